"""ai.onnx.ml tree ensembles: TreeEnsemble (5), TreeEnsembleRegressor and
TreeEnsembleClassifier (1, 3, 5).

Every encoding is turned once per session into one flat node table (leaves are nodes too)
with a dense leaf-value matrix. Traversal is vectorized over depth: each step moves every
still-interior (sample, tree) pair one level down at once, so the Python loop runs as many
times as the deepest path, never per sample or per tree.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.framework.kernel import NodeInfo
from onnxrt.framework.parallel import pool_of
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.ml import tree_compiled
from onnxrt.providers.cpu.ml._common import (ML, as_2d_float, labels_array, post_transform,
                                             transform_name)

LEQ, LT, GTE, GT, EQ, NEQ, MEMBER, LEAF = range(8)
_MODE_NAMES = {"BRANCH_LEQ": LEQ, "BRANCH_LT": LT, "BRANCH_GTE": GTE, "BRANCH_GT": GT,
               "BRANCH_EQ": EQ, "BRANCH_NEQ": NEQ, "BRANCH_MEMBER": MEMBER, "LEAF": LEAF}
_CMP = {LEQ: np.less_equal, LT: np.less, GTE: np.greater_equal, GT: np.greater,
        EQ: np.equal, NEQ: np.not_equal}
_AGGREGATES = {"AVERAGE": 0, "SUM": 1, "MIN": 2, "MAX": 3}
_CHUNK = 1 << 22  # gathered (sample, tree, target) values held at once


class Forest:
    """A flat node table. ``values``/``has``: (n_nodes, n_targets) leaf contributions."""

    def __init__(self, feat: np.ndarray, thr: np.ndarray, mode: np.ndarray,
                 tchild: np.ndarray, fchild: np.ndarray, mtt: np.ndarray, roots: np.ndarray,
                 values: np.ndarray, has: np.ndarray, members: dict[int, np.ndarray]) -> None:
        n = feat.size
        for name, arr in (("true", tchild), ("false", fchild)):
            bad = (arr < 0) | (arr >= n)
            if bad.any():
                raise ValueError(f"tree node {int(np.nonzero(bad)[0][0])} has a {name} branch "
                                 f"outside the node table")
        # renumber so interior nodes come first: "is a leaf" is then "index >= n_inner",
        # a comparison instead of a gather in the traversal loop
        leaf = mode == LEAF
        order = np.concatenate([np.flatnonzero(~leaf), np.flatnonzero(leaf)])
        new = np.empty(n, np.intp)
        new[order] = np.arange(n)
        self.n_inner = int(np.count_nonzero(~leaf))
        self.is_leaf = np.arange(n) >= self.n_inner
        self.feat = np.where(leaf, 0, feat)[order].astype(np.intp)
        self.thr = thr.astype(np.float64)[order]
        # float32 inputs compare against float32 thresholds when that loses nothing: the
        # gathers of the traversal then move half the bytes
        thr32 = self.thr.astype(np.float32)
        self.thr32 = thr32 if np.array_equal(thr32.astype(np.float64), self.thr) else None
        self.mode = mode.astype(np.uint8)[order]
        self.tchild = np.where(self.is_leaf, np.arange(n), new[tchild[order]]).astype(np.intp)
        self.fchild = np.where(self.is_leaf, np.arange(n), new[fchild[order]]).astype(np.intp)
        # child of node i: child[2 * i + cond]
        self.child = np.stack([self.fchild, self.tchild], axis=1).reshape(-1)
        self.mtt = mtt.astype(bool)[order]
        self.any_mtt = bool(self.mtt[~self.is_leaf].any())
        self.roots = new[roots.astype(np.intp)]
        self.values = values[order]
        self.has = has[order]
        self.members = {int(new[k]): v for k, v in members.items()}
        inner = np.unique(self.mode[~self.is_leaf])
        self.single_mode = int(inner[0]) if inner.size == 1 and inner[0] != MEMBER else None
        self.modes = [int(m) for m in inner]
        self.n_features = int(self.feat.max()) + 1 if n else 0
        if self.n_inner and int(self.feat[:self.n_inner].min()) < 0:
            # both walks index the row by feature id (the compiled one unchecked)
            raise ValueError(f"a tree node reads feature {int(self.feat[:self.n_inner].min())}"
                             f": feature ids must be >= 0")
        self._check_depth()
        # the compiled walk's packing of this table (ml/tree_compiled.py), or None
        self._walk = tree_compiled.kernel()
        self._layout = None
        if self._walk is not None:
            self._layout = tree_compiled.Layout(self.feat, self.thr, self.mode, self.child,
                                                self.mtt, self.roots, self.n_inner,
                                                self.values, self.has, self.members,
                                                self.single_mode)

    def _check_depth(self) -> None:
        # a cycle would make traversal loop forever: walk all paths once, bounded
        cur = self.roots.copy()
        for _ in range(self.feat.size + 1):
            cur = cur[~self.is_leaf[cur]]
            if not cur.size:
                return
            cur = np.unique(np.concatenate([self.tchild[cur], self.fchild[cur]]))
        raise ValueError("tree ensemble has a cycle (a node is its own descendant)")

    def leaves(self, x: np.ndarray) -> np.ndarray:
        """(N, n_trees) leaf node index reached by each sample in each tree."""
        n, t = x.shape[0], self.roots.size
        f = x.shape[1]
        if f < self.n_features:
            raise ValueError(f"input has {f} features, the trees read feature "
                             f"{self.n_features - 1}")
        thr = self.thr
        if x.dtype == np.float32 and self.thr32 is not None:
            thr = self.thr32
        elif x.dtype != np.float64:
            x = x.astype(np.float64)
        xf = np.ascontiguousarray(x).reshape(-1)
        cur = np.tile(self.roots, n)
        # flat offset of each (sample, tree) pair's row in x
        base = np.repeat(np.arange(n, dtype=np.intp) * f, t)
        active = None  # None: every pair; compacted once most pairs sit on a leaf
        while True:
            nd = cur if active is None else cur.take(active)
            rb = base if active is None else base.take(active)
            xv = xf.take(rb + self.feat.take(nd))
            th = thr.take(nd)
            if self.single_mode is not None:
                cond = _CMP[self.single_mode](xv, th)
            else:
                cond = np.zeros(nd.size, bool)
                md = self.mode.take(nd)
                for m in self.modes:
                    sel = md == m
                    if not sel.any():
                        continue
                    if m == MEMBER:
                        cond[sel] = self._member(nd[sel], xv[sel])
                    else:
                        cond[sel] = _CMP[m](xv[sel], th[sel])
            if self.any_mtt:
                cond |= np.isnan(xv) & self.mtt.take(nd)
            # leaves point to themselves, so pairs already on a leaf stay there
            nxt = self.child.take(nd * 2 + cond)
            inner = nxt < self.n_inner
            if active is None:
                cur = nxt
                n_inner = int(np.count_nonzero(inner))
                if n_inner == 0:
                    break
                if n_inner * 2 < cur.size:
                    active = np.flatnonzero(inner)
            else:
                cur[active] = nxt
                active = active[inner]
                if not active.size:
                    break
        return cur.reshape(n, t)

    def _member(self, nd: np.ndarray, xv: np.ndarray) -> np.ndarray:
        out = np.zeros(nd.size, bool)
        for node in np.unique(nd):
            sel = nd == node
            out[sel] = np.isin(xv[sel], self.members.get(int(node), ()))
        return out

    def aggregate(self, x: np.ndarray, agg: int, acc: np.dtype | type = np.float64,
                  pool: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Per-target scores and whether any reached leaf fed each target. Sums run tree by
        tree in ``acc`` (float32 for float inputs, as onnxruntime does, so ties such as a
        score of exactly 0.5 resolve the same way)."""
        if self._layout is not None:
            if x.shape[1] < self.n_features:
                raise ValueError(f"input has {x.shape[1]} features, the trees read feature "
                                 f"{self.n_features - 1}")
            scores, has = self._layout.scores(x, agg, acc, self._walk, pool=pool)
            if agg == 0 and self.roots.size:
                scores /= scores.dtype.type(self.roots.size)
            return scores, has
        leaves = self.leaves(x)
        n, t = leaves.shape
        k = self.values.shape[1]
        values = self.values if acc == np.float64 else self.values.astype(acc)
        scores = np.zeros((n, k), acc)
        has = np.zeros((n, k), bool)
        step = max(1, _CHUNK // max(1, t * k))
        for s in range(0, n, step):
            lv = leaves[s:s + step]
            v = values[lv]  # (chunk, trees, targets)
            h = self.has[lv]
            has[s:s + step] = h.any(axis=1)
            if agg in (0, 1):
                scores[s:s + step] = v.sum(axis=1)
            elif agg == 2:
                scores[s:s + step] = np.where(h, v, np.inf).min(axis=1)
            else:
                scores[s:s + step] = np.where(h, v, -np.inf).max(axis=1)
        if agg == 0 and t:
            scores /= acc(t)
        elif agg in (2, 3):
            scores[~has] = 0.0
        return scores, has


def _features(x: np.ndarray) -> np.ndarray:
    """[N, F] features: float32 kept as is (see Forest.thr32), anything else as float64."""
    return as_2d_float(x, np.float32 if x.dtype == np.float32 else np.float64)


def _acc_type(x: np.ndarray) -> type:
    return np.float64 if x.dtype == np.float64 else np.float32


def _tensor_or_list(a: dict[str, Any], name: str) -> np.ndarray | None:
    t = a.get(f"{name}_as_tensor")
    if t is not None:
        return np.asarray(t, dtype=np.float64).reshape(-1)
    v = a.get(name)
    if v is None or len(v) == 0:
        return None
    return np.asarray(v, dtype=np.float32).astype(np.float64)


def forest_from_legacy(a: dict[str, Any], prefix: str, n_targets: int) -> Forest:
    """Build a Forest from TreeEnsembleRegressor/Classifier attributes (``prefix``: target
    or class)."""
    treeids = np.asarray(a.get("nodes_treeids") or [], dtype=np.int64)
    nodeids = np.asarray(a.get("nodes_nodeids") or [], dtype=np.int64)
    n = treeids.size
    if nodeids.size != n:
        raise ValueError("nodes_treeids and nodes_nodeids differ in length")
    index = {(int(t), int(i)): k for k, (t, i) in enumerate(zip(treeids.tolist(),
                                                                 nodeids.tolist()))}
    modes = a.get("nodes_modes") or []
    try:
        mode = np.array([_MODE_NAMES[m] for m in modes], dtype=np.uint8)
    except KeyError as e:
        raise ValueError(f"unknown node mode {e.args[0]!r}") from None
    thr = _tensor_or_list(a, "nodes_values")
    thr = np.zeros(n) if thr is None else thr
    feat = np.asarray(a.get("nodes_featureids") or [0] * n, dtype=np.int64)
    mtt = np.asarray(a.get("nodes_missing_value_tracks_true") or [0] * n, dtype=bool)
    if not (mode.size == thr.size == feat.size == mtt.size == n):
        raise ValueError("the nodes_* attributes differ in length")
    tids = a.get("nodes_truenodeids") or [0] * n
    fids = a.get("nodes_falsenodeids") or [0] * n

    def child(tree: int, c: int, k: int) -> int:
        if mode[k] == LEAF:
            return k
        j = index.get((tree, int(c)))
        if j is None:
            raise ValueError(f"node ({tree}, {int(nodeids[k])}) points to missing node {c}")
        return j

    tl = treeids.tolist()
    tchild = np.array([child(tl[k], tids[k], k) for k in range(n)], dtype=np.int64)
    fchild = np.array([child(tl[k], fids[k], k) for k in range(n)], dtype=np.int64)
    _, first = np.unique(treeids, return_index=True)
    roots = np.sort(first)  # each tree's first node, in order of appearance
    values = np.zeros((n, n_targets))
    has = np.zeros((n, n_targets), bool)
    w_tree = a.get(f"{prefix}_treeids") or []
    w_node = a.get(f"{prefix}_nodeids") or []
    w_id = np.asarray(a.get(f"{prefix}_ids") or [], dtype=np.int64)
    w = _tensor_or_list(a, f"{prefix}_weights")
    w = np.zeros(0) if w is None else w
    if not (len(w_tree) == len(w_node) == w_id.size == w.size):
        raise ValueError(f"the {prefix}_* attributes differ in length")
    if w_id.size and (w_id.min() < 0 or w_id.max() >= n_targets):
        raise ValueError(f"{prefix}_ids must lie in [0, {n_targets})")
    try:
        rows = np.array([index[(int(t), int(i))] for t, i in zip(w_tree, w_node)],
                        dtype=np.intp)
    except KeyError as e:
        raise ValueError(f"leaf weight for missing node {e.args[0]}") from None
    if rows.size:
        np.add.at(values, (rows, w_id), w)
        has[rows, w_id] = True
    return Forest(feat, thr, mode, tchild, fchild, mtt, roots, values, has, {})


def _aggregate_code(v: Any) -> int:
    if isinstance(v, (int, np.integer)):
        return int(v)
    if v not in _AGGREGATES:
        raise ValueError(f"unknown aggregate_function {v!r}")
    return _AGGREGATES[v]


@CPU.kernel("TreeEnsembleRegressor", since=1, domain=ML, threads=True)
class TreeEnsembleRegressor:
    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        self.n_targets = int(a.get("n_targets") or 1)
        self.forest = forest_from_legacy(a, "target", self.n_targets)
        self.agg = _aggregate_code(a.get("aggregate_function", "SUM"))
        base = _tensor_or_list(a, "base_values")
        if base is not None and base.size != self.n_targets:
            raise ValueError(f"{base.size} base_values for {self.n_targets} targets")
        self.base = base
        self.transform = transform_name(a.get("post_transform", "NONE"))
        if self.n_targets == 1 and self.transform != "PROBIT":
            # onnxruntime applies only PROBIT to a single score: we follow it
            self.transform = "NONE"

    def __call__(self, x: np.ndarray, ctx: Any = None) -> np.ndarray:
        scores, _ = self.forest.aggregate(_features(x), self.agg, _acc_type(x),
                                          pool_of(ctx))
        if self.base is not None:
            scores += self.base.astype(scores.dtype)
        return post_transform(scores, self.transform).astype(np.float32)


@CPU.kernel("TreeEnsemble", since=5, domain=ML, threads=True)
class TreeEnsemble:
    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        feat = np.asarray(a["nodes_featureids"], dtype=np.int64)
        n_int = feat.size
        split = np.asarray(a["nodes_splits"]).reshape(-1)
        mode = np.asarray(a["nodes_modes"]).reshape(-1).astype(np.uint8)
        tl = np.asarray(a["nodes_trueleafs"], dtype=bool)
        fl = np.asarray(a["nodes_falseleafs"], dtype=bool)
        tid = np.asarray(a["nodes_truenodeids"], dtype=np.int64)
        fid = np.asarray(a["nodes_falsenodeids"], dtype=np.int64)
        mtt = np.asarray(a.get("nodes_missing_value_tracks_true") or [0] * n_int, dtype=bool)
        if not (split.size == mode.size == tl.size == fl.size == tid.size == fid.size
                == mtt.size == n_int):
            raise ValueError("the nodes_* attributes differ in length")
        if mode.size and mode.max() > MEMBER:
            raise ValueError(f"unknown node mode {int(mode.max())}")
        targets = np.asarray(a["leaf_targetids"], dtype=np.int64)
        weights = np.asarray(a["leaf_weights"]).reshape(-1).astype(np.float64)
        n_leaf = targets.size
        if weights.size != n_leaf:
            raise ValueError("leaf_targetids and leaf_weights differ in length")
        self.n_targets = int(a.get("n_targets") or (int(targets.max()) + 1 if n_leaf else 1))
        if n_leaf and (targets.min() < 0 or targets.max() >= self.n_targets):
            raise ValueError(f"leaf_targetids must lie in [0, {self.n_targets})")
        n = n_int + n_leaf
        values = np.zeros((n, self.n_targets))
        has = np.zeros((n, self.n_targets), bool)
        leaf_rows = n_int + np.arange(n_leaf)
        values[leaf_rows, targets] = weights
        has[leaf_rows, targets] = True
        members: dict[int, np.ndarray] = {}
        member_nodes = np.nonzero(mode == MEMBER)[0]
        if member_nodes.size:
            mv = a.get("membership_values")
            if mv is None:
                raise ValueError("BRANCH_MEMBER nodes need membership_values")
            mv = np.asarray(mv, dtype=np.float64).reshape(-1)
            cuts = np.nonzero(np.isnan(mv))[0]
            sets = np.split(mv, cuts)
            sets = [s[~np.isnan(s)] for s in sets]
            if len(sets) < member_nodes.size:
                raise ValueError("membership_values holds fewer sets than BRANCH_MEMBER nodes")
            members = {int(k): sets[i] for i, k in enumerate(member_nodes)}
        self.forest = Forest(
            np.concatenate([feat, np.zeros(n_leaf, np.int64)]),
            np.concatenate([split.astype(np.float64), np.zeros(n_leaf)]),
            np.concatenate([mode, np.full(n_leaf, LEAF, np.uint8)]),
            np.concatenate([np.where(tl, n_int + tid, tid), leaf_rows]),
            np.concatenate([np.where(fl, n_int + fid, fid), leaf_rows]),
            np.concatenate([mtt, np.zeros(n_leaf, bool)]),
            np.asarray(a["tree_roots"], dtype=np.int64), values, has, members)
        self.agg = _aggregate_code(a.get("aggregate_function", 1))
        # the spec's codes: 1 SOFTMAX, 2 LOGISTIC (onnxruntime 1.31 reads them the other way
        # round; we follow the spec)
        self.transform = transform_name(a.get("post_transform", 0))

    def __call__(self, x: np.ndarray, ctx: Any = None) -> np.ndarray:
        scores, _ = self.forest.aggregate(_features(x), self.agg, _acc_type(x),
                                          pool_of(ctx))
        return post_transform(scores, self.transform).astype(x.dtype)


@CPU.kernel("TreeEnsembleClassifier", since=1, domain=ML, threads=True)
class TreeEnsembleClassifier:
    """Scores per class, then onnxruntime's conventions for labels and two-class outputs.

    With two labels onnxruntime does not take an argmax: the label is positive when the
    positive score passes 0.5 (all weights >= 0 and one class fed) or 0, and a single
    fed class is expanded to two columns. We follow it so outputs agree with it.
    """

    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        self.labels = labels_array(a, "classlabels_int64s", "classlabels_strings")
        if self.labels is None:
            raise ValueError("TreeEnsembleClassifier needs classlabels_int64s or "
                             "classlabels_strings")
        k = self.labels.size
        self.forest = forest_from_legacy(a, "class", k)
        base = _tensor_or_list(a, "base_values")
        self.base = np.zeros(0) if base is None else base
        if k > 2 and self.base.size not in (0, k):
            raise ValueError(f"{self.base.size} base_values for {k} classes")
        self.transform = transform_name(a.get("post_transform", "NONE"))
        ids = np.asarray(a.get("class_ids") or [], dtype=np.int64)
        self.fed = np.zeros(k, bool)
        self.fed[ids] = True
        w = _tensor_or_list(a, "class_weights")
        self.all_positive = bool(w is None or (w >= 0).all())
        self.binary_case = k == 2 and np.unique(ids).size == 1

    def __call__(self, x: np.ndarray, ctx: Any = None) -> tuple[np.ndarray, np.ndarray]:
        p, _ = self.forest.aggregate(_features(x), 1, _acc_type(x), pool_of(ctx))
        p[:, ~self.fed] = 0.0
        if self.labels.size > 2:
            if self.base.size:
                p += self.base.astype(p.dtype)
            label = self.labels[np.argmax(p, axis=1)]
            return label, post_transform(p, self.transform).astype(np.float32)
        return self._two_classes(p)

    def _two_classes(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        fed0, fed1 = bool(self.fed[0]), bool(self.fed[1])
        base = self.base
        single = False
        if base.size == 2:
            if fed1:
                p1 = p.dtype.type(base[1]) + p[:, 0]
                p[:, 1] = p1
                p[:, 0] = -p1 if fed0 else 0.0
            else:
                if fed0:
                    p[:, 0] += p.dtype.type(base[0])
        else:
            if base.size == 1 and fed0:
                p[:, 0] += p.dtype.type(base[0])
            single = not fed1
        pos = p[:, 1] if fed1 else p[:, 0]
        cut = 0.5 if self.binary_case and self.all_positive else 0.0
        label = self.labels[(pos > cut).astype(np.intp)]
        if not single:
            return label, post_transform(p, self.transform).astype(np.float32)
        s = p[:, 0]
        t = self.transform
        if t == "PROBIT":
            z = np.stack([post_transform(p[:, :1], "PROBIT")[:, 0], np.zeros_like(s)], axis=1)
        elif t == "LOGISTIC":
            z = np.stack([post_transform(-p[:, :1], t)[:, 0], post_transform(p[:, :1], t)[:, 0]],
                         axis=1)
        elif self.binary_case and self.all_positive:
            z = np.stack([1.0 - s, s], axis=1)
        else:
            z = np.stack([-s, s], axis=1)
        return label, z.astype(np.float32)
