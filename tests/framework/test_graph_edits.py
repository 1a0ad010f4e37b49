"""Graph.replace and Graph.remove record their edits and apply them when the node list is
next read: the order and contents must be what applying each edit at once gives."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from onnxrt.ir.graph import Graph


def _chain(n: int) -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"], name=f"r{i}")
             for i in range(n)]
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info(f"v{n}", TensorProto.FLOAT, [2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _names(g: Graph) -> list[str]:
    return [n.name for n in g.nodes]


def _node(g: Graph, name: str) -> onnx.NodeProto:
    return next(n for n in g.nodes if n.name == name)


def test_edits_in_order_with_new_nodes_as_anchors():
    g = Graph(_chain(6))
    r = {n.name: n for n in g.nodes}
    a = helper.make_node("Neg", ["v1"], ["v3"], name="a")
    g.replace([r["r1"], r["r2"]], a, at=r["r2"])
    b = helper.make_node("Abs", ["v3"], ["w"], name="b")
    c = helper.make_node("Abs", ["w"], ["v4"], name="c")
    # the new node of the first edit is the anchor and a dead node of the second
    g.replace([a, r["r3"]], [b, c], at=r["r3"])
    g.remove([r["r5"]])
    assert _names(g) == ["r0", "b", "c", "r4"]
    # the index follows every edit
    assert g.producer("v4") is c and g.consumers("v4") == [r["r4"]]
    assert g.producer("v3") is None


def test_a_node_moved_by_replace_stays_once_at_its_new_place():
    g = Graph(_chain(4))
    r = {n.name: n for n in g.nodes}
    # r1 moves after r2's replacement: it is both dead and new
    x = helper.make_node("Neg", ["v0"], ["v2"], name="x")
    g.replace([r["r1"], r["r2"]], [x, r["r1"]], at=r["r2"])
    assert _names(g) == ["r0", "x", "r1", "r3"]
    # removed earlier, inserted again later: there, once
    g.remove([r["r0"]])
    g.replace([r["r3"]], [r["r0"]], at=r["r3"])
    assert _names(g) == ["x", "r1", "r0"]


def test_many_edits_on_a_long_chain_match_the_eager_result():
    n = 300
    g = Graph(_chain(n))
    expect = [f"r{i}" for i in range(n)]
    for i in range(0, n - 1, 3):
        dead = [_node(g, f"r{i}"), _node(g, f"r{i + 1}")] if i % 2 else [_node(g, f"r{i}")]
        at = dead[-1]
        new = helper.make_node("Neg", [f"v{i}"], [at.output[0]], name=f"n{i}")
        g.replace(dead, new, at=at)
        pos = expect.index(at.name)
        expect[pos:pos + 1] = [f"n{i}", at.name]
        expect = [e for e in expect if e not in {d.name for d in dead}]
    assert _names(g) == expect
