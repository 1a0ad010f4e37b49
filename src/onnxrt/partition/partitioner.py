"""Split a model's nodes across execution providers.

Providers claim unclaimed nodes in priority order through ``get_capability``; the CPU
provider, always last, takes what is left. Nodes of nested graphs (If/Loop/Scan bodies) are
partitioned the same way, graph by graph. Shape computations that feed host inputs stay on
the host. Every refusal is recorded with its reason for the placement report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import onnx

from onnxrt.errors import EPFail
from onnxrt.framework.kernel import KernelDef
from onnxrt.framework.provider import ExecutionProvider
from onnxrt.ir.attrs import tensor_to_array
from onnxrt.ir.schemas import get_schema
from onnxrt.framework.capability import Capability
from onnxrt.framework.graph_view import GraphView, NodeView, ValueInfos
from onnxrt.ir.graph import Graph, SubGraph, const_type
from onnxrt.ir.walk import has_subgraphs, iter_subgraph_attrs, node_reads, subgraph_path
from onnxrt.partition.copies import CopyRecord, insert_copies
from onnxrt.partition.ep_context import ContextLoad, claim_contexts
from onnxrt.partition.fused_nodes import fuse_group

__all__ = ["Partition", "Placement", "FusedGroup", "partition_model"]

# ops that compute shapes and indices: kept on the host when they only feed host inputs
# (Shape and Size are not among them: on the host they would copy a whole device tensor
# back to read its dims; where the device has them they run there and return a small tensor)
SHAPE_OPS = frozenset({
    "Gather", "GatherElements", "Concat", "Unsqueeze", "Squeeze", "Slice",
    "Cast", "Reshape", "Add", "Sub", "Mul", "Div", "Range", "ConstantOfShape", "Equal",
    "Where", "ReduceProd", "ReduceMax", "ReduceMin", "Max", "Min", "Expand", "Identity",
    "Neg", "Abs", "Floor", "Ceil", "Sqrt", "Less", "Greater", "Not", "And", "Or", "Mod",
    "NonZero", "Transpose", "Tile", "Constant", "Flatten", "Split", "ScatterND",
})


@dataclass(eq=False)
class FusedGroup:
    """Nodes a compile-based provider fuses into one node."""

    id: int
    provider: ExecutionProvider
    node_ids: tuple[int, ...]
    graph: str
    name: str
    context: Any = None     # an EPContext node's parsed fields: loaded, not compiled
    compiled: Any = None    # what fuse_group made of it (a PerShapeCompile keeps fallbacks)


@dataclass(frozen=True)
class Placement:
    provider: ExecutionProvider
    kernel: KernelDef | None = None
    group: FusedGroup | None = None


@dataclass
class Partition:
    providers: list[ExecutionProvider]
    nodes: dict[int, NodeView] = field(default_factory=dict)
    index: dict[tuple[str, int], int] = field(default_factory=dict)
    graphs: dict[str, list[int]] = field(default_factory=dict)
    placement: dict[int, Placement] = field(default_factory=dict)
    groups: list[FusedGroup] = field(default_factory=list)
    declines: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    host_preferred: set[int] = field(default_factory=set)
    types: dict[str, dict[str, Any]] = field(default_factory=dict)
    copies: list[CopyRecord] = field(default_factory=list)

    def decline(self, node: NodeView, provider: str, reason: str) -> None:
        lst = self.declines.setdefault(node.id, [])
        if not any(p == provider for p, _ in lst):
            lst.append((provider, reason))

    def providers_used(self) -> list[str]:
        used = {p.provider.name for p in self.placement.values()}
        return [ep.name for ep in self.providers if ep.name in used]


def _graphs(graph: Graph) -> dict[str, Graph | SubGraph]:
    """Every graph of the model by path ("main", then nested graphs depth first)."""
    out: dict[str, Graph | SubGraph] = {}

    def walk(g: Graph | SubGraph, path: str) -> None:
        out[path] = g
        for i, n in enumerate(list(g.nodes)):
            for a_name, k, proto in iter_subgraph_attrs(n):
                sub_path = subgraph_path(path, i, a_name, k)
                walk(graph.subgraph(n, a_name, k, proto, sub_path), sub_path)

    walk(graph, "main")
    return out


def _types(g: Graph | SubGraph) -> dict[str, Any]:
    """Types by value name: the graph's own (declared, and inferred once at load) and its
    constants'."""
    types = dict(g.types)
    for name, v in g.constant_values().items():
        if name not in types:
            types[name] = const_type(v)
    return types


def partition_model(graph: Graph, providers: Sequence[ExecutionProvider],
                    opsets: dict[str, int],
                    host_kernels: Callable[[str, str, int], KernelDef | None], *,
                    disable_cpu_fallback: bool = False, cpu_requested: bool = True,
                    contexts: ContextLoad | None = None) -> Partition:
    """Claims of ``providers`` in priority order on every graph of ``graph``, written into
    it: each node annotated with its provider and kernel, each compile-based group replaced
    by one fused node (compiled here), a copy node wherever a value crosses devices.
    ``host_kernels(domain, op_type, since_version)``: the kernel that would run a node on
    the host (its ``host_inputs`` keep shape computations there); a ``KernelLookup`` there
    also runs the groups of a per-shape provider at shapes it cannot compile.
    ``contexts``: where EPContext nodes' blob files are read from, and whether compiling
    is allowed."""
    contexts = contexts or ContextLoad()
    part = Partition(list(providers))
    any_device = any(not ep.device.is_host for ep in providers)
    graphs = _graphs(graph)
    types = {path: _types(g) for path, g in graphs.items()}
    part.types = types
    next_id = [0]
    norm = {("" if k == "ai.onnx" else k): v for k, v in opsets.items()}
    for path, g in graphs.items():
        infos = ValueInfos(types[path])    # a value is read and written: built once
        ids = []
        for i, n in enumerate(g.nodes):
            dom = "" if n.domain == "ai.onnx" else n.domain
            opset = norm.get(dom, 1)
            schema = get_schema(n.op_type, opset, dom)
            since = schema.since_version if schema is not None else opset
            kd = host_kernels(dom, n.op_type, since)
            host = kd.host_inputs if kd is not None else frozenset()
            view = NodeView(
                id=next_id[0], name=n.name, op_type=n.op_type, domain=dom,
                inputs=tuple(n.input), outputs=tuple(n.output), opset=opset,
                since_version=since, graph=path, proto=n, host_inputs=host, values=infos,
                read_names=tuple(node_reads(n)) if has_subgraphs(n) else tuple(n.input))
            next_id[0] += 1
            part.nodes[view.id] = view
            part.index[(path, i)] = view.id
            ids.append(view.id)
        part.graphs[path] = ids
    for path, g in graphs.items():
        _partition_graph(part, path, g, types[path], any_device, norm, contexts)
    if disable_cpu_fallback and not cpu_requested:
        on_cpu = [part.nodes[i] for i, p in part.placement.items()
                  if p.provider.name == "CPUExecutionProvider"]
        if on_cpu:
            listed = ", ".join(f"{n.name or '<unnamed>'} ({n.op_type})" for n in on_cpu[:20])
            more = f" and {len(on_cpu) - 20} more" if len(on_cpu) > 20 else ""
            raise EPFail(
                f"session.disable_cpu_ep_fallback is set and {len(on_cpu)} node(s) would run "
                f"on CPUExecutionProvider: {listed}{more}")
    for nid, pl in part.placement.items():
        if pl.group is None:
            graph.annotate(part.nodes[nid].proto, provider=pl.provider, kernel=pl.kernel)
    # a per-shape group its provider cannot compile at some shapes runs on the host kernels
    # there, unless the session forbids nodes on the CPU provider
    host = None if disable_cpu_fallback and not cpu_requested \
        or not hasattr(host_kernels, "assign") else host_kernels
    for grp in part.groups:
        fuse_group(graph, graphs[grp.graph], grp, [part.nodes[i].proto for i in grp.node_ids],
                   types[grp.graph], norm, contexts.allow_compile, host)
    if any_device:
        for path, g in graphs.items():
            part.copies += insert_copies(graph, g, providers, is_main=path == "main")
    return part


def _partition_graph(part: Partition, path: str, g: Graph | SubGraph, tmap: dict[str, Any],
                     any_device: bool, opsets: dict[str, int], contexts: ContextLoad) -> None:
    ids = part.graphs[path]
    all_views = [part.nodes[i] for i in ids]
    inits, g_in, g_out = g.constant_values(), g.inputs, g.outputs
    host_pref = _host_preferred(all_views, [o.name for o in g_out]) if any_device else set()
    part.host_preferred |= host_pref
    value_info = all_views[0].values if all_views else ValueInfos(tmap)
    unclaimed = claim_contexts(part, path, ids, contexts,
                               lambda ep, nid, p, ctx: _context_group(part, ep, nid, p, ctx))
    for ep in part.providers:
        if not unclaimed:
            break
        offered = []
        for i in unclaimed:
            if i in host_pref and not ep.device.is_host:
                part.decline(part.nodes[i], ep.name, "host-only: it computes a shape or index "
                                                      "that a host input reads")
            else:
                offered.append(i)
        if not offered:
            continue
        view = GraphView(path, [part.nodes[i] for i in offered], all_views,
                         [vi.name for vi in g_in], [vi.name for vi in g_out],
                         _LazyConstants(inits), value_info,
                         opsets, provider=ep.name, decline=part.decline,
                         kernel_lookup=ep.kernels.lookup if ep.kernels is not None else None)
        try:
            caps = ep.get_capability(view) or []
        except Exception as e:
            raise EPFail(f"{ep.name}.get_capability failed on graph {path!r}: "
                         f"{type(e).__name__}: {e}") from e
        claimed = _apply_claims(part, ep, caps, set(offered), path)
        for i in offered:
            if i not in claimed and not any(p == ep.name for p, _ in part.declines.get(i, [])):
                part.decline(part.nodes[i], ep.name, "not claimed by its get_capability")
        unclaimed = [i for i in unclaimed if i not in claimed]


def _context_group(part: Partition, ep: ExecutionProvider, nid: int, path: str,
                   ctx: Any) -> None:
    grp = FusedGroup(len(part.groups), ep, (nid,), path, ctx.name, ctx)
    part.groups.append(grp)
    part.placement[nid] = Placement(ep, None, grp)


class _LazyConstants(dict):
    """Initializers converted to arrays only when a provider looks at them."""

    def __init__(self, protos: dict[str, Any]) -> None:
        super().__init__()
        self._protos = protos

    def __contains__(self, key: object) -> bool:
        return key in self._protos

    def __getitem__(self, key: str) -> Any:
        if not super().__contains__(key):
            v = self._protos[key]
            super().__setitem__(key, tensor_to_array(v) if isinstance(v, onnx.TensorProto)
                                else v)
        return super().__getitem__(key)


def _apply_claims(part: Partition, ep: ExecutionProvider, caps: list[Capability],
                  offered: set[int], path: str) -> set[int]:
    claimed: set[int] = set()
    for cap in caps:
        if not isinstance(cap, Capability):
            raise EPFail(f"{ep.name}.get_capability returned {type(cap).__name__}, "
                         f"expected Capability objects")
        for nid in cap.nodes:
            if nid not in offered:
                n = part.nodes.get(nid)
                what = f"node {n.name!r} ({n.op_type})" if n else f"node id {nid}"
                raise EPFail(f"{ep.name} claimed {what}, which was not offered to it "
                             f"(already claimed, or in another graph)")
            if nid in claimed:
                raise EPFail(f"{ep.name} claimed node id {nid} twice")
        if cap.fuse:
            if not ep.is_compile_based():
                raise EPFail(f"{ep.name} asked to fuse nodes but does not implement compile()")
            if _creates_cycle(part, path, set(cap.nodes)):
                names = [part.nodes[i].name or part.nodes[i].op_type for i in cap.nodes]
                raise EPFail(f"{ep.name} claimed a fused group that would create a cycle: "
                             f"{names[:10]} (use ort.group_nodes to build groups)")
            grp = FusedGroup(len(part.groups), ep, tuple(cap.nodes), path,
                             cap.name or f"{ep.name}_fused_{len(part.groups)}")
            part.groups.append(grp)
            for nid in cap.nodes:
                part.placement[nid] = Placement(ep, None, grp)
        else:
            for nid in cap.nodes:
                n = part.nodes[nid]
                kd = ep.kernels.lookup(n.domain, n.op_type, n.since_version) \
                    if ep.kernels is not None else None
                if kd is None:
                    raise EPFail(f"{ep.name} claimed node {n.name!r} ({n.op_type}-"
                                 f"{n.since_version}) without fusing it, but has no kernel "
                                 f"for it")
                part.placement[nid] = Placement(ep, kd, None)
        claimed.update(cap.nodes)
    return claimed


def _creates_cycle(part: Partition, path: str, group: set[int]) -> bool:
    """Whether some path leaves the group and re-enters it through other nodes."""
    views = [part.nodes[i] for i in part.graphs[path]]
    producer = {}
    for n in views:
        for o in n.outputs:
            if o:
                producer[o] = n.id
    consumers: dict[int, list[int]] = {}
    for n in views:
        for i in dict.fromkeys(n.reads):
            if i in producer:
                consumers.setdefault(producer[i], []).append(n.id)
    # walk forward from the group's direct outside successors; reaching the group = cycle
    stack = [c for g in group for c in consumers.get(g, ()) if c not in group]
    seen: set[int] = set()
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        for c in consumers.get(x, ()):
            if c in group:
                return True
            stack.append(c)
    return False


def _host_preferred(views: list[NodeView], graph_outputs: list[str]) -> set[int]:
    """Shape-computing nodes whose every consumer reads them as a host input (or is itself
    such a node): they stay on the host, where the values are needed."""
    consumers: dict[str, list[tuple[NodeView, int]]] = {}
    for n in views:
        for k, i in enumerate(n.inputs):
            if i:
                consumers.setdefault(i, []).append((n, k))
    outs = set(graph_outputs)
    pref: set[int] = set()
    for n in reversed(views):
        if n.op_type not in SHAPE_OPS or any(o in outs for o in n.outputs):
            continue
        uses = [u for o in n.outputs if o for u in consumers.get(o, ())]
        if uses and all(k in c.host_inputs or c.id in pref for c, k in uses):
            pref.add(n.id)
    return pref
