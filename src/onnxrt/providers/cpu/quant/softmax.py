"""A compiled QLinearSoftmax row loop (the attention probabilities of a QDQ transformer):
contrib/qlinear._softmax_rows' arithmetic step for step (the byte-indexed exp table, the
left-to-right float32 sum, the float32 division and rounding), one pass over each row in
cache instead of NumPy's temporaries over the whole tensor. None without numba: the NumPy
path runs."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.providers.cpu.nn import jit

__all__ = ["rows", "prepare"]

_SLOT: list[Any] = []


def _rows(x, table, inv, zp, signed, lo, hi, out):
    r_n, d = x.shape
    e = np.empty(d, np.float32)
    for r in range(r_n):
        xr = x[r]
        mx = np.int32(xr[0])
        for j in range(1, d):
            mx = max(mx, np.int32(xr[j]))
        total = np.float32(0)
        for j in range(d):
            if signed:
                i = (np.int32(127) - mx + np.int32(xr[j])) & 255     # wraps like a byte
            else:
                i = np.int32(xr[j]) + (np.int32(255) - mx)
            v = table[i]
            e[j] = v
            total += v
        o = out[r]
        if total == 0:
            for j in range(d):
                o[j] = 0
            continue
        for j in range(d):
            q = np.rint((e[j] * inv) / total) + zp
            if q != q:
                q = zp
            q = lo if q < lo else q
            q = hi if q > hi else q
            o[j] = np.int32(q)


def _build(numba: Any) -> Any:
    fn = jit._njit(numba, _rows)
    f = np.float32
    for dt in (np.uint8, np.int8):
        z = np.zeros((2, 3), dt)
        fn(z, np.ones(256, np.float32), f(255), f(0), dt == np.int8, f(0), f(255),
           np.empty((2, 3), dt))
    return fn


def prepare() -> None:
    """Compile (or load from numba's cache) the kernel now, at session creation."""
    jit.compile_once(_SLOT, _build)


def rows(x: np.ndarray, table: np.ndarray, inv: np.float32, zp: int, lo: int, hi: int
         ) -> np.ndarray | None:
    """The quantized softmax of each row of 8-bit x (N, D) (see qlinear._softmax_rows);
    None where the compiled kernel does not apply."""
    if x.ndim != 2 or x.dtype.kind not in "iu" or x.dtype.itemsize != 1:
        return None
    fn = jit.compile_once(_SLOT, _build)
    if fn is None:
        return None
    out = np.empty(x.shape, x.dtype)
    fn(np.ascontiguousarray(x), np.ascontiguousarray(table, np.float32), np.float32(inv),
       np.float32(zp), x.dtype == np.int8, np.float32(lo), np.float32(hi), out)
    return out
