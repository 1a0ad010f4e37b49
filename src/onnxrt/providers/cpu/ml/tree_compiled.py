"""Tree ensembles compiled (numba): every (row, tree) walk in one call over a flat layout.

ml/tree.py turns each encoding (TreeEnsemble-5, TreeEnsembleRegressor/Classifier) into one
flat node table, interior nodes first; ``Layout`` packs it once per session for this loop:
feature ids, thresholds (in the input's float type where that is exact), one mode per node,
children as ``child[2 * node + condition]``, and the leaves' contributions as a CSR list
(target, weight) per node. A walk reads four small arrays per level; rows are taken in
blocks of 64 and each tree walks the whole block before the next tree, so a tree's nodes
and the block's features stay in cache.

Threads (the session's ThreadPool, framework/parallel.py): a large batch splits its rows over the session's threads; a
small batch of a large forest splits the trees instead, each part summing into its own
score buffer, combined after (SUM/AVERAGE add, MIN/MAX take the extreme where a part had
a leaf for the target). Below ``_PAR_MIN_WALKS`` (row, tree) walks one thread runs it all.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.framework.parallel import SERIAL

__all__ = ["Layout", "kernel"]

_PAR_MIN_WALKS = 30_000
_ROW_BLOCK = 64


def _leaf_leq(x, r, tab, thr, n_inner, node):
    """The leaf row ``r`` reaches from ``node`` when every interior node is BRANCH_LEQ and
    no missing value tracks true: the child is picked by index, no branch to mispredict."""
    while node < n_inner:
        b = node * 4
        node = tab[b + 1 + (1 if x[r, tab[b]] <= thr[node] else 0)]
    return node


def _leaf_lt(x, r, tab, thr, n_inner, node):
    """_leaf_leq for BRANCH_LT (XGBoost's trees)."""
    while node < n_inner:
        b = node * 4
        node = tab[b + 1 + (1 if x[r, tab[b]] < thr[node] else 0)]
    return node


def _leaf_cmp_missing(x, r, tab, thr, n_inner, node, lt):
    """The leaf row ``r`` reaches from ``node`` when every interior node is BRANCH_LEQ
    (``lt`` False, LightGBM's trees) or BRANCH_LT and some send a missing value the true
    way (bit 4 of tab[4 * node + 3])."""
    while node < n_inner:
        b = node * 4
        v = x[r, tab[b]]
        th = thr[node]
        c = (v < th) if lt else (v <= th)
        miss = (v != v) and (tab[b + 3] >> 4) != 0
        node = tab[b + 1 + (1 if c or miss else 0)]
    return node


def _leaf_any(x, r, tab, thr, n_inner, node, mem_ptr, mem_vals):
    """The leaf row ``r`` reaches from ``node``, each node with its own mode (the low 4
    bits of tab[4 * node + 3]; bit 4: a missing value goes the true way)."""
    while node < n_inner:
        b = node * 4
        v = x[r, tab[b]]
        th = thr[node]
        fl = tab[b + 3]
        m = fl & 15
        if m == 0:
            c = v <= th
        elif m == 1:
            c = v < th
        elif m == 2:
            c = v >= th
        elif m == 3:
            c = v > th
        elif m == 4:
            c = v == th
        elif m == 5:
            c = v != th
        else:
            c = False
            for e in range(mem_ptr[node], mem_ptr[node + 1]):
                if mem_vals[e] == v:
                    c = True
                    break
        if v != v and (fl >> 4) != 0:
            c = True
        node = tab[b + 1 + (1 if c else 0)]
    return node


def _walk(x, tab, thr, roots, n_inner, fast, mem_ptr, mem_vals, lptr, ltgt, lw, agg,
          scores, has, by_trees, n_parts, lo, hi):
    """Parts lo..hi-1 of ``n_parts``: by rows (every part writes its rows of scores[0])
    or, when ``by_trees``, by trees (part p writes scores[p] for all rows). ``tab``: per
    interior node (feature, false child, true child, mode | missing-tracks-true << 4),
    flat; ``fast``: 0 every node BRANCH_LEQ, 1 every node BRANCH_LT (no missing values
    tracked in either), 2/3 the same with missing values tracked, -1 per-node modes. ``agg``: 0/1 sum (average divides later),
    2 min, 3 max; ``has`` marks targets some leaf fed."""
    n_rows = x.shape[0]
    n_trees = roots.shape[0]
    for part in range(lo, hi):
        if by_trees:
            r0, r1 = 0, n_rows
            t0 = part * n_trees // n_parts
            t1 = (part + 1) * n_trees // n_parts
            out = scores[part]
            hout = has[part]
        else:
            r0 = part * n_rows // n_parts
            r1 = (part + 1) * n_rows // n_parts
            t0, t1 = 0, n_trees
            out = scores[0]
            hout = has[0]
        for b0 in range(r0, r1, 64):
            b1 = min(r1, b0 + 64)
            for t in range(t0, t1):
                root = roots[t]
                for r in range(b0, b1):
                    if fast == 0:
                        node = _leaf_leq(x, r, tab, thr, n_inner, root)
                    elif fast == 1:
                        node = _leaf_lt(x, r, tab, thr, n_inner, root)
                    elif fast >= 2:
                        node = _leaf_cmp_missing(x, r, tab, thr, n_inner, root, fast == 3)
                    else:
                        node = _leaf_any(x, r, tab, thr, n_inner, root, mem_ptr, mem_vals)
                    for e in range(lptr[node], lptr[node + 1]):
                        k = ltgt[e]
                        w = lw[e]
                        if agg <= 1:
                            out[r, k] += w
                        elif not hout[r, k]:
                            out[r, k] = w
                        elif agg == 2:
                            if w < out[r, k]:
                                out[r, k] = w
                        elif w > out[r, k]:
                            out[r, k] = w
                        hout[r, k] = True


_KERNEL: list[Any] = []


def kernel() -> Any:
    """The compiled walk (numba's disk cache, or compiled once per process), warmed for the
    argument types runs use; None where numba is missing or disabled (ONNXRT_JIT=0)."""
    from onnxrt.providers.cpu.nn import jit

    def build(numba: Any) -> Any:
        g = globals()
        for f in (_leaf_leq, _leaf_lt, _leaf_cmp_missing, _leaf_any):
            g[f.__name__] = numba.njit(error_model="numpy")(f)
        fn = jit._njit(numba, _walk)
        for xt, acc in ((np.float32, np.float32), (np.float64, np.float32),
                        (np.float64, np.float64)):
            lay = Layout(np.zeros(1, np.intp), np.zeros(1), np.zeros(1, np.uint8),
                         np.zeros(2, np.intp), np.zeros(1, bool), np.zeros(1, np.intp), 0,
                         np.zeros((1, 1)), np.ones((1, 1), bool), {}, None)
            lay.scores(np.zeros((1, 1), xt), 1, acc, fn, parts=1)
        return fn

    return jit.compile_once(_KERNEL, build)


class Layout:
    """A Forest's node table packed for ``_walk`` (see the module docstring)."""

    def __init__(self, feat: np.ndarray, thr: np.ndarray, mode: np.ndarray,
                 child: np.ndarray, mtt: np.ndarray, roots: np.ndarray, n_inner: int,
                 values: np.ndarray, has: np.ndarray, members: dict[int, np.ndarray],
                 single: int | None) -> None:
        n = feat.size
        self.n_inner = int(n_inner)
        self.n_targets = values.shape[1]
        self.thr64 = np.ascontiguousarray(thr, dtype=np.float64)
        thr32 = self.thr64.astype(np.float32)
        # float32 rows compare against float32 thresholds when that loses nothing
        self.thr32 = thr32 if np.array_equal(thr32.astype(np.float64), self.thr64) else None
        ni = self.n_inner
        if n >= 2**31:
            raise ValueError(f"tree ensemble of {n} nodes: more than the compiled walk's "
                             f"32-bit node ids")
        # per interior node: feature, false child, true child, mode | missing-true << 4
        tab = np.empty((ni, 4), np.int32)
        tab[:, 0] = feat[:ni]
        tab[:, 1] = child[0:2 * ni:2]
        tab[:, 2] = child[1:2 * ni:2]
        tab[:, 3] = mode[:ni].astype(np.int32) | (mtt[:ni].astype(np.int32) << 4)
        self.tab = tab.reshape(-1)
        self.thr64 = np.ascontiguousarray(self.thr64[:ni])
        self.thr32 = None if self.thr32 is None else np.ascontiguousarray(self.thr32[:ni])
        self.roots = np.ascontiguousarray(roots, dtype=np.int64)
        single = -1 if single is None else int(single)
        # 0/1: every interior node BRANCH_LEQ/BRANCH_LT and no missing value tracked, 2/3
        # the same with missing values tracked, -1 per-node modes
        self.fast = -1
        if single in (0, 1):
            self.fast = single + (2 if mtt[:ni].any() else 0)
        ptr = np.zeros(n + 1, np.int64)
        vals: list[np.ndarray] = []
        for node in range(n):
            s = members.get(node)
            ptr[node + 1] = ptr[node] + (0 if s is None else len(s))
            if s is not None:
                vals.append(np.asarray(s, np.float64))
        self.mem_ptr = ptr
        self.mem_vals = np.concatenate(vals) if vals else np.zeros(0)
        rows, tgts = np.nonzero(has)
        self.lptr = np.zeros(n + 1, np.int64)
        np.add.at(self.lptr, rows + 1, 1)
        np.cumsum(self.lptr, out=self.lptr)
        self.ltgt = np.ascontiguousarray(tgts, dtype=np.int64)
        self.lw64 = np.ascontiguousarray(values[rows, tgts], dtype=np.float64)
        self.lw32 = self.lw64.astype(np.float32)

    def scores(self, x: np.ndarray, agg: int, acc: Any, fn: Any,
               parts: int | None = None, pool: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """(scores (N, K) in ``acc``, has (N, K)) for the float rows ``x`` (N, F), already
        checked to hold every feature the trees read."""
        if x.dtype == np.float32 and self.thr32 is not None:
            thr = self.thr32
        else:
            x = x.astype(np.float64, copy=False)
            thr = self.thr64
        x = np.ascontiguousarray(x)
        n = x.shape[0]
        t = self.roots.size
        acc = np.dtype(acc)
        lw = self.lw64 if acc == np.float64 else self.lw32
        walks = n * t
        pool = SERIAL if pool is None else pool
        if parts is None:
            parts = pool.threads if walks >= _PAR_MIN_WALKS else 1
        by_trees = parts > 1 and n < parts * _ROW_BLOCK
        if parts > 1 and not by_trees:
            parts = min(parts, n)
        k = self.n_targets
        bufs = parts if by_trees else 1
        out = np.zeros((bufs, n, k), acc)
        has = np.zeros((bufs, n, k), np.bool_)
        args = (x, self.tab, thr, self.roots, self.n_inner, self.fast, self.mem_ptr,
                self.mem_vals, self.lptr, self.ltgt, lw, agg, out, has, by_trees, parts)
        pool.for_ranges(fn, args, parts, spread=parts > 1)
        if bufs == 1:
            return out[0], has[0]
        h = has.any(axis=0)
        if agg <= 1:
            return out.sum(axis=0), h
        big = np.inf if agg == 2 else -np.inf
        masked = np.where(has, out, acc.type(big))
        res = masked.min(axis=0) if agg == 2 else masked.max(axis=0)
        res[~h] = 0
        return res.astype(acc, copy=False), h
