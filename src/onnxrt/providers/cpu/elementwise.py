"""Element-wise unary and binary ops, as tables over NumPy ufuncs.

Hot path: a kernel is the ufunc plus one type check. NumPy returns a scalar, not an array,
when every input is 0-d, so results pass through ``as_array``. The ml_dtypes element types
(bfloat16, float8...; dtype kind ``V``) go through float32, where every value is exact.
Opset-1/6 arithmetic, comparison and logical ops carry ``broadcast``/``axis`` attributes
(the old "B is a contiguous sub-shape of A starting at axis" rule): those versions get a
wrapper; later versions get the plain kernel.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from onnxrt.providers.cpu import CPU

__all__ = ["as_array", "legacy_broadcast", "trunc_divide", "erf", "work_dtype"]

_ndarray = np.ndarray
_F32 = np.dtype(np.float32)
_F16 = np.dtype(np.float16)


def as_array(r: Any) -> np.ndarray:
    """``r`` as an ndarray (ufuncs hand back NumPy scalars for 0-d inputs)."""
    return r if type(r) is _ndarray else np.asarray(r)


def work_dtype(dt: np.dtype) -> np.dtype:
    """The dtype to compute a multi-step float formula in: float32 for the narrow floats."""
    return _F32 if dt.kind == "V" or dt == _F16 else dt


def legacy_broadcast(a: np.ndarray, b: np.ndarray, broadcast: int, axis: int | None) -> np.ndarray:
    """Opset < 7 broadcasting: B's shape is a contiguous run of A's dims starting at ``axis``
    (suffix-aligned, i.e. NumPy's rule, when ``axis`` is not given)."""
    if not broadcast:
        if a.shape != b.shape:
            raise ValueError(f"shapes {a.shape} and {b.shape} differ and broadcast=0")
        return b
    if axis is None or b.ndim == 0 or b.size == 1:
        return b
    axis = axis + a.ndim if axis < 0 else axis
    # B's dims match A's from ``axis`` on, a dim of 1 stretching (as onnxruntime allows)
    span = a.shape[axis:axis + b.ndim]
    if axis + b.ndim > a.ndim or any(d != e and d != 1 for d, e in zip(b.shape, span)):
        raise ValueError(f"cannot broadcast shape {b.shape} onto {a.shape} at axis {axis}")
    return b.reshape(b.shape + (1,) * (a.ndim - axis - b.ndim))


# -- unary ---------------------------------------------------------------------------------

def _unary(uf: np.ufunc, name: str) -> Callable[..., np.ndarray]:
    def kernel(x: np.ndarray, *, consumed_inputs: Any = None) -> np.ndarray:
        if x.dtype.kind == "V":
            r = as_array(uf(x.astype(np.float32)))
            return r.astype(x.dtype) if r.dtype.kind == "f" else r   # IsNaN stays bool
        r = uf(x)
        return r if type(r) is _ndarray else np.asarray(r)

    kernel.__name__ = kernel.__qualname__ = name
    kernel.direct = (uf, "biufc")   # see _BINARY's note
    return kernel


def _erf_fallback(x: np.ndarray) -> np.ndarray:
    return np.frompyfunc(math.erf, 1, 1)(x).astype(x.dtype)


_ERF64: list[Any] = []


def _erf_ufunc_f64() -> Any:
    """SciPy's compiled erf if SciPy is installed (imported on first use: importing
    scipy.special costs ~0.5 s), else None."""
    if not _ERF64:
        try:
            from scipy.special import erf
        except ImportError:  # pragma: no cover - depends on the environment
            erf = None
        _ERF64.append(erf)
    return _ERF64[0]


# Least-squares polynomial fits made for this module (float64, Chebyshev nodes):
# erf(x) = x * A(x^2) on |x| <= 1 (relative error 1.4e-9) and
# erf(x) = 1 - exp(-x^2) * B(x - 2.5) on 1 < |x| <= 4 (relative error 2e-8); beyond 4,
# erf(x) rounds to +-1 in float32. Far below float32's 6e-8 resolution on both pieces.
_ERF_A = (1.12837916588333, -0.3761262690789202, 0.1128359749155175, -0.026854329537852696,
          0.005189312811666684, -0.0008018859005975861, 7.882500416351154e-05)
_ERF_B = (0.21080635752659932, -0.07434760098919378, 0.024938203784894083,
          -0.007999345153810159, 0.0024659821652449573, -0.0007389983919419788,
          0.0002129723538989144, -5.3585250874790786e-05, 1.435350618478822e-05,
          -6.386209745007157e-06, 1.6718326764845164e-06)


def _horner(t: np.ndarray, coefs: tuple[float, ...]) -> np.ndarray:
    p = np.multiply(t, coefs[-1])
    for c in coefs[-2:0:-1]:
        p += c
        p *= t
    p += coefs[0]
    return p


def _erf_f32(x: np.ndarray) -> np.ndarray:
    """erf of a float32 array with whole-array NumPy steps (no per-element branches: a
    data-dependent select costs more than evaluating both pieces and blending them)."""
    a = np.absolute(x)
    np.minimum(a, 4.0, out=a)
    u = np.multiply(a, a)
    small = _horner(u, _ERF_A)
    small *= a
    t = np.subtract(a, 2.5)
    big = _horner(t, _ERF_B)
    np.negative(u, out=u)
    np.exp(u, out=u)
    big *= u
    np.subtract(1.0, big, out=big)
    # blend small*[a <= 1] + big*[a > 1]: both are finite, so this selects exactly
    small *= a <= 1.0
    big *= a > 1.0
    big += small
    return np.copysign(big, x, out=big)


_ERF_CHUNK = 32768   # elements: the ~40 passes of _erf_f32 then run on cache-sized pieces


def _erf_f32_chunked(x: np.ndarray) -> np.ndarray:
    flat = x.reshape(-1)
    if flat.size <= 2 * _ERF_CHUNK:
        return _erf_f32(flat).reshape(x.shape)
    out = np.empty_like(flat)
    for i in range(0, flat.size, _ERF_CHUNK):
        out[i:i + _ERF_CHUNK] = _erf_f32(flat[i:i + _ERF_CHUNK])
    return out.reshape(x.shape)


def erf(x: np.ndarray) -> np.ndarray:
    """erf for float16/32/64 arrays (same dtype out)."""
    dt = x.dtype
    if dt == np.float32 or dt == np.float16:
        w = x.astype(np.float32) if dt == np.float16 else x
        return _erf_f32_chunked(w).astype(dt, copy=False)
    erf64 = _erf_ufunc_f64()
    if erf64 is not None:
        return as_array(erf64(x))
    return _erf_fallback(np.asarray(x))


# (op, since, ufunc): one kernel covers every later schema version of the op
_UNARY: list[tuple[str, int, Any]] = [
    ("Abs", 1, np.absolute), ("Neg", 1, np.negative), ("Reciprocal", 1, np.reciprocal),
    ("Exp", 1, np.exp), ("Log", 1, np.log), ("Sqrt", 1, np.sqrt),
    ("Ceil", 1, np.ceil), ("Floor", 1, np.floor),
    ("Sin", 7, np.sin), ("Cos", 7, np.cos), ("Tan", 7, np.tan),
    ("Asin", 7, np.arcsin), ("Acos", 7, np.arccos), ("Atan", 7, np.arctan),
    ("Sinh", 9, np.sinh), ("Cosh", 9, np.cosh), ("Asinh", 9, np.arcsinh),
    ("Acosh", 9, np.arccosh), ("Atanh", 9, np.arctanh),
    ("Sign", 9, np.sign), ("Round", 11, np.rint),   # rint: halves to even, as the spec says
    ("IsNaN", 9, np.isnan),
    ("Not", 1, np.logical_not), ("BitwiseNot", 18, np.invert),
]

for _op, _since, _uf in _UNARY:
    CPU.register(_op, _unary(_uf, _op.lower()), since=_since)


@CPU.kernel("Erf", since=9)
def erf_kernel(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "V":
        return erf(x.astype(np.float32)).astype(x.dtype)
    if x.dtype.kind in "iu":
        return erf(x.astype(np.float64)).astype(x.dtype)
    return erf(x)


# -- binary --------------------------------------------------------------------------------

def trunc_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division rounding toward zero (C semantics, what onnxruntime does)."""
    if a.dtype.kind == "u":
        return np.floor_divide(a, b)
    r = np.fmod(a, b)   # the remainder with the dividend's sign
    return np.floor_divide(np.subtract(a, r), b)   # exact: a - r is a multiple of b


def add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r = np.add(a, b)
    return r if type(r) is _ndarray else np.asarray(r)


def sub(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r = np.subtract(a, b)
    return r if type(r) is _ndarray else np.asarray(r)


def mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    r = np.multiply(a, b)
    return r if type(r) is _ndarray else np.asarray(r)


def div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        return as_array(trunc_divide(a, b))
    r = np.divide(a, b)
    return r if type(r) is _ndarray else np.asarray(r)


def _plain(uf: np.ufunc, name: str) -> Callable[..., np.ndarray]:
    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        r = uf(a, b)
        return r if type(r) is _ndarray else np.asarray(r)

    kernel.__name__ = kernel.__qualname__ = name
    kernel.direct = (uf, "biufc")
    return kernel


def _legacy(fn: Callable[..., np.ndarray], name: str) -> Callable[..., np.ndarray]:
    def kernel(a: np.ndarray, b: np.ndarray, *, broadcast: int = 0, axis: int | None = None,
               consumed_inputs: Any = None) -> np.ndarray:
        return fn(a, legacy_broadcast(a, b, broadcast, axis))

    kernel.__name__ = kernel.__qualname__ = name + "_legacy"
    return kernel


# (op, since of the NumPy-broadcasting version, kernel, whether older versions exist)
_BINARY: list[tuple[str, int, Callable[..., np.ndarray], bool]] = [
    ("Add", 7, add, True), ("Sub", 7, sub, True), ("Mul", 7, mul, True),
    ("Div", 7, div, True),
    ("Equal", 7, _plain(np.equal, "equal"), True),
    ("Greater", 7, _plain(np.greater, "greater"), True),
    ("Less", 7, _plain(np.less, "less"), True),
    ("GreaterOrEqual", 12, _plain(np.greater_equal, "greater_equal"), False),
    ("LessOrEqual", 12, _plain(np.less_equal, "less_equal"), False),
    ("And", 7, _plain(np.logical_and, "logical_and"), True),
    ("Or", 7, _plain(np.logical_or, "logical_or"), True),
    ("Xor", 7, _plain(np.logical_xor, "logical_xor"), True),
    ("BitwiseAnd", 18, _plain(np.bitwise_and, "bitwise_and"), False),
    ("BitwiseOr", 18, _plain(np.bitwise_or, "bitwise_or"), False),
    ("BitwiseXor", 18, _plain(np.bitwise_xor, "bitwise_xor"), False),
]

# ``direct``: (ufunc, dtype kinds) the planner binds instead of the kernel when every input's
# type is known to be one of those kinds with rank >= 1 and no attribute is set: the
# wrappers only turn 0-d results back into arrays (and Div's integer division), and a
# call through them costs 0.1-0.2 us per node (the 1,000-node chain of the benchmark)
add.direct = (np.add, "biufc")
sub.direct = (np.subtract, "biufc")
mul.direct = (np.multiply, "biufc")
div.direct = (np.divide, "fc")

for _op, _since, _fn, _old in _BINARY:
    CPU.register(_op, _fn, since=_since)
    if _old:
        CPU.register(_op, _legacy(_fn, _fn.__name__), since=1)
