"""Shared pieces of the quantization kernels: target ranges, float8 saturation, broadcasting
of per-tensor / per-axis / blocked scales."""

from __future__ import annotations

import ml_dtypes
import numpy as np


__all__ = ["int_range", "is_float_q", "to_quantized", "expand_param", "float_of", "requantize"]

# float types whose conversion from float32 is a rounding, not a rint + clip
_FLOAT_Q = {np.dtype(t) for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz,
                                  ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz,
                                  ml_dtypes.float4_e2m1fn, ml_dtypes.float6_e2m3fn,
                                  ml_dtypes.float6_e3m2fn)}
# types with an infinity or NaN encoding: saturate=0 lets overflow become inf / NaN
_NON_SAT = {np.dtype(t) for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz,
                                  ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz)}
# with saturation, +-inf becomes +-max for these, NaN for the "fnuz" ones
_INF_TO_MAX = {np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)}


def is_float_q(dt: np.dtype) -> bool:
    return np.dtype(dt) in _FLOAT_Q


def int_range(dt: np.dtype) -> tuple[int, int]:
    dt = np.dtype(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
    else:
        info = ml_dtypes.iinfo(dt)
    return int(info.min), int(info.max)


def float_of(a: np.ndarray) -> np.ndarray:
    """float32 view of a float16 / bfloat16 / float8 / e8m0 array (float32/64 unchanged)."""
    if a.dtype == np.float32 or a.dtype == np.float64:
        return a
    return a.astype(np.float32)


def to_quantized(v: np.ndarray, dt: np.dtype, saturate: bool = True) -> np.ndarray:
    """Convert already-scaled float values to the quantized type ``dt`` (ints: rint + clip)."""
    dt = np.dtype(dt)
    if dt in _FLOAT_Q:
        if saturate or dt not in _NON_SAT:
            m = float(ml_dtypes.finfo(dt).max)
            if dt in _NON_SAT and dt not in _INF_TO_MAX:
                # fnuz types: infinities have no saturated image, they become NaN
                v = np.where(np.isinf(v), np.nan, v)
            v = np.clip(v, -m, m)
        return v.astype(dt)
    lo, hi = int_range(dt)
    r = np.rint(v)
    np.clip(r, lo, hi, out=r)
    return r.astype(dt)


def expand_param(p: np.ndarray, x_shape: tuple[int, ...], axis: int, block_size: int,
                 what: str) -> np.ndarray:
    """Reshape a scale / zero point so it broadcasts against ``x`` (per tensor, axis, block)."""
    rank = len(x_shape)
    if p.ndim == 0 or (p.size == 1 and block_size <= 0):
        return p.reshape(())
    if rank == 0:
        raise ValueError(f"{what} must be a scalar for a scalar input, got shape {p.shape}")
    ax = axis + rank if axis < 0 else axis
    if rank == 1:
        ax = 0  # the only axis there is (the default axis=1 does not exist for rank 1)
    if not 0 <= ax < rank:
        raise ValueError(f"axis {axis} is out of range for an input of rank {rank}")
    if block_size > 0:
        if p.ndim != rank:
            raise ValueError(f"blocked quantization needs {what} of rank {rank}, got {p.shape}")
        d = x_shape[ax]
        nb = -(-d // block_size)
        if p.shape[ax] != nb:
            raise ValueError(f"{what} has {p.shape[ax]} blocks on axis {ax}, expected "
                             f"ceil({d}/{block_size}) = {nb}")
        p = np.repeat(p, block_size, axis=ax)
        if p.shape[ax] != d:  # the last block is shorter
            p = p[(slice(None),) * ax + (slice(0, d),)]
        return p
    if p.ndim != 1 or p.shape[0] != x_shape[ax]:
        raise ValueError(f"{what} of shape {p.shape} is neither a scalar nor a 1-D tensor of "
                         f"length {x_shape[ax]} (axis {ax} of input shape {x_shape})")
    shape = [1] * rank
    shape[ax] = p.shape[0]
    return p.reshape(shape)


def requantize(acc: np.ndarray, mult: np.ndarray, zp: np.ndarray, out: np.dtype) -> np.ndarray:
    """int32 accumulations (held exactly as float) to the quantized output the way
    onnxruntime's requantization does it: float32(acc) * multiplier in float32, rounded half
    to even, plus the zero point, saturated."""
    v = acc.astype(np.float32)  # a new array: the in-place steps below may use it
    v *= mult
    np.rint(v, out=v)
    z = np.asarray(zp).astype(np.float32)
    if z.ndim == 0 and z != 0 or z.ndim and np.any(z):
        v += z
    return to_quantized(v, out)
