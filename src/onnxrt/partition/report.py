"""Where every node runs and why: the answer a session gives about its placement (including
the fused groups a per-shape provider could not compile at some input shapes, which ran on
the host there: known only once a run has met those shapes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onnxrt.partition.partitioner import Partition

__all__ = ["AssignedNode", "AssignedSubgraph", "assignment_info", "placement_report",
           "count_partitions"]


@dataclass(frozen=True)
class AssignedNode:
    """A node and where it runs (onnxruntime's OrtEpAssignedNode)."""

    name: str
    op_type: str
    domain: str
    graph: str = "main"


class AssignedSubgraph:
    """Nodes a provider runs together (onnxruntime's OrtEpAssignedSubgraph): one per fused
    group, and one per node for kernel-based providers, as onnxruntime reports them."""

    def __init__(self, ep_name: str, nodes: list[AssignedNode]) -> None:
        self.ep_name = ep_name
        self._nodes = nodes

    def get_nodes(self) -> list[AssignedNode]:
        return list(self._nodes)

    def __repr__(self) -> str:
        return f"AssignedSubgraph({self.ep_name!r}, {[n.name for n in self._nodes]})"


def _label(n: Any) -> str:
    """A node's name, or for an unnamed node the value it produces."""
    if n.name:
        return n.name
    first = next((o for o in n.outputs if o), "")
    return f"<{first}>" if first else "<unnamed>"


def assignment_info(part: Partition) -> list[AssignedSubgraph]:
    out: list[AssignedSubgraph] = []
    seen_groups: set[int] = set()
    for nid in sorted(part.nodes):
        pl = part.placement.get(nid)
        n = part.nodes[nid]
        if pl is None:
            continue
        if pl.group is not None:
            if pl.group.id in seen_groups:
                continue
            seen_groups.add(pl.group.id)
            out.extend(_group_assignment(part, pl.group))
        else:
            out.append(AssignedSubgraph(pl.provider.name,
                                        [AssignedNode(n.name, n.op_type, n.domain, n.graph)]))
    return out


def _group_assignment(part: Partition, grp: Any) -> list[AssignedSubgraph]:
    """A fused group under its provider, and, where it ran on the host kernels at some
    input shapes (framework/fused.py HostFallback), its nodes one by one under the host
    provider whose kernel ran each; a group that has run nowhere else (refused at every
    shape, or at every shape met so far) is listed under the host only."""
    nodes = [part.nodes[i] for i in grp.node_ids]
    assigned = [AssignedNode(m.name, m.op_type, m.domain, m.graph) for m in nodes]
    fbs = _fallbacks(grp)
    if not fbs:
        return [AssignedSubgraph(grp.provider.name, assigned)]
    out: list[AssignedSubgraph] = []
    native = getattr(grp.compiled, "native_shapes", None)
    if not any(f.shapes is None for f in fbs) and (native is None or native() > 0):
        out.append(AssignedSubgraph(grp.provider.name, assigned))
    hosts = fbs[0].node_providers or (fbs[0].ran_on,) * len(assigned)
    out.extend(AssignedSubgraph(h, [a]) for h, a in zip(hosts, assigned))
    return out


def _fallbacks(grp: Any) -> list[Any]:
    """The HostFallback records of a fused group (framework/fused.py PerShapeCompile)."""
    return list(getattr(grp.compiled, "fallbacks", None) or ())


def count_partitions(steps: list[Any]) -> dict[str, int]:
    """Maximal runs of consecutive steps on one provider, per provider (copies excluded)."""
    counts: dict[str, int] = {}
    prev = None
    for st in steps:
        if st.provider == "copy":
            continue
        if st.provider != prev:
            counts[st.provider] = counts.get(st.provider, 0) + 1
            prev = st.provider
    return counts


def placement_report(part: Partition, steps: list[Any], copies: list[Any],
                     folded: list[str], model_name: str = "") -> str:
    lines = []
    used = part.providers_used()
    lines.append(f"placement of model {model_name!r}: providers in priority order: "
                 f"{', '.join(ep.name for ep in part.providers)}")
    per_ep: dict[str, int] = {}
    for pl in part.placement.values():
        per_ep[pl.provider.name] = per_ep.get(pl.provider.name, 0) + 1
    lines.append("nodes per provider: " + ", ".join(f"{k} {v}" for k, v in per_ep.items()))
    parts = count_partitions(steps)
    lines.append(f"partitions (runs of consecutive steps on one provider, main graph): "
                 f"{sum(parts.values())} (" + ", ".join(f"{k} {v}" for k, v in parts.items())
                 + f"); fused groups: {len(part.groups)}")
    if folded:
        lines.append(f"folded into constants at session creation: {len(folded)} node(s)")
    width = min(48, max([len(_label(n)) for n in part.nodes.values()] + [12]))
    lines.append("")
    lines.append(f"{'node':<{width}}  {'op':<22} {'provider':<28} why not a provider above")
    for nid in sorted(part.nodes):
        n = part.nodes[nid]
        pl = part.placement.get(nid)
        where = pl.provider.name if pl is not None else "(function body on CPU)"
        if pl is not None and pl.group is not None:
            fb = _fallbacks(pl.group)
            where += f" [{pl.group.name}]" if not fb else \
                f" [{pl.group.name}; on {fb[0].ran_on} at {len(fb)} input shape(s)]"
        rank = [ep.name for ep in part.providers]
        above = rank[:rank.index(pl.provider.name)] if pl is not None else rank
        why = "; ".join(f"{p}: {r}" for p, r in part.declines.get(nid, []) if p in above)
        graph = "" if n.graph == "main" else f" (in {n.graph})"
        op = f"{n.domain + '::' if n.domain else ''}{n.op_type}-{n.since_version}"
        lines.append(f"{_label(n) + graph:<{width}}  {op:<22} {where:<28} {why}".rstrip())
    lines.append("")
    fbs = [f for grp in part.groups for f in _fallbacks(grp)]
    if fbs:
        lines.append(f"groups run on the host where their provider could not compile them "
                     f"(decided per input shape at run time, so far): {len(fbs)}")
        lines.extend(f"  {f.describe()}" for f in fbs)
        lines.append("")
    if copies:
        lines.append(f"device copies: {len(copies)}")
        for c in copies:
            lines.append(f"  {c.value}: {c.src} -> {c.dst} for {c.consumer}"
                         + ("" if c.graph in ("", None) else f" (graph {c.graph!r})"))
    else:
        lines.append("device copies: none")
    if not used:
        lines.append("(no nodes)")
    return "\n".join(lines)
