"""com.microsoft.nchwc ops in the model onnxruntime saves at graph optimization level "all"
(on this CPU: its NCHWc block size, 8 or 16), run by onnxrt against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper

from kernels.contrib_oracle import run_ours

RNG = np.random.default_rng(123)


def _model(upsample_mode):
    def init(name, *shape, scale=0.3):
        return numpy_helper.from_array((RNG.normal(size=shape) * scale).astype(np.float32),
                                       name)
    nodes = [
        # narrow input (3 channels): the NCHW input feeds an OIHWBo filter
        oh.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        oh.make_node("Relu", ["c1"], ["r1"]),
        # depthwise (OIHWBo, group = channels)
        oh.make_node("Conv", ["r1", "wd", "bd"], ["c2"], pads=[1, 1, 1, 1], group=16),
        oh.make_node("Clip", ["c2"], ["r2"], min=0.0, max=6.0),
        # a regular conv (OIHWBiBo) with its output added to r1: the Sum fusion
        oh.make_node("Conv", ["r2", "w3", "b3"], ["c3"], pads=[0, 0, 0, 0]),
        oh.make_node("Add", ["c3", "r1"], ["a3"]),
        oh.make_node("MaxPool", ["a3"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        oh.make_node("AveragePool", ["p1"], ["p2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        oh.make_node("Conv", ["p2", "w4", "b4"], ["c4"], strides=[2, 2], pads=[1, 1, 1, 1]),
        oh.make_node("Sigmoid", ["c4"], ["s4"]),
        oh.make_node("Upsample", ["s4", "sc"], ["u"], mode=upsample_mode),
        oh.make_node("GlobalAveragePool", ["u"], ["gap"]),
        oh.make_node("GlobalMaxPool", ["u"], ["gmp"]),
        # a wide second input, NHWC-transposed by the graph: ReorderInput (channels_last)
        oh.make_node("Transpose", ["z"], ["zt"], perm=[0, 3, 1, 2]),
        oh.make_node("Conv", ["zt", "w5", "b5"], ["cz"], pads=[1, 1, 1, 1]),
        oh.make_node("LeakyRelu", ["cz"], ["rz"], alpha=0.2),
    ]
    inits = [init("w1", 16, 3, 3, 3), init("b1", 16), init("wd", 16, 1, 3, 3), init("bd", 16),
             init("w3", 16, 16, 1, 1), init("b3", 16), init("w4", 24, 16, 3, 3),
             init("b4", 24), init("w5", 12, 20, 3, 3), init("b5", 12),
             numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "sc")]
    outs = [oh.make_tensor_value_info(n, TP.FLOAT, None) for n in ("u", "gap", "gmp", "rz")]
    ins = [oh.make_tensor_value_info("x", TP.FLOAT, [2, 3, 16, 16]),
           oh.make_tensor_value_info("z", TP.FLOAT, [2, 6, 5, 20])]
    g = oh.make_graph(nodes, "nchwc", ins, outs, initializer=inits)
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 9)], ir_version=9)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_onnxruntime_optimized_model_with_nchwc_ops(tmp_path, mode):
    model = _model(mode)
    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    sess = onnxruntime.InferenceSession(model.SerializeToString(), so,
                                        providers=["CPUExecutionProvider"])
    opt = onnx.load(str(tmp_path / "opt.onnx"))
    ops = {n.op_type for n in opt.graph.node if n.domain == "com.microsoft.nchwc"}
    if not ops:
        pytest.skip("onnxruntime applies no NCHWc layout on this CPU (block size 1)")
    assert {"ReorderInput", "Conv", "ReorderOutput", "MaxPool", "AveragePool",
            "Upsample"} <= ops, ops
    feeds = {"x": RNG.normal(size=(2, 3, 16, 16)).astype(np.float32),
             "z": RNG.normal(size=(2, 6, 5, 20)).astype(np.float32)}
    ref = sess.run(None, feeds)
    got = run_ours(opt, feeds)
    for r, o in zip(ref, got):
        np.testing.assert_allclose(o, r, rtol=1e-4, atol=1e-5)
