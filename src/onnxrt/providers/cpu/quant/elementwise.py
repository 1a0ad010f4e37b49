"""A compiled QLinearAdd for operands of one shape (a residual connection of a quantized
CNN or transformer): onnxruntime's float32 arithmetic, operation for operation (see
contrib/qlinear._add), in one pass without the NumPy temporaries (8-10x faster on
ResNet-18's 64x56x56 residuals). None without numba: the NumPy path runs."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.providers.cpu.nn import jit

__all__ = ["add", "prepare"]

_SLOT: list[Any] = []


def _add(a, b, ra, rb, fixed, lo, hi, out):
    # no fused multiply-add: numba compiles without fast-math, so each float32 step
    # rounds as NumPy's does
    for i in range(a.size):
        v = fixed + np.float32(a[i]) * ra
        v = v + np.float32(b[i]) * rb
        v = np.rint(v)
        v = lo if v < lo else v
        v = hi if v > hi else v
        out[i] = np.int32(v)


def _build(numba: Any) -> Any:
    fn = jit._njit(numba, _add)
    for dt in (np.uint8, np.int8):
        z = np.zeros(3, dt)
        fn(z, z, np.float32(1), np.float32(1), np.float32(0), np.float32(0), np.float32(1),
           np.empty(3, dt))
    return fn


def prepare() -> None:
    """Compile (or load from numba's cache) the kernel now, at session creation."""
    jit.compile_once(_SLOT, _build)


def add(a: np.ndarray, b: np.ndarray, ra: np.float32, rb: np.float32, fixed: np.float32,
        lo: int, hi: int) -> np.ndarray | None:
    """rint(fixed + a * ra + b * rb) saturated to [lo, hi], for a and b of one shape and
    8-bit type; None where the compiled kernel does not apply."""
    if a.shape != b.shape or a.dtype != b.dtype or a.size < 64:
        return None
    fn = jit.compile_once(_SLOT, _build)
    if fn is None:
        return None
    out = np.empty(a.shape, a.dtype)
    # flat, contiguous operands: the one signature _build compiled (a run never compiles)
    fn(np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1),
       np.float32(ra), np.float32(rb), np.float32(fixed), np.float32(lo), np.float32(hi),
       out.reshape(-1))
    return out
