"""Indexing ops: Gather, GatherElements, GatherND, Scatter, ScatterElements, ScatterND (with
reductions), TensorScatter, Compress, NonZero, OneHot, Unique, Range.

Negative indices wrap; out-of-range indices raise a ValueError naming the bad index.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.validate.alloc import check_alloc

_WIDEN = {np.dtype(ml_dtypes.bfloat16)}  # ufunc.at has no loops for these: use float32


def _axis(a: int, rank: int, op: str) -> int:
    if not -rank <= a < rank:
        raise ValueError(f"{op}: axis {a} is out of range for rank {rank}")
    return a + rank if a < 0 else a


def _check_range(idx: np.ndarray, dim: int, op: str, what: str = "axis") -> np.ndarray:
    """Indices as intp with negatives wrapped; raises on anything outside [-dim, dim-1]."""
    idx = np.asarray(idx)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"{op}: indices must be integers, not {idx.dtype}")
    if idx.size:
        lo, hi = idx.min(), idx.max()
        if lo < -dim or hi >= dim:
            bad = lo if lo < -dim else hi
            raise ValueError(f"{op}: index {int(bad)} is out of range for {what} of size {dim}")
        if lo < 0:
            idx = np.where(idx < 0, idx + dim, idx)
    return idx.astype(np.intp, copy=False)


# -- Gather family ---------------------------------------------------------------------------

@CPU.kernel("Gather", since=1)
class Gather:
    """Constant 1-D integer indices (a shape's entries picked by a model's shape arithmetic)
    range-checked once per (rank, size of the gathered axis); the rest through ``gather``."""

    def __init__(self, node: Any) -> None:
        self.axis = int(node.attrs.get("axis", 0))
        c = node.constant_inputs.get(1)
        idx = None if c is None else np.asarray(c)
        ok = idx is not None and idx.ndim == 1 and idx.dtype.kind in "iu" and 0 < idx.size <= 16
        self.idx = idx.astype(np.intp) if ok else None   # NumPy wraps negatives itself
        self._checked: set[tuple[int, int]] = set()

    def __call__(self, data, indices):
        if self.idx is None or type(data) is not np.ndarray:
            return gather(data, indices, axis=self.axis)
        ax = self.axis
        key = (data.ndim, data.shape[ax] if -data.ndim <= ax < data.ndim else -1)
        if key not in self._checked:
            out = gather(data, self.idx, axis=ax)   # raises on a bad axis or index
            if len(self._checked) < 16:
                self._checked.add(key)
            return out
        return data[self.idx] if key[0] == 1 else np.take(data, self.idx, axis=ax)


def gather(data, indices, *, axis=0):
    data = np.asarray(data)
    ax = _axis(axis, data.ndim, "Gather")
    idx = np.asarray(indices)
    dim = data.shape[ax]
    if idx.ndim == 0:  # one index: a view, no copy
        i = int(idx)
        if not -dim <= i < dim:
            raise ValueError(f"Gather: index {i} is out of range for axis {ax} of size {dim}")
        return data[(slice(None),) * ax + (i, Ellipsis)]  # Ellipsis: 0-d array, not scalar
    if idx.dtype.kind not in "iu":
        raise TypeError(f"Gather: indices must be integers, not {idx.dtype}")
    try:  # np.take wraps negative indices and range-checks in its one pass
        return np.take(data, idx, axis=ax)
    except IndexError:
        _check_range(idx, dim, "Gather")  # raises the ValueError naming the index
        raise


def _full_index(indices: np.ndarray, axis: int) -> tuple[Any, ...]:
    """Index tuple addressing data[i0, .., indices[i], .., in] for every position i."""
    grids = list(np.ogrid[tuple(slice(0, d) for d in indices.shape)]) if indices.ndim else []
    grids[axis] = indices
    return tuple(grids)


@CPU.kernel("GatherElements", since=11)
def gather_elements(data, indices, *, axis=0):
    data = np.asarray(data)
    ax = _axis(axis, data.ndim, "GatherElements")
    idx = np.asarray(indices)
    if idx.ndim != data.ndim:
        raise ValueError(f"GatherElements: indices rank {idx.ndim} != data rank {data.ndim}")
    idx = _check_range(idx, data.shape[ax], "GatherElements")
    if idx.shape == data.shape:
        return np.take_along_axis(data, idx, axis=ax)
    return data[_full_index(idx, ax)]


@CPU.kernel("GatherND", since=11)
def gather_nd(data, indices, *, batch_dims=0):
    data = np.asarray(data)
    idx = np.asarray(indices)
    b = int(batch_dims)
    if idx.ndim < 1:
        raise ValueError("GatherND: indices must have rank >= 1")
    k = idx.shape[-1]
    if b + k > data.ndim or data.shape[:b] != idx.shape[:b]:
        raise ValueError(f"GatherND: indices shape {list(idx.shape)} does not fit data shape "
                         f"{list(data.shape)} with batch_dims={b}")
    nb = int(np.prod(data.shape[:b], dtype=np.int64))
    n = int(np.prod(idx.shape[b:-1], dtype=np.int64))
    d = data.reshape((nb,) + data.shape[b:])
    if k == 0:  # empty index tuples select whole slices
        out = np.repeat(d[:, None], n, axis=1)
        return out.reshape(idx.shape[:-1] + data.shape[b:])
    ii = idx.reshape((nb, n, k))
    cols = [_check_range(ii[..., j], d.shape[1 + j], "GatherND", f"data dim {b + j}")
            for j in range(k)]
    out = d[(np.arange(nb)[:, None],) + tuple(cols)]  # [nb, n, *rest]
    return out.reshape(idx.shape[:-1] + data.shape[b + k:])


# -- Scatter family --------------------------------------------------------------------------

_AT = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter(out: np.ndarray, key: tuple[Any, ...], updates: np.ndarray, reduction: str,
             op: str) -> np.ndarray:
    """out[key] (op)= updates, in place on ``out`` (a fresh contiguous copy owned by the
    caller). ``key`` holds non-negative index arrays for the leading dims of ``out``."""
    if reduction == "none":
        out[key] = updates
        return out
    uf = _AT.get(reduction)
    if uf is None:
        raise ValueError(f"{op}: unknown reduction {reduction!r} (none, add, mul, max, min)")
    if out.dtype in _WIDEN:  # no NumPy loops for these: reduce in float32
        wide = _scatter(out.astype(np.float32), key, updates.astype(np.float32), reduction, op)
        return wide.astype(out.dtype)
    if out.dtype == np.bool_ and reduction in ("add", "mul"):
        uf = np.logical_or if reduction == "add" else np.logical_and
    # The spec applies updates one after another, so duplicates reduce left to right
    # starting from the current value: keep that order for bit-exact float results.
    k = len(key)
    lin = np.ravel_multi_index(np.broadcast_arrays(*key), out.shape[:k]).reshape(-1)
    n = lin.size
    if n == 0:
        return out
    flat_out = out.reshape(int(np.prod(out.shape[:k], dtype=np.int64)), -1)
    flat_upd = updates.reshape(n, -1)
    if flat_out.shape[1] >= 512 or n <= 8:  # big slices: a loop of row-wide ufunc calls
        for i, t in enumerate(lin.tolist()):
            row = flat_out[t]
            uf(row, flat_upd[i], out=row)
        return out
    if out.dtype.kind in "fc" and reduction in ("add", "mul"):
        # float sums depend on order and reduceat sums pairwise: ufunc.at is sequential
        uf.at(flat_out, lin, flat_upd)
        return out
    # order-free reductions (max, min, integer add/mul): sort the targets, put each one's
    # current value first in its run and reduce every run at once
    order = np.argsort(lin, kind="stable")
    sl = lin[order]
    starts = np.concatenate(([0], np.flatnonzero(sl[1:] != sl[:-1]) + 1))
    targets = sl[starts]
    heads = starts + np.arange(starts.size)
    comb = np.empty((n + starts.size, flat_out.shape[1]), dtype=out.dtype)
    rest = np.ones(comb.shape[0], dtype=bool)
    rest[heads] = False
    comb[heads] = flat_out[targets]
    comb[rest] = flat_upd[order]
    flat_out[targets] = uf.reduceat(comb, heads, axis=0)
    return out


def _scatter_elements(data, indices, updates, axis, reduction, op):
    data = np.asarray(data)
    ax = _axis(axis, data.ndim, op)
    idx = np.asarray(indices)
    updates = np.asarray(updates)
    if idx.shape != updates.shape or idx.ndim != data.ndim:
        raise ValueError(f"{op}: indices {list(idx.shape)} and updates {list(updates.shape)} "
                         f"must have one shape of data's rank {data.ndim}")
    idx = _check_range(idx, data.shape[ax], op)
    out = data.copy()
    if idx.size == 0:
        return out
    return _scatter(out, _full_index(idx, ax), updates, reduction, op)


@CPU.kernel("ScatterElements", since=11)
def scatter_elements(data, indices, updates, *, axis=0, reduction="none"):
    return _scatter_elements(data, indices, updates, axis, reduction, "ScatterElements")


@CPU.kernel("Scatter", since=9)
def scatter(data, indices, updates, *, axis=0):
    return _scatter_elements(data, indices, updates, axis, "none", "Scatter")


@CPU.kernel("ScatterND", since=11)
def scatter_nd(data, indices, updates, *, reduction="none"):
    data = np.asarray(data)
    idx = np.asarray(indices)
    updates = np.asarray(updates)
    k = idx.shape[-1]
    if k > data.ndim or updates.shape != idx.shape[:-1] + data.shape[k:]:
        raise ValueError(f"ScatterND: updates shape {list(updates.shape)} does not match "
                         f"indices {list(idx.shape)} and data {list(data.shape)}")
    out = data.copy()
    if idx.size == 0:
        return out
    key = tuple(_check_range(idx[..., j], data.shape[j], "ScatterND", f"data dim {j}")
                for j in range(k))
    return _scatter(out, key, updates, reduction, "ScatterND")


@CPU.kernel("TensorScatter", since=24)
def tensor_scatter(past, update, write_indices=None, *, axis=-2, mode="linear"):
    past = np.asarray(past)
    update = np.asarray(update)
    ax = _axis(axis, past.ndim, "TensorScatter")
    if ax == 0:
        raise ValueError("TensorScatter: axis must not be 0 (the batch dimension)")
    if update.ndim != past.ndim or any(u != p for i, (u, p) in
                                       enumerate(zip(update.shape, past.shape)) if i != ax):
        raise ValueError(f"TensorScatter: update shape {list(update.shape)} does not match "
                         f"cache shape {list(past.shape)} outside axis {ax}")
    nb, m, s = past.shape[0], past.shape[ax], update.shape[ax]
    w = (np.zeros(nb, dtype=np.int64) if write_indices is None
         else np.asarray(write_indices).astype(np.int64).reshape(-1))
    pos = w[:, None] + np.arange(s)[None, :]  # [batch, seq]
    if mode == "circular":
        pos %= m
    elif mode != "linear":
        raise ValueError(f"TensorScatter: mode must be linear or circular, not {mode!r}")
    if pos.size and (pos.min() < 0 or pos.max() >= m):
        raise ValueError(f"TensorScatter: write_indices + sequence length exceed the cache "
                         f"length {m}")
    out = past.copy()
    view = np.moveaxis(out, ax, 1)  # a view: writes land in ``out``
    view[np.arange(nb)[:, None], pos] = np.moveaxis(update, ax, 1)
    return out


# -- Compress, NonZero, OneHot ---------------------------------------------------------------

@CPU.kernel("Compress", since=9)
def compress(x, condition, *, axis=None):
    x = np.asarray(x)
    cond = np.asarray(condition).reshape(-1).astype(bool, copy=False)
    if axis is None:
        flat = x.reshape(-1)
        if cond.shape[0] > flat.shape[0]:
            raise ValueError(f"Compress: condition length {cond.shape[0]} exceeds input size "
                             f"{flat.shape[0]}")
        return flat[:cond.shape[0]][cond]
    ax = _axis(axis, x.ndim, "Compress")
    if cond.shape[0] > x.shape[ax]:
        raise ValueError(f"Compress: condition length {cond.shape[0]} exceeds dim "
                         f"{x.shape[ax]} of axis {ax}")
    return np.compress(cond, x, axis=ax)


@CPU.kernel("NonZero", since=9)
def nonzero(x):
    x = np.asarray(x)
    if x.ndim == 0:  # a scalar counts as one element of a 1-D tensor
        x = x.reshape(1)
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


@CPU.kernel("OneHot", since=9, host_inputs=(1,))
def one_hot(indices, depth, values, *, axis=-1):
    ind = np.asarray(indices)
    d = np.asarray(depth).reshape(-1)
    if d.size != 1:
        raise ValueError("OneHot: depth must be a scalar or one-element tensor")
    depth_i = int(d[0])
    if depth_i < 1:
        raise ValueError(f"OneHot: depth must be positive, not {depth_i}")
    vals = np.asarray(values).reshape(-1)
    if vals.size != 2:
        raise ValueError("OneHot: values must hold [off_value, on_value]")
    r = ind.ndim + 1
    ax = _axis(axis, r, "OneHot")
    if ind.dtype.kind == "f":
        ind = np.trunc(ind)
    ind = ind.astype(np.int64)
    ind = np.where(ind < 0, ind + depth_i, ind)  # out-of-range stays unmatched: all off
    hot = np.expand_dims(ind, ax) == np.arange(depth_i).reshape(
        (depth_i,) + (1,) * (r - 1 - ax))
    return np.where(hot, vals[1], vals[0])


# -- Unique ----------------------------------------------------------------------------------

@CPU.kernel("Unique", since=11)
def unique(x, *, axis=None, sorted=1):  # noqa: A002 - the ONNX attribute's name
    x = np.asarray(x)
    if axis is None:
        flat = x.reshape(-1)
        y, first, inverse, counts = np.unique(flat, return_index=True, return_inverse=True,
                                              return_counts=True)
        inverse = inverse.reshape(-1)
    else:
        ax = _axis(axis, x.ndim, "Unique")
        moved = np.moveaxis(x, ax, 0)
        rows = moved.reshape(moved.shape[0], -1)
        _, first, inverse, counts = np.unique(rows, axis=0, return_index=True,
                                              return_inverse=True, return_counts=True)
        inverse = inverse.reshape(-1)
        y = np.take(x, first, axis=ax)
    if not sorted:  # order of first occurrence instead of ascending
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        first = first[order]
        counts = counts[order]
        inverse = rank[inverse]
        y = np.take(x.reshape(-1), first) if axis is None else np.take(x, first, axis=ax)
    return (y, first.astype(np.int64), inverse.astype(np.int64), counts.astype(np.int64))


# -- Range -----------------------------------------------------------------------------------

def _scalar(v: Any, name: str) -> np.ndarray:
    a = np.asarray(v)
    if a.size != 1:
        raise ValueError(f"Range: {name} must be a scalar")
    return a.reshape(())


@CPU.kernel("Range", since=11, host_inputs=(0, 1, 2))
def range_(start, limit, delta, *, stash_type=1):
    s, l, d = _scalar(start, "start"), _scalar(limit, "limit"), _scalar(delta, "delta")
    dt = s.dtype
    if dt.kind in "iu":
        if int(d) == 0:
            raise ValueError("Range: delta must not be 0")
        check_alloc([max(0, -(-(int(l) - int(s)) // int(d)))], dt, "Range")
        return np.arange(int(s), int(l), int(d), dtype=dt)
    # floats: n = ceil((limit - start) / delta); out[i] = start + i * delta
    work = np.float64 if dt == np.float64 else np.float32
    sf, lf, df = (work(s.astype(work)), work(l.astype(work)), work(d.astype(work)))
    if df == 0:
        raise ValueError("Range: delta must not be 0")
    span = (float(lf) - float(sf)) / float(df)
    if not np.isfinite(span):
        raise ValueError(f"Range: start {sf}, limit {lf} and delta {df} give no finite length")
    n = max(int(np.ceil(span)), 0)
    check_alloc([n], dt, "Range")
    out = sf + np.arange(n, dtype=work) * df
    return out.astype(dt, copy=False)
