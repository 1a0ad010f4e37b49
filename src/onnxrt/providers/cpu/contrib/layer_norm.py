"""LayerNormalization (before opset 17), SkipLayerNormalization, SimplifiedLayerNormalization and
SkipSimplifiedLayerNormalization (com.microsoft), in float32 for float16 inputs. float32
rows run as one compiled pass each where numba is enabled (``compiled_norm``; also used by
LayerNormalization-17)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from onnxrt.framework.parallel import SERIAL, ThreadPool, pool_of
from onnxrt.providers.cpu import CPU

MS = "com.microsoft"
_F32 = np.dtype(np.float32)


def _norm_rows(x, skip, bias, gamma, beta, y, ssum, stats, has_skip, has_bias, has_beta,
               keep_sum, simplified, eps, lo, hi):
    """Rows lo..hi-1 of 2-D float32 x: s = x (+ skip) (+ bias), then y = (s - mean) /
    sqrt(var + eps) * gamma (+ beta) (mean 0 and var = mean(s^2) when ``simplified``); s
    kept in ``ssum`` when ``keep_sum``; mean and 1/std per row in ``stats`` (2, rows).
    Sums in float64; each row three passes over memory already in cache.

    Preconditions (checked by compiled_norm): x, y, ssum and skip (rows, m); gamma, beta
    and bias (m,); stats (2, rows); 0 <= lo <= hi <= rows."""
    m = x.shape[1]
    for i in range(lo, hi):
        xr = x[i]
        yr = y[i]
        tot = 0.0
        for j in range(m):
            v = xr[j]
            if has_skip:
                v += skip[i, j]
            if has_bias:
                v += bias[j]
            yr[j] = v
            tot += v
        if keep_sum:
            sr = ssum[i]
            for j in range(m):
                sr[j] = yr[j]
        mean = 0.0 if simplified else tot / m
        sq = 0.0
        for j in range(m):
            d = yr[j] - mean
            sq += d * d
        inv = 1.0 / math.sqrt(sq / m + eps)
        stats[0, i] = mean
        stats[1, i] = inv
        for j in range(m):
            v = (yr[j] - mean) * inv * gamma[j]
            if has_beta:
                v += beta[j]
            yr[j] = v


_NORM: list[Any] = []
# a call splits its rows over the session's threads from this many elements on (one
# 128x768 BERT row block takes ~40 us, about what a split costs)
_NORM_PAR_MIN = 1 << 18


def _norm_kernel() -> Any:
    """The compiled _norm_rows (numba's disk cache or compiled once per process), or None
    where numba is missing or disabled (ONNXRT_JIT=0)."""
    from onnxrt.providers.cpu.nn import jit

    def build(numba: Any) -> Any:
        # reassociation lets the float64 row sums vectorize
        fn = jit._njit(numba, _norm_rows, fastmath={"reassoc", "contract"})
        x = np.zeros((1, 1), np.float32)
        fn(x, x, x[0], x[0], x[0], np.empty_like(x), x, np.empty((2, 1), np.float32),
           True, True, True, True, False, 1e-5, 0, 1)
        return fn

    return jit.compile_once(_NORM, build)


def compiled_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray | None, epsilon: float,
                  axis: int = -1, skip: np.ndarray | None = None,
                  bias: np.ndarray | None = None, simplified: bool = False,
                  keep_sum: bool = False, pool: ThreadPool = SERIAL) -> tuple | None:
    """(y, mean, inv_std, sum) of a float32 layer norm over the axes from ``axis`` on, in
    one compiled pass per row (mean and inv_std keep the normalized axes as 1s; sum is
    x + skip + bias when ``keep_sum``), or None where that does not apply: numba off, not
    float32, a skip of another shape, gamma/beta/bias not one value per normalized element."""
    fn = _norm_kernel()
    if fn is None or x.dtype != _F32 or x.ndim == 0 or x.size == 0:
        return None
    # the checks in Python's cheapest forms: a decoding step calls this nine times or more
    # on one row each, where NumPy's helpers cost ten times the compiled pass
    nd = x.ndim
    ax = axis + nd if axis < 0 else axis
    shape = x.shape
    m = shape[-1] if ax == nd - 1 else int(np.prod(shape[ax:]))
    for v in (gamma, beta, bias):
        if v is not None and (type(v) is not np.ndarray or v.dtype != _F32 or v.size != m):
            return None
    if skip is not None and (type(skip) is not np.ndarray or skip.shape != shape
                             or skip.dtype != _F32):
        return None
    rows = x.size // m
    x2 = x.reshape(rows, m) if x.flags.c_contiguous else np.ascontiguousarray(x).reshape(rows, m)
    sk = x2 if skip is None else _rows(skip, rows, m)
    g = _vec(gamma, m)
    b = g if beta is None else _vec(beta, m)
    bi = g if bias is None else _vec(bias, m)
    y = np.empty((rows, m), _F32)
    ssum = np.empty((rows, m), _F32) if keep_sum else y
    stats = np.empty((2, rows), _F32)
    args = (x2, sk, bi, g, b, y, ssum, stats, skip is not None, bias is not None,
            beta is not None, keep_sum, simplified, float(epsilon))
    if rows == 1 or x2.size < _NORM_PAR_MIN:
        fn(*args, 0, rows)
    else:
        pool.for_ranges(fn, args, rows, True)
    kept = shape[:ax] + (1,) * (nd - ax)
    return (y.reshape(shape), stats[0].reshape(kept), stats[1].reshape(kept),
            ssum.reshape(shape) if keep_sum else None)


def _rows(a: np.ndarray, rows: int, m: int) -> np.ndarray:
    return a.reshape(rows, m) if a.flags.c_contiguous else \
        np.ascontiguousarray(a).reshape(rows, m)


def _vec(a: np.ndarray, m: int) -> np.ndarray:
    return a.reshape(m) if a.flags.c_contiguous else np.ascontiguousarray(a).reshape(m)


def _norm(s: np.ndarray, axis: int, epsilon: float, simplified: bool,
          ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """(normalized, mean, inv_std) of a float array ``s`` that this call owns."""
    ax = axis + s.ndim if axis < 0 else axis
    axes = tuple(range(ax, s.ndim))
    mean = None
    if simplified:
        d = s
        var = np.mean(np.square(s), axis=axes, keepdims=True)
        d = s * 1   # s is reused as the skip sum output: keep it
    else:
        mean = np.mean(s, axis=axes, keepdims=True)
        d = s - mean
        var = np.mean(np.square(d), axis=axes, keepdims=True)
    var += s.dtype.type(epsilon)
    inv = np.sqrt(var, out=var)
    np.reciprocal(inv, out=inv)
    d *= inv
    return d, mean, inv


def _work(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype != np.float64 and x.dtype != np.float32 else x


def _affine(y: np.ndarray, gamma: np.ndarray, beta: np.ndarray | None) -> np.ndarray:
    y *= gamma.astype(y.dtype, copy=False)
    if beta is not None:
        y += beta.astype(y.dtype, copy=False)
    return y


def _outputs(node: Any, dt: np.dtype, y: np.ndarray, *rest: Any) -> Any:
    y = y.astype(dt, copy=False)
    if node.num_outputs <= 1:
        return y
    return (y,) + tuple(None if r is None else r.astype(
        np.float32 if i < 2 else dt, copy=False) for i, r in enumerate(rest))


# onnxruntime registers LayerNormalization and SimplifiedLayerNormalization as contrib ops of
# the ONNX domain for opsets before LayerNormalization-17; its fusions emit them there
@CPU.kernel("LayerNormalization", since=1, until=16, needs_node=True, threads=True)
@CPU.kernel("LayerNormalization", since=1, domain=MS, needs_node=True, threads=True)
def layer_normalization(x, scale, b=None, *, axis=-1, epsilon=1e-5, stash_type=1, node,
                        ctx=None):
    r = compiled_norm(x, scale, b, epsilon, axis, pool=pool_of(ctx))
    if r is not None:
        return _outputs(node, x.dtype, *r[:3])
    y, mean, inv = _norm(_work(x), axis, epsilon, False)
    return _outputs(node, x.dtype, _affine(y, scale, b), mean, inv)


@CPU.kernel("SimplifiedLayerNormalization", since=1, needs_node=True, threads=True)
@CPU.kernel("SimplifiedLayerNormalization", since=1, domain=MS, needs_node=True, threads=True)
def simplified_layer_normalization(x, scale, *, axis=-1, epsilon=1e-5, stash_type=1, node,
                                   ctx=None):
    r = compiled_norm(x, scale, None, epsilon, axis, simplified=True, pool=pool_of(ctx))
    if r is not None:
        return _outputs(node, x.dtype, r[0], r[2])
    y, _, inv = _norm(_work(x), axis, epsilon, True)
    return _outputs(node, x.dtype, _affine(y, scale, None), inv)


def _skip_sum(x: np.ndarray, skip: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    s = np.add(_work(x), skip.astype(np.float32) if skip.dtype != x.dtype else skip,
               dtype=np.float64 if x.dtype == np.float64 else np.float32)
    if bias is not None:
        s += bias.astype(s.dtype, copy=False)
    return s


@CPU.kernel("SkipLayerNormalization", since=1, domain=MS, needs_node=True, threads=True)
def skip_layer_normalization(x, skip, gamma, beta=None, bias=None, *, epsilon=1e-12, node,
                             ctx=None):
    """LayerNorm over the last axis of x + skip (+ bias); outputs y, mean, inv_std_var and
    the sum itself (input_skip_bias_sum)."""
    r = compiled_norm(x, gamma, beta, epsilon, -1, skip, bias, keep_sum=node.num_outputs > 3,
                      pool=pool_of(ctx))
    if r is not None:
        return _outputs(node, x.dtype, *r)
    s = _skip_sum(x, skip, bias)
    y, mean, inv = _norm(s, -1, epsilon, False)
    return _outputs(node, x.dtype, _affine(y, gamma, beta), mean, inv, s)


@CPU.kernel("SkipSimplifiedLayerNormalization", since=1, domain=MS, needs_node=True,
            threads=True)
def skip_simplified_layer_normalization(x, skip, gamma, bias=None, *, epsilon=1e-12, node,
                                        ctx=None):
    r = compiled_norm(x, gamma, None, epsilon, -1, skip, bias, simplified=True,
                      keep_sum=node.num_outputs > 3, pool=pool_of(ctx))
    if r is not None:
        return _outputs(node, x.dtype, r[0], None, r[2], r[3])
    s = _skip_sum(x, skip, bias)
    y, _, inv = _norm(s, -1, epsilon, True)
    return _outputs(node, x.dtype, _affine(y, gamma, None), None, inv, s)
