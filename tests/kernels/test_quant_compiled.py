"""The compiled integer products (providers/cpu/quant/igemm.py) behind QLinearConv,
ConvInteger, MatMulInteger, QLinearMatMul and the com.microsoft quantized products, against
exact integer NumPy formulas: int64 sums of the zero-point-shifted operands, then
onnxruntime's requantization (float32(acc + bias) * float32 multiplier, rounded half to
even, plus the zero point, saturated). onnxruntime itself is not the oracle for u8s8 here:
on CPUs without VNNI its kernels saturate int16 pair sums."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper

import onnxrt
from onnxrt.providers.cpu.quant import igemm

pytestmark = pytest.mark.skipif(igemm.kernels() is None,
                                reason="numba missing or disabled: the compiled path is off")

RNG = np.random.default_rng(7)
_F32 = np.float32


def _et(dt):
    return oh.np_dtype_to_tensor_dtype(np.dtype(dt))


def _session(op, ins, inits, out, attrs, domain="", free=False):
    """One-node model: ``ins`` (name, array) graph inputs (of free shape with ``free``),
    ``inits`` constants."""
    node = oh.make_node(op, [n for n, _ in ins + inits], [out[0]], domain=domain, **attrs)
    g = oh.make_graph([node], "g",
                      [oh.make_tensor_value_info(n, _et(a.dtype), None if free else a.shape)
                       for n, a in ins],
                      [oh.make_tensor_value_info(out[0], _et(out[1]), None)],
                      initializer=[numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    ops = [oh.make_opsetid("", 21)] + ([oh.make_opsetid(domain, 1)] if domain else [])
    m = oh.make_model(g, opset_imports=ops, ir_version=10)
    return onnxrt.InferenceSession(m.SerializeToString())


def _q(shape, dt):
    info = np.iinfo(dt)
    return RNG.integers(info.min, info.max + 1, size=shape).astype(dt)


def _requant(acc, mult, zp, dt):
    v = np.rint(acc.astype(_F32) * mult.astype(_F32)) + _F32(zp)
    info = np.iinfo(dt)
    return np.clip(v, info.min, info.max).astype(dt)


def _conv_ref(x, xz, w, wz, group, strides, pads, dil):
    """Exact int64 conv of (x - xz) and (w - wz), NCHW, pads [top, left, bottom, right]."""
    n, c, hh, ww = x.shape
    m, cg, kh, kw = w.shape
    xs = np.pad(x.astype(np.int64) - xz, [(0, 0), (0, 0), (pads[0], pads[2]),
                                          (pads[1], pads[3])])
    ws = w.astype(np.int64) - np.asarray(wz, np.int64).reshape(-1, 1, 1, 1)
    oh_ = (xs.shape[2] - (kh - 1) * dil[0] - 1) // strides[0] + 1
    ow_ = (xs.shape[3] - (kw - 1) * dil[1] - 1) // strides[1] + 1
    out = np.zeros((n, m, oh_, ow_), np.int64)
    mg = m // group
    for i in range(kh):
        for j in range(kw):
            patch = xs[:, :, i * dil[0]: i * dil[0] + (oh_ - 1) * strides[0] + 1: strides[0],
                       j * dil[1]: j * dil[1] + (ow_ - 1) * strides[1] + 1: strides[1]]
            for g in range(group):
                out[:, g * mg:(g + 1) * mg] += np.einsum(
                    "nchw,mc->nmhw", patch[:, g * cg:(g + 1) * cg], ws[g * mg:(g + 1) * mg, :,
                                                                      i, j])
    return out


CONVS = [
    # (N, C, H, W), (M, kh, kw), group, strides, pads, dilations
    ((1, 3, 9, 11), (8, 3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1)),
    ((2, 16, 7, 7), (20, 1, 1), 1, (1, 1), (0, 0, 0, 0), (1, 1)),
    ((1, 5, 12, 10), (6, 3, 2), 1, (2, 3), (2, 0, 1, 1), (2, 1)),
    ((1, 8, 9, 9), (8, 3, 3), 8, (1, 1), (1, 1, 1, 1), (1, 1)),        # depthwise
    ((1, 4, 10, 13), (8, 3, 3), 4, (2, 2), (1, 1, 1, 1), (1, 1)),      # depthwise, 2 each
    ((1, 6, 11, 8), (9, 3, 3), 3, (1, 2), (0, 1, 2, 0), (1, 2)),       # grouped
    ((1, 40, 6, 6), (36, 3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1)),      # K = 360: several pairs
]


@pytest.mark.parametrize("xdt,wdt", [(np.uint8, np.int8), (np.int8, np.int8),
                                     (np.uint8, np.uint8)])
@pytest.mark.parametrize("case", range(len(CONVS)))
@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv_exact(case, xdt, wdt, per_channel):
    xs, (m, kh, kw), group, strides, pads, dil = CONVS[case]
    c = xs[1]
    x = _q(xs, xdt)
    w = _q((m, c // group, kh, kw), wdt)
    wz = _q((m,) if per_channel else (), wdt)
    ws = (RNG.random((m,) if per_channel else ()) * 0.02 + 0.001).astype(_F32)
    xz, yz = _q((), xdt), _q((), xdt)
    xsc, ysc = _F32(0.05), _F32(0.7)
    b = RNG.integers(-20000, 20000, m).astype(np.int32)
    sess = _session("QLinearConv", [("x", x)],
                    [("xs", np.array(xsc)), ("xz", xz), ("w", w), ("ws", ws), ("wz", wz),
                     ("ys", np.array(ysc)), ("yz", yz), ("b", b)], ("y", xdt),
                    dict(group=group, strides=list(strides), pads=list(pads),
                         dilations=list(dil), kernel_shape=[kh, kw]))
    y = sess.run(None, {"x": x})[0]
    acc = _conv_ref(x, int(xz), w, wz, group, strides, pads, dil) + b.reshape(1, -1, 1, 1)
    mult = (xsc * ws / ysc).astype(_F32).reshape((1, -1, 1, 1) if per_channel else ())
    ref = _requant(acc, mult, yz, xdt)
    assert y.dtype == ref.dtype and y.shape == ref.shape
    np.testing.assert_array_equal(y, ref)


def test_qlinear_conv_saturation_and_ties():
    """Multiplier 0.5 on odd sums: exact .5 values round half to even; big sums saturate
    to both ends of the output range."""
    x = np.full((1, 2, 4, 4), 255, np.uint8)
    x[0, 1] = 0
    x[0, 0, 0, 0] = 1
    w = np.zeros((3, 2, 1, 1), np.int8)
    w[0, 0] = 1        # x itself (with zero points 0): odd and even values
    w[1, 0] = 127      # 255 * 127: saturates high
    w[2, 0] = -128     # saturates low
    sess = _session("QLinearConv", [("x", x)],
                    [("xs", np.array(_F32(1))), ("xz", np.array(0, np.uint8)), ("w", w),
                     ("ws", np.array(_F32(0.5))), ("wz", np.array(0, np.int8)),
                     ("ys", np.array(_F32(1))), ("yz", np.array(3, np.uint8))], ("y", np.uint8),
                    {})
    y = sess.run(None, {"x": x})[0]
    # 1 * 0.5 = 0.5 -> 0, 255 * 0.5 = 127.5 -> 128, plus the zero point 3
    assert y[0, 0, 0, 0] == 3 and y[0, 0, 0, 1] == 131
    # 127 * 1 * 0.5 = 63.5 -> 64 (+ 3); 127 * 255 saturates high, -128 * 255 low
    assert y[0, 1, 0, 0] == 67 and (y[0, 1].reshape(-1)[1:] == 255).all()
    assert y[0, 2, 0, 0] == 0 and (y[0, 2].reshape(-1)[1:] == 0).all()


@pytest.mark.parametrize("xdt,wdt", [(np.uint8, np.int8), (np.int8, np.uint8)])
def test_conv_integer_exact(xdt, wdt):
    x = _q((2, 6, 8, 7), xdt)
    w = _q((10, 3, 3, 3), wdt)
    xz, wz = _q((), xdt), _q((10,), wdt)
    sess = _session("ConvInteger", [("x", x)], [("w", w), ("xz", xz), ("wz", wz)],
                    ("y", np.int32), dict(group=2, pads=[1, 0, 1, 2], strides=[1, 2]))
    y = sess.run(None, {"x": x})[0]
    ref = _conv_ref(x, int(xz), w, wz, 2, (1, 2), (1, 0, 1, 2), (1, 1))
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, ref)


def test_qlinear_conv_1d():
    x = _q((2, 4, 19), np.uint8)
    w = _q((5, 4, 3), np.int8)
    sess = _session("QLinearConv", [("x", x)],
                    [("xs", np.array(_F32(0.1))), ("xz", np.array(128, np.uint8)), ("w", w),
                     ("ws", np.array(_F32(0.01))), ("wz", np.array(0, np.int8)),
                     ("ys", np.array(_F32(0.2))), ("yz", np.array(100, np.uint8))],
                    ("y", np.uint8), dict(pads=[2, 1], strides=[2]))
    y = sess.run(None, {"x": x})[0]
    acc = _conv_ref(x[:, :, None], 128, w[:, :, None], np.zeros(5, np.int64), 1, (1, 2),
                    (0, 2, 0, 1), (1, 1))[:, :, 0]
    ref = _requant(acc, np.float32(_F32(0.1) * _F32(0.01) / _F32(0.2)), 100, np.uint8)
    np.testing.assert_array_equal(y, ref)


def test_qlinear_conv_bad_channels_keeps_session():
    w = _q((4, 3, 3, 3), np.int8)
    sess = _session("QLinearConv", [("x", _q((1, 3, 5, 5), np.uint8))],
                    [("xs", np.array(_F32(1))), ("xz", np.array(0, np.uint8)), ("w", w),
                     ("ws", np.array(_F32(1))), ("wz", np.array(0, np.int8)),
                     ("ys", np.array(_F32(1))), ("yz", np.array(0, np.uint8))],
                    ("y", np.uint8), {}, free=True)
    with pytest.raises(Exception, match="channels"):
        sess.run(None, {"x": _q((1, 4, 5, 5), np.uint8)})
    assert sess.run(None, {"x": _q((1, 3, 5, 5), np.uint8)})[0].shape == (1, 4, 3, 3)
