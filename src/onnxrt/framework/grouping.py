"""Cycle-free maximal groups of supported nodes, for compile-based providers."""

from __future__ import annotations

from typing import Callable, Collection

from onnxrt.framework.capability import Capability
from onnxrt.framework.graph_view import GraphView, NodeView

__all__ = ["group_nodes", "drop_groups_of", "claim_groups"]


def group_nodes(graph: GraphView, predicate: Callable[[NodeView], bool],
                min_size: int = 1) -> list[Capability]:
    """Fuse the nodes for which ``predicate`` is true into maximal groups that can each run
    as one node: connected through their values, and such that contracting a group creates
    no cycle (no path leaves the group and comes back into it through other nodes).

    Greedy in topological order: a node joins the group of one of its supported producers
    unless that would create a cycle; the cycle test is a reachability check that ignores
    the group's own nodes.
    """
    nodes = list(graph.nodes)
    everything = list(getattr(graph, "all_nodes", nodes))  # paths may leave the offer
    ok = {n.id for n in nodes if _safe(predicate, n)}
    order = {n.id: i for i, n in enumerate(everything)}
    for n in nodes:
        order.setdefault(n.id, len(order))
    by_id = {n.id: n for n in nodes}
    producer: dict[str, int] = {}
    for n in everything:
        for o in n.outputs:
            if o:
                producer[o] = n.id
    preds: dict[int, set[int]] = {n.id: set() for n in everything}
    for n in nodes:
        preds.setdefault(n.id, set())
    for n in everything:
        for i in n.reads:  # subgraphs' outer reads are dependencies too
            if i in producer:
                preds[n.id].add(producer[i])
    group_of: dict[int, int] = {}
    members: dict[int, list[int]] = {}

    # ancestors through the whole view, computed lazily with memoization
    anc_cache: dict[int, frozenset[int]] = {}

    def ancestors(nid: int) -> frozenset[int]:
        if nid in anc_cache:
            return anc_cache[nid]
        out: set[int] = set()
        stack = list(preds[nid])
        while stack:
            p = stack.pop()
            if p in out:
                continue
            out.add(p)
            if p in anc_cache:
                out |= anc_cache[p]
                continue
            stack.extend(preds[p])
        res = frozenset(out)
        anc_cache[nid] = res
        return res

    def creates_cycle(nid: int, gid: int) -> bool:
        # joining nid to group gid makes a cycle iff some ancestor of nid outside the group
        # has an ancestor inside the group
        grp = set(members[gid])
        for a in ancestors(nid):
            if a in grp:
                continue
            if ancestors(a) & grp:
                return True
        return False

    for n in sorted(nodes, key=lambda x: order[x.id]):
        if n.id not in ok:
            continue
        candidates = sorted({group_of[p] for p in preds[n.id] if p in group_of},
                            key=lambda g: order[members[g][0]])
        placed = None
        for gid in candidates:
            if not creates_cycle(n.id, gid):
                placed = gid
                break
        if placed is None:
            placed = n.id
            members[placed] = []
        members[placed].append(n.id)
        group_of[n.id] = placed
        # merge the other candidate groups when that keeps everything acyclic
        for gid in candidates:
            if gid == placed or gid not in members:
                continue
            if _can_merge(members[placed], members[gid], ancestors):
                for m in members.pop(gid):
                    group_of[m] = placed
                    members[placed].append(m)
    out = []
    for gid, ms in members.items():
        if len(ms) >= min_size:
            ms_sorted = sorted(ms, key=lambda i: order[i])
            out.append(Capability([by_id[i] for i in ms_sorted], fuse=True))
    return out


def drop_groups_of(graph: GraphView, groups: list[Capability], ops: Collection[str],
                   what: str) -> list[Capability]:
    """``groups`` less those whose op types all lie in ``ops`` (data movement a compiled
    engine gains nothing on); their nodes are declined as "its group <what> (<ops>): cheaper
    to run here", which the placement report shows."""
    by_id = {n.id: n for n in graph}
    keep = []
    for g in groups:
        names = {by_id[i].op_type for i in g.nodes}
        if names <= set(ops):
            why = f"its group {what} ({', '.join(sorted(names))}): cheaper to run here"
            for i in g.nodes:
                graph.decline(by_id[i], why)
            continue
        keep.append(g)
    return keep


def claim_groups(graph: GraphView, verdict: dict[int, str], ops: Collection[str],
                 what: str) -> list[Capability]:
    """A compile-based provider's ``get_capability`` from its verdict per node id (""
    takes it, a reason declines it, absent: not judged, left alone): every reason shown
    as a decline, the taken nodes grouped (``group_nodes``) and the groups of ``ops`` only
    dropped (``drop_groups_of``)."""
    for n in graph:
        why = verdict.get(n.id, "")
        if why:
            graph.decline(n, why)
    groups = group_nodes(graph, lambda n: verdict.get(n.id) == "")
    return drop_groups_of(graph, groups, ops, what)


def _can_merge(a: list[int], b: list[int], ancestors: Callable[[int], frozenset[int]]) -> bool:
    merged = set(a) | set(b)
    for m in merged:
        for x in ancestors(m):
            if x in merged:
                continue
            if ancestors(x) & merged:
                return False
    return True


def _safe(predicate: Callable[[NodeView], bool], n: NodeView) -> bool:
    try:
        return bool(predicate(n))
    except Exception:
        return False
