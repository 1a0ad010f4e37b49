"""com.microsoft QLinear* element-wise, pooling and concatenation ops against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.contrib_oracle import assert_close, assert_q_close, both, ms_model, run_ours

RNG = np.random.default_rng(12)
Q8 = [np.uint8, np.int8]


def _q(shape, dt):
    info = np.iinfo(dt)
    return RNG.integers(info.min, info.max + 1, size=shape).astype(dt)


def _s(v):
    return np.array(v, np.float32)


def _z(v, dt):
    return np.array(v, dt)


@pytest.mark.parametrize("dt", Q8)
@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("shapes", [((2, 3, 8), (2, 3, 8)), ((2, 3, 8), (8,)),
                                    ((4, 1), (1, 5)),
                                    ((2, 8, 9, 11), (2, 8, 9, 11)),    # compiled
                                    ((3, 16, 40), (40,)), ((1,), (3, 16, 40)),
                                    ((6, 1, 1), (6, 5, 7)), ((2, 1, 40), (2, 5, 40))])
def test_qlinear_binary(dt, op, shapes):
    zp = (3, 130, 120) if dt == np.uint8 else (-5, 2, -1)
    scales = (0.05, 0.02, 0.08) if op == "QLinearAdd" else (0.05, 0.04, 0.3)
    ins = [("a", _q(shapes[0], dt)), ("as", _s(scales[0])), ("az", _z(zp[0], dt)),
           ("b", _q(shapes[1], dt)), ("bs", _s(scales[1])), ("bz", _z(zp[1], dt)),
           ("cs", _s(scales[2])), ("cz", _z(zp[2], dt))]
    ref, got = both(op, ins, consts=("as", "az", "bs", "bz", "cs", "cz"))
    assert_q_close(ref[0], got[0])


@pytest.mark.parametrize("dt", Q8)
def test_qlinear_add_compiled_matches_numpy_formula(dt):
    """The compiled same-shape QLinearAdd against the NumPy formula it replaces, bit for
    bit: every pair of codes, scales whose sums fall on ties and past both ends."""
    from onnxrt.providers.cpu.contrib import qlinear
    from onnxrt.providers.cpu.quant import elementwise
    from onnxrt.providers.cpu.quant._common import int_range

    codes = np.arange(256, dtype=np.uint8).view(dt)
    a, b = np.meshgrid(codes, codes)
    lo, hi = int_range(dt)
    for sa, sb, sc, za, zb, zc in ((0.5, 0.25, 0.5, 3, -2, 1), (0.05, 0.02, 0.08, 7, 9, -4),
                                   (1.0, 1.0, 0.5, 0, 0, 0)):
        za, zb, zc = (v + (128 if dt == np.uint8 else 0) for v in (za, zb, zc))
        ra, rb = np.float32(sa) / np.float32(sc), np.float32(sb) / np.float32(sc)
        fixed = np.float32(zc) - (ra * np.float32(za) + rb * np.float32(zb))
        got = elementwise.add(a, b, ra, rb, fixed, lo, hi)
        assert got is not None, "the compiled kernel did not run"
        ref = np.clip(np.rint(qlinear._add(a, za, np.float32(sa), b, zb, np.float32(sb),
                                           np.float32(sc), zc)), lo, hi).astype(dt)
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("dt", Q8)
@pytest.mark.parametrize("sa,sb", [((3, 16, 40), (40,)), ((3, 16, 40), (3, 16, 40)),
                                   ((3, 16, 40), (1,)), ((), (3, 16, 40)),
                                   ((6, 1, 1), (6, 5, 7)), ((16, 40), (3, 16, 40)),
                                   ((3, 1), (1, 40))])
def test_qlinear_binary_compiled_broadcast(dt, sa, sb):
    """The compiled QLinearAdd and QLinearMul over broadcast operands (a bias over the last
    axes, a scalar, one value per row) against the NumPy formulas they replace, bit for
    bit, with values past both ends of the output range."""
    from onnxrt.providers.cpu.contrib import qlinear
    from onnxrt.providers.cpu.quant import elementwise
    from onnxrt.providers.cpu.quant._common import int_range

    f = np.float32
    a, b = _q(sa, dt), _q(sb, dt)
    lo, hi = int_range(dt)
    off = 128 if dt == np.uint8 else 0
    for sa_, sb_, sc, za, zb, zc in ((0.05, 0.02, 0.08, 7, 9, -4), (0.5, 0.25, 0.5, 3, -2, 1),
                                     (0.04, 0.03, 0.002, -1, 4, 2)):
        za, zb, zc = za + off, zb + off, zc + off
        ra, rb = f(sa_) / f(sc), f(sb_) / f(sc)
        got = elementwise.add(a, b, ra, rb, f(zc) - (ra * f(za) + rb * f(zb)), lo, hi)
        assert got is not None, "the compiled kernel did not run"
        ref = np.clip(np.rint(qlinear._add(a, za, f(sa_), b, zb, f(sb_), f(sc), zc)), lo, hi)
        np.testing.assert_array_equal(got, ref.astype(dt))
        got = elementwise.mul(a, b, za, zb, f(sa_) * f(sb_) / f(sc), f(zc), lo, hi)
        assert got is not None, "the compiled kernel did not run"
        ref = np.clip(np.rint(qlinear._mul(a, za, f(sa_), b, zb, f(sb_), f(sc), zc)), lo, hi)
        np.testing.assert_array_equal(got, ref.astype(dt))


@pytest.mark.parametrize("dt", Q8)
@pytest.mark.parametrize("op,attrs", [("QLinearLeakyRelu", {"alpha": 0.15}),
                                      ("QLinearLeakyRelu", {}), ("QLinearSigmoid", {})])
@pytest.mark.parametrize("const", [True, False])
def test_qlinear_lookup_ops(dt, op, attrs, const):
    x = np.arange(256, dtype=np.uint8).view(dt).reshape(4, 64)   # every code
    zx, zy = (128, 0) if dt == np.uint8 else (0, -128)
    ins = [("x", x), ("xs", _s(0.06)), ("xz", _z(zx, dt)), ("ys", _s(1 / 256 if op ==
           "QLinearSigmoid" else 0.05)), ("yz", _z(zy if op == "QLinearSigmoid" else zx, dt))]
    consts = ("xs", "xz", "ys", "yz") if const else ()
    ref, got = both(op, ins, consts=consts, **attrs)
    assert_close(ref, got)       # the same table: exact


@pytest.mark.parametrize("dt", Q8)
@pytest.mark.parametrize("opset,axis,shape", [(13, -1, (3, 4, 10)), (13, 1, (3, 4, 10)),
                                              (12, 1, (3, 4, 10)), (11, None, (2, 3, 5)),
                                              (13, None, (5, 300))])
def test_qlinear_softmax(dt, opset, axis, shape):
    x = _q(shape, dt)
    attrs = {"opset": opset} if axis is None else {"opset": opset, "axis": axis}
    zy = 0 if dt == np.uint8 else -128
    # int8: onnxruntime's kernel wraps a probability near 1.0 (code 128) to -128 instead of
    # saturating; a smaller input scale keeps every probability below 255/256
    xs = 0.07 if dt == np.uint8 else 0.02
    ins = [("x", x), ("xs", _s(xs)), ("xz", _z(3, dt)), ("ys", _s(1 / 256)),
           ("yz", _z(zy, dt))]
    ref, got = both("QLinearSoftmax", ins, consts=("xs", "xz", "ys", "yz"), **attrs)
    if dt == np.int8:
        assert (got[0] != 127).all()
    assert_q_close(ref[0], got[0], frac=0.01)


@pytest.mark.parametrize("dt", Q8)
def test_qlinear_softmax_compiled_matches_numpy_formula(dt):
    """The compiled QLinearSoftmax rows against the NumPy steps they replace, bit for bit:
    rows holding every code, a constant row, input scales from tiny to large (exp table
    entries underflowing to 0), output scales whose results saturate."""
    from onnxrt.providers.cpu.contrib import qlinear
    from onnxrt.providers.cpu.quant import softmax
    from onnxrt.providers.cpu.quant._common import int_range

    codes = np.arange(256, dtype=np.uint8).view(dt)
    x = np.concatenate([np.stack([np.roll(codes, k) for k in range(0, 256, 37)]),
                        np.full((1, 256), codes[200]), _q((20, 256), dt)])
    lo, hi = int_range(dt)
    signed = dt == np.int8
    for xs in (0.001, 0.07, 0.5, 3.0):
        for ys, zp in ((1 / 256, lo), (1 / 64, 0 if dt == np.uint8 else -20)):
            inv = np.float32(np.floor(np.float32(1) / np.float32(ys)))
            table = qlinear._softmax_table(xs, x.shape[1], signed)
            got = softmax.rows(x, table, inv, zp, lo, hi)
            assert got is not None, "the compiled kernel did not run"
            np.testing.assert_array_equal(
                got, qlinear._softmax_rows_np(x, table, inv, zp, signed))


def test_qlinear_softmax_dynamic_scale():
    x = _q((4, 16), np.uint8)
    ins = [("x", x), ("xs", _s(0.1)), ("xz", _z(0, np.uint8)), ("ys", _s(1 / 256)),
           ("yz", _z(0, np.uint8))]
    ref, got = both("QLinearSoftmax", ins, opset=13)
    assert_q_close(ref[0], got[0], frac=0.01)


@pytest.mark.parametrize("dt", Q8)
def test_qlinear_where(dt):
    zp = (10, 20, 30) if dt == np.uint8 else (-10, 0, 5)
    cond = RNG.random((3, 1, 6)) > 0.5
    ins = [("c", cond), ("x", _q((3, 4, 6), dt)), ("xs", _s(0.1)), ("xz", _z(zp[0], dt)),
           ("y", _q((4, 1), dt)), ("ys", _s(0.2)), ("yz", _z(zp[1], dt)),
           ("zs", _s(0.15)), ("zz", _z(zp[2], dt))]
    ref, got = both("QLinearWhere", ins, consts=("xs", "xz", "ys", "yz", "zs", "zz"))
    assert_close(ref, got)


@pytest.mark.parametrize("dt", Q8)
@pytest.mark.parametrize("const", [True, False])
def test_qlinear_concat(dt, const):
    ins = [("ys", _s(0.1)), ("yz", _z(7, dt)),
           ("a", _q((2, 3, 4), dt)), ("as", _s(0.1)), ("az", _z(7, dt)),      # same: a copy
           ("b", _q((2, 5, 4), dt)), ("bs", _s(0.23)), ("bz", _z(-3 if dt == np.int8 else 3,
                                                                  dt))]
    consts = ("ys", "yz", "as", "az", "bs", "bz") if const else ()
    ref, got = both("QLinearConcat", ins, consts=consts, axis=1)
    assert_close(ref, got)


@pytest.mark.parametrize("dt", Q8)
@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_global_average_pool(dt, channels_last):
    x = _q((2, 5, 7, 6) if not channels_last else (2, 7, 6, 5), dt)
    ins = [("x", x), ("xs", _s(0.05)), ("xz", _z(4, dt)), ("ys", _s(0.03)),
           ("yz", _z(-2 if dt == np.int8 else 9, dt))]
    ref, got = both("QLinearGlobalAveragePool", ins, consts=("xs", "xz", "ys", "yz"),
                    channels_last=channels_last)
    assert_q_close(ref[0], got[0], frac=0.05)


@pytest.mark.parametrize("dt", Q8)
@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1},
    {"kernel_shape": [2, 3], "ceil_mode": 1, "strides": [2, 2]},
    {"kernel_shape": [3, 3], "channels_last": 1, "auto_pad": "SAME_UPPER"},
    {"kernel_shape": [3], "strides": [2]}])
def test_qlinear_average_pool(dt, attrs):
    nd = len(attrs["kernel_shape"])
    shape = (2, 3, 9, 8)[:2 + nd]
    if attrs.get("channels_last"):
        shape = (2, 9, 8, 3)
    ins = [("x", _q(shape, dt)), ("xs", _s(0.05)), ("xz", _z(4, dt)), ("ys", _s(0.04)),
           ("yz", _z(-1 if dt == np.int8 else 6, dt))]
    ref, got = both("QLinearAveragePool", ins, consts=("xs", "xz", "ys", "yz"), **attrs)
    assert_q_close(ref[0], got[0], frac=0.05)


@pytest.mark.parametrize("dt", Q8)
@pytest.mark.parametrize("attrs", [{"kernel_shape": [3, 3], "strides": [2, 2],
                                    "pads": [1, 1, 1, 1]},
                                   {"kernel_shape": [2, 2], "dilations": [2, 2]},
                                   {"kernel_shape": [3], "auto_pad": "SAME_UPPER"}])
def test_nhwc_max_pool(dt, attrs):
    shape = (2, 9, 8, 5) if len(attrs["kernel_shape"]) == 2 else (2, 9, 5)
    ref, got = both("NhwcMaxPool", [("x", _q(shape, dt))], **attrs)
    assert_close(ref, got)


def test_bad_zero_point_type_names_the_op():
    m = ms_model("QLinearSigmoid", [("x", _q((4,), np.uint8)), ("xs", _s(0.1)),
                                    ("xz", _z(0, np.int8)), ("ys", _s(0.1)),
                                    ("yz", _z(0, np.uint8))])
    with pytest.raises(Exception, match="QLinearSigmoid"):
        run_ours(m, {"x": _q((4,), np.uint8), "xs": _s(0.1), "xz": _z(0, np.int8),
                     "ys": _s(0.1), "yz": _z(0, np.uint8)})
