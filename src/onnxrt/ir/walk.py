"""Walking a graph's structure: nested graphs, their paths, and the values nodes read."""

from __future__ import annotations

from typing import Any, Iterator

import onnx
from onnx import AttributeProto

__all__ = ["node_reads", "graph_free_names", "subgraph_path", "iter_subgraphs",
           "has_subgraphs", "iter_subgraph_attrs", "topo_order"]


def graph_free_names(graph: onnx.GraphProto | Any, defined: Any = ()) -> list[str]:
    """Names a graph (or a list of nodes) reads without defining them, in first-use order."""
    if isinstance(graph, onnx.GraphProto):
        nodes = graph.node
        known = set(defined)
        known.update(i.name for i in graph.input)
        known.update(t.name for t in graph.initializer)
        known.update(t.values.name for t in graph.sparse_initializer)
    else:
        nodes = graph
        known = set(defined)
    free: dict[str, None] = {}
    for node in nodes:
        for name in node_reads(node):
            if name and name not in known:
                free.setdefault(name, None)
        known.update(o for o in node.output if o)
    return list(free)


def node_reads(node: onnx.NodeProto) -> list[str]:
    """A node's inputs plus the outer values its subgraphs read."""
    reads = list(node.input)
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            reads.extend(graph_free_names(a.g))
        elif a.type == onnx.AttributeProto.GRAPHS:
            for g in a.graphs:
                reads.extend(graph_free_names(g))
    return reads


def has_subgraphs(node: onnx.NodeProto) -> bool:
    if not node.attribute:      # most nodes: no loop over attributes at all
        return False
    return any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in node.attribute)


def subgraph_path(parent: str, index: int, attr: str, k: int | None = None) -> str:
    """The path of a nested graph: parent path, the node's index, the attribute."""
    return f"{parent}/{index}.{attr}" + (f"[{k}]" if k is not None else "")


def iter_subgraphs(node: onnx.NodeProto, parent: str,
                   index: int) -> Iterator[tuple[str, onnx.GraphProto]]:
    """(path, graph) of each graph attribute of ``node``, the ``index``-th node of
    ``parent``."""
    for a in node.attribute:
        if a.type == AttributeProto.GRAPH:
            yield subgraph_path(parent, index, a.name), a.g
        elif a.type == AttributeProto.GRAPHS:
            for k, g in enumerate(a.graphs):
                yield subgraph_path(parent, index, a.name, k), g


def iter_subgraph_attrs(node: onnx.NodeProto) -> Iterator[tuple[str, int | None,
                                                                 onnx.GraphProto]]:
    """(attribute name, position in a GRAPHS attribute or None, graph) of each graph
    attribute of ``node``."""
    for a in node.attribute:
        if a.type == AttributeProto.GRAPH:
            yield a.name, None, a.g
        elif a.type == AttributeProto.GRAPHS:
            for k, g in enumerate(a.graphs):
                yield a.name, k, g


def topo_order(nodes: list[onnx.NodeProto], graph_name: str = "") -> list[onnx.NodeProto]:
    """``nodes`` in an order where every value is produced before a node reads it
    (subgraphs' outer reads included), changed as little as possible: the same list when
    it already is one. A cycle is an InvalidGraph error naming nodes on it."""
    from onnxrt.errors import InvalidGraph

    produced = set()
    for n in nodes:
        produced.update(n.output)
    seen: set[str] = {""}
    for n in nodes:     # the usual case, checked without building anything per node
        if any(x not in seen and x in produced for x in
               (node_reads(n) if has_subgraphs(n) else n.input)):
            break
        seen.update(n.output)
    else:
        return nodes
    outputs = [[o for o in n.output if o] for n in nodes]
    reads = [node_reads(n) if has_subgraphs(n) else list(n.input) for n in nodes]
    produced_by: dict[str, int] = {}
    for i, outs in enumerate(outputs):
        for o in outs:
            produced_by[o] = i
    deps = [sorted({produced_by[x] for x in reads[i]
                    if x and x in produced_by and produced_by[x] != i})
            for i in range(len(nodes))]
    indeg = [len(d) for d in deps]
    users: dict[int, list[int]] = {}
    for i, d in enumerate(deps):
        for j in d:
            users.setdefault(j, []).append(i)
    import heapq
    ready = [i for i, k in enumerate(indeg) if k == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users.get(i, ()):
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(nodes):
        stuck = [nodes[i].name or nodes[i].op_type for i in range(len(nodes)) if indeg[i] > 0]
        raise InvalidGraph(f"graph {graph_name!r} has a cycle through nodes {stuck[:10]}")
    return [nodes[i] for i in order]
