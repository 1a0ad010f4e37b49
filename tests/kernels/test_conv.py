"""Conv, ConvTranspose and pooling beyond the ONNX suite, onnxruntime as the oracle."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import onnxrt
from oracle import assert_outputs_close

ort = pytest.importorskip("onnxruntime")

F32 = onnx.TensorProto.FLOAT
F16 = onnx.TensorProto.FLOAT16


def _run_both(node, feeds, consts=None, opset=17, elem=F32, n_out=1, out_elems=None):
    consts = consts or {}
    inputs = [helper.make_tensor_value_info(k, elem, list(v.shape)) for k, v in feeds.items()]
    out_elems = out_elems or [elem] * n_out
    outs = [helper.make_tensor_value_info(o, e, None)
            for o, e in zip(node.output[:n_out], out_elems)]
    g = helper.make_graph([node], "g", inputs, outs,
                          [numpy_helper.from_array(v, k) for k, v in consts.items()])
    m = helper.make_model(g, ir_version=9, opset_imports=[helper.make_opsetid("", opset)])
    data = m.SerializeToString()
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = onnxrt.InferenceSession(data).run(None, feeds)
    return ref, got


def _check(ref, got, rtol=1e-4, atol=1e-4):
    assert_outputs_close(ref, got, rtol, atol)


RNG = np.random.default_rng(0)

CONV_CASES = [
    # x shape, w shape, attrs
    ((2, 8, 9, 10), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),            # depthwise
    ((1, 8, 11, 12), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 6, 13, 12), (6, 1, 5, 3), {"group": 6, "pads": [2, 0, 1, 2], "strides": [3, 2],
                                    "dilations": [1, 2]}),
    ((2, 4, 9, 9), (8, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),             # multiplier 2
    ((1, 4, 9, 9), (12, 1, 3, 3), {"group": 4, "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((2, 64, 4, 5), (64, 1, 3, 3), {"group": 64, "pads": [1, 1, 1, 1]}),     # channels-last
    ((1, 48, 6, 5), (96, 1, 3, 3), {"group": 48, "pads": [1, 0, 1, 1], "strides": [2, 2]}),
    ((2, 8, 10, 7), (12, 2, 3, 3), {"group": 4, "pads": [1, 0, 1, 2]}),           # grouped
    ((1, 16, 7, 7), (8, 16, 1, 1), {}),                                           # 1x1
    ((2, 16, 7, 7), (8, 16, 1, 1), {"strides": [2, 2]}),                          # 1x1 strided
    ((2, 16, 7, 7), (8, 4, 1, 1), {"group": 4}),                                  # grouped 1x1
    ((1, 3, 17, 15), (5, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    ((1, 3, 12, 12), (4, 3, 3, 3), {"dilations": [2, 2], "pads": [2, 1, 0, 2]}),
    ((1, 3, 11, 12), (4, 3, 4, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 3, 12, 12), (4, 3, 3, 3), {"auto_pad": "VALID", "strides": [2, 3]}),
    ((2, 3, 20), (4, 3, 5), {"pads": [2, 1], "strides": [2]}),                    # 1-D
    ((1, 4, 20), (4, 1, 3), {"group": 4, "pads": [1, 1]}),                        # 1-D dw
    ((1, 2, 6, 7, 5), (3, 2, 3, 3, 3), {"pads": [1, 1, 1, 1, 1, 1]}),             # 3-D
    ((1, 4, 6, 7, 5), (4, 1, 3, 3, 3), {"group": 4, "strides": [2, 1, 2]}),       # 3-D dw
]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("xs,ws,attrs", CONV_CASES)
def test_conv(xs, ws, attrs, bias):
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    consts = {"w": w}
    ins = ["x", "w"]
    if bias:
        consts["b"] = RNG.standard_normal(ws[0]).astype(np.float32)
        ins.append("b")
    node = helper.make_node("Conv", ins, ["y"], **attrs)
    _check(*_run_both(node, {"x": x}, consts))


def test_conv_weight_not_constant_and_fp16():
    x = RNG.standard_normal((1, 6, 8, 8)).astype(np.float16)
    w = RNG.standard_normal((6, 1, 3, 3)).astype(np.float16)
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=6, pads=[1, 1, 1, 1])
    _check(*_run_both(node, {"x": x, "w": w}, elem=F16), rtol=2e-3, atol=2e-3)
    w = RNG.standard_normal((4, 6, 3, 3)).astype(np.float32)
    x = x.astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[2, 2])
    _check(*_run_both(node, {"x": x, "w": w}))


@pytest.mark.parametrize("layout", ["cf", "cl"])
@pytest.mark.parametrize("xs,ws,attrs", [c for c in CONV_CASES if c[1][1] == 1])
def test_depthwise_layouts(monkeypatch, layout, xs, ws, attrs):
    from onnxrt.providers.cpu.nn import conv_numpy
    monkeypatch.setattr(conv_numpy, "_DW_FORCE", layout)
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], **attrs)
    _check(*_run_both(node, {"x": x}, {"w": w}))


def test_conv_banded_im2col(monkeypatch):
    from onnxrt.providers.cpu.nn import conv_numpy
    monkeypatch.setattr(conv_numpy, "_COLS_LIMIT", 4096)
    x = RNG.standard_normal((2, 5, 23, 9)).astype(np.float32)
    w = RNG.standard_normal((4, 5, 3, 3)).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], strides=[2, 1])
    _check(*_run_both(node, {"x": x}, {"w": w}))


CT_CASES = [
    ((1, 4, 5, 6), (4, 3, 3, 3), {"strides": [2, 2], "pads": [1, 0, 1, 1]}),
    ((2, 4, 5, 6), (4, 2, 3, 3), {"group": 2, "strides": [2, 1], "output_padding": [1, 0]}),
    ((1, 2, 5, 5), (2, 3, 3, 3), {"dilations": [2, 2]}),
    ((1, 2, 5, 5), (2, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 5, 5), (2, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 7), (2, 3, 4), {"strides": [3]}),
    ((1, 2, 3, 4, 3), (2, 2, 2, 2, 2), {"strides": [2, 2, 2]}),
]


@pytest.mark.parametrize("xs,ws,attrs", CT_CASES)
def test_conv_transpose(xs, ws, attrs):
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    b = RNG.standard_normal(ws[1] * attrs.get("group", 1)).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)
    _check(*_run_both(node, {"x": x}, {"w": w, "b": b}))


POOL_CASES = [
    ("MaxPool", (2, 3, 11, 12), {"kernel_shape": [3, 3], "strides": [2, 2],
                                 "pads": [1, 1, 1, 1]}),
    ("MaxPool", (1, 3, 11, 12), {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1}),
    ("MaxPool", (1, 3, 11, 12), {"kernel_shape": [3, 3], "dilations": [2, 2],
                                 "pads": [1, 2, 0, 1]}),
    ("MaxPool", (1, 3, 11, 12), {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER",
                                 "strides": [2, 2]}),
    ("MaxPool", (1, 2, 9, 8, 7), {"kernel_shape": [2, 3, 2], "strides": [2, 1, 2]}),
    ("AveragePool", (2, 3, 11, 12), {"kernel_shape": [3, 3], "strides": [2, 2],
                                     "pads": [1, 1, 1, 1]}),
    ("AveragePool", (2, 3, 11, 12), {"kernel_shape": [3, 3], "strides": [2, 2],
                                     "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    ("AveragePool", (1, 3, 10, 12), {"kernel_shape": [3, 3], "strides": [2, 2],
                                     "ceil_mode": 1}),
    ("AveragePool", (1, 3, 10, 12), {"kernel_shape": [3, 3], "strides": [2, 2],
                                     "auto_pad": "SAME_LOWER"}),
    ("AveragePool", (1, 3, 17), {"kernel_shape": [4], "strides": [3], "pads": [2, 1]}),
    ("LpPool", (1, 3, 10, 12), {"kernel_shape": [3, 3], "strides": [2, 2], "p": 3}),
    # many channels, small images: the channels-last path
    ("MaxPool", (2, 16, 5, 6), {"kernel_shape": [3, 3], "strides": [2, 1], "pads": [1, 0, 1, 1],
                                "ceil_mode": 1}),
    ("AveragePool", (2, 16, 5, 6), {"kernel_shape": [3, 2], "pads": [1, 1, 1, 0],
                                    "count_include_pad": 1}),
    ("LpPool", (1, 32, 4, 5, 3), {"kernel_shape": [2, 2, 2], "p": 2}),
    ("LpPool", (1, 3, 10, 12), {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1], "p": 1}),
]


@pytest.mark.parametrize("op,xs,attrs", POOL_CASES)
def test_pool(op, xs, attrs):
    x = RNG.standard_normal(xs).astype(np.float32)
    _check(*_run_both(helper.make_node(op, ["x"], ["y"], **attrs), {"x": x}, opset=18))


@pytest.mark.parametrize("order", [0, 1])
def test_maxpool_indices(order):
    x = RNG.standard_normal((2, 3, 9, 10)).astype(np.float32)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3], strides=[2, 2],
                            pads=[1, 1, 1, 1], storage_order=order)
    ref, got = _run_both(node, {"x": x}, n_out=2, out_elems=[F32, onnx.TensorProto.INT64])
    _check(ref, got)


def test_maxpool_int8_and_fp16():
    x = RNG.integers(-128, 127, (1, 2, 7, 7)).astype(np.int8)
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    _check(*_run_both(node, {"x": x}, elem=onnx.TensorProto.INT8))
    x = RNG.standard_normal((1, 2, 7, 7)).astype(np.float16)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2])
    _check(*_run_both(node, {"x": x}, elem=F16), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"])
def test_global_pools(op):
    x = RNG.standard_normal((2, 5, 4, 3)).astype(np.float32)
    _check(*_run_both(helper.make_node(op, ["x"], ["y"]), {"x": x}))


EPI_CASES = [
    # x shape, w shape, attrs: each of Conv's paths
    ((2, 16, 7, 9), (8, 16, 1, 1), {}),                                           # 1x1
    ((2, 16, 7, 9), (8, 16, 1, 1), {"strides": [2, 2]}),
    ((2, 16, 7, 9), (8, 4, 1, 1), {"group": 4}),                                  # grouped 1x1
    ((2, 5, 23, 9), (4, 5, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 1]}),     # im2col
    ((2, 8, 10, 7), (12, 2, 3, 3), {"group": 4, "pads": [1, 0, 1, 2]}),           # grouped
    ((2, 8, 30, 31), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),    # depthwise (jit)
    ((2, 8, 9, 10), (16, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),    # depthwise numpy
    ((1, 3, 6, 5, 4), (4, 3, 3, 3, 3), {"pads": [1] * 6}),                         # 3-D
]


@pytest.mark.parametrize("banded", [False, True])
@pytest.mark.parametrize("with_z", [False, True])
@pytest.mark.parametrize("xs,ws,attrs", EPI_CASES)
def test_conv_fused_epilogue(monkeypatch, xs, ws, attrs, with_z, banded):
    """Conv.fuse_epilogue (FusedConv's hook): bias, Z and the activation applied per slice
    equal the same steps applied after the plain convolution."""
    import types

    from onnxrt.providers.cpu.contrib.fused import activation_fn
    from onnxrt.providers.cpu.nn import conv, conv_numpy

    if banded:
        monkeypatch.setattr(conv_numpy, "_COLS_LIMIT", 4096)
        monkeypatch.setattr(conv_numpy, "_MIN_COLS", 8)
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    b = RNG.standard_normal(ws[0]).astype(np.float32)
    node = types.SimpleNamespace(attrs=attrs, constant_inputs={1: w, 2: b})
    plain = conv.Conv(node)(x, w, b)
    z = RNG.standard_normal(plain.shape).astype(np.float32) if with_z else None
    for (act_name, a, bb), named in itertools.product(
            [("Relu", 0, 0), ("LeakyRelu", 0.1, 0), ("Clip", -0.5, 0.7), ("Sigmoid", 0, 0),
             (None, 0, 0)], [True, False]):
        act = activation_fn(act_name, a, bb)
        ref = plain + (z if with_z else 0)
        ref = act(ref.copy()) if act is not None else ref
        k = conv.Conv(node)
        # named: the compiled epilogue where it has the activation; else NumPy's ufuncs
        k.fuse_epilogue(act, act_name, (a, bb)) if named else k.fuse_epilogue(act)
        got = k(x, w, b, z)
        assert got.dtype == np.float32 and got.shape == ref.shape and got.flags.c_contiguous
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
        if z is not None:   # a Z the epilogue cannot slice (broadcast) still adds
            got = k(x, w, b, z[:1])
            ref1 = plain + z[:1]
            ref1 = act(ref1) if act is not None else ref1
            np.testing.assert_allclose(got, ref1, rtol=1e-5, atol=1e-5)


def test_conv_fused_epilogue_fp16_and_no_bias():
    import types

    from onnxrt.providers.cpu.contrib.fused import activation_fn
    from onnxrt.providers.cpu.nn import conv

    x = RNG.standard_normal((2, 6, 9, 8)).astype(np.float16)
    w = RNG.standard_normal((5, 6, 3, 3)).astype(np.float16)
    node = types.SimpleNamespace(attrs={"pads": [1, 1, 1, 1]}, constant_inputs={1: w})
    plain = conv.Conv(node)(x, w)
    z = RNG.standard_normal(plain.shape).astype(np.float16)
    k = conv.Conv(node)
    k.fuse_epilogue(activation_fn("Relu", 0, 0))
    got = k(x, w, None, z)
    assert got.dtype == np.float16
    ref = np.maximum(plain.astype(np.float32) + z.astype(np.float32), 0)
    np.testing.assert_allclose(got.astype(np.float32), ref, rtol=1e-2, atol=1e-2)
