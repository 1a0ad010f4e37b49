"""The compiled integer products (providers/cpu/quant/igemm.py) behind QLinearConv,
ConvInteger, MatMulInteger, QLinearMatMul and the com.microsoft quantized products, against
exact integer NumPy formulas: int64 sums of the zero-point-shifted operands, then
onnxruntime's requantization (float32(acc + bias) * float32 multiplier, rounded half to
even, plus the zero point, saturated). onnxruntime itself is not the oracle for u8s8 here:
on CPUs without VNNI its kernels saturate int16 pair sums."""

from __future__ import annotations

import numpy as np
import pytest
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
    # a first layer: K = 147 (odd), 16-pixel panels inside one output row and across two
    ((1, 3, 40, 37), (16, 7, 7), 1, (2, 2), (3, 3, 3, 3), (1, 1)),
    # 1x1 with padding: the padded rows make a panel's pixels one stride apart across rows
    ((1, 6, 9, 9), (10, 1, 1), 1, (1, 1), (1, 1, 1, 1), (1, 1)),
    ((1, 5, 7, 30), (7, 3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 2)),      # dilated columns
    ((1, 4, 50, 48), (4, 5, 5), 4, (1, 1), (2, 2, 2, 2), (1, 1)),     # depthwise, 25 taps, big
    ((1, 3, 47, 45), (6, 2, 2), 3, (2, 2), (0, 0, 1, 1), (1, 1)),     # depthwise, 4 taps, s 2
    # small output planes: the channels-last depthwise loop (igemm._dw_nhwc_rows)
    ((2, 24, 7, 7), (24, 3, 3), 24, (1, 1), (1, 1, 1, 1), (1, 1)),
    ((1, 20, 14, 13), (20, 3, 3), 20, (2, 2), (1, 0, 1, 1), (1, 1)),
    ((1, 17, 8, 8), (17, 3, 3), 17, (1, 1), (2, 2, 2, 2), (2, 2)),     # dilated
    # the exact float32 depthwise loop (igemm._dw_f32_items) row by row: strides 2 and 3,
    # dilated columns, 5 kernel columns (one pass of three, two single ones), uneven pads
    ((1, 5, 60, 41), (5, 3, 5), 5, (2, 3), (1, 2, 0, 1), (1, 2)),
    # ... and over the flattened plane: 2 images, 2 outputs per channel, one kernel column
    ((2, 3, 33, 20), (6, 4, 1), 3, (1, 1), (2, 0, 1, 0), (3, 1)),
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


@pytest.mark.parametrize("case", [3, 4, 10, 11, 12, 13, 14, 15, 16])
def test_depthwise_layouts_agree(case):
    """The three depthwise loops (float32 per plane, int32 per plane with stride phases,
    channels-last where there is one output per channel) on the same convs, forced each
    way, against the exact int64 formula (raw int32 sums)."""
    xs, (m, kh, kw), group, strides, pads, dil = CONVS[case]
    x = _q(xs, np.uint8)
    w = _q((m, 1, kh, kw), np.int8)
    wz = _q((m,), np.int8)
    ref = _conv_ref(x, 17, w, wz, group, strides, pads, dil)
    for loop in ("f32", "int32", "nhwc"):
        pw = igemm.PackedConvW(w, wz, group)
        if loop == "int32":
            pw.rows32 = None
        if loop == "nhwc" and pw.taps is None:
            continue
        y = igemm.conv2d(x, 17, pw, list(dil), list(strides), list(pads),
                         igemm.Epilogue.raw(), dw_nhwc=loop == "nhwc")
        np.testing.assert_array_equal(y, ref, err_msg=loop)


@pytest.mark.parametrize("ks,f32", [((16, 16), True), ((17, 17), False)])
def test_depthwise_float32_bound(ks, f32):
    """The float32 depthwise loop is exact only while every partial sum stays below 2**24:
    the largest products (255 * 255, all one sign) over the most taps it takes (256 of a
    16x16 kernel: 16.6 million) stay exact, and a 17x17 kernel (18.8 million) goes to the
    int32 loop. Raw sums and a requantized output against the int64 formula."""
    c = 3
    x = np.zeros((1, c, 20, 21), np.uint8)
    x[0, 1] = 255
    x[0, 2, ::2] = 255
    w = np.full((c, 1) + ks, -128, np.int8)
    w[1, 0, ::3] = 1
    wz = np.array([127, 127, -4], np.int8)
    pw = igemm.PackedConvW(w, wz, c)
    assert (pw.rows32 is not None) == f32
    for xz in (255, 0):
        ref = _conv_ref(x, xz, w, wz, c, (1, 1), (1, 2, 1, 0), (1, 1))
        y = igemm.conv2d(x, xz, pw, [1, 1], [1, 1], [1, 2, 1, 0], igemm.Epilogue.raw(),
                         dw_nhwc=False)
        np.testing.assert_array_equal(y, ref)
        mult = np.array([1e-5, 3e-6, 2e-6], _F32)
        epi = igemm.Epilogue(igemm.MODE_QUANT, np.int8, scale=mult, zp=-3, qrange=(-128, 127))
        y = igemm.conv2d(x, xz, pw, [1, 1], [1, 1], [1, 2, 1, 0], epi, dw_nhwc=False)
        np.testing.assert_array_equal(y, _requant(ref, mult.reshape(1, -1, 1, 1), -3, np.int8))


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


# -- the matrix products ------------------------------------------------------------------

def _mm_ref(a, za, b, zb):
    return (a.astype(np.int64) - np.asarray(za, np.int64)) @ \
        (b.astype(np.int64) - np.asarray(zb, np.int64))


@pytest.mark.parametrize("adt,bdt", [(np.uint8, np.int8), (np.int8, np.int8),
                                     (np.uint8, np.uint8), (np.int8, np.uint8)])
@pytest.mark.parametrize("shape", [(1, 5), (3, 37, 19), (2, 9, 300, 70), (130, 17)])
def test_matmul_integer_exact(adt, bdt, shape):
    """M = 1 and M % 4 != 0 (the row tails), K odd (the K-pair padding), N not a multiple
    of 16 (the panel tails), leading dimensions flattened; per-column B zero points."""
    k = shape[-1]
    n = 23 if len(shape) < 4 else shape[-1] // 2
    a = _q(shape[:-1] + (k,), adt)
    b = _q((k, n), bdt)
    za, zb = _q((), adt), _q((n,), bdt)
    sess = _session("MatMulInteger", [("a", a)], [("b", b), ("za", za), ("zb", zb)],
                    ("y", np.int32), {})
    y = sess.run(None, {"a": a})[0]
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, _mm_ref(a, za, b, zb))


@pytest.mark.parametrize("ydt", [np.uint8, np.int8])
@pytest.mark.parametrize("per_col", [False, True])
def test_qlinear_matmul_exact(ydt, per_col):
    a = _q((6, 40), np.uint8)
    b = _q((40, 33), np.int8)
    n = 33
    bs = (RNG.random(n if per_col else ()) * 0.01 + 0.002).astype(_F32)
    bz = _q((n,) if per_col else (), np.int8)
    asc, ysc = _F32(0.03), _F32(0.05)
    az, yz = _q((), np.uint8), _q((), ydt)
    sess = _session("QLinearMatMul", [("a", a)],
                    [("as", np.array(asc)), ("az", az), ("b", b), ("bs", bs), ("bz", bz),
                     ("ys", np.array(ysc)), ("yz", yz)], ("y", ydt), {})
    y = sess.run(None, {"a": a})[0]
    ref = _requant(_mm_ref(a, az, b, bz), (asc * bs / ysc).astype(_F32), yz, ydt)
    np.testing.assert_array_equal(y, ref)


@pytest.mark.parametrize("out", ["float", "quant"])
@pytest.mark.parametrize("trans", [(0, 0), (1, 1)])
def test_qgemm_exact(out, trans):
    m, k, n = 5, 30, 20
    a = _q((m, k), np.uint8)
    b = _q((k, n), np.int8)
    c = RNG.integers(-5000, 5000, n).astype(np.int32)
    az, bz = _q((), np.uint8), _q((n,), np.int8)
    asc, bs = _F32(0.02), (RNG.random(n) * 0.01 + 0.001).astype(_F32)
    inits = [("as", np.array(asc)), ("az", az), ("b", b.T.copy() if trans[1] else b),
             ("bs", bs), ("bz", bz), ("c", c)]
    if out == "quant":
        inits += [("ys", np.array(_F32(0.4))), ("yz", np.array(9, np.uint8))]
    a_in = a.T.copy() if trans[0] else a
    sess = _session("QGemm", [("a", a_in)], inits, ("y", _F32 if out == "float" else np.uint8),
                    dict(alpha=0.5, transA=trans[0], transB=trans[1]), domain="com.microsoft")
    y = sess.run(None, {"a": a_in})[0]
    acc = _mm_ref(a, az, b, bz) + c
    mult = (_F32(0.5) * asc * bs).astype(_F32)
    if out == "float":
        np.testing.assert_array_equal(y, acc.astype(_F32) * mult)
    else:
        np.testing.assert_array_equal(y, _requant(acc, (mult / _F32(0.4)).astype(_F32), 9,
                                                  np.uint8))


def test_matmul_integer_to_float_exact():
    a = _q((2, 7, 50), np.int8)
    b = _q((50, 18), np.int8)
    az, bz = _q((), np.int8), _q((18,), np.int8)
    asc, bs = _F32(0.1), (RNG.random(18) * 0.01).astype(_F32)
    bias = RNG.standard_normal(18).astype(_F32)
    sess = _session("MatMulIntegerToFloat", [("a", a)],
                    [("b", b), ("as", np.array(asc)), ("bs", bs), ("az", az), ("bz", bz),
                     ("bias", bias)], ("y", _F32), {}, domain="com.microsoft")
    y = sess.run(None, {"a": a})[0]
    ref = _mm_ref(a, az, b, bz).astype(_F32) * (asc * bs).astype(_F32) + bias
    np.testing.assert_array_equal(y, ref)


# -- MatMulNBits: its float product against onnxruntime -------------------------------------

@pytest.mark.parametrize("m", [1, 3, 17])
@pytest.mark.parametrize("bits,block,zp", [(4, 32, "packed"), (4, 16, None), (8, 32, "packed"),
                                           (2, 16, "packed"), (4, 64, "float")])
def test_matmul_nbits_compiled(m, bits, block, zp):
    """Decoding rows (M <= 4: the per-block sums) and prompt rows (dequantized bands and
    sgemm) with every code width; K not a multiple of the block (a ragged last block)."""
    from kernels.contrib_oracle import assert_close, both

    k, n = 100, 45
    kb = -(-k // block)
    b = _q((n, kb, block * bits // 8), np.uint8)
    s = (RNG.random((n, kb)) * 0.1 + 0.01).astype(_F32)
    if zp == "packed":
        z = _q((n, -(-kb * bits // 8)), np.uint8)
    elif zp == "float":
        z = (RNG.random((n, kb)) * (1 << bits)).astype(_F32)
    else:
        z = None
    ins = [("a", RNG.standard_normal((m, k)).astype(_F32)), ("b", b), ("s", s), ("z", z),
           ("g", None), ("bias", RNG.standard_normal(n).astype(_F32))]
    assert_close(*both("MatMulNBits", ins, consts=("b", "s", "z"), K=k, N=n, bits=bits,
                       block_size=block), rtol=1e-4, atol=1e-4)


def _level4_vs_onnxruntime(m: int, k: int, n: int, block: int):
    """A random 4-bit MatMulNBits at accuracy_level 4 on onnxruntime and onnxrt, and how far
    onnxruntime's result is from the exact float product."""
    from kernels.contrib_oracle import both

    kb = k // block
    b = _q((n, kb, 16), np.uint8)
    s = (RNG.random((n, kb)) * 0.1 + 0.01).astype(_F32)
    z = _q((n, -(-kb // 2)), np.uint8)
    ins = [("a", RNG.standard_normal((m, k)).astype(_F32)), ("b", b), ("s", s), ("z", z)]
    ref, got = both("MatMulNBits", ins, consts=("b", "s", "z"), K=k, N=n, bits=4,
                    block_size=block, accuracy_level=4)
    exact = both("MatMulNBits", ins, consts=("b", "s", "z"), K=k, N=n, bits=4,
                 block_size=block)[1]
    err_ref = np.abs(ref[0] - exact[0]).max()
    return ref, got, err_ref


@pytest.mark.parametrize("m", [1, 9])
def test_matmul_nbits_level4_compiled(m):
    """accuracy_level 4 (int8 activations per block) on both compiled paths: as close to
    onnxruntime as onnxruntime is to itself in float32, far from the float product."""
    ref, got, err_ref = _level4_vs_onnxruntime(m, 96, 40, 32)
    assert err_ref > 1e-3
    assert np.abs(got[0] - ref[0]).max() <= 0.05 * err_ref


def _level4_ref(a, codes, s, z, block):
    """onnxruntime's accuracy_level 4 product, exactly: each block of A quantized to int8
    (scale max|a| / 127, half to even, +-127), int64 sums of qa * (q - zp) per block,
    scaled by the two block scales and summed in float64."""
    m, k = a.shape
    n, kb = s.shape
    q = np.stack([codes & 15, codes >> 4], -1).reshape(n, kb, block).astype(np.int64)
    ap = np.zeros((m, kb * block), _F32)
    ap[:, :k] = a
    ab = ap.reshape(m, kb, block)
    sa = (np.abs(ab).max(-1) / _F32(127)).astype(_F32)
    inv = np.where(sa != 0, _F32(1) / np.where(sa != 0, sa, 1), 0).astype(_F32)
    qa = np.clip(np.rint(ab * inv[..., None]), -127, 127).astype(np.int64)
    isum = np.einsum("mkb,nkb->mnk", qa, q - z.astype(np.int64)[..., None])
    return (isum * (sa[:, None, :].astype(np.float64) * s[None].astype(np.float64))).sum(-1)


@pytest.mark.parametrize("same_zp", [False, True])
@pytest.mark.parametrize("m,k,n,block", [(1, 100, 45, 32), (2, 200, 17, 128), (3, 512, 64, 64),
                                         (4, 1000, 33, 32)])
def test_matmul_nbits_level4_integer_exact(m, k, n, block, same_zp):
    """The integer decoding kernel (quant/nbits_q8.py: vpmaddubsw over the codes) against
    the exact integer formula: ragged last blocks, column counts that are not a multiple of
    the four a call, zero points of every block different or all one value (11: the kernel
    then reads no scale * zero point array)."""
    from onnxrt.providers.cpu.quant import nbits, nbits_q8

    if nbits_q8.kernels() is None:
        pytest.skip("no AVX2 on this CPU: the float path of accuracy_level 4 runs")
    kb = -(-k // block)
    codes = _q((n, kb, block // 2), np.uint8)
    s = (RNG.random((n, kb)) * 0.1 + 0.01).astype(_F32)
    z = np.full((n, kb), 11, _F32) if same_zp else RNG.integers(0, 16, (n, kb)).astype(_F32)
    a = RNG.standard_normal((m, k)).astype(_F32)
    a[0, :block] = 0                        # a block of zeros: scale 0
    bias = RNG.standard_normal(n).astype(_F32)
    w = nbits.NBitsWeight(codes, s, z, None, k, n, 4, block)
    y = w.matmul(nbits.kernels(), a, bias, True)
    ref = _level4_ref(a, codes, s, z, block) + bias
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


@pytest.mark.parametrize("m", [1, 4])
def test_matmul_nbits_level4_decode_rows_vs_onnxruntime(m):
    """Decoding rows at accuracy_level 4 on a wider product (K 1024, N 70: the integer
    kernel's four-column calls and remainder): onnxruntime's integer compute within float
    rounding, far closer than the float product is."""
    ref, got, err_ref = _level4_vs_onnxruntime(m, 1024, 70, 32)
    assert err_ref > 1e-2
    assert np.abs(got[0] - ref[0]).max() <= 0.01 * err_ref


def test_matmul_nbits_level4_decode_takes_integer_kernel(monkeypatch):
    """A decoding row at accuracy_level 4 runs the integer kernel (not A scaled back to
    float and the float product), and its answer is that kernel's."""
    from onnxrt.providers.cpu.quant import nbits, nbits_q8

    real = nbits_q8.kernels()
    if real is None:
        pytest.skip("no AVX2 on this CPU: the float path of accuracy_level 4 runs")
    calls = []

    def spy(*args):
        calls.append(args[-2:])
        return real["gemv"](*args)

    monkeypatch.setattr(nbits_q8, "kernels", lambda: {"prep": real["prep"], "gemv": spy})
    k, n, block = 256, 12, 32
    codes = _q((n, k // block, 16), np.uint8)
    s = (RNG.random((n, k // block)) * 0.1 + 0.01).astype(_F32)
    z = np.full((n, k // block), 8, _F32)
    a = RNG.standard_normal((1, k)).astype(_F32)
    w = nbits.NBitsWeight(codes, s, z, None, k, n, 4, block)
    calls.clear()
    y = w.matmul(nbits.kernels(), a, None, True)
    assert calls == [(0, n)]
    np.testing.assert_allclose(y, _level4_ref(a, codes, s, z, block), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("level4", [False, True])
def test_matmul_nbits_decode_rows_split_over_threads(monkeypatch, level4):
    """Decoding rows with their columns split over two threads (the split taken here from
    any size; the sessions take it only on products past _GEMV_PAR_MIN codes): the same
    answer as the formula, every column written once (N odd, K ragged against the block)."""
    from onnxrt.framework.parallel import ThreadPool
    from onnxrt.providers.cpu.quant import nbits

    if nbits.kernels() is None:
        pytest.skip("numba disabled or missing: MatMulNBits keeps its NumPy path")
    monkeypatch.setattr(nbits, "_GEMV_PAR_MIN", 0)
    k, n, block = 200, 37, 32
    kb = -(-k // block)
    codes = _q((n, kb, block // 2), np.uint8)
    s = (RNG.random((n, kb)) * 0.1 + 0.01).astype(_F32)
    z = RNG.integers(0, 16, (n, kb)).astype(_F32)
    a = RNG.standard_normal((2, k)).astype(_F32)
    w = nbits.NBitsWeight(codes, s, z, None, k, n, 4, block)
    pool = ThreadPool(2)
    try:
        y = w.matmul(nbits.kernels(), a, None, level4, pool)
    finally:
        pool.close()
    if level4:
        ref = _level4_ref(a, codes, s, z, block)
    else:
        q = np.stack([codes & 15, codes >> 4], -1).reshape(n, kb * block)[:, :k]
        wf = (q.astype(np.float64) - np.repeat(z, block, 1)[:, :k]) * \
            np.repeat(s, block, 1)[:, :k]
        ref = a.astype(np.float64) @ wf.T
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
