"""The compiled MaxPool/AveragePool kernel (``JitPool``), chosen per node in the pool
kernels' ``__init__`` (pool.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.framework.parallel import SERIAL, ThreadPool
from onnxrt.providers.cpu.nn import jit
from onnxrt.providers.cpu.nn.native import Kind

__all__ = ["JitPool", "pool_kernel"]

# a non-overlapping pool takes the compiled kernel from this much work (outputs x taps)
_NONOVERLAP_MIN_WORK = 2_000_000

# -- MaxPool / AveragePool ------------------------------------------------------------------

class JitPool:
    """Max or average pooling of float32/float64 (N, C, H, W) or (N, C, W) inputs."""

    def __init__(self, is_max: bool, dtype: np.dtype, strided: bool,
                 min_work: int = 0) -> None:
        self.is_max = int(is_max)
        self.dtype = dt = np.dtype(dtype)
        self.strided = strided
        self.min_work = min_work     # smaller calls: None, the NumPy path is faster
        # compile (or load from the cache) now
        x, out, div = np.zeros((1, 2, 2), dt), np.empty((1, 1, 1), dt), np.ones((1, 1), dt)
        if strided:
            geo: tuple = (self.is_max, 1, 1, 1, 1, 1, 1, 0, 0)
            jit._K["pool"](x, out, div, *geo, 0, 1)
        else:
            geo = (self.is_max, 1, 1, 1, 1, 0, 0)
            jit._K["spool"](x, out, div, *geo, 0, 1)
        if dt == np.float32 and jit._install_native():
            # its serving loop runs the planes: that and the packing compiled now too
            jit._K["pack_pool"](jit._slots()[0], x, out, div, geo)

    def __call__(self, x: np.ndarray, geo: Any, div: np.ndarray | None,
                 pool: ThreadPool = SERIAL) -> np.ndarray | None:
        n, c = x.shape[:2]
        k, s, d, b, o = geo.kernel, geo.strides, geo.dil, geo.begin, geo.out
        e = [a + b for a, b in zip(geo.end, geo.extra)]
        if x.ndim == 3:
            k, s, d, b, o, e = [1] + k, [1] + s, [1] + d, [0] + b, [1] + o, [0] + e
        if x.ndim not in (3, 4):
            raise ValueError(f"compiled pool: input of rank {x.ndim}, expected 3 or 4")
        jit.check_window(x.shape[2:] if x.ndim == 4 else (1,) + x.shape[2:], k, s, d, b, o, e)
        if n * c * o[0] * o[1] * (k[0] + k[1]) < self.min_work or jit._empty(n, c, *o):
            return None
        x3 = np.ascontiguousarray(x).reshape(n * c, 1 if x.ndim == 3 else x.shape[2],
                                             x.shape[-1])
        out = np.empty((n * c, o[0], o[1]), dtype=x.dtype)
        if div is None:
            div = np.ones((1, 1), x.dtype)
        else:
            div = np.ascontiguousarray(div.reshape(o[0], o[1]), dtype=x.dtype)
        work = out.size * (k[0] + k[1])
        if s[0] == 1 and s[1] == 1:
            key, native = "spool", Kind.POOL_STRIDE1
            geo_i = (self.is_max, k[0], k[1], d[0], d[1], b[0], b[1])
        else:
            key, native = "pool", Kind.POOL_ANY
            geo_i = (self.is_max, k[0], k[1], s[0], s[1], d[0], d[1], b[0], b[1])
        jit._call(pool, key, n * c, work >= jit._PAR_MIN_WORK, (x3, out, div) + geo_i,
              (native, lambda ji, jf: jit._K["pack_pool"](ji, x3, out, div, geo_i))
              if x3.dtype == np.float32 else None)
        return out.reshape((n, c) + tuple(geo.out))


def pool_kernel(is_max: bool, dtype: Any, kernel: Any, strides: Any) -> JitPool | None:
    """A compiled max/average pool for float32/float64 input (``dtype`` from the node's
    input type) where it wins by measurement: overlapping windows (at stride 1
    _spool_planes, else _dpool_planes); non-overlapping windows (2x2/2) only when big
    enough to split over threads (smaller ones are faster in NumPy)."""
    if not kernel or not jit._ready(dtype):
        return None
    strides = list(strides or [1] * len(kernel))
    if len(kernel) not in (1, 2):
        return None
    overlap = any(k > s for k, s in zip(kernel, strides))
    return JitPool(is_max, dtype, any(s != 1 for s in strides),
                   0 if overlap else _NONOVERLAP_MIN_WORK)
