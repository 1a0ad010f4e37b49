"""Cast and CastLike, every version: numeric, string, float8 (saturating or not), e8m0 with its
rounding modes, 4/2-bit integers, float4/float6, bfloat16, float16.

``cast_array`` is the one conversion routine; other kernels may import it.
"""

from __future__ import annotations

import re
from typing import Any

import ml_dtypes
import numpy as np
from onnx import TensorProto

from onnxrt.ir.dtypes import np_dtype
from onnxrt.providers.cpu import CPU

__all__ = ["cast_array"]

_OBJ = np.dtype(object)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)

# float8 types the spec's saturation tables apply to, with their largest finite value
_F8_MAX = {
    np.dtype(t): float(ml_dtypes.finfo(t).max)
    for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2,
              ml_dtypes.float8_e5m2fnuz)
}
# narrow floats NumPy cannot compute in: widen to float32 (exactly) before anything else
_ML_FLOATS = frozenset(
    [np.dtype(ml_dtypes.bfloat16), _E8M0, np.dtype(ml_dtypes.float4_e2m1fn),
     np.dtype(ml_dtypes.float6_e2m3fn), np.dtype(ml_dtypes.float6_e3m2fn), *_F8_MAX])
# sub-byte integers: (bits, signed)
_SUB_INTS = {
    np.dtype(ml_dtypes.int4): (4, True), np.dtype(ml_dtypes.uint4): (4, False),
    np.dtype(ml_dtypes.int2): (2, True), np.dtype(ml_dtypes.uint2): (2, False),
}


def _is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" or dt in _ML_FLOATS


def cast_array(x: Any, dst: np.dtype, saturate: int = 1, round_mode: str = "up") -> np.ndarray:
    """``x`` converted to ``dst`` with ONNX Cast semantics."""
    x = np.asarray(x)
    dst = np.dtype(dst)
    src = x.dtype
    if src == dst:
        return x
    if x.ndim == 0:  # ufuncs turn 0-d arrays into scalars: work on one element instead
        return cast_array(x.reshape(1), dst, saturate, round_mode).reshape(())
    if src == _OBJ or src.kind in "US":
        return _from_strings(x, dst, saturate, round_mode)
    if dst == _OBJ:
        return _to_strings(x)
    if src in _SUB_INTS:
        x = x.astype(np.int8 if _SUB_INTS[src][1] else np.uint8)
        src = x.dtype
        if src == dst:
            return x
    elif src in _ML_FLOATS:
        x = x.astype(np.float32)  # exact for every narrow float
        src = _F32
        if dst == _F32:
            return x
    if dst in _F8_MAX:
        f = x if src == _F32 or src == _F64 else x.astype(np.float32)
        if saturate:
            m = _F8_MAX[dst]
            f = np.clip(f, -m, m)  # NaN stays NaN; +-inf and overflow become +-max
        return f.astype(dst)
    if dst == _E8M0:
        return _to_e8m0(x, saturate, round_mode)
    if dst in _SUB_INTS:
        return _to_sub_int(x, dst)
    if dst.kind == "b":
        return x != 0
    if dst in _ML_FLOATS:  # bfloat16, float4, float6: ml_dtypes rounds to nearest even
        if src.kind in "biu":
            x = x.astype(np.float64 if src.itemsize > 2 else np.float32)
        return x.astype(dst)
    if (src.kind == "f" and dst.kind in "iu") or dst.kind == "f":
        # out of range: +-inf for floats, undefined for ints (the C cast's result), quietly
        with np.errstate(invalid="ignore", over="ignore"):
            return x.astype(dst)
    return x.astype(dst)


def _to_sub_int(x: np.ndarray, dst: np.dtype) -> np.ndarray:
    bits, signed = _SUB_INTS[dst]
    if x.dtype.kind == "f":
        with np.errstate(invalid="ignore", over="ignore"):
            v = np.trunc(x).astype(np.int64)
    else:
        v = x.astype(np.int64)
    # keep the low bits and reinterpret, like every other narrowing integer cast
    v = v & ((1 << bits) - 1)
    if signed:
        v = np.where(v >= (1 << (bits - 1)), v - (1 << bits), v)
    return v.astype(np.int8).astype(dst)


def _to_e8m0(x: np.ndarray, saturate: int, round_mode: str) -> np.ndarray:
    # e8m0 holds only positive powers of two 2**(e-127), e in 0..254; 255 is NaN. Like
    # onnxruntime, values outside [2**-127, 2**127] (zero, negatives and infinities included)
    # clamp to the nearest end when saturating and become NaN otherwise.
    f = x if x.dtype == _F64 else x.astype(np.float32)
    mant, exp = np.frexp(f)  # f = mant * 2**exp, |mant| in [0.5, 1)
    k = exp.astype(np.int32) - 1  # floor(log2(f)) for finite f > 0
    if round_mode == "up":
        k += mant != 0.5
    elif round_mode == "nearest":
        k += mant >= 0.75  # halfway between 2**k and 2**(k+1) rounds up
    elif round_mode != "down":
        raise ValueError(f"Cast: round_mode must be 'up', 'down' or 'nearest', not {round_mode!r}")
    biased = np.clip(k + 127, 0, 254)
    with np.errstate(invalid="ignore"):
        low = ~(f >= 2.0 ** -127)  # also zero, negatives and NaN (fixed below)
        high = f > 2.0 ** 127
    if saturate:
        biased[low] = 0
        biased[high] = 254
    else:
        biased[low | high] = 255
    biased[np.isnan(f)] = 255
    return biased.astype(np.uint8).view(_E8M0)


# -- strings --------------------------------------------------------------------------------

def _to_strings(x: np.ndarray) -> np.ndarray:
    dt = x.dtype
    if _is_float(dt):
        v = x.astype(np.float64)
        # onnxruntime prints floats with 8 significant digits ("%.8g") and spells the
        # specials NaN, INF, -INF
        s = np.char.mod("%.8g", v).astype(object)
        if not np.isfinite(v).all():
            s[np.isnan(v)] = "NaN"
            s[v == np.inf] = "INF"
            s[v == -np.inf] = "-INF"
        return s
    if dt.kind == "b":
        return np.where(x, "1", "0").astype(object)
    if dt in _SUB_INTS:
        x = x.astype(np.int8)
    if dt.kind == "c":
        return np.array([str(v) for v in x.reshape(-1)], dtype=object).reshape(x.shape)
    return x.astype(str).astype(object)


_INT_PREFIX = re.compile(r"\s*([+-]?\d+)")
_HEX = re.compile(r"[+-]?0[xX]")


def _parse_float(s: Any) -> float:
    try:
        return float(s)
    except (TypeError, ValueError):
        pass
    if isinstance(s, bytes):
        s = s.decode("utf-8", errors="replace")
    s = str(s).strip()
    if _HEX.match(s):
        try:
            return float.fromhex(s)  # strtod reads "0x" hexadecimal floats too
        except ValueError:
            pass
    raise ValueError(f"Cast: cannot parse {s!r} as a number")


def _parse_int(s: Any) -> int:
    if isinstance(s, bytes):
        s = s.decode("utf-8", errors="replace")
    s = str(s)
    try:
        return int(s)
    except ValueError:
        pass
    m = _INT_PREFIX.match(s)  # like strtoll: the leading integer ("100.5" -> 100)
    if m:
        return int(m.group(1))
    f = _parse_float(s)
    if not np.isfinite(f):
        raise ValueError(f"Cast: cannot convert {s!r} to an integer")
    return int(f)


def _from_strings(x: np.ndarray, dst: np.dtype, saturate: int, round_mode: str) -> np.ndarray:
    flat = x.reshape(-1)
    if dst == _OBJ:
        return np.array([v if isinstance(v, str) else str(v) for v in flat],
                        dtype=object).reshape(x.shape)
    if _is_float(dst):
        try:
            f = flat.astype(np.float64)
        except (TypeError, ValueError):
            f = np.array([_parse_float(v) for v in flat], dtype=np.float64)
        return cast_array(f.reshape(x.shape), dst, saturate, round_mode)
    if dst.kind == "b":
        out = np.empty(flat.shape, dtype=bool)
        for i, v in enumerate(flat):
            t = (v.decode() if isinstance(v, bytes) else str(v)).strip().lower()
            out[i] = t == "true" or (t != "false" and _parse_float(t) != 0)
        return out.reshape(x.shape)
    # integers: parse to Python ints, wrap to 64 bits, then narrow like a C cast
    ints = [_parse_int(v) & 0xFFFF_FFFF_FFFF_FFFF for v in flat]
    u = np.array(ints, dtype=np.uint64).reshape(x.shape)
    if dst in _SUB_INTS:
        return _to_sub_int(u.view(np.int64), dst)
    return u.astype(dst)


# -- kernels --------------------------------------------------------------------------------

def _target_dtype(to: Any) -> np.dtype:
    if isinstance(to, str):  # Cast-1 names the type: "FLOAT", "INT64"...
        try:
            to = TensorProto.DataType.Value(to.upper())
        except ValueError:
            raise ValueError(f"Cast: unknown target type {to!r}") from None
    return np_dtype(int(to))


_PLAIN = tuple(np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64,
                                      np.uint8, np.uint16, np.uint32, np.uint64, np.float16,
                                      np.float32, np.float64))


def _quiet_astype(dst: np.dtype) -> Any:
    def conv(x: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", over="ignore"):
            return x.astype(dst)
    return conv


def _fast_paths(dst: np.dtype) -> dict[np.dtype, Any]:
    """Per source dtype, a direct conversion where plain ``astype`` already is ONNX's Cast
    (built once per node: casts of small shape tensors are everywhere)."""
    if dst not in _PLAIN:
        return {}
    fast: dict[np.dtype, Any] = {}
    for src in _PLAIN:
        if src == dst:
            fast[src] = lambda x: x
        elif (src.kind == "f" and dst.kind in "iu") or (dst.kind == "f" and dst.itemsize
                                                          <= src.itemsize):
            fast[src] = _quiet_astype(dst)  # out of range: undefined / inf, quietly
        else:
            fast[src] = lambda x, d=dst: x.astype(d)  # bool: nonzero (and NaN) is True
    return fast


@CPU.kernel("Cast", since=1)
class Cast:
    def __init__(self, node: Any) -> None:
        a = node.attrs
        if "to" not in a:
            raise ValueError("Cast needs the 'to' attribute")
        self.dst = _target_dtype(a["to"])
        self.saturate = int(a.get("saturate", 1))
        self.round_mode = str(a.get("round_mode", "up"))
        self.fast = _fast_paths(self.dst)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        fn = self.fast.get(getattr(x, "dtype", None))
        if fn is not None:
            return fn(x)
        return cast_array(x, self.dst, self.saturate, self.round_mode)


@CPU.kernel("CastLike", since=15)
class CastLike:
    def __init__(self, node: Any) -> None:
        self.saturate = int(node.attrs.get("saturate", 1))
        self.round_mode = str(node.attrs.get("round_mode", "up"))

    def __call__(self, x: np.ndarray, like: np.ndarray) -> np.ndarray:
        return cast_array(x, np.asarray(like).dtype, self.saturate, self.round_mode)
