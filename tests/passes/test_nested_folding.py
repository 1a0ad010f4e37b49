"""ConstantFolding inside nested graphs: a branch or body that computes from the constants of
the scopes around it folds at session creation (an exported LSTM inside an If slices and
concatenates the main graph's weights in its branch). Expected values from onnx.reference,
and from onnxruntime for the Loop (onnx.reference's Loop disagrees with it on this model)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxrt

_F = TensorProto.FLOAT


def _ops(runner) -> list[str]:
    return [st.node.op_type for st in runner.plan.steps]


def _if_model() -> onnx.ModelProto:
    """Y = If(cond, then: X + Concat(Slice(W, 0:2), Slice(W, 2:4)) * 2,
    else: X - Unsqueeze(Constant)), W a main-graph initializer, the slice bounds
    main-graph Constant nodes."""
    w = np.arange(8, dtype=np.float32).reshape(4, 2)
    then = helper.make_graph(
        [helper.make_node("Slice", ["W", "s0", "s2"], ["a"]),
         helper.make_node("Slice", ["W", "s2", "s4"], ["b"]),
         helper.make_node("Concat", ["b", "a"], ["c"], axis=0),
         helper.make_node("Constant", [], ["two"], value=numpy_helper.from_array(
             np.array(2, np.float32))),
         helper.make_node("Mul", ["c", "two"], ["d"]),
         helper.make_node("Add", ["X", "d"], ["Yt"])],
        "then", [], [helper.make_tensor_value_info("Yt", _F, [4, 2])])
    other = helper.make_graph(
        [helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(
            np.array([1.5, -1.0], np.float32))),
         helper.make_node("Unsqueeze", ["k", "ax"], ["ku"]),
         helper.make_node("Sub", ["X", "ku"], ["Ye"])],
        "else", [], [helper.make_tensor_value_info("Ye", _F, [4, 2])])
    nodes = [helper.make_node("Constant", [], [n], value=numpy_helper.from_array(
        np.array([v], np.int64))) for n, v in (("s0", 0), ("s2", 2), ("s4", 4), ("ax", 0))]
    nodes.append(helper.make_node("If", ["cond"], ["Y"], then_branch=then,
                                  else_branch=other))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("cond", TensorProto.BOOL,
                                                                     []),
                                       helper.make_tensor_value_info("X", _F, [4, 2])],
                          [helper.make_tensor_value_info("Y", _F, [4, 2])],
                          [numpy_helper.from_array(w, "W")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _branches(sess):
    (step,) = [st for st in sess._plan.steps if st.node.op_type == "If"]
    return step.fn.then_branch, step.fn.else_branch


@pytest.mark.parametrize("cond", [True, False])
def test_if_branches_fold_outer_constants(cond: bool) -> None:
    m = _if_model()
    x = np.random.default_rng(0).standard_normal((4, 2)).astype(np.float32)
    feeds = {"cond": np.array(cond), "X": x}
    sess = onnxrt.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    then, other = _branches(sess)
    # what reads only constants is gone from the branches; what reads X stays
    assert _ops(then) == ["Add"]
    assert _ops(other) == ["Sub"]
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    np.testing.assert_allclose(sess.run(None, feeds)[0], want, rtol=1e-6)
    np.testing.assert_allclose(sess.run(None, feeds)[0], want, rtol=1e-6)   # again: intact


def test_no_folding_when_optimizations_are_off() -> None:
    m = _if_model()
    so = onnxrt.SessionOptions()
    so.graph_optimization_level = onnxrt.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = onnxrt.InferenceSession(m.SerializeToString(), so,
                                   providers=["CPUExecutionProvider"])
    then, _ = _branches(sess)
    assert "Concat" in _ops(then)
    x = np.ones((4, 2), np.float32)
    feeds = {"cond": np.array(True), "X": x}
    np.testing.assert_allclose(sess.run(None, feeds)[0],
                               ReferenceEvaluator(m).run(None, feeds)[0], rtol=1e-6)


def test_nested_if_and_loop_body() -> None:
    """Two levels down: an If inside a Loop body reads the main graph's W and the body's own
    initializer; the loop-carried value and the iteration number never fold."""
    w = np.array([1.0, 2.0, 3.0], np.float32)
    inner_then = helper.make_graph(
        [helper.make_node("Mul", ["W", "scale"], ["ws"]),
         helper.make_node("Add", ["acc", "ws"], ["r"])],
        "inner_then", [], [helper.make_tensor_value_info("r", _F, [3])])
    inner_else = helper.make_graph(
        [helper.make_node("Neg", ["W"], ["wn"]),
         helper.make_node("Add", ["acc", "wn"], ["r2"])],
        "inner_else", [], [helper.make_tensor_value_info("r2", _F, [3])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["flag"], ["flag_out"]),
         helper.make_node("Mod", ["i", "two"], ["m"]),
         helper.make_node("Equal", ["m", "zero"], ["even"]),
         helper.make_node("If", ["even"], ["acc_out"], then_branch=inner_then,
                          else_branch=inner_else)],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("flag", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc", _F, [3])],
        [helper.make_tensor_value_info("flag_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", _F, [3])],
        [numpy_helper.from_array(np.array(0.5, np.float32), "scale"),
         numpy_helper.from_array(np.array(2, np.int64), "two"),
         numpy_helper.from_array(np.array(0, np.int64), "zero")])
    g = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "a0"], ["acc_final"], body=body)],
        "g", [helper.make_tensor_value_info("n", TensorProto.INT64, []),
              helper.make_tensor_value_info("a0", _F, [3])],
        [helper.make_tensor_value_info("acc_final", _F, [3])],
        [numpy_helper.from_array(w, "W")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    sess = onnxrt.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    (loop,) = [st for st in sess._plan.steps if st.node.op_type == "Loop"]
    (inner,) = [st for st in loop.fn.body.plan.steps if st.node.op_type == "If"]
    assert _ops(inner.fn.then_branch) == ["Add"]
    assert _ops(inner.fn.else_branch) == ["Add"]
    assert "Mod" in _ops(loop.fn.body)
    ref = onnxruntime.InferenceSession(m.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
    for n in (0, 1, 4, 5):
        feeds = {"n": np.array(n, np.int64), "a0": np.array([0.0, 1.0, -1.0], np.float32)}
        np.testing.assert_allclose(sess.run(None, feeds)[0], ref.run(None, feeds)[0],
                                   rtol=1e-6)
