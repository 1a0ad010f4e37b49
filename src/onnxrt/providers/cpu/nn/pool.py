"""Pooling: MaxPool, AveragePool, LpPool, their Global forms and MaxUnpool.

Max, sum and Lp sums over a box window are separable: pooling one spatial axis at a time
costs k_1 + k_2 + ... strided vectorized ops on shrinking arrays instead of k_1 * k_2 * ...
No padded copy is made: each window offset only touches the outputs whose input lies inside
the tensor, and averages divide by a count-aware divisor (the outer product of per-axis
window counts). The MaxPool Indices output takes the non-separable path over an input padded
with -inf (one comparison per kernel offset).
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

from onnxrt.framework.parallel import pool_of
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.nn import compute_dtype, jit, pool_jit, resolve_pads, row_mean
from onnxrt.validate import SpecError, check_shapes

__all__ = []


class _PoolGeo:
    __slots__ = ("kernel", "strides", "dil", "begin", "end", "extra", "out")

    def __init__(self, spatial: Sequence[int], kernel_shape: Sequence[int],
                 strides: Sequence[int] | None, dilations: Sequence[int] | None,
                 pads: Sequence[int] | None, auto_pad: str, ceil_mode: int) -> None:
        nd = len(spatial)
        if kernel_shape is None or len(kernel_shape) != nd:
            raise ValueError(f"kernel_shape {kernel_shape} does not match {nd} spatial axes")
        self.kernel = [int(k) for k in kernel_shape]
        self.strides = [int(s) for s in (strides or [1] * nd)]
        self.dil = [int(d) for d in (dilations or [1] * nd)]
        self.begin, self.end, self.extra, self.out = resolve_pads(
            spatial, self.kernel, self.strides, self.dil, pads, auto_pad, ceil_mode)
        for i in range(nd):
            # every window must hold one input position: a window of padding only has no
            # max and no average (explicit pads are smaller than the kernel, onnxrt/validate;
            # SAME padding with dilations can still leave one)
            pos = (np.arange(self.out[i])[:, None] * self.strides[i] - self.begin[i]
                   + np.arange(self.kernel[i])[None, :] * self.dil[i])
            inside = ((pos >= 0) & (pos < int(spatial[i]))).any(axis=1)
            if not inside.all():
                at = int(np.argmin(inside))
                raise SpecError("attribute auto_pad" if auto_pad not in ("NOTSET", "")
                                else "attribute pads", auto_pad if auto_pad not in
                                ("NOTSET", "") else list(pads or []),
                                f"the window of output {at} along spatial axis {i} holds "
                                f"padding only (kernel_shape {self.kernel}, dilations "
                                f"{self.dil}, input {list(spatial)})")


def _pad(x: np.ndarray, geo: _PoolGeo, value: Any) -> np.ndarray:
    nd = x.ndim - 2
    after = [e + ex for e, ex in zip(geo.end, geo.extra)]
    if not any(geo.begin) and not any(after):
        return x
    shape = x.shape[:2] + tuple(x.shape[2 + i] + geo.begin[i] + after[i] for i in range(nd))
    out = np.full(shape, value, dtype=x.dtype)
    out[(slice(None), slice(None))
        + tuple(slice(b, b + x.shape[2 + i]) for i, b in enumerate(geo.begin))] = x
    return out


def _taps(n: int, k: int, d: int, s: int, b: int, out: int) -> list[tuple[int, int, int]]:
    """Per window offset o: the output range [r0, r1) whose input row r*s - b + o*d lies
    inside the input, and the input row of r0."""
    taps = []
    for o in range(k):
        first = o * d - b                              # input row of output 0
        r0 = max(0, -(first // s)) if first < 0 else 0
        r1 = min(out, (n - 1 - first) // s + 1) if n - 1 - first >= 0 else 0
        if r1 > r0:
            taps.append((r0, r1, first + r0 * s))
    return taps


def _axis_pass(x: np.ndarray, axis: int, k: int, d: int, s: int, b: int, out: int,
               ufunc: Any, init: Any) -> np.ndarray:
    """Reduce windows along one axis with a binary ufunc (maximum or add); positions outside
    the input (padding) contribute nothing, so no padded copy is made."""
    n = x.shape[axis]
    taps = _taps(n, k, d, s, b, out)
    pre = (slice(None),) * axis
    shape = x.shape[:axis] + (out,) + x.shape[axis + 1:]
    full = [t for t in taps if t[0] == 0 and t[1] == out]
    if len(full) >= 2:   # two taps that cover every output start the result in one op
        (_, _, i0), (_, _, i1) = full[:2]
        acc = ufunc(x[pre + (slice(i0, i0 + s * (out - 1) + 1, s),)],
                    x[pre + (slice(i1, i1 + s * (out - 1) + 1, s),)])
        taps = [t for t in taps if t is not full[0] and t is not full[1]]
    elif full:
        r0, r1, i0 = full[0]
        acc = np.empty(shape, dtype=x.dtype)
        np.copyto(acc, x[pre + (slice(i0, i0 + s * (out - 1) + 1, s),)])
        taps = [t for t in taps if t is not full[0]]
    else:
        acc = np.full(shape, init, dtype=x.dtype)
    for r0, r1, i0 in taps:
        dst = acc[pre + (slice(r0, r1),)]
        ufunc(dst, x[pre + (slice(i0, i0 + s * (r1 - r0 - 1) + 1, s),)], out=dst)
    return acc


def _separable(x: np.ndarray, geo: _PoolGeo, ufunc: Any, init: Any) -> np.ndarray:
    nd = x.ndim - 2
    n, c = x.shape[:2]
    if n * c < x.shape[-1] or int(np.prod(x.shape[2:])) > 1024:
        for i in range(nd):
            x = _axis_pass(x, 2 + i, geo.kernel[i], geo.dil[i], geo.strides[i], geo.begin[i],
                           geo.out[i], ufunc, init)
        return x
    # small images with more images x channels than pixels per row: pool channels-last so
    # every op runs over rows of n*c values instead of a few pixels (two transposes, far
    # fewer loops; measured faster up to ~32x32, slower above)
    xt = np.ascontiguousarray(x.reshape((n * c,) + x.shape[2:]).transpose(
        tuple(range(1, nd + 1)) + (0,)))
    for i in range(nd):
        xt = _axis_pass(xt, i, geo.kernel[i], geo.dil[i], geo.strides[i], geo.begin[i],
                        geo.out[i], ufunc, init)
    y = np.ascontiguousarray(xt.transpose((nd,) + tuple(range(nd))))
    return y.reshape((n, c) + tuple(geo.out))


def _lowest(dt: np.dtype) -> Any:
    if dt.kind in "iu":
        return np.iinfo(dt).min
    return -np.inf


def _counts(spatial: Sequence[int], geo: _PoolGeo, include_pad: bool, dt: np.dtype
            ) -> np.ndarray:
    """Divisor per output position: the outer product of per-axis window counts.

    With count_include_pad the explicit pads count, the extra ceil_mode overhang does not.
    """
    total = None
    nd = len(spatial)
    for i in range(nd):
        n, b, e = spatial[i], geo.begin[i], geo.end[i]
        pos = (np.arange(geo.out[i])[:, None] * geo.strides[i] - b
               + np.arange(geo.kernel[i])[None, :] * geo.dil[i])
        lo, hi = (-b, n + e) if include_pad else (0, n)
        c = ((pos >= lo) & (pos < hi)).sum(axis=1).astype(dt)
        c = c.reshape((-1,) + (1,) * (nd - 1 - i))
        total = c if total is None else total * c
    return total


def _pool_args(x: np.ndarray, kernel_shape: Any, strides: Any, dilations: Any, pads: Any,
               auto_pad: Any, ceil_mode: Any) -> _PoolGeo:
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode()
    return _PoolGeo(x.shape[2:], kernel_shape, strides, dilations, pads, auto_pad,
                    int(ceil_mode))


def _maxpool_indices(xp: np.ndarray, x_shape: tuple[int, ...], geo: _PoolGeo,
                     storage_order: int) -> tuple[np.ndarray, np.ndarray]:
    nd = len(geo.kernel)
    offs = list(itertools.product(*(range(k) for k in geo.kernel)))
    best = None
    arg = None
    for j, off in enumerate(offs):
        v = xp[(slice(None), slice(None)) + tuple(
            slice(o * d, o * d + s * (n - 1) + 1, s)
            for o, d, s, n in zip(off, geo.dil, geo.strides, geo.out))]
        if best is None:
            best = v.copy()
            arg = np.zeros(v.shape, dtype=np.int64)
        else:
            upd = v > best
            if v.dtype.kind == "f":     # NaN wins, its first position, as np.maximum
                upd |= np.isnan(v) & ~np.isnan(best)
            np.copyto(best, v, where=upd)
            np.copyto(arg, j, where=upd)
    koff = np.unravel_index(arg, tuple(geo.kernel))
    spatial = x_shape[2:]
    flat = np.zeros(arg.shape, dtype=np.int64)
    mult = 1
    axes = range(nd - 1, -1, -1) if storage_order == 0 else range(nd)
    for i in axes:
        shape = [1] * (nd + 2)
        shape[2 + i] = geo.out[i]
        base = (np.arange(geo.out[i], dtype=np.int64) * geo.strides[i] - geo.begin[i])
        coord = base.reshape(shape) + koff[i] * geo.dil[i]
        flat += coord * mult
        mult *= int(spatial[i])
    n, c = x_shape[:2]
    plane = int(np.prod(spatial))
    flat += (np.arange(n * c, dtype=np.int64) * plane).reshape(n, c, *([1] * nd))
    return best, flat


def max_pool(x, *, kernel_shape=None, strides=None, pads=None, auto_pad="NOTSET",
             ceil_mode=0, dilations=None, storage_order=0, node=None):
    geo = _pool_args(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    if node is not None and node.output_present(1):
        return _maxpool_indices(_pad(x, geo, _lowest(x.dtype)), x.shape, geo, int(storage_order))
    y = _separable(x, geo, np.maximum, _lowest(x.dtype))
    # MaxPool-1 has one output; later versions declare the optional Indices
    return y if node is None or node.since_version < 8 else (y,)


def average_pool(x, *, kernel_shape=None, strides=None, pads=None, auto_pad="NOTSET",
                 ceil_mode=0, count_include_pad=0, dilations=None):
    geo = _pool_args(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    cdt = compute_dtype(x.dtype)
    s = _separable(x.astype(cdt, copy=False), geo, np.add, 0)
    s /= _counts(x.shape[2:], geo, bool(count_include_pad), cdt)
    return s.astype(x.dtype, copy=False)


# -- [jit hook] MaxPool/AveragePool as class kernels: the compiled 2-D/1-D loops of nn/jit.py
# are prepared at session creation; max_pool/average_pool above stay the NumPy path

class _JitPool:
    _POOL_ATTRS = ("kernel_shape", "strides", "pads", "auto_pad", "ceil_mode", "dilations")

    def __init__(self, node: Any, is_max: bool, impl: Any) -> None:
        self.node = node
        self.impl = impl
        self.kw = dict(node.attrs)
        if is_max:
            self.kw["node"] = node
        self.geo_kw = {k: self.kw.get(k) for k in self._POOL_ATTRS}
        self.include_pad = bool(self.kw.get("count_include_pad", 0))
        self.jit = None
        if not (is_max and node.output_present(1)):
            self.jit = pool_jit.pool_kernel(is_max, jit.input_dtype(node),
                                            self.kw.get("kernel_shape"), self.kw.get("strides"))
        self._geo: dict[tuple[int, ...], tuple[_PoolGeo, np.ndarray | None]] = {}
        self._checked: set[tuple[int, ...]] = set()

    def check(self, x: np.ndarray) -> None:
        """The spec's rules on this input shape, once per shape (onnxrt/validate)."""
        if x.shape not in self._checked:
            check_shapes(self.node, (x,))
            self._checked.add(x.shape)     # a benign race: every thread adds the same

    def _run_jit(self, x: np.ndarray, ctx: Any) -> np.ndarray | None:
        j = self.jit
        if j is None or x.dtype != j.dtype or x.ndim not in (3, 4):
            return None
        hit = self._geo.get(x.shape[2:])
        if hit is None:     # a benign race: every thread computes the same value
            kw = self.geo_kw
            geo = _pool_args(x, kw["kernel_shape"], kw["strides"], kw["dilations"], kw["pads"],
                             kw["auto_pad"], kw["ceil_mode"] or 0)
            div = None if j.is_max else _counts(x.shape[2:], geo, self.include_pad, x.dtype)
            hit = self._geo[x.shape[2:]] = (geo, div)
        geo, div = hit
        return j(x, geo, div, pool_of(ctx))


@CPU.kernel("MaxPool", since=1, needs_node=True, threads=True)
class MaxPool(_JitPool):
    def __init__(self, node: Any) -> None:
        super().__init__(node, True, max_pool)
        kw = self.kw
        # 2x2 windows at stride 2 without padding (a small CNN's pool): three element-wise
        # maxima of strided views, ~10 us where the channels-last NumPy path took ~100
        self._pair = (list(kw.get("kernel_shape") or []) == [2, 2]
                      and list(kw.get("strides") or []) == [2, 2]
                      and not any(kw.get("pads") or [])
                      and list(kw.get("dilations") or [1, 1]) == [1, 1]
                      and kw.get("auto_pad", "NOTSET") in ("NOTSET", "VALID")
                      and not kw.get("ceil_mode") and not node.output_present(1))

    def __call__(self, x: np.ndarray, ctx: Any = None) -> Any:
        self.check(x)
        if (self._pair and x.ndim == 4 and x.shape[2] >= 2 and x.shape[3] >= 2
                and x.size < pool_jit._NONOVERLAP_MIN_WORK):
            y = _max_2x2(x)
            return y if self.node.since_version < 8 else (y,)
        y = self._run_jit(x, ctx)
        if y is None:
            return self.impl(x, **self.kw)
        # MaxPool-1 has one output; later versions declare the optional Indices
        return y if self.node.since_version < 8 else (y,)


def _max_2x2(x: np.ndarray) -> np.ndarray:
    """MaxPool 2x2 stride 2 without padding of (N, C, H, W): the maxima of the four
    window positions' strided views (odd last rows and columns dropped, as the floor of
    the output size drops them); np.maximum keeps NaN as the NumPy path does."""
    oh, ow = 2 * (x.shape[2] // 2), 2 * (x.shape[3] // 2)
    y = np.maximum(x[:, :, 0:oh:2, 0:ow:2], x[:, :, 0:oh:2, 1:ow:2])
    np.maximum(y, x[:, :, 1:oh:2, 0:ow:2], out=y)
    return np.maximum(y, x[:, :, 1:oh:2, 1:ow:2], out=y)


@CPU.kernel("AveragePool", since=1, needs_node=True, threads=True)
class AveragePool(_JitPool):
    def __init__(self, node: Any) -> None:
        super().__init__(node, False, average_pool)

    def __call__(self, x: np.ndarray, ctx: Any = None) -> np.ndarray:
        self.check(x)
        y = self._run_jit(x, ctx)
        return self.impl(x, **self.kw) if y is None else y


def _lp(x: np.ndarray, p: float) -> np.ndarray:
    if p == 1:
        return np.abs(x)
    if p == 2:
        return x * x
    return np.abs(x) ** p


def _root(s: np.ndarray, p: float) -> np.ndarray:
    if p == 1:
        return s
    if p == 2:
        return np.sqrt(s, out=s)
    return np.power(s, 1.0 / p, out=s)


@CPU.kernel("LpPool", since=1)
def lp_pool(x, *, kernel_shape=None, strides=None, pads=None, auto_pad="NOTSET", ceil_mode=0,
            dilations=None, p=2):
    geo = _pool_args(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    cdt = compute_dtype(x.dtype)
    p = float(p)
    s = _separable(_lp(x.astype(cdt, copy=False), p), geo, np.add, 0)
    return _root(s, p).astype(x.dtype, copy=False)


@CPU.kernel("GlobalAveragePool", since=1)
def global_average_pool(x):
    cdt = compute_dtype(x.dtype)
    n, c = x.shape[:2]
    m = row_mean(x.astype(cdt, copy=False).reshape(n * c, -1))
    return m.reshape((n, c) + (1,) * (x.ndim - 2)).astype(x.dtype, copy=False)


@CPU.kernel("GlobalMaxPool", since=1)
def global_max_pool(x):
    return np.max(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@CPU.kernel("GlobalLpPool", since=1)
def global_lp_pool(x, *, p=2):
    cdt = compute_dtype(x.dtype)
    p = float(p)
    s = np.sum(_lp(x.astype(cdt, copy=False), p), axis=tuple(range(2, x.ndim)), keepdims=True)
    return _root(s, p).astype(x.dtype, copy=False)


@CPU.kernel("MaxUnpool", since=9, host_inputs=(2,))
def max_unpool(x, indices, output_shape=None, *, kernel_shape=None, strides=None, pads=None):
    nd = x.ndim - 2
    strides = list(strides or [1] * nd)
    pads = list(pads or [0] * (2 * nd))
    shape = x.shape[:2] + tuple(
        (x.shape[2 + i] - 1) * strides[i] + kernel_shape[i] - pads[i] - pads[i + nd]
        for i in range(nd))
    idx = np.asarray(indices, dtype=np.int64).reshape(-1)
    if output_shape is not None:
        target = tuple(int(v) for v in np.asarray(output_shape).reshape(-1))
        if target != shape:
            # indices address the inferred shape: keep their coordinates in the larger output
            idx = np.ravel_multi_index(np.unravel_index(idx, shape), target)
            shape = target
    y = np.zeros(int(np.prod(shape)), dtype=x.dtype)
    y[idx] = x.reshape(-1)
    return y.reshape(shape)
