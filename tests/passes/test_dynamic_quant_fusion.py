"""MatMulIntegerToFloatFusion and DynamicQuantizeMatMulFusion on models made by onnxruntime's
``quantize_dynamic``: DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul (-> Add bias)
becomes com.microsoft DynamicQuantizeMatMul (MatMulIntegerToFloat where the quantized input
is shared) in the session's graph, with the outputs of onnx.reference's exact integer run
of the unfused model."""

from __future__ import annotations

import collections
import os
import tempfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxrt as ort

RNG = np.random.default_rng(5)


def _float_model(shared: bool) -> onnx.ModelProto:
    """X @ W1 + b1 (and X @ W2 + b2 from the same X when ``shared``), summed."""
    inits = []
    nodes = []

    def lin(i: int) -> str:
        w = (RNG.standard_normal((16, 12)) * 0.2).astype(np.float32)
        b = (RNG.standard_normal(12) * 0.1).astype(np.float32)
        inits.extend([numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")])
        nodes.append(oh.make_node("MatMul", ["x", f"w{i}"], [f"m{i}"]))
        nodes.append(oh.make_node("Add", [f"m{i}", f"b{i}"], [f"y{i}"]))
        return f"y{i}"

    out = lin(0)
    if shared:
        nodes.append(oh.make_node("Add", [out, lin(1)], ["y"]))
        out = "y"
    g = oh.make_graph(nodes, "dyn", [oh.make_tensor_value_info("x", TP.FLOAT, [2, 5, 16])],
                      [oh.make_tensor_value_info(out, TP.FLOAT, None)], inits)
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("shared", [False, True])
def test_quantize_dynamic_chain_fuses(tmp_path, shared):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    src, dst = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(_float_model(shared), src)
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)
    m = onnx.load(dst)
    assert any(n.op_type == "MatMulInteger" for n in m.graph.node)
    with tempfile.TemporaryDirectory() as d:
        so = ort.SessionOptions()
        so.optimized_model_filepath = os.path.join(d, "opt.onnx")
        sess = ort.InferenceSession(m.SerializeToString(), so)
        ops = collections.Counter(n.op_type for n in
                                  onnx.load(so.optimized_model_filepath).graph.node)
    for gone in ("MatMulInteger", "Cast", "Mul"):
        assert ops[gone] == 0, dict(ops)
    if shared:      # one quantization of X for both products
        assert ops["DynamicQuantizeLinear"] == 1 and ops["MatMulIntegerToFloat"] == 2, dict(ops)
    else:           # the bias Add joined too
        assert ops["DynamicQuantizeMatMul"] == 1 and ops["Add"] == 0, dict(ops)
    x = RNG.standard_normal((2, 5, 16)).astype(np.float32)
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    got = sess.run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
