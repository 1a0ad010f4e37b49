"""Quantization kernels against onnxruntime / onnx.reference (oracles only)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxrt

RNG = np.random.default_rng(0)


def _model(op, attrs, ins, outs, opset=21, inits=()):
    node = oh.make_node(op, [i[0] for i in ins], [o[0] for o in outs], **attrs)
    g = oh.make_graph([node], "g",
                      [oh.make_tensor_value_info(n, t, s) for n, t, s in ins
                       if n not in {i.name for i in inits}],
                      [oh.make_tensor_value_info(n, t, s) for n, t, s in outs],
                      initializer=list(inits))
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)], ir_version=10)


def _run(model, feeds):
    return onnxrt.InferenceSession(model.SerializeToString()).run(None, feeds)


def _ort(model, feeds):
    s = onnxruntime.InferenceSession(model.SerializeToString(),
                                     providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def _ref(model, feeds):
    return ReferenceEvaluator(model).run(None, feeds)


def _eq(out, ref, atol=0):
    assert out.dtype == ref.dtype, (out.dtype, ref.dtype)
    assert out.shape == ref.shape
    a, b = out.astype(np.float64), ref.astype(np.float64)
    np.testing.assert_allclose(a, b, atol=atol, rtol=0, equal_nan=True)


def _et(dt):
    return oh.np_dtype_to_tensor_dtype(np.dtype(dt))


# -- QuantizeLinear / DequantizeLinear --------------------------------------------------------
@pytest.mark.parametrize("zdt", [np.uint8, np.int8, np.int16, np.uint16, ml_dtypes.int4,
                                 ml_dtypes.uint4, ml_dtypes.int2])
@pytest.mark.parametrize("gran", ["tensor", "axis0", "axis1", "axis-1", "block"])
def test_quantize_dequantize_granularity(zdt, gran):
    x = (RNG.normal(size=(4, 6, 5)) * 40).astype(np.float32)
    x[0, 0, :3] = [2.5, -2.5, 3.5]  # ties round to even
    attrs = {}
    if gran == "tensor":
        shape = ()
    elif gran == "block":
        attrs = dict(axis=1, block_size=4)  # 6 = 4 + 2: a ragged last block
        shape = (4, 2, 5)
    else:
        ax = int(gran[4:])
        attrs = dict(axis=ax)
        shape = (x.shape[ax],)
    scale = np.asarray(RNG.random(shape) * 3 + 0.5, dtype=np.float32)
    info = ml_dtypes.iinfo(zdt) if np.dtype(zdt).kind == "V" else np.iinfo(zdt)
    zp = np.asarray(RNG.integers(info.min, info.max + 1, size=shape)).astype(zdt)
    if gran == "tensor":
        scale[...] = 1.0
    q = _model("QuantizeLinear", attrs, [("x", TP.FLOAT, x.shape), ("s", TP.FLOAT, shape),
                                         ("z", _et(zdt), shape)], [("y", _et(zdt), x.shape)])
    feeds = {"x": x, "s": scale, "z": zp}
    y = _run(q, feeds)[0]
    _eq(y, _ref(q, feeds)[0])
    d = _model("DequantizeLinear", attrs, [("x", _et(zdt), x.shape), ("s", TP.FLOAT, shape),
                                           ("z", _et(zdt), shape)], [("y", TP.FLOAT, x.shape)])
    feeds = {"x": y, "s": scale, "z": zp}
    _eq(_run(d, feeds)[0], _ref(d, feeds)[0], atol=1e-5)


@pytest.mark.parametrize("fdt", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz,
                                 ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz])
@pytest.mark.parametrize("saturate", [0, 1])
def test_quantize_float8_saturate(fdt, saturate):
    x = np.array([0, 1.3, -7.1, 1e5, -1e5, np.inf, -np.inf, np.nan, 300, 500, 3e4, 6e4],
                 np.float32)
    m = _model("QuantizeLinear", dict(saturate=saturate),
               [("x", TP.FLOAT, [12]), ("s", TP.FLOAT, []), ("z", _et(fdt), [])],
               [("y", _et(fdt), [12])])
    feeds = {"x": x, "s": np.array(1.0, np.float32), "z": np.array(0, fdt)}
    out, ref = _run(m, feeds)[0], _ref(m, feeds)[0]
    if saturate and "fnuz" in np.dtype(fdt).name:
        # the spec's table sends +-inf to NaN for the fnuz types (onnx.reference: to +-max)
        assert np.isnan(out[5:7].astype(np.float32)).all()
        out, ref = np.delete(out, [5, 6]), np.delete(ref, [5, 6])
    _eq(out, ref)


@pytest.mark.parametrize("xdt", [np.float16, np.float32])
def test_quantize_float16_and_output_dtype(xdt):
    x = (RNG.normal(size=(3, 8)) * 20).astype(xdt)
    m = _model("QuantizeLinear", dict(output_dtype=TP.INT8, axis=0),
               [("x", _et(xdt), [3, 8]), ("s", _et(xdt), [3])], [("y", TP.INT8, [3, 8])],
               opset=23)
    feeds = {"x": x, "s": np.array([0.5, 0.25, 2.0], xdt)}
    _eq(_run(m, feeds)[0], _ref(m, feeds)[0])
    m = _model("QuantizeLinear", {}, [("x", _et(xdt), [3, 8]), ("s", _et(xdt), [])],
               [("y", TP.UINT8, [3, 8])], opset=19)
    feeds = {"x": x, "s": np.array(0.7, xdt)}
    _eq(_run(m, feeds)[0], _ort(m, feeds)[0])


def test_dequantize_int32_fp16_output_dtype():
    x = RNG.integers(-(2 ** 20), 2 ** 20, size=(4, 5)).astype(np.int32)
    m = _model("DequantizeLinear", {}, [("x", TP.INT32, [4, 5]), ("s", TP.FLOAT, [])],
               [("y", TP.FLOAT, [4, 5])], opset=13)
    feeds = {"x": x, "s": np.array(0.01, np.float32)}
    _eq(_run(m, feeds)[0], _ort(m, feeds)[0], atol=1e-4)
    xq = RNG.integers(0, 255, size=(4, 5)).astype(np.uint8)
    m = _model("DequantizeLinear", dict(output_dtype=TP.FLOAT16, axis=1),
               [("x", TP.UINT8, [4, 5]), ("s", TP.FLOAT, [5]), ("z", TP.UINT8, [5])],
               [("y", TP.FLOAT16, [4, 5])], opset=23)
    feeds = {"x": xq, "s": np.linspace(0.1, 1, 5).astype(np.float32),
             "z": np.arange(5, dtype=np.uint8) * 20}
    out = _run(m, feeds)[0]
    assert out.dtype == np.float16
    expect = ((xq.astype(np.float32) - feeds["z"]) * feeds["s"]).astype(np.float16)
    np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("data", ["mixed", "positive", "negative", "zeros"])
def test_dynamic_quantize_linear(data):
    x = {"mixed": RNG.normal(size=(5, 7)) * 3, "positive": RNG.random((5, 7)) * 9,
         "negative": -RNG.random((5, 7)) * 9, "zeros": np.zeros((5, 7))}[data]
    x = x.astype(np.float32)
    m = _model("DynamicQuantizeLinear", {}, [("x", TP.FLOAT, [5, 7])],
               [("y", TP.UINT8, [5, 7]), ("s", TP.FLOAT, []), ("z", TP.UINT8, [])])
    out, ref = _run(m, {"x": x}), _ort(m, {"x": x})
    _eq(out[1], ref[1])
    _eq(out[2], ref[2])
    _eq(out[0], ref[0])


# -- MatMulInteger / QLinearMatMul ------------------------------------------------------------
def _q(shape, dt):
    info = np.iinfo(dt)
    return RNG.integers(info.min, info.max + 1, size=shape).astype(dt)


@pytest.mark.parametrize("adt,bdt", [(np.uint8, np.uint8), (np.uint8, np.int8),
                                     (np.int8, np.int8), (np.int8, np.uint8)])
@pytest.mark.parametrize("shapes", [((4, 300), (300, 5)), ((2, 3, 4, 7), (7, 6)),
                                    ((3, 9), (2, 9, 4))])
@pytest.mark.parametrize("zp", ["none", "scalar", "vector"])
def test_matmul_integer(adt, bdt, shapes, zp):
    sa, sb = shapes
    a, b = _q(sa, adt), _q(sb, bdt)
    feeds = {"A": a, "B": b}
    ins = [("A", _et(adt), sa), ("B", _et(bdt), sb)]
    if zp != "none":
        n_rows, n_cols = sa[-2], sb[-1]
        if zp == "vector" and len(sa) == 2:
            feeds["az"] = _q((n_rows,), adt)
        else:
            feeds["az"] = _q((), adt)
        feeds["bz"] = _q((n_cols,), bdt) if zp == "vector" else _q((), bdt)
        ins += [("az", _et(adt), feeds["az"].shape), ("bz", _et(bdt), feeds["bz"].shape)]
    m = _model("MatMulInteger", {}, ins, [("Y", TP.INT32, None)], opset=10)
    ref = (a.astype(np.int64) - (feeds["az"].reshape(-1, 1) if zp == "vector" and len(sa) == 2
                                  else feeds.get("az", 0))) @ \
        (b.astype(np.int64) - feeds.get("bz", 0))
    _eq(_run(m, feeds)[0], ref.astype(np.int32))


@pytest.mark.parametrize("dt", [np.uint8, np.int8])
@pytest.mark.parametrize("k", [7, 400])
@pytest.mark.parametrize("per_col", [False, True])
def test_qlinear_matmul(dt, k, per_col):
    a, b = _q((2, 3, k), dt), _q((k, 5), dt)
    feeds = {"a": a, "as": np.array(0.02, np.float32), "az": _q((), dt),
             "b": b, "bs": np.asarray(RNG.random(5 if per_col else ()) * 0.03 + 0.01, np.float32),
             "bz": _q((5,) if per_col else (), dt),
             "ys": np.array(0.5 * np.sqrt(k), np.float32), "yz": _q((), dt)}
    ins = [(n, TP.FLOAT if v.dtype == np.float32 else _et(dt), v.shape)
           for n, v in feeds.items()]
    m = _model("QLinearMatMul", {}, ins, [("y", _et(dt), None)], opset=10)
    _eq(_run(m, feeds)[0], _ort(m, feeds)[0])


# -- ConvInteger / QLinearConv ----------------------------------------------------------------
_CONVS = {
    "plain": (dict(), (1, 3, 7, 8), (4, 3, 3, 3)),
    "strided_padded": (dict(strides=[2, 1], pads=[1, 0, 2, 1]), (2, 3, 9, 7), (5, 3, 3, 2)),
    "dilated": (dict(dilations=[2, 2], pads=[2, 2, 2, 2]), (1, 2, 8, 8), (3, 2, 3, 3)),
    "grouped": (dict(group=2), (1, 4, 6, 6), (6, 2, 3, 3)),
    "depthwise": (dict(group=4, pads=[1, 1, 1, 1]), (2, 4, 5, 5), (4, 1, 3, 3)),
    "pointwise": (dict(), (2, 5, 4, 4), (3, 5, 1, 1)),
    "pointwise_strided": (dict(strides=[2, 2]), (1, 5, 5, 5), (3, 5, 1, 1)),
    "same_upper": (dict(auto_pad="SAME_UPPER", strides=[2, 2]), (1, 2, 7, 6), (3, 2, 3, 3)),
    "same_lower": (dict(auto_pad="SAME_LOWER"), (1, 2, 6, 6), (3, 2, 2, 2)),
    "conv1d": (dict(pads=[1, 1]), (2, 3, 11), (4, 3, 3)),
    "conv3d": (dict(strides=[1, 2, 1]), (1, 2, 4, 5, 4), (3, 2, 2, 3, 2)),
}


@pytest.mark.parametrize("case", sorted(_CONVS))
@pytest.mark.parametrize("const_w", [False, True])
def test_qlinear_conv(case, const_w):
    attrs, xs, ws = _CONVS[case]
    x, w = _q(xs, np.uint8), _q(ws, np.int8)
    m_out = ws[0]
    feeds = {"x": x, "xs": np.array(0.05, np.float32), "xz": np.array(128, np.uint8),
             "w": w, "ws": (RNG.random(m_out) * 0.02 + 0.005).astype(np.float32),
             "wz": np.zeros(m_out, np.int8), "ys": np.array(0.4, np.float32),
             "yz": np.array(100, np.uint8),
             "B": RNG.integers(-500, 500, size=m_out).astype(np.int32)}
    ins = [(n, _et(v.dtype), v.shape) for n, v in feeds.items()]
    inits = []
    if const_w:
        inits = [numpy_helper.from_array(feeds.pop("w"), "w")]
    m = _model("QLinearConv", attrs, ins, [("y", TP.UINT8, None)], opset=10, inits=inits)
    feeds_all = dict(feeds, w=w)
    _eq(_run(m, feeds)[0], _exact_qlinear_conv(attrs, feeds_all, len(xs) - 2))


def _exact_qlinear_conv(attrs, f, nd):
    """QLinearConv as exact integer sums, requantized with a float32 multiplier.

    onnxruntime is no oracle here: on x86 CPUs without VNNI its u8s8 kernels add pairs of
    products in saturating int16 and are off by tens of steps. The sums come from a float32
    Conv of the zero-point-shifted integers instead (every partial sum is far below 2**24,
    so float32 adds them exactly)."""
    lead = (-1,) + (1,) * (nd + 1)
    xf = (f["x"].astype(np.int64) - f["xz"].astype(np.int64)).astype(np.float32)
    wf = (f["w"].astype(np.int64) - f["wz"].astype(np.int64).reshape(lead)).astype(np.float32)
    conv = _model("Conv", attrs, [("x", TP.FLOAT, xf.shape), ("w", TP.FLOAT, wf.shape)],
                  [("y", TP.FLOAT, None)], opset=11)
    acc = _ort(conv, {"x": xf, "w": wf})[0].astype(np.int64)
    acc += f["B"].astype(np.int64).reshape((-1,) + (1,) * nd)
    mult = (f["xs"] * f["ws"] / f["ys"]).astype(np.float32).reshape((-1,) + (1,) * nd)
    y = np.rint(acc.astype(np.float32) * mult) + f["yz"].astype(np.int64)
    return np.clip(y, 0, 255).astype(np.uint8)


@pytest.mark.parametrize("case", sorted(_CONVS))
def test_conv_integer(case):
    attrs, xs, ws = _CONVS[case]
    x, w = _q(xs, np.uint8), _q(ws, np.uint8)
    feeds = {"x": x, "w": w, "xz": np.array(3, np.uint8), "wz": np.array(120, np.uint8)}
    ins = [(n, TP.UINT8, v.shape) for n, v in feeds.items()]
    m = _model("ConvInteger", attrs, ins, [("y", TP.INT32, None)], opset=10)
    _eq(_run(m, feeds)[0], _ort(m, feeds)[0])


def test_qlinear_conv_int8_per_channel_zero_points():
    # per-channel weight zero points (onnxruntime requires them to be 0): exact NumPy check
    x, w = _q((1, 2, 5, 5), np.int8), _q((3, 2, 3, 3), np.int8)
    wz = np.array([1, -2, 3], np.int8)
    feeds = {"x": x, "xs": np.array(0.1, np.float32), "xz": np.array(-3, np.int8), "w": w,
             "ws": np.array(0.02, np.float32), "wz": wz, "ys": np.array(0.3, np.float32),
             "yz": np.array(5, np.int8)}
    ins = [(n, _et(v.dtype), v.shape) for n, v in feeds.items()]
    m = _model("QLinearConv", {}, ins, [("y", TP.INT8, None)], opset=10)
    out = _run(m, feeds)[0]
    xi = x.astype(np.int64) + 3
    wi = w.astype(np.int64) - wz.reshape(3, 1, 1, 1)
    acc = np.zeros((1, 3, 3, 3), np.int64)
    for i in range(3):
        for j in range(3):
            acc[0, :, i, j] = np.einsum("chw,mchw->m", xi[0, :, i:i + 3, j:j + 3], wi)
    y = np.clip(np.rint(acc * (0.1 * 0.02 / 0.3)) + 5, -128, 127).astype(np.int8)
    _eq(out, y, atol=1)


def test_qlinear_matmul_float8():
    f8 = ml_dtypes.float8_e4m3fn
    a = (RNG.normal(size=(3, 4)) * 4).astype(f8)
    b = (RNG.normal(size=(4, 2)) * 4).astype(f8)
    feeds = {"a": a, "as": np.array(0.5, np.float32), "az": np.array(0, f8), "b": b,
             "bs": np.array(0.25, np.float32), "bz": np.array(0, f8),
             "ys": np.array(2.0, np.float32), "yz": np.array(0, f8)}
    ins = [(n, _et(v.dtype), v.shape) for n, v in feeds.items()]
    m = _model("QLinearMatMul", {}, ins, [("y", _et(f8), None)], opset=21)
    y = (a.astype(np.float32) * 0.5) @ (b.astype(np.float32) * 0.25) / 2.0
    _eq(_run(m, feeds)[0], np.clip(y, -448, 448).astype(f8))
