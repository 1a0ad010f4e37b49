"""Cast and CastLike against onnxruntime, onnx.reference (float8 / e8m0 / 4-bit types, which
onnxruntime's Python API cannot return) and the spec's tables."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxrt

ort = pytest.importorskip("onnxruntime")


def _model(x, to, attrs, opset, like=None):
    elem = TP.STRING if x.dtype == object else helper.np_dtype_to_tensor_dtype(x.dtype)
    ins = [helper.make_tensor_value_info("x", elem, list(x.shape))]
    if like is None:
        node = helper.make_node("Cast", ["x"], ["y"], to=to, **attrs)
    else:
        lt = TP.STRING if like.dtype == object else helper.np_dtype_to_tensor_dtype(like.dtype)
        ins.append(helper.make_tensor_value_info("like", lt, list(like.shape)))
        node = helper.make_node("CastLike", ["x", "like"], ["y"], **attrs)
    out_t = to if isinstance(to, int) else 0
    g = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("y", out_t, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def ours(x, to, attrs=None, opset=21, like=None):
    m = _model(x, to, attrs or {}, opset, like)
    feeds = {"x": x} if like is None else {"x": x, "like": like}
    return onnxrt.InferenceSession(m.SerializeToString()).run(None, feeds)[0]


def theirs(x, to, attrs=None, opset=21):
    m = _model(x, to, attrs or {}, opset)
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x})[0]


def reference(x, to, attrs=None, opset=24):
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(_model(x, to, attrs or {}, opset)).run(None, {"x": x})[0]


def same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    if a.dtype == object:
        assert a.tolist() == b.tolist()
    else:
        np.testing.assert_array_equal(a.astype(np.float64) if a.dtype.kind == "V" else a,
                                      b.astype(np.float64) if b.dtype.kind == "V" else b)


FLOATS = np.array([0.1, 1 / 3, 1e10, 1e-10, np.pi, -0.0, np.nan, np.inf, -np.inf, 100.0, 1.5e-7,
                   123456789.0, 16777216.0, 1e15, 1e-5, -2.5])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_float_to_string(dtype):
    with np.errstate(over="ignore"):
        x = FLOATS.astype(dtype).reshape(4, 4)
    same(ours(x, TP.STRING), theirs(x, TP.STRING))


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64, np.uint64, np.bool_])
def test_int_to_string(dtype):
    x = np.array([0, 1, 7, 100], dtype=dtype)
    if dtype is np.int64:
        x = np.array([2**63 - 1, -2**63, -5, 0], dtype=dtype)
    same(ours(x, TP.STRING), theirs(x, TP.STRING))


STRS = np.array(["1.5", "INF", "-inf", "+INF", "nan", "NaN", "1e-5", "1E8", " 3", "-0",
                 "0x10", "255"], dtype=object)


@pytest.mark.parametrize("to", [TP.FLOAT, TP.DOUBLE, TP.FLOAT16])
def test_string_to_float(to):
    same(ours(STRS, to), theirs(STRS, to))


@pytest.mark.parametrize("to", [TP.INT8, TP.INT32, TP.INT64, TP.UINT8, TP.UINT64])
def test_string_to_int(to):
    x = np.array(["12", "-3", "100", "+5", "2000", " 7", "18446744073709551615"], dtype=object)
    if to in (TP.UINT8, TP.UINT64):
        x = np.array(["12", "3", "100", "+5", "255", "0", "18446744073709551615"], dtype=object)
    if to != TP.UINT64:
        x = x[:-1]
    same(ours(x, to), theirs(x, to))


def test_string_to_string_and_bfloat16():
    x = np.array(["a", "bc"], dtype=object)
    same(ours(x, TP.STRING), x)
    got = ours(np.array(["1.5", "-INF"], dtype=object), TP.BFLOAT16)
    assert got.dtype == ml_dtypes.bfloat16 and got.astype(np.float32).tolist() == [1.5, -np.inf]


def test_bad_string_raises():
    with pytest.raises(Exception, match="parse"):
        ours(np.array(["abc"], dtype=object), TP.FLOAT)


@pytest.mark.parametrize("to", [TP.INT8, TP.UINT8, TP.INT16, TP.INT32, TP.INT64, TP.UINT32,
                                TP.BOOL, TP.FLOAT16, TP.DOUBLE])
@pytest.mark.parametrize("src", [np.float32, np.float64, np.float16])
def test_float_to_numeric(src, to):
    x = np.array([1.7, -1.7, 2.5, -2.5, 0.0, 100.9, -0.4, 120.0], dtype=src)
    if to in (TP.UINT8, TP.UINT32):
        x = np.abs(x)
    same(ours(x, to), theirs(x, to))


@pytest.mark.parametrize("to", [TP.INT8, TP.UINT8, TP.INT16, TP.UINT16, TP.INT32, TP.BOOL,
                                TP.FLOAT, TP.FLOAT16, TP.DOUBLE])
@pytest.mark.parametrize("src", [np.int64, np.int32, np.uint8, np.bool_])
def test_int_to_numeric(src, to):
    x = np.array([0, 1, 200, 300, -56, 70000, -1, 2**31 - 1], dtype=np.int64).astype(src)
    same(ours(x, to), theirs(x, to))


def test_same_type_returns_input_and_v1_string_to():
    x = np.arange(4, dtype=np.float32)
    assert ours(x, TP.FLOAT) is not None
    got = ours(x, "INT32", opset=1)
    same(got, x.astype(np.int32))


F8 = [TP.FLOAT8E4M3FN, TP.FLOAT8E4M3FNUZ, TP.FLOAT8E5M2, TP.FLOAT8E5M2FNUZ]
BIG = np.array([0.0, -0.0, 0.3, -1.7, 1e6, -1e6, np.inf, -np.inf, np.nan, 448.5, 500.0,
                57344.0, 61440.0, 1e-9, 240.0, 0.0009765625])


@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("to", F8)
@pytest.mark.parametrize("src", [np.float32, np.float64, np.float16])
def test_float8(src, to, saturate):
    with np.errstate(over="ignore"):
        x = BIG.astype(src)
    got = ours(x, to, {"saturate": saturate})
    want = reference(x, to, {"saturate": saturate})
    assert got.dtype == want.dtype
    g, w = got.astype(np.float32), want.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    np.testing.assert_array_equal(g[~np.isnan(g)], w[~np.isnan(w)])


def _e8m0_roundtrip(x, attrs, session):
    n1 = helper.make_node("Cast", ["x"], ["e"], to=TP.FLOAT8E8M0, **attrs)
    n2 = helper.make_node("Cast", ["e"], ["y"], to=TP.FLOAT)
    g = helper.make_graph([n1, n2], "g", [helper.make_tensor_value_info("x", TP.FLOAT, None)],
                          [helper.make_tensor_value_info("y", TP.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 24)], ir_version=11)
    return session(m.SerializeToString()).run(None, {"x": x})[0]


@pytest.mark.parametrize("round_mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [0, 1])
def test_e8m0(round_mode, saturate):
    # onnxruntime follows the spec's table (the reference evaluator differs on inf and zero)
    x = np.array([0.0, -0.0, 0.124, 0.25, 0.5, 1.1, 1.5, 1.49, 3.0, 2.0**-127, 2.0**-130,
                  0.9 * 2.0**-127, 3 * 2.0**-128, 1e38, 1.7e38, 3.4e38, np.inf, -np.inf, np.nan,
                  6.0, -2.0, 2.0**127 * 1.4, 2.0**127], dtype=np.float32)
    attrs = {"saturate": saturate, "round_mode": round_mode}
    got = _e8m0_roundtrip(x, attrs, onnxrt.InferenceSession)
    want = _e8m0_roundtrip(
        x, attrs, lambda b: ort.InferenceSession(b, providers=["CPUExecutionProvider"]))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("to", [TP.INT4, TP.UINT4, TP.INT2, TP.UINT2, TP.FLOAT4E2M1])
def test_narrow_types(to):
    x = np.array([-9, -8, -3, -1, 0, 1, 2, 3, 7, 8, 15, 16, 33], dtype=np.int32)
    got = ours(x, to, opset=25)
    want = reference(x, to, opset=25)
    same(got, want)
    back = ours(got, TP.FLOAT, opset=25)
    same(back, got.astype(np.float32))


def test_castlike():
    x = np.array([1.5, -2.25, np.nan], dtype=np.float32)
    same(ours(x, None, like=np.zeros(1, np.float16), opset=21), x.astype(np.float16))
    got = ours(x, None, like=np.array([""], dtype=object), opset=21)
    assert got.tolist() == ["1.5", "-2.25", "NaN"]
    got = ours(np.array([1e6], np.float32), None, {"saturate": 0},
               like=np.zeros(1, ml_dtypes.float8_e4m3fn), opset=21)
    assert np.isnan(got.astype(np.float32)[0])
