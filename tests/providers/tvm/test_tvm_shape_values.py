"""Shape arithmetic that TVM's Relax frontend evaluates as shape values: the chain Hugging
Face exports write around attention masks (a computed shape compared with -1, then
Where)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from providers.tvm.tvmhelpers import needs_tvm, tvm_session

pytestmark = needs_tvm


def _shape_chain(out: str) -> onnx.ModelProto:
    """shape = [N, -1, 32, 32] from x's batch, compared with -1 and fixed by Where (the
    mask-expanding pattern): ``out`` picks the value the graph returns."""
    def c(name: str, v: object) -> onnx.TensorProto:
        return nh.from_array(np.array(v, np.int64), name)

    nodes = [h.make_node("Shape", ["x"], ["sh"]),
             h.make_node("Gather", ["sh", "zero"], ["d0"], axis=0),
             h.make_node("Unsqueeze", ["d0", "ax"], ["u"]),
             h.make_node("Concat", ["u", "m1", "k32", "k32"], ["s"], axis=0),
             h.make_node("Equal", ["s", "m1s"], ["eq"]),
             h.make_node("Where", ["eq", "ones", "s"], ["y"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["N", 32])],
                     [h.make_tensor_value_info(out, T.BOOL if out == "eq" else T.INT64, [4])],
                     [c("zero", 0), c("ax", [0]), c("m1", [-1]), c("k32", [32]),
                      c("m1s", [-1] * 4), c("ones", [1] * 4)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def test_computed_shape_compared_with_minus_one():
    """TVM's frontend gave all False for this Equal (and so kept the -1 through Where):
    the provider leaves int64 Equal to the CPU provider and says why."""
    x = np.zeros((3, 32), np.float32)
    for out, want in (("eq", [False, True, False, False]), ("y", [3, 1, 32, 32])):
        sess = tvm_session(_shape_chain(out))
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], np.array(want))
    assert "compares int64 shape values wrongly" in sess.placement_report()
