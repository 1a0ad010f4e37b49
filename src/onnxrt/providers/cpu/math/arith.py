"""Pow, Mod, BitShift, Clip, Where, the variadic Sum/Mean/Max/Min, Det, IsInf, BitCast."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from onnxrt.framework.kernel import NodeInfo
from onnxrt.ir.dtypes import np_dtype
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.elementwise import as_array, legacy_broadcast, work_dtype

_ndarray = np.ndarray


# -- Pow -------------------------------------------------------------------------------

def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ak, bk = a.dtype.kind, b.dtype.kind
    if ak == "f" and a.dtype == b.dtype:
        return as_array(np.power(a, b))
    if ak in "iu":
        if bk in "iu" and not (bk == "i" and np.any(b < 0)):
            return as_array(np.power(a, b.astype(a.dtype, copy=False)))
        # a float or negative exponent: the real power, truncated back to the integer type
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            return as_array(np.power(a.astype(np.float64), b.astype(np.float64))).astype(a.dtype)
    wd = work_dtype(a.dtype)
    if bk in "iu":
        # an integer exponent: float64 keeps odd/even for huge exponents of negative bases
        r = np.power(a.astype(np.float64), b.astype(np.float64)) if wd != a.dtype or \
            b.dtype.itemsize > 4 else np.power(a, b.astype(a.dtype))
    else:
        r = np.power(a.astype(wd, copy=False), b.astype(wd, copy=False))
    return as_array(r).astype(a.dtype, copy=False)


def _cube(a: np.ndarray) -> np.ndarray:
    r = np.multiply(a, a)
    return np.multiply(r, a, out=r)


# constant exponents that have a cheaper exact-enough form than powf (which costs ~100 ns
# per element): the squares of LayerNorm decompositions, the cube of tanh-GELU, sqrt, 1/x
_FAST_EXPONENTS: dict[float, Callable[[np.ndarray], np.ndarray]] = {
    1.0: lambda a: a,
    2.0: lambda a: np.multiply(a, a),
    3.0: _cube,
    0.5: np.sqrt,
    -1.0: lambda a: np.divide(1, a, dtype=a.dtype),
}


@CPU.kernel("Pow", since=7)
class Pow:
    """Pow; a constant scalar exponent of 1, 2, 3, 0.5 or -1 on floats runs as plain
    arithmetic (onnxruntime special-cases 2 and 3 the same way)."""

    def __init__(self, node: NodeInfo) -> None:
        e = node.constant_inputs.get(1)
        self.fast = None
        if e is not None and np.size(e) == 1 and np.ndim(e) == 0 and \
                np.asarray(e).dtype.kind in "fiu":
            self.fast = _FAST_EXPONENTS.get(float(np.asarray(e)))

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if self.fast is not None and a.dtype.kind == "f":
            return as_array(self.fast(a))
        return _pow(a, b)


@CPU.kernel("Pow", since=1)
def pow_v1(a: np.ndarray, b: np.ndarray, *, broadcast: int = 0,
           axis: int | None = None) -> np.ndarray:
    return _pow(a, legacy_broadcast(a, b, broadcast, axis))


# -- Mod, BitShift ---------------------------------------------------------------------

@CPU.kernel("Mod", since=10)
def mod(a: np.ndarray, b: np.ndarray, *, fmod: int = 0) -> np.ndarray:
    dt = a.dtype
    if dt.kind == "V":
        a, b = a.astype(np.float32), b.astype(np.float32)
    # x mod 0 is NaN for floats, undefined for integers (NumPy gives 0): no warnings either way
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.fmod(a, b) if fmod else np.remainder(a, b)
    return as_array(r).astype(dt, copy=False)


@CPU.kernel("BitShift", since=11)
def bit_shift(x: np.ndarray, y: np.ndarray, *, direction: str) -> np.ndarray:
    if direction == "LEFT":
        shift = np.left_shift
    elif direction == "RIGHT":
        shift = np.right_shift
    else:
        raise ValueError(f"BitShift: direction must be LEFT or RIGHT, got {direction!r}")
    bits = x.dtype.itemsize * 8
    y = y.astype(x.dtype, copy=False)
    bad = (y >= bits) if y.dtype.kind == "u" else ((y < 0) | (y >= bits))
    if not bad.any():
        return as_array(shift(x, y))
    # shifts by >= width (or < 0) leave only the sign fill: -1 for right shifts of negatives
    r = shift(x, np.where(bad, 0, y).astype(x.dtype, copy=False))
    fill = np.where(x < 0, -1, 0).astype(x.dtype) if (direction == "RIGHT" and
                                                        x.dtype.kind == "i") else 0
    return as_array(np.where(bad, fill, r)).astype(x.dtype, copy=False)


# -- Clip ------------------------------------------------------------------------------

def _clip(x: np.ndarray, lo: Any, hi: Any) -> np.ndarray:
    if lo is None and hi is None:
        return x
    if lo is not None:
        r = as_array(np.maximum(x, lo))
        if hi is not None:
            np.minimum(r, hi, out=r)
        return r
    return as_array(np.minimum(x, hi))


def _bound(v: Any, dt: np.dtype) -> Any:
    if v is None:
        return None
    v = np.asarray(v)
    if v.size != 1:
        raise ValueError(f"Clip: min and max must be scalars, got shape {v.shape}")
    return v.reshape(()).astype(dt, copy=False)


@CPU.kernel("Clip", since=11)
class Clip:
    """Clip with min/max inputs; constant bounds are read once."""

    def __init__(self, node: NodeInfo) -> None:
        self.const = {i: node.constant_inputs[i] for i in (1, 2) if i in node.constant_inputs}

    def __call__(self, x: np.ndarray, lo: Any = None, hi: Any = None) -> np.ndarray:
        dt = x.dtype
        if dt.kind == "V":
            lo = None if lo is None else np.asarray(lo).astype(np.float32)
            hi = None if hi is None else np.asarray(hi).astype(np.float32)
            return _clip(x.astype(np.float32), _bound(lo, np.dtype(np.float32)),
                         _bound(hi, np.dtype(np.float32))).astype(dt)
        return _clip(x, _bound(lo, dt), _bound(hi, dt))


_FLT_MAX = float(np.finfo(np.float32).max)


@CPU.kernel("Clip", since=1)
def clip_v1(x: np.ndarray, *, min: float | None = None, max: float | None = None,
            consumed_inputs: Any = None) -> np.ndarray:
    lo = None if min is None or min <= -_FLT_MAX else np.asarray(min, dtype=x.dtype)
    hi = None if max is None or max >= _FLT_MAX else np.asarray(max, dtype=x.dtype)
    return _clip(x, lo, hi)


# -- Where -----------------------------------------------------------------------------

@CPU.kernel("Where", since=9)
def where(cond: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    r = np.where(cond, x, y)
    if r.dtype != x.dtype and x.dtype.kind != "O":
        r = r.astype(x.dtype)
    return r if type(r) is _ndarray else np.asarray(r)


# -- variadic Sum / Mean / Max / Min ----------------------------------------------------

def _fold(uf: np.ufunc, xs: tuple[np.ndarray, ...]) -> np.ndarray:
    r = as_array(uf(xs[0], xs[1]))
    for x in xs[2:]:
        if np.broadcast_shapes(r.shape, x.shape) == r.shape:
            uf(r, x, out=r)   # r is ours: accumulate in place
        else:
            r = as_array(uf(r, x))
    return r


def _variadic(uf: np.ufunc, name: str, mean: bool = False) -> Callable[..., np.ndarray]:
    def kernel(*xs: np.ndarray, consumed_inputs: Any = None) -> np.ndarray:
        if not xs:
            raise ValueError(f"{name} needs at least one input")
        dt = xs[0].dtype
        if dt.kind == "V" or (mean and dt == np.float16):
            xs = tuple(x.astype(np.float32) for x in xs)
        if len(xs) == 1:
            r = xs[0]
        else:
            r = _fold(uf, xs)
        if mean:
            r = r / len(xs) if r is xs[0] else np.divide(r, len(xs), out=r)
        return r.astype(dt, copy=False)

    kernel.__name__ = kernel.__qualname__ = name
    return kernel


for _op, _uf, _mean in (("Sum", np.add, False), ("Mean", np.add, True),
                        ("Max", np.maximum, False), ("Min", np.minimum, False)):
    CPU.register(_op, _variadic(_uf, _op.lower(), _mean), since=1)


# -- Det, IsInf, BitCast ---------------------------------------------------------------

@CPU.kernel("Det", since=11)
def det(x: np.ndarray) -> np.ndarray:
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"Det: input must be [*, M, M], got shape {x.shape}")
    wd = work_dtype(x.dtype)
    return as_array(np.linalg.det(x.astype(wd, copy=False))).astype(x.dtype, copy=False)


@CPU.kernel("IsInf", since=10)
def is_inf(x: np.ndarray, *, detect_negative: int = 1, detect_positive: int = 1) -> np.ndarray:
    if x.dtype.kind == "V":
        x = x.astype(np.float32)
    if detect_negative and detect_positive:
        return as_array(np.isinf(x))
    if detect_positive:
        return as_array(np.equal(x, np.inf))
    if detect_negative:
        return as_array(np.equal(x, -np.inf))
    return np.zeros(np.shape(x), dtype=bool)


_NARROW_BITS = {"int4": 4, "uint4": 4, "float4_e2m1fn": 4, "int2": 2, "uint2": 2}


def _bits(dt: np.dtype) -> int:
    return _NARROW_BITS.get(dt.name, dt.itemsize * 8)


@CPU.kernel("BitCast", since=26)
class BitCast:
    def __init__(self, node: NodeInfo) -> None:
        self.to = np_dtype(int(node.attrs["to"]))
        if self.to.kind == "O":
            raise ValueError("BitCast: strings cannot be bit-cast")

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if _bits(x.dtype) != _bits(self.to) or x.dtype.kind == "O":
            raise ValueError(f"BitCast: {x.dtype} and {self.to} differ in bit width")
        return x.view(self.to)   # same item size: any layout views in place
