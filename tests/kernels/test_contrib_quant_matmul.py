"""com.microsoft quantized matrix products (MatMulInteger16, MatMulIntegerToFloat,
DynamicQuantizeMatMul, QGemm, MatMulNBits, MatMulBnb4), GatherBlockQuantized and the
com.microsoft Quantize/DequantizeLinear and QLinearConv against onnxruntime, and against the
exact integer formula where onnxruntime's u8s8 kernel saturates on CPUs without VNNI."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from kernels.contrib_oracle import assert_close, assert_q_close, both, ms_model, run_ours

RNG = np.random.default_rng(21)


def _q(shape, dt, lo=None, hi=None):
    info = np.iinfo(dt)
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    return RNG.integers(lo, hi + 1, size=shape).astype(dt)


def _f(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def _b_range(adt, bdt):
    # u8s8 without VNNI: onnxruntime adds product pairs in saturating int16; operands whose
    # pair sums stay below 2^15 compare exactly (full range: test_u8s8_full_range_exact)
    if adt == np.uint8 and bdt == np.int8:
        return -63, 63
    return None, None


def test_matmul_integer16():
    a, b = _q((2, 3, 40), np.int16), _q((40, 5), np.int16)
    assert_close(*both("MatMulInteger16", [("a", a), ("b", b)]))


@pytest.mark.parametrize("adt,bdt", [(np.uint8, np.int8), (np.uint8, np.uint8),
                                     (np.int8, np.int8)])
@pytest.mark.parametrize("per_col", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_matmul_integer_to_float(adt, bdt, per_col, with_bias):
    lo, hi = _b_range(adt, bdt)
    a, b = _q((2, 4, 32), adt), _q((32, 6), bdt, lo, hi)
    n = 6 if per_col else 1
    bs = (RNG.random(n) * 0.05 + 0.01).astype(np.float32)
    bz = _q((n,), bdt, -3 if bdt == np.int8 else 100, 3 if bdt == np.int8 else 140)
    ins = [("a", a), ("b", b), ("as", np.array(0.02, np.float32)),
           ("bs", bs if per_col else bs.reshape(())), ("az", np.array(7, adt)),
           ("bz", bz if per_col else bz.reshape(())),
           ("bias", _f(6) if with_bias else None)]
    assert_close(*both("MatMulIntegerToFloat", ins, consts=("as", "bs", "az", "bz")),
                 rtol=1e-6, atol=1e-5)


def test_u8s8_full_range_exact():
    a, b = _q((3, 64), np.uint8), _q((64, 4), np.int8)
    ins = [("a", a), ("b", b), ("as", np.array(0.5, np.float32)),
           ("bs", np.array(0.25, np.float32)), ("az", np.array(0, np.uint8)),
           ("bz", np.array(0, np.int8))]
    m = ms_model("MatMulIntegerToFloat", ins)
    got = run_ours(m, {n: v for n, v in ins})[0]
    exact = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float32) * np.float32(0.125)
    np.testing.assert_array_equal(got, exact)


@pytest.mark.parametrize("bdt", [np.int8, np.uint8])
@pytest.mark.parametrize("per_col", [False, True])
def test_dynamic_quantize_matmul(bdt, per_col):
    lo, hi = _b_range(np.uint8, bdt)
    a, b = _f(3, 5, 24), _q((24, 7), bdt, lo, hi)
    n = 7 if per_col else 1
    bs = (RNG.random(n) * 0.05 + 0.01).astype(np.float32)
    bz = _q((n,), bdt, 0, 3)
    ins = [("a", a), ("b", b), ("bs", bs if per_col else bs.reshape(())),
           ("bz", bz if per_col else bz.reshape(())), ("bias", _f(7))]
    assert_close(*both("DynamicQuantizeMatMul", ins, consts=("b", "bs", "bz")),
                 rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("adt,bdt", [(np.uint8, np.int8), (np.uint8, np.uint8),
                                     (np.int8, np.int8)])
@pytest.mark.parametrize("out", ["float", "quantized"])
@pytest.mark.parametrize("trans", [(0, 0), (1, 1)])
def test_qgemm(adt, bdt, out, trans):
    lo, hi = _b_range(adt, bdt)
    m, k, n = 4, 20, 6
    a = _q((k, m) if trans[0] else (m, k), adt)
    b = _q((n, k) if trans[1] else (k, n), bdt, lo, hi)
    bs = (RNG.random(n) * 0.02 + 0.01).astype(np.float32)
    ins = [("a", a), ("as", np.array(0.03, np.float32)), ("az", np.array(3, adt)),
           ("b", b), ("bs", bs), ("bz", _q((n,), bdt, 0, 2)),
           ("c", _q((n,), np.int32, -500, 500))]
    if out != "float":
        # onnxruntime registers a quantized output of A's type only
        ins += [("ys", np.array(0.4, np.float32)), ("yz", np.array(5, adt))]
    ref, got = both("QGemm", ins, consts=[n for n, _ in ins if n not in ("a",)],
                    alpha=0.7, transA=trans[0], transB=trans[1])
    if out == "float":
        assert_close(ref, got, rtol=1e-5, atol=1e-4)
    else:
        assert_q_close(ref[0], got[0], frac=0.03)


def _nbits_inputs(k, n, bits, block, zp):
    kb = -(-k // block)
    blob = block * bits // 8
    b = _q((n, kb, blob), np.uint8)
    scales = (RNG.random((n, kb)) * 0.1 + 0.01).astype(np.float32)
    if zp == "packed":
        z = _q((n, -(-kb * bits // 8)), np.uint8)
    elif zp == "float":
        z = (RNG.random((n, kb)) * (1 << bits)).astype(np.float32)
    else:
        z = None
    return b, scales, z


@pytest.mark.parametrize("bits,block,k,zp", [
    (4, 32, 64, "packed"), (4, 16, 40, None), (4, 32, 96, "float"), (8, 32, 64, "packed"),
    (8, 64, 100, None), (2, 16, 48, "packed"), (4, 128, 128, "packed")])
@pytest.mark.parametrize("const", [True, False])
def test_matmul_nbits(bits, block, k, zp, const):
    n = 10
    b, s, z = _nbits_inputs(k, n, bits, block, zp)
    ins = [("a", _f(2, 3, k)), ("b", b), ("s", s), ("z", z), ("g", None), ("bias", _f(n))]
    consts = ("b", "s", "z") if const else ()
    assert_close(*both("MatMulNBits", ins, consts=consts, K=k, N=n, bits=bits,
                       block_size=block), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("zp", [None, "float"])
def test_matmul_nbits_g_idx(zp):
    # onnxruntime ignores packed uint8 zero points when g_idx is given (it keeps 8): only
    # the cases it computes as specified are compared
    k, n, block = 64, 6, 16
    b, s, z = _nbits_inputs(k, n, 4, block, zp)
    g = RNG.permutation(np.arange(k) // block).astype(np.int32)
    ins = [("a", _f(3, k)), ("b", b), ("s", s), ("z", z), ("g", g)]
    assert_close(*both("MatMulNBits", ins, consts=("b", "s", "z", "g"), K=k, N=n, bits=4,
                       block_size=block), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bits", [4, 8])
def test_matmul_nbits_accuracy_level4(bits):
    k, n = 64, 8
    b, s, z = _nbits_inputs(k, n, bits, 32, "packed")
    ins = [("a", _f(4, k)), ("b", b), ("s", s), ("z", z)]
    ref, got = both("MatMulNBits", ins, consts=("b", "s", "z"), K=k, N=n, bits=bits,
                    block_size=32, accuracy_level=4)
    exact = both("MatMulNBits", ins, consts=("b", "s", "z"), K=k, N=n, bits=bits,
                 block_size=32)[1]
    # int8 activations: both runtimes move away from the float32 product by about the same
    err_ref = np.abs(ref[0] - exact[0]).max()
    assert np.abs(got[0] - ref[0]).max() <= 0.25 * err_ref + 1e-4


@pytest.mark.parametrize("quant_type", [0, 1])
@pytest.mark.parametrize("k,n,block", [(32, 8, 16), (40, 6, 64)])
def test_matmul_bnb4(quant_type, k, n, block):
    numel = k * n
    b = _q(((numel + 1) // 2,), np.uint8)
    absmax = (RNG.random(-(-numel // block)) + 0.5).astype(np.float32)
    ins = [("a", _f(2, 3, k)), ("b", b), ("am", absmax)]
    assert_close(*both("MatMulBnb4", ins, consts=("b", "am"), K=k, N=n, block_size=block,
                       quant_type=quant_type), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", ["u8_8", "u8_4", "int4", "uint4"])
@pytest.mark.parametrize("with_zp", [False, True])
@pytest.mark.parametrize("idt", [np.int64, np.int32])
def test_gather_block_quantized(case, with_zp, idt):
    blk = 16
    if case.startswith("u8"):
        bits = 8 if case == "u8_8" else 4
        cols = 48
        data = _q((5, cols if bits == 8 else cols // 2), np.uint8)
        s = (RNG.random((5, cols // blk)) + 0.1).astype(np.float32)
        z = _q((5, 3 if bits == 8 else 2), np.uint8) if with_zp else None
        attrs = {"bits": bits, "block_size": blk, "gather_axis": 0, "quantize_axis": 1}
        idx = np.array([[0, 4], [-1, 2]], idt)
    else:
        dt = ml_dtypes.int4 if case == "int4" else ml_dtypes.uint4
        lo, hi = (-8, 7) if case == "int4" else (0, 15)
        data = RNG.integers(lo, hi + 1, size=(3, 32, 6)).astype(dt)
        s = (RNG.random((3, 2, 6)) + 0.1).astype(np.float32)
        z = RNG.integers(lo, hi + 1, size=(3, 2, 6)).astype(dt) if with_zp else None
        attrs = {"bits": 4, "block_size": blk, "gather_axis": 0, "quantize_axis": 1}
        idx = np.array([2, 0, -2], idt)
    ins = [("d", data), ("i", idx), ("s", s), ("z", z)]
    assert_close(*both("GatherBlockQuantized", ins, consts=("d", "s", "z"), **attrs))


@pytest.mark.parametrize("dt", [np.uint8, np.int8, np.uint16, np.int16])
@pytest.mark.parametrize("axis", [None, 1])
def test_quantize_dequantize_ms(dt, axis):
    x = _f(2, 3, 4) * 20
    if axis is None:
        s, z = np.array(0.3, np.float32), np.array(3, dt)
        attrs = {}
    else:
        s, z = np.array([0.1, 0.2, 0.3], np.float32), np.array([1, 2, 3], dt)
        attrs = {"axis": axis}
    ref, got = both("QuantizeLinear", [("x", x), ("s", s), ("z", z)], consts=("s", "z"),
                    **attrs)
    assert_close(ref, got)
    assert_close(*both("DequantizeLinear", [("x", ref[0]), ("s", s), ("z", z)],
                       consts=("s", "z"), **attrs))


@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("xdt,wdt", [(np.uint8, np.int8), (np.int8, np.int8)])
def test_qlinear_conv_ms(channels_last, xdt, wdt):
    x = _q((1, 3, 7, 6), xdt)
    if channels_last:
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    w = _q((4, 3, 3, 3), wdt, -40, 40)      # no int16 pair saturation on any CPU
    ins = [("x", x), ("xs", np.array(0.05, np.float32)), ("xz", np.array(3, xdt)),
           ("w", w), ("ws", np.array([0.01, 0.02, 0.03, 0.04], np.float32)),
           ("wz", np.zeros(4, wdt)), ("ys", np.array(0.5, np.float32)),
           ("yz", np.array(4, xdt)), ("b", _q((4,), np.int32, -100, 100))]
    ref, got = both("QLinearConv", ins, consts=[n for n, _ in ins if n != "x"],
                    channels_last=channels_last, pads=[1, 1, 1, 1])
    assert_q_close(ref[0], got[0], frac=0.02)


def test_matmul_nbits_g_idx_packed_zero_points():
    """onnxruntime drops packed uint8 zero points when g_idx is given (its result equals the
    default zero point's): onnxrt applies them, checked against the dequantization formula."""
    k, n, block = 64, 6, 16
    b, s, z = _nbits_inputs(k, n, 4, block, "packed")
    g = RNG.permutation(np.arange(k) // block).astype(np.int32)
    a = _f(3, k)
    ins = [("a", a), ("b", b), ("s", s), ("z", z), ("g", g)]
    ref, got = both("MatMulNBits", ins, consts=("b", "s", "z", "g"), K=k, N=n, bits=4,
                    block_size=block)
    ref_default = both("MatMulNBits", ins[:3] + [("z", None), ("g", g)],
                       consts=("b", "s", "g"), K=k, N=n, bits=4, block_size=block)[0]
    np.testing.assert_allclose(ref[0], ref_default[0])         # what onnxruntime does
    q = np.stack([b & 15, b >> 4], axis=-1).reshape(n, -1)[:, :k].astype(np.float32)
    zz = np.stack([z & 15, z >> 4], axis=-1).reshape(n, -1)[:, :k // block].astype(np.float32)
    w = (q - zz[:, g]) * s[:, g]
    np.testing.assert_allclose(got[0], a @ w.T, rtol=1e-4, atol=1e-4)
