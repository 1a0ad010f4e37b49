"""Conv's per-shape bound calls (nn/conv.py ``Conv._bind``, ``GemmConv.bind``,
``JitConv.bind``): after the first run of an input shape the compiled path's checks and
choices are kept and later runs of that shape call the kernel directly. Checked against
onnxruntime over repeated runs with fresh inputs, shapes changing between runs (a free
spatial dimension), one and two threads, every path that binds (tiny 1x1 and tiny columns,
GemmConv on one thread and split, depthwise planar and channels-last with a fused
activation), and inputs that must not take a bound call (FusedConv's Z, a weight given at
run time, a non-contiguous input)."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt.providers.cpu.nn import jit

needs_numba = pytest.mark.skipif(not jit.available(), reason="numba is not installed")


def _model(c, m, k, group=1, stride=1, act=None, params=None, z=False, const_w=True,
           spatial=("h", "w")):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((m, c // group, k, k)) * 0.3).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    inits = [numpy_helper.from_array(b, "b")]
    vis = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, c, *spatial])]
    if const_w:
        inits.append(numpy_helper.from_array(w, "w"))
    else:
        vis.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, list(w.shape)))
    attrs = {"kernel_shape": [k, k], "pads": [k // 2] * 4, "strides": [stride] * 2,
             "group": group}
    ins = ["x", "w", "b"]
    opsets = [helper.make_opsetid("", 17)]
    if act or z:
        if act:
            attrs["activation"] = act
        if params:
            attrs["activation_params"] = params
        if z:
            ins.append("z")
            vis.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, None))
        node = helper.make_node("FusedConv", ins, ["y"], domain="com.microsoft", **attrs)
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    else:
        node = helper.make_node("Conv", ins, ["y"], **attrs)
    g = helper.make_graph([node], "g", vis,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, ir_version=8, opset_imports=opsets).SerializeToString(), w


def _sessions(mb, threads):
    so = onnxrt.SessionOptions()
    so.intra_op_num_threads = threads
    ours = onnxrt.InferenceSession(mb, so)
    ro = onnxruntime.SessionOptions()
    ro.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    ref = onnxruntime.InferenceSession(mb, ro, providers=["CPUExecutionProvider"])
    conv = ours._plan.steps[0].fn
    return ours, ref, getattr(conv, "conv", conv)       # FusedConv wraps a Conv


CASES = [   # id, (C, M, K, group, stride, activation, params), spatial sizes run in turn
    ("tiny_1x1", (24, 16, 1, 1, 1, "Relu", None), [(4, 4), (4, 4), (3, 5), (4, 4)]),
    ("tiny_cols", (3, 8, 3, 1, 2, "HardSwish", None), [(9, 9), (9, 9), (7, 10), (9, 9)]),
    ("gemm", (32, 48, 3, 1, 1, "LeakyRelu", [0.1]), [(20, 20), (20, 20), (18, 22), (20, 20)]),
    ("gemm_1x1", (64, 64, 1, 1, 1, None, None), [(49, 10), (49, 10), (30, 12), (49, 10)]),
    ("depthwise", (64, 64, 3, 64, 1, "HardSwish", None),
     [(49, 10), (49, 10), (20, 16), (49, 10)]),
    ("depthwise_s2", (96, 96, 5, 96, 2, "HardSigmoid", [0.2, 0.5]),
     [(28, 28), (28, 28), (14, 14), (28, 28)]),
    ("depthwise_narrow", (240, 240, 5, 240, 1, "Relu", None), [(7, 7), (7, 7), (6, 6)]),
    ("depthwise_plain", (32, 32, 3, 32, 1, None, None), [(12, 12), (12, 12), (11, 13)]),
]


@needs_numba
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name,spec,sizes", CASES, ids=[c[0] for c in CASES])
def test_bound_calls_match_onnxruntime(name, spec, sizes, threads):
    c, m, k, group, stride, act, params = spec
    mb, _ = _model(c, m, k, group, stride, act, params)
    ours, ref, conv = _sessions(mb, threads)
    rng = np.random.default_rng(1)
    for i, (h, w) in enumerate(sizes):
        x = rng.standard_normal((1, c, h, w)).astype(np.float32)
        got = ours.run(None, {"x": x})[0]
        want = ref.run(None, {"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"run {i} {h}x{w}")
    # every shape run got its bound call (the first run of a shape takes the full path)
    keys = {key[0] for key in conv._bound}
    assert keys == {(1, c, h, w) for h, w in sizes}


@needs_numba
def test_bound_call_outputs_are_fresh_arrays():
    """A bound call returns a new array each run: an output kept by the caller is not
    overwritten by the next run."""
    mb, _ = _model(64, 64, 1)
    ours, ref, conv = _sessions(mb, 2)
    x1 = np.ones((1, 64, 49, 10), np.float32)
    x2 = np.full((1, 64, 49, 10), -2.0, np.float32)
    y1 = ours.run(None, {"x": x1})[0]
    y2 = ours.run(None, {"x": x2})[0]
    y1b = ours.run(None, {"x": x1})[0]
    assert conv._bound
    np.testing.assert_allclose(y1, ref.run(None, {"x": x1})[0], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(y2, ref.run(None, {"x": x2})[0], rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(y1, y1b)
    assert not np.shares_memory(y1, y1b)


@needs_numba
def test_no_bound_call_with_residual_or_runtime_weight():
    """FusedConv's Z and a weight computed at run time take the full path every run."""
    mb, _ = _model(16, 16, 3, act="Relu", z=True)
    ours, ref, conv = _sessions(mb, 1)
    rng = np.random.default_rng(2)
    for _ in range(3):
        feeds = {"x": rng.standard_normal((1, 16, 8, 8)).astype(np.float32),
                 "z": rng.standard_normal((1, 16, 8, 8)).astype(np.float32)}
        np.testing.assert_allclose(ours.run(None, feeds)[0], ref.run(None, feeds)[0],
                                   rtol=1e-4, atol=1e-4)
    assert not conv._bound
    mb, w = _model(16, 16, 3, const_w=False)
    ours, ref, conv = _sessions(mb, 1)
    for scale in (1.0, -0.5, 2.0):      # a new weight each run must be used
        feeds = {"x": rng.standard_normal((1, 16, 8, 8)).astype(np.float32),
                 "w": (w * scale).astype(np.float32)}
        np.testing.assert_allclose(ours.run(None, feeds)[0], ref.run(None, feeds)[0],
                                   rtol=1e-4, atol=1e-4)
    assert not conv._bound


@needs_numba
def test_bound_call_takes_non_contiguous_input():
    """An input that is a strided view (a slice of a larger array) gives the same result
    through the bound call as a contiguous copy."""
    mb, _ = _model(32, 48, 3, act="Relu")
    ours, ref, conv = _sessions(mb, 1)
    big = np.random.default_rng(3).standard_normal((1, 64, 20, 20)).astype(np.float32)
    x = big[:, ::2]
    for _ in range(2):
        got = conv(x, None, conv.bias)
    assert conv._bound
    np.testing.assert_allclose(got, ref.run(None, {"x": np.ascontiguousarray(x)})[0],
                               rtol=1e-4, atol=1e-4)


@needs_numba
def test_bound_call_after_a_failed_run():
    """A run with a wrong channel count fails and leaves the bound call of
    the right shape working."""
    mb, _ = _model(8, 8, 3, act="Relu")
    ours, ref, conv = _sessions(mb, 1)
    x = np.random.default_rng(4).standard_normal((1, 8, 10, 10)).astype(np.float32)
    ours.run(None, {"x": x})
    with pytest.raises(Exception):
        ours.run(None, {"x": np.zeros((1, 5, 10, 10), np.float32)})
    np.testing.assert_allclose(ours.run(None, {"x": x})[0], ref.run(None, {"x": x})[0],
                               rtol=1e-4, atol=1e-4)


@needs_numba
def test_bound_calls_are_capped():
    """A stream of ever new input sizes keeps at most conv._MAX_BOUND bound calls and
    stays right past it."""
    from onnxrt.providers.cpu.nn import conv as conv_mod

    mb, _ = _model(8, 8, 3, act="Relu")
    ours, ref, conv = _sessions(mb, 1)
    rng = np.random.default_rng(5)
    for h in range(4, 4 + conv_mod._MAX_BOUND + 4):
        x = rng.standard_normal((1, 8, h, 6)).astype(np.float32)
        np.testing.assert_allclose(ours.run(None, {"x": x})[0], ref.run(None, {"x": x})[0],
                                   rtol=1e-4, atol=1e-4)
    assert len(conv._bound) == conv_mod._MAX_BOUND
