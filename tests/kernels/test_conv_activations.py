"""HardSwish and HardSigmoid after a Conv fused into FusedConv and applied in the conv's
epilogue (passes/fusions.py, nn/jit.py _epi_image), against onnxruntime running the
unfused model, through the compiled kernel and the NumPy path."""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt.providers.cpu.nn import conv_jit, jit


def _model(act: str, attrs: dict, residual: bool, depthwise: bool = False) -> bytes:
    rng = np.random.default_rng(4)
    cin = 16 if depthwise else 8
    w = rng.standard_normal((16, 1 if depthwise else 8, 3, 3)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1],
                              group=16 if depthwise else 1)]
    src = "c"
    if residual:
        nodes.append(helper.make_node("Add", ["c", "z"], ["s"]))
        src = "s"
    nodes.append(helper.make_node(act, [src], ["y"], **attrs))
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, cin, 20, 20])]
    if residual:
        ins.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 16, 20, 20]))
    g = helper.make_graph(nodes, "g", ins,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, ir_version=8,
                             opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _saved_model_agrees_in_onnxruntime(path: str, feeds: dict, y: np.ndarray) -> None:
    """The optimized model onnxrt wrote loads in onnxruntime (whose FusedConv has no
    HardSwish or Silu: those are written as their own nodes after it) and agrees."""
    ref = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
        None, feeds)[0]
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("depthwise", [False, True])
@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("act,attrs", [("HardSwish", {}),
                                       ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
                                       ("LeakyRelu", {"alpha": 0.2})])
def test_activations_fused_into_the_conv(act, attrs, residual, compiled, depthwise, tmp_path,
                                        monkeypatch):
    """Dense convs apply them in the compiled conv's epilogue, depthwise ones (whose kernel
    adds the bias) in the compiled epilogue right after; the NumPy path alike."""
    if compiled and not jit.available():
        pytest.skip("numba is not installed")
    mb = _model(act, attrs, residual, depthwise)
    rng = np.random.default_rng(5)
    cin = 16 if depthwise else 8
    feeds = {"x": (rng.standard_normal((2, cin, 20, 20)) * 3).astype(np.float32)}
    if residual:
        feeds["z"] = rng.standard_normal((2, 16, 20, 20)).astype(np.float32)
    so = onnxrt.SessionOptions()
    so.optimized_model_filepath = os.path.join(tmp_path, "opt.onnx")
    from onnxrt.providers.cpu.nn import conv as conv_mod
    late = []       # activations left to the NumPy pass over the whole output
    real_finish = conv_mod.Conv._finish
    monkeypatch.setattr(conv_mod.Conv, "_finish", staticmethod(
        lambda y, b, z, a, dt: late.append(a) or real_finish(y, b, z, a, dt)))
    jit.set_enabled(compiled)
    try:
        s = onnxrt.InferenceSession(mb, so)
        y = s.run(None, feeds)[0]
    finally:
        jit.set_enabled(jit.available())
    fused = [n for n in s._graph.nodes if n.op_type == "FusedConv"]
    assert len(fused) == 1 and len(s._graph.nodes) == 1
    assert helper.get_attribute_value(
        next(a for a in fused[0].attribute if a.name == "activation")).decode() == act
    _saved_model_agrees_in_onnxruntime(so.optimized_model_filepath, feeds, y)
    kernel = getattr(s._plan.steps[0].fn, "__self__", s._plan.steps[0].fn)
    assert kernel.conv._epi_kind[0] == conv_jit.EPI_KINDS[act]   # the compiled epilogue's code
    assert ((kernel.conv._jit if depthwise else kernel.conv._gemm) is not None) == compiled
    if compiled:
        assert not any(late)
    ref = onnxruntime.InferenceSession(mb, providers=["CPUExecutionProvider"]).run(
        None, feeds)[0]
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


def test_epilogue_kernel_applies_each_kind_like_numpy():
    """The compiled epilogue alone, every activation code, NaN passing through."""
    if not jit.available():
        pytest.skip("numba is not installed")
    fn = conv_jit.epilogue_kernel(np.float32)
    rng = np.random.default_rng(6)
    y0 = (rng.standard_normal((1, 3, 50)) * 4).astype(np.float32)
    y0[0, 1, 7] = np.nan
    b = rng.standard_normal(3).astype(np.float32)
    pre = y0 + b[None, :, None]
    hs = lambda v, a, c: np.clip(v * a + c, 0, 1)       # noqa: E731
    want = {4: (0.3, 0.4, hs(pre, 0.3, 0.4)),
            5: (1 / 6, 0.5, pre * hs(pre, 1 / 6, 0.5)),
            6: (0.0, 0.0, pre / (1 + np.exp(-pre.astype(np.float64))))}
    for kind, (alpha, beta, ref) in want.items():
        y = y0.copy()
        fn(y, 0, 0, 50, 0, 3, b, y, False, kind, np.float32(alpha), np.float32(beta))
        np.testing.assert_allclose(y, ref, rtol=2e-6, atol=1e-6)
        assert np.isnan(y[0, 1, 7])


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("act,attrs", [("Relu", {}), ("HardSigmoid", {"alpha": 0.2,
                                                                      "beta": 0.5})])
@pytest.mark.parametrize("spatial", [1, 5])
def test_small_1x1_conv_takes_one_matmul(act, attrs, residual, spatial):
    """A squeeze-excitation block's 1x1 convs on one pixel (and a 5x5 head): one matmul and
    the compiled epilogue, the compiled conv not called; bias, residual, activation."""
    if not jit.available():
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(7)
    inits = [numpy_helper.from_array(rng.standard_normal((24, 96, 1, 1)).astype(np.float32),
                                     "w"),
             numpy_helper.from_array(rng.standard_normal(24).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"])]
    src = "c"
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 96, spatial, spatial])]
    if residual:
        nodes.append(helper.make_node("Add", ["c", "z"], ["s"]))
        ins.append(helper.make_tensor_value_info("z", TensorProto.FLOAT,
                                                 [2, 24, spatial, spatial]))
        src = "s"
    nodes.append(helper.make_node(act, [src], ["y"], **attrs))
    g = helper.make_graph(nodes, "g", ins,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    mb = helper.make_model(g, ir_version=8,
                           opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    feeds = {"x": rng.standard_normal((2, 96, spatial, spatial)).astype(np.float32)}
    if residual:
        feeds["z"] = rng.standard_normal((2, 24, spatial, spatial)).astype(np.float32)
    s = onnxrt.InferenceSession(mb)
    y = s.run(None, feeds)[0]
    kernel = getattr(s._plan.steps[0].fn, "__self__", s._plan.steps[0].fn)
    assert kernel.conv._gemm is not None and not kernel.conv._gemm._plans   # not called
    ref = onnxruntime.InferenceSession(mb, providers=["CPUExecutionProvider"]).run(
        None, feeds)[0]
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("mul_first", [False, True])
def test_silu_after_a_conv_is_fused(compiled, mul_first, tmp_path):
    """Conv -> Sigmoid, Mul(conv, sigmoid) (exporters' SiLU, YOLO's Conv-BN-SiLU) becomes
    one FusedConv with activation Silu, applied in the conv's epilogue."""
    if compiled and not jit.available():
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(9)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 8, 3, 3)).astype(np.float32),
                                     "w"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b")]
    mul_in = ["s", "c"] if mul_first else ["c", "s"]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", mul_in, ["y"])]
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 20, 20])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    mb = helper.make_model(g, ir_version=8,
                           opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    feeds = {"x": (rng.standard_normal((2, 8, 20, 20)) * 4).astype(np.float32)}
    so = onnxrt.SessionOptions()
    so.optimized_model_filepath = os.path.join(tmp_path, "opt.onnx")
    jit.set_enabled(compiled)
    try:
        s = onnxrt.InferenceSession(mb, so)
        y = s.run(None, feeds)[0]
    finally:
        jit.set_enabled(jit.available())
    assert [n.op_type for n in s._graph.nodes] == ["FusedConv"]
    _saved_model_agrees_in_onnxruntime(so.optimized_model_filepath, feeds, y)
    ref = onnxruntime.InferenceSession(mb, providers=["CPUExecutionProvider"]).run(
        None, feeds)[0]
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("pads,strides", [([0, 0, 0, 0], [1, 1]), ([1, 1, 1, 1], [2, 2])])
def test_single_channel_input_takes_the_plane_kernel(pads, strides):
    """A conv of a one-channel image (MNIST, OCR, spectrograms) runs the depthwise plane
    kernel with every output reading that channel, not im2col with K = 9."""
    if not jit.available():
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(10)
    inits = [numpy_helper.from_array(rng.standard_normal((32, 1, 3, 3)).astype(np.float32),
                                     "w"),
             numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b")]
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=pads, strides=strides),
         helper.make_node("Relu", ["c"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 28, 28])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    mb = helper.make_model(g, ir_version=8,
                           opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    feeds = {"x": rng.standard_normal((2, 1, 28, 28)).astype(np.float32)}
    s = onnxrt.InferenceSession(mb)
    y = s.run(None, feeds)[0]
    kernel = getattr(s._plan.steps[0].fn, "__self__", s._plan.steps[0].fn)
    assert kernel.conv._jit is not None and kernel.conv._gemm is None
    ref = onnxruntime.InferenceSession(mb, providers=["CPUExecutionProvider"]).run(
        None, feeds)[0]
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)
