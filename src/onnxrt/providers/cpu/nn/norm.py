"""Normalization: BatchNormalization (inference and training outputs), Instance, Layer, Group,
RMS, Lp and MeanVariance normalization, LRN.

Statistics are computed in float32 for float16/bfloat16 inputs (and in the input's precision
for float32/float64); results are cast back to the declared output type. BatchNormalization
with constant statistics folds them into one scale and one shift per channel, once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.framework.parallel import pool_of
from onnxrt.providers.cpu.contrib.layer_norm import compiled_norm
from onnxrt.providers.cpu.nn import compute_dtype, row_mean

__all__ = []


def _chan(v: np.ndarray, ndim: int, cdt: np.dtype) -> np.ndarray:
    """A per-channel (or, with spatial=0, per-activation) parameter shaped to broadcast."""
    v = np.asarray(v).astype(cdt, copy=False)
    if v.ndim <= 1:
        return v.reshape((1, -1) + (1,) * max(0, ndim - 2))
    return v.reshape((1,) + v.shape)


def _moments(x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and population variance over ``axes`` (kept), in two passes for accuracy."""
    nd = x.ndim
    if axes and axes == tuple(range(nd - len(axes), nd)) and x.flags.c_contiguous:
        # trailing axes: rows of a 2-D view, reduced in BLAS
        kept = x.shape[:nd - len(axes)] + (1,) * len(axes)
        x2 = x.reshape(int(np.prod(x.shape[:nd - len(axes)])), -1)
        mean = row_mean(x2)
        d = x2 - mean[:, None]
        d *= d
        return mean.reshape(kept), row_mean(d).reshape(kept)
    mean = np.mean(x, axis=axes, keepdims=True)
    d = x - mean
    var = np.mean(d * d, axis=axes, keepdims=True)
    return mean, var


@CPU.kernel("BatchNormalization", since=1, needs_node=True)
class BatchNormalization:
    """BatchNormalization-1..15. Training statistics when training_mode=1 (v14+), or, before
    v14, when the node asks for the optional statistics outputs outside test mode."""

    def __init__(self, node: Any) -> None:
        a = node.attrs
        self.eps = float(a.get("epsilon", 1e-5))
        self.momentum = float(a.get("momentum", 0.9))
        self.since = node.since_version
        if self.since >= 14:
            self.training = bool(a.get("training_mode", 0))
        else:
            self.training = node.num_outputs > 1 and not a.get("is_test", 0)
        self.folded = None
        ci = node.constant_inputs
        if not self.training and all(i in ci for i in (1, 2, 3, 4)):
            self.folded = self._fold(ci[1], ci[2], ci[3], ci[4])

    def _fold(self, scale: Any, b: Any, mean: Any, var: Any) -> tuple[np.ndarray, np.ndarray]:
        scale, b, mean, var = (np.asarray(v, dtype=np.float64) for v in (scale, b, mean, var))
        mul = scale / np.sqrt(var + self.eps)
        return mul, b - mean * mul

    def __call__(self, x: np.ndarray, scale: np.ndarray, b: np.ndarray, mean: np.ndarray,
                 var: np.ndarray, *_: Any) -> tuple[np.ndarray, ...]:
        dt = x.dtype
        cdt = compute_dtype(dt)
        nd = x.ndim
        xc = x.astype(cdt, copy=False)
        if not self.training:
            mul, add = self.folded if self.folded is not None else self._fold(scale, b, mean, var)
            y = xc * _chan(mul, nd, cdt)
            y += _chan(add, nd, cdt)
            return (y.astype(dt, copy=False),)
        axes = (0,) + tuple(range(2, nd))
        bm, bv = _moments(xc, axes)
        y = (xc - bm) / np.sqrt(bv + cdt.type(self.eps))
        y = y * _chan(scale, nd, cdt) + _chan(b, nd, cdt)
        bm, bv = bm.reshape(-1), bv.reshape(-1)
        sdt = np.asarray(mean).dtype
        m = self.momentum
        run_mean = (np.asarray(mean).astype(cdt) * m + bm * (1 - m)).astype(sdt)
        run_var = (np.asarray(var).astype(cdt) * m + bv * (1 - m)).astype(sdt)
        y = y.astype(dt, copy=False)
        if self.since >= 14:
            return y, run_mean, run_var
        return y, run_mean, run_var, bm.astype(sdt), bv.astype(sdt)


@CPU.kernel("InstanceNormalization", since=1)
def instance_normalization(x, scale, b, *, epsilon=1e-5, consumed_inputs=None):
    dt = x.dtype
    cdt = compute_dtype(dt)
    xc = x.astype(cdt, copy=False)
    mean, var = _moments(xc, tuple(range(2, x.ndim)))
    inv = 1.0 / np.sqrt(var + cdt.type(epsilon))
    y = (xc - mean) * (inv * _chan(scale, x.ndim, cdt))
    y += _chan(b, x.ndim, cdt)
    return y.astype(dt, copy=False)


def _stash(dt: np.dtype, stash_type: int) -> np.dtype:
    cdt = compute_dtype(dt)
    if stash_type == 1 and cdt != np.float64:
        return np.dtype(np.float32)
    return cdt


@CPU.kernel("LayerNormalization", since=17, threads=True)
def layer_normalization(x, scale, b=None, *, axis=-1, epsilon=1e-5, stash_type=1, ctx=None):
    dt = x.dtype
    if stash_type == 1:
        r = compiled_norm(x, scale, b, epsilon, axis, pool=pool_of(ctx))
        if r is not None:
            return r[:3]
    cdt = _stash(dt, stash_type)
    ax = axis + x.ndim if axis < 0 else axis
    axes = tuple(range(ax, x.ndim))
    xc = x.astype(cdt, copy=False)
    mean, var = _moments(xc, axes)
    inv = 1.0 / np.sqrt(var + cdt.type(epsilon))
    y = (xc - mean) * inv
    y *= scale.astype(cdt, copy=False)
    if b is not None:
        y += b.astype(cdt, copy=False)
    udt = np.float32 if stash_type == 1 else dt
    return y.astype(dt, copy=False), mean.astype(udt, copy=False), inv.astype(udt, copy=False)


@CPU.kernel("GroupNormalization", since=18)
def group_normalization(x, scale, b, *, num_groups, epsilon=1e-5, stash_type=1):
    dt = x.dtype
    cdt = _stash(dt, stash_type)
    n, c = x.shape[:2]
    g = int(num_groups)
    if c % g:
        raise ValueError(f"channels {c} not divisible by num_groups {g}")
    xg = x.astype(cdt, copy=False).reshape(n, g, -1)
    mean, var = _moments(xg, (2,))
    y = ((xg - mean) / np.sqrt(var + cdt.type(epsilon))).reshape(x.shape)
    scale = np.asarray(scale).astype(cdt, copy=False).reshape(-1)
    b = np.asarray(b).astype(cdt, copy=False).reshape(-1)
    if scale.size == g and g != c:    # GroupNormalization-18: one scale and bias per group
        scale = np.repeat(scale, c // g)
        b = np.repeat(b, c // g)
    y *= _chan(scale, x.ndim, cdt)
    y += _chan(b, x.ndim, cdt)
    return y.astype(dt, copy=False)


@CPU.kernel("RMSNormalization", since=23)
def rms_normalization(x, scale, *, axis=-1, epsilon=1e-5, stash_type=1):
    cdt = _stash(x.dtype, stash_type)
    ax = axis + x.ndim if axis < 0 else axis
    xc = x.astype(cdt, copy=False)
    x2 = np.ascontiguousarray(xc).reshape(int(np.prod(x.shape[:ax])), -1)
    ms = row_mean(x2 * x2).reshape(x.shape[:ax] + (1,) * (x.ndim - ax))
    y = xc / np.sqrt(ms + cdt.type(epsilon))
    y *= scale.astype(cdt, copy=False)
    return y.astype(scale.dtype, copy=False)


@CPU.kernel("LpNormalization", since=1)
def lp_normalization(x, *, axis=-1, p=2):
    cdt = compute_dtype(x.dtype)
    xc = x.astype(cdt, copy=False)
    if p == 1:
        norm = np.sum(np.abs(xc), axis=axis, keepdims=True)
    elif p == 2:
        norm = np.sqrt(np.sum(xc * xc, axis=axis, keepdims=True))
    else:
        raise ValueError(f"LpNormalization supports p=1 or p=2, got {p}")
    norm[norm == 0] = 1      # an all-zero slice stays zero instead of becoming NaN
    return (xc / norm).astype(x.dtype, copy=False)


@CPU.kernel("MeanVarianceNormalization", since=9)
def mean_variance_normalization(x, *, axes=(0, 2, 3)):
    cdt = compute_dtype(x.dtype)
    xc = x.astype(cdt, copy=False)
    axes = tuple(int(a) for a in axes)
    mean = np.mean(xc, axis=axes, keepdims=True)
    var = np.mean(xc * xc, axis=axes, keepdims=True) - mean * mean
    # the spec's function: (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9)
    std = np.sqrt(np.maximum(var, 0)) + cdt.type(1e-9)
    return ((xc - mean) / std).astype(x.dtype, copy=False)


@CPU.kernel("LRN", since=1)
def lrn(x, *, size, alpha=1e-4, beta=0.75, bias=1.0):
    dt = x.dtype
    cdt = compute_dtype(dt)
    xc = x.astype(cdt, copy=False)
    sq = xc * xc
    c = x.shape[1]
    lo = (size - 1) // 2
    hi = size - 1 - lo
    pad = np.zeros((x.shape[0], c + lo + hi) + x.shape[2:], dtype=cdt)
    pad[:, lo:lo + c] = sq
    acc = pad[:, 0:c].copy()
    for k in range(1, size):
        acc += pad[:, k:k + c]
    acc *= cdt.type(alpha / size)
    acc += cdt.type(bias)
    if beta == 0.75:
        # x^0.75 = sqrt(x * sqrt(x)): two square roots beat one pow
        np.sqrt(acc * np.sqrt(acc), out=acc)
    else:
        np.power(acc, cdt.type(beta), out=acc)
    return (xc / acc).astype(dt, copy=False)
