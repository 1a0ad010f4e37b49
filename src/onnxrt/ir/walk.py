"""Walking a graph's structure: nested graphs, their paths, and the values nodes read."""

from __future__ import annotations

from typing import Any, Iterator

import onnx
from onnx import AttributeProto

__all__ = ["node_reads", "graph_free_names", "subgraph_path", "iter_subgraphs",
           "has_subgraphs"]


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
