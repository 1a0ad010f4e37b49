"""What TensorRT claims: the parser's answer on the offered nodes, mapped back to node ids,
grouped cycle-free, and re-asked per group until every group parses as a whole.

TensorRT's parser judges nodes in the context of the model it is given; a subgraph that it
accepts inside the whole model may not parse on its own (a shape it needed came from a node
left outside). Like onnxruntime, each candidate group is therefore sent back to the parser
as a standalone model and split by its answer, for at most ``trt_max_partition_iterations``
rounds.
"""

from __future__ import annotations

from typing import Callable, Iterable

import onnx
from onnx import helper, numpy_helper

from onnxrt.framework.capability import Capability
from onnxrt.framework.grouping import group_nodes
from onnxrt.framework.graph_view import GraphView, NodeView

__all__ = ["subset_model", "claim", "node_reads"]

Ask = Callable[[bytes], list[list[int]]]


def node_reads(node: onnx.NodeProto) -> list[str]:
    """Values a node reads: its inputs, then the outer values its subgraphs use."""
    out = [i for i in node.input if i]
    for a in node.attribute:
        graphs = [a.g] if a.type == onnx.AttributeProto.GRAPH else \
            list(a.graphs) if a.type == onnx.AttributeProto.GRAPHS else []
        for g in graphs:
            out.extend(_outer_reads(g))
    return list(dict.fromkeys(out))


def _outer_reads(g: onnx.GraphProto) -> list[str]:
    defined = {i.name for i in g.input} | {t.name for t in g.initializer}
    out = []
    for n in g.node:
        out.extend(r for r in node_reads(n) if r not in defined)
        defined.update(o for o in n.output if o)
    return out


def subset_model(graph: GraphView, nodes: list[NodeView]) -> onnx.ModelProto:
    """The given nodes (in the view's topological order) as a standalone model: values read
    from outside become inputs (or initializers when constant), values used outside or by
    nobody become outputs."""
    ids = {n.id for n in nodes}
    produced = {o for n in nodes for o in n.outputs if o}
    inputs, inits, seen = [], [], set()
    for n in nodes:
        for r in node_reads(n.proto):
            if r in produced or r in seen:
                continue
            seen.add(r)
            if graph.is_constant(r):
                inits.append(numpy_helper.from_array(graph.constant(r), r))
            else:
                inputs.append(_value_info(graph, r))
    graph_outs = set(graph.outputs)
    outputs = []
    for n in nodes:
        for o in n.outputs:
            if not o:
                continue
            users = graph.consumers(o)
            if o in graph_outs or not users or any(u.id not in ids for u in users):
                outputs.append(_value_info(graph, o))
    opsets: dict[str, int] = {}
    for n in nodes:
        opsets[n.domain] = max(opsets.get(n.domain, 0), n.opset)
    opsets.setdefault("", 1)
    imports = [helper.make_opsetid(d, v) for d, v in sorted(opsets.items())]
    g = helper.make_graph([n.proto for n in nodes], "trt_query", inputs, outputs, inits)
    model = helper.make_model(g, opset_imports=imports, producer_name="onnxrt")
    model.ir_version = lowest_ir_version(imports)
    return model


def lowest_ir_version(imports: Iterable[onnx.OperatorSetIdProto]) -> int:
    """The oldest IR version that carries these opsets: parsers built against an older
    onnx reject models that claim a newer IR than they know."""
    try:
        return max(helper.find_min_ir_version_for(list(imports), ignore_unknown=True), 7)
    except Exception:
        return onnx.IR_VERSION


def _value_info(graph: GraphView, name: str) -> onnx.ValueInfoProto:
    vi = graph.value_info.get(name)
    if vi is None or not vi.elem_type:
        v = onnx.ValueInfoProto()
        v.name = name
        return v
    shape = None if vi.shape is None else [d if isinstance(d, (int, str)) else None
                                           for d in vi.shape]
    return helper.make_tensor_value_info(name, vi.elem_type, shape)


def _tensor_only(graph: GraphView, n: NodeView) -> str:
    """Why a node cannot go to TensorRT whatever the parser says ("" when it can)."""
    for v in list(n.input_info) + list(n.output_info):
        if v.name and v.type != "unknown" and not v.type.startswith("tensor("):
            return f"TensorRT takes only tensors; {v.name!r} is a {v.type}"
        if v.type in ("tensor(string)", "tensor(complex64)", "tensor(complex128)"):
            return f"TensorRT has no {v.type[7:-1]} tensors ({v.name!r})"
    return ""


def claim(graph: GraphView, ask: Ask, *, max_iterations: int = 1000,
          min_size: int = 1) -> list[Capability]:
    """The groups to fuse. ``ask`` is the parser's ``supported_subgraphs``."""
    offered = []
    for n in graph:
        why = _tensor_only(graph, n)
        if why:
            graph.decline(n, why)
        else:
            offered.append(n)
    if not offered:
        return []
    reason: dict[int, str] = {}
    pending = [offered]
    final: list[list[NodeView]] = []
    rounds = 0
    while pending and rounds < max_iterations:
        rounds += 1
        nxt: list[list[NodeView]] = []
        for nodes in pending:
            subs = _ask(graph, nodes, ask)
            ok = {n.id for s in subs for n in s}
            for n in nodes:
                if n.id not in ok:
                    reason.setdefault(n.id, "TensorRT's ONNX parser does not support it here")
            whole = len(subs) == 1 and len(subs[0]) == len(nodes)
            for s in subs:
                ids = {n.id for n in s}
                groups = group_nodes(graph, lambda v, ids=ids: v.id in ids)
                if whole and len(groups) == 1:
                    final.append(nodes)      # one network, and fusing it makes no cycle
                    continue
                nxt.extend([graph.node(i) for i in cap.nodes] for cap in groups)
        pending = nxt
    for nodes in pending:
        for n in nodes:
            reason[n.id] = (f"its group still split after trt_max_partition_iterations="
                            f"{max_iterations} rounds of asking the parser")
    out = []
    for nodes in final:
        if len(nodes) < min_size:
            for n in nodes:
                reason[n.id] = (f"its group of {len(nodes)} node(s) is smaller than "
                                f"trt_min_subgraph_size={min_size}")
            continue
        out.append(Capability(nodes, fuse=True))
    claimed = {i for c in out for i in c.nodes}
    for n in offered:
        if n.id not in claimed and n.id in reason:
            graph.decline(n, reason[n.id])
    return out


def _ask(graph: GraphView, nodes: list[NodeView], ask: Ask) -> list[list[NodeView]]:
    model = subset_model(graph, nodes)
    answer = ask(model.SerializeToString())
    subs = []
    for s in answer:
        picked = sorted({int(i) for i in s if 0 <= int(i) < len(nodes)})
        if picked:
            subs.append([nodes[i] for i in picked])
    return subs
