"""ArgMax/ArgMin, CumSum/CumProd and TopK: the reductions that keep positions."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU


def _axis(axis: int, ndim: int, op: str) -> int:
    n = max(ndim, 1)
    if not -n <= axis < n:
        raise ValueError(f"{op}: axis {axis} is out of range for rank {ndim}")
    return axis + ndim if axis < 0 else axis


# -- ArgMax / ArgMin -------------------------------------------------------------------

def _arg(fn: Any, op: str) -> Any:
    def kernel(x: np.ndarray, *, axis: int = 0, keepdims: int = 1,
               select_last_index: int = 0) -> np.ndarray:
        ax = _axis(axis, x.ndim, op)
        if x.dtype.kind == "V":
            x = x.astype(np.float32)
        if x.ndim == 0:
            return np.zeros((), dtype=np.int64)
        if x.shape[ax] == 0:
            raise ValueError(f"{op}: cannot reduce over an empty axis {ax} of shape {x.shape}")
        if select_last_index:
            # the first hit in the reversed axis is the last one in the original order
            i = fn(np.flip(x, ax), axis=ax, keepdims=bool(keepdims))
            i = (x.shape[ax] - 1) - i
        else:
            i = fn(x, axis=ax, keepdims=bool(keepdims))
        return np.asarray(i, dtype=np.int64)

    kernel.__name__ = kernel.__qualname__ = op.lower()
    return kernel


CPU.register("ArgMax", _arg(np.argmax, "ArgMax"), since=1)
CPU.register("ArgMin", _arg(np.argmin, "ArgMin"), since=1)


# -- CumSum / CumProd ------------------------------------------------------------------

def _cumulative(fn: Any, identity: int, op: str) -> Any:
    def kernel(x: np.ndarray, axis: Any, *, exclusive: int = 0, reverse: int = 0) -> np.ndarray:
        a = np.asarray(axis)
        if a.size != 1 or a.dtype.kind not in "iu":
            raise ValueError(f"{op}: axis must be an integer scalar, got {a!r}")
        ax = _axis(int(a.reshape(-1)[0]), x.ndim, op)
        dt = x.dtype
        acc = np.dtype(np.float32) if dt.kind == "V" or dt == np.float16 else dt
        if x.ndim == 0:
            return x.copy() if not exclusive else np.full((), identity, dtype=dt)
        w = np.flip(x, ax) if reverse else x
        r = fn(w, axis=ax, dtype=acc)
        if exclusive:
            # shift by one along the axis; the first element becomes the identity
            out = np.empty_like(r)
            lead = (slice(None),) * ax
            out[lead + (slice(0, 1),)] = identity
            out[lead + (slice(1, None),)] = r[lead + (slice(0, -1),)]
            r = out
        if reverse:
            r = np.flip(r, ax)
        return r.astype(dt, copy=False)

    kernel.__name__ = kernel.__qualname__ = op.lower()
    return kernel


CPU.register("CumSum", _cumulative(np.cumsum, 0, "CumSum"), since=11, host_inputs=(1,))
CPU.register("CumProd", _cumulative(np.cumprod, 1, "CumProd"), since=26, host_inputs=(1,))


# -- TopK ------------------------------------------------------------------------------

def _order(vals: np.ndarray, largest: bool) -> np.ndarray:
    """Positions that sort the last axis, descending when ``largest``; ties keep the lower
    position first (a stable ascending sort of the reversed axis, read backwards, is a
    stable descending sort)."""
    if not largest:
        return np.argsort(vals, axis=-1, kind="stable")
    n = vals.shape[-1]
    return (n - 1) - np.argsort(vals[..., ::-1], axis=-1, kind="stable")[..., ::-1]


def _select(rows: np.ndarray, k: int, largest: bool) -> np.ndarray | None:
    """Column positions of the top k of each row (in increasing position order), found in
    linear time: partition for the k-th value, then take everything beyond it and, of the
    values equal to it, the lowest positions. None where there are NaNs."""
    if rows.dtype.kind == "f" and np.isnan(rows).any():
        return None   # the sort orders NaN above everything; comparisons cannot
    n = rows.shape[-1]
    kth = n - k if largest else k - 1
    v = np.partition(rows, kth, axis=-1)[:, kth:kth + 1]
    sel = rows >= v if largest else rows <= v
    if not (np.add.reduce(sel, axis=-1, dtype=np.int32) == k).all():
        # more values tie with the k-th than fit: of those, the lowest positions
        beyond = rows > v if largest else rows < v
        eq = sel & ~beyond
        need = k - np.add.reduce(beyond, axis=-1, keepdims=True, dtype=np.int32)
        sel = eq.cumsum(axis=-1, dtype=np.int32) <= need
        sel &= eq
        sel |= beyond
    flat = np.flatnonzero(sel)   # row-major: k hits per row, in increasing position
    return (flat % n).reshape(rows.shape[0], k)


def topk(x: np.ndarray, k: int, axis: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """The k largest (or smallest) along ``axis``, sorted; ties go to the lower index."""
    ax = _axis(axis, x.ndim, "TopK")
    n = x.shape[ax]
    if not 0 <= k <= n:
        raise ValueError(f"TopK: k={k} is out of range for axis {ax} of size {n}")
    w = x.astype(np.float32) if x.dtype.kind == "V" else x
    wm = np.moveaxis(w, ax, -1)
    lead = wm.shape[:-1]
    rows = wm.reshape(-1, n)
    cols = None
    if 0 < k and 8 * k <= n and n >= 64:
        cols = _select(rows, k, largest)
    if cols is None:
        idx = _order(rows, largest)[:, :k]
    else:
        cand = np.take_along_axis(rows, cols, axis=-1)
        idx = np.take_along_axis(cols, _order(cand, largest), axis=-1)
    idx = np.moveaxis(idx.reshape(lead + (k,)).astype(np.int64, copy=False), -1, ax)
    idx = np.ascontiguousarray(idx)
    return np.take_along_axis(x, idx, axis=ax), idx


def _k_value(k: Any) -> int:
    a = np.asarray(k)
    if a.size != 1:
        raise ValueError(f"TopK: K must hold one value, got shape {a.shape}")
    return int(a.reshape(-1)[0])


@CPU.kernel("TopK", since=10, host_inputs=(1,))
def topk_kernel(x: np.ndarray, k: Any, *, axis: int = -1, largest: int = 1,
                sorted: int = 1) -> tuple[np.ndarray, np.ndarray]:
    return topk(x, _k_value(k), axis, bool(largest))


@CPU.kernel("TopK", since=1)
def topk_v1(x: np.ndarray, *, k: int, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    return topk(x, int(k), axis, True)
