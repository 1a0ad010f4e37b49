"""Element-wise, activation and softmax-family kernels: the cases the ONNX suite leaves out
(other dtypes, old opsets, 0-d inputs, fast paths), against onnxruntime or a NumPy formula."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import onnx
import pytest

import onnxrt
from models import single_node_model

ort = pytest.importorskip("onnxruntime")

BF16 = ml_dtypes.bfloat16
RNG = np.random.default_rng(0)


_model = single_node_model


def _feeds(inputs, const):
    return {f"in{i}": a for i, a in enumerate(inputs) if a is not None and i not in const}


def run(op, inputs, attrs=None, n_out=1, opset=21, const=()):
    m = _model(op, inputs, attrs or {}, n_out, opset, set(const))
    return onnxrt.InferenceSession(m.SerializeToString()).run(None, _feeds(inputs, set(const)))


def ort_run(op, inputs, attrs=None, n_out=1, opset=21, const=()):
    m = _model(op, inputs, attrs or {}, n_out, opset, set(const))
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, _feeds(inputs, set(const)))


def ref_run(op, inputs, attrs=None, n_out=1, opset=21, const=()):
    from onnx.reference import ReferenceEvaluator

    m = _model(op, inputs, attrs or {}, n_out, opset, set(const))
    return ReferenceEvaluator(m).run(None, _feeds(inputs, set(const)))


def oracle(op, inputs, attrs=None, n_out=1, opset=21, const=()):
    """onnxruntime; onnx.reference where onnxruntime has no kernel for the type."""
    try:
        return ort_run(op, inputs, attrs, n_out, opset, const)
    except Exception as e:
        if "NOT_IMPLEMENTED" not in str(e) and "Type Error" not in str(e):
            raise
    return [np.asarray(r) for r in ref_run(op, inputs, attrs, n_out, opset, const)]


def check(op, inputs, attrs=None, n_out=1, opset=21, const=(), rtol=1e-6, atol=1e-7):
    ours = run(op, inputs, attrs, n_out, opset, const)
    theirs = oracle(op, inputs, attrs, n_out, opset, const)
    for o, t in zip(ours, theirs):
        assert isinstance(o, np.ndarray)
        assert o.dtype == t.dtype and o.shape == t.shape, (o.dtype, t.dtype, o.shape, t.shape)
        if o.dtype == object or o.dtype.kind in "biu":
            np.testing.assert_array_equal(o, t)
        else:
            np.testing.assert_allclose(o.astype(np.float64), t.astype(np.float64),
                                       rtol=rtol, atol=atol)
    return ours


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# -- unary ---------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["Abs", "Neg", "Exp", "Sin", "Cos", "Tanh", "Sigmoid", "Floor",
                                "Ceil", "Sign", "Round", "Erf", "Relu", "Softsign", "Softplus"])
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16])
def test_unary_floats(op, dt):
    x = (f32(3, 5) * 3).astype(dt)
    x[0, 0] = 2.5   # a half: Round goes to even
    check(op, [x], rtol=1e-3 if dt == np.float16 else 1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["Abs", "Neg", "Sign", "Relu"])
@pytest.mark.parametrize("dt", [np.int8, np.int32, np.int64])
def test_unary_ints(op, dt):
    x = RNG.integers(-100, 100, (4, 6)).astype(dt)
    check(op, [x])


def test_unary_zero_rank_gives_arrays():
    for op in ["Exp", "Relu", "Sigmoid", "Not", "IsNaN", "Erf"]:
        x = np.array(True) if op == "Not" else np.array(0.5, np.float32)
        (y,) = run(op, [x])
        assert type(y) is np.ndarray and y.shape == ()


def test_unary_bfloat16():
    x = f32(4, 4)
    for op, fn in [("Exp", np.exp), ("Sqrt", lambda v: np.sqrt(np.abs(v))),
                   ("Tanh", np.tanh), ("Sigmoid", lambda v: 1 / (1 + np.exp(-v)))]:
        xin = np.abs(x) if op == "Sqrt" else x
        (y,) = run(op, [xin.astype(BF16)])
        assert y.dtype == BF16
        want = fn(xin.astype(BF16).astype(np.float32))
        np.testing.assert_allclose(y.astype(np.float32), want, rtol=1e-2)
    (y,) = run("Relu", [np.array([-1.5, -0.0, 0, 2.5, -np.inf, np.inf], BF16)])
    assert y.dtype == BF16 and y.astype(np.float32).tolist() == [0, 0, 0, 2.5, 0, np.inf]
    (y,) = run("IsNaN", [np.array([1, np.nan], BF16)])
    assert y.dtype == bool and y.tolist() == [False, True]


def test_erf_fallback_matches_math_erf():
    from onnxrt.providers.cpu import elementwise as ew

    x = np.linspace(-5, 5, 101)
    want = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(ew._erf_fallback(x), want, rtol=1e-15)
    np.testing.assert_allclose(ew.erf(x.astype(np.float32)), want, rtol=1e-6, atol=1e-7)
    big = (RNG.standard_normal((3, 50_000)) * 2).astype(np.float32)   # the chunked path
    want = np.vectorize(math.erf)(big.astype(np.float64))
    np.testing.assert_allclose(ew.erf(big.T), want.T, rtol=1e-6, atol=1e-7)


def test_isinf_flags():
    x = np.array([np.inf, -np.inf, 0, np.nan], np.float32)
    for dn, dp in [(1, 1), (0, 1), (1, 0), (0, 0)]:
        check("IsInf", [x], {"detect_negative": dn, "detect_positive": dp})
    (y,) = run("IsInf", [x.astype(BF16)], opset=20)
    assert y.tolist() == [True, True, False, False]


# -- binary --------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("dt", [np.int8, np.int32, np.int64, np.uint8, np.float16, np.float64])
def test_arith_dtypes(op, dt):
    a = RNG.integers(-120, 120, (3, 4)).astype(dt)
    b = RNG.integers(1, 9, (4,)).astype(dt)
    if np.dtype(dt).kind == "u":
        a = np.abs(a.astype(np.int64)).astype(dt)
    check(op, [a, b], rtol=1e-3)


def test_int_div_truncates_toward_zero():
    a = np.array([-7, 7, -7, 7, -1, 0], np.int32)
    b = np.array([2, -2, -2, 2, 3, -5], np.int32)
    (y,) = check("Div", [a, b])
    assert y.tolist() == [-3, -3, 3, 3, 0, 0]


def test_bfloat16_arith():
    a, b = f32(2, 3), f32(3)
    for op, fn in [("Add", np.add), ("Mul", np.multiply), ("Div", np.divide)]:
        (y,) = run(op, [a.astype(BF16), b.astype(BF16)])
        assert y.dtype == BF16
        want = fn(a.astype(BF16).astype(np.float32), b.astype(BF16).astype(np.float32))
        np.testing.assert_allclose(y.astype(np.float32), want, rtol=1e-2)


def test_legacy_broadcast_axis():
    a = f32(2, 3, 4, 5)
    b = f32(3, 4)
    (y,) = run("Add", [a, b], {"broadcast": 1, "axis": 1}, opset=6)
    np.testing.assert_array_equal(y, a + b[None, :, :, None])
    (y,) = run("Mul", [a, f32(5)[None]], {"broadcast": 1}, opset=6)   # suffix matching
    assert y.shape == a.shape
    (y,) = run("Sub", [a, a], opset=1)
    np.testing.assert_array_equal(y, np.zeros_like(a))
    ai = RNG.integers(0, 5, (2, 3)).astype(np.int32)
    (y,) = run("Equal", [ai, ai[:, :1].reshape(2)], {"broadcast": 1, "axis": 0}, opset=1)
    np.testing.assert_array_equal(y, ai == ai[:, :1])


@pytest.mark.parametrize("op", ["Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"])
@pytest.mark.parametrize("dt", [np.int8, np.uint16, np.int64, np.float16, np.float64])
def test_comparisons(op, dt):
    a = RNG.integers(0, 4, (3, 4)).astype(dt)
    b = RNG.integers(0, 4, (1, 4)).astype(dt)
    check(op, [a, b])


def test_equal_strings():
    a = np.array(["a", "bb", ""], dtype=object)
    b = np.array(["a", "b", ""], dtype=object)
    check("Equal", [a, b], opset=19)


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logical(op):
    a = RNG.integers(0, 2, (2, 3, 4)).astype(bool)
    b = RNG.integers(0, 2, (3, 1)).astype(bool)
    check(op, [a, b])


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dt", [np.int8, np.uint32, np.int64])
def test_bitwise(op, dt):
    a = RNG.integers(0, 100, (3, 4)).astype(dt)
    b = RNG.integers(0, 100, (4,)).astype(dt)
    check(op, [a, b])
    check("BitwiseNot", [a])


def test_bitshift_edge_widths():
    x = np.array([-8, 8, -1, 5], np.int16)
    y = np.array([20, 20, -1, 1], np.int16)
    (r,) = run("BitShift", [x, y], {"direction": "RIGHT"}, opset=28)
    assert r.tolist() == [-1, 0, -1, 2]
    (r,) = run("BitShift", [x, y], {"direction": "LEFT"}, opset=28)
    assert r.tolist() == [0, 0, 0, 10]
    xu = np.array([1, 255], np.uint8)
    check("BitShift", [xu, np.array([3, 1], np.uint8)], {"direction": "LEFT"})


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dt", [np.int32, np.int8, np.float32, np.float16])
def test_mod(fmod, dt):
    if np.dtype(dt).kind == "f" and fmod == 0:
        a = (f32(4, 5) * 10).astype(dt)
        b = (f32(5) * 3).astype(dt)
        (y,) = run("Mod", [a, b])
        want = np.remainder(a.astype(np.float64), b.astype(np.float64))
        np.testing.assert_allclose(y.astype(np.float64), want, rtol=1e-2, atol=1e-2)
        return
    a = RNG.integers(-50, 50, (4, 5)).astype(dt)
    b = RNG.integers(1, 7, (5,)).astype(dt) * np.array([1, -1, 1, -1, 1]).astype(dt)
    check("Mod", [a, b], {"fmod": fmod}, rtol=1e-3)


@pytest.mark.parametrize("bt,et", [(np.float32, np.float32), (np.float32, np.int64),
                                   (np.int32, np.int32), (np.int64, np.float32),
                                   (np.float64, np.int32), (np.float16, np.float16)])
def test_pow_types(bt, et):
    a = RNG.integers(1, 5, (3, 4)).astype(bt)
    b = RNG.integers(0, 4, (4,)).astype(et)
    check("Pow", [a, b], rtol=1e-3)


def test_pow_constant_square_and_negative_int_exponent():
    a = f32(3, 4)
    (y,) = check("Pow", [a, np.array(2.0, np.float32)], const=(1,))
    np.testing.assert_array_equal(y, a * a)
    (y,) = run("Pow", [np.array([2, 3], np.int64), np.array([-1, 2], np.int64)])
    assert y.dtype == np.int64 and y.tolist() == [0, 9]


def test_where_strings_and_broadcast():
    c = np.array([[True, False], [False, True]])
    x = np.array(["x1", "x2"], dtype=object)
    y = np.array([["y"]], dtype=object)
    check("Where", [c, x, y])
    check("Where", [c, f32(2), np.array(0, np.float32)])


# -- variadic, clip ------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min"])
def test_variadic(op):
    xs = [f32(3, 1), f32(4), f32(1, 4), f32(3, 4)]
    check(op, xs, rtol=1e-5)
    check(op, xs[:1])
    (y,) = check(op, [f32(2, 2).astype(np.float16), f32(2).astype(np.float16)], rtol=1e-3)
    assert y.dtype == np.float16


def test_max_min_nan_and_ints():
    a = np.array([1, np.nan, 3], np.float32)
    b = np.array([2, 0, np.nan], np.float32)
    for op in ["Max", "Min"]:
        (y,) = run(op, [a, b])
        assert np.isnan(y[1]) and np.isnan(y[2])
        check(op, [RNG.integers(0, 200, (5,)).astype(np.uint8), np.array([100], np.uint8)])


def test_clip_versions():
    x = f32(4, 5) * 3
    check("Clip", [x, np.array(-1, np.float32), np.array(1, np.float32)])
    check("Clip", [x, None, np.array(0.5, np.float32)])
    check("Clip", [x, np.array(0.5, np.float32)])
    check("Clip", [x])
    check("Clip", [x, np.array(2, np.float32), np.array(1, np.float32)])   # min > max
    xi = RNG.integers(-100, 100, (6,)).astype(np.int8)
    check("Clip", [xi, np.array(-5, np.int8), np.array(7, np.int8)], const=(1, 2))
    (y,) = run("Clip", [x], {"min": -0.5, "max": 0.25}, opset=6)
    np.testing.assert_array_equal(y, np.clip(x, -0.5, 0.25))
    (y,) = run("Clip", [x.astype(np.float16)], {"max": 0.25}, opset=6)
    assert y.dtype == np.float16 and y.max() <= 0.25 and y.min() < -1


# -- activations ---------------------------------------------------------------------------

@pytest.mark.parametrize("op,attrs", [
    ("LeakyRelu", {"alpha": 0.1}), ("LeakyRelu", {"alpha": 1.5}), ("Elu", {"alpha": 0.7}),
    ("Selu", {}), ("Celu", {"alpha": 2.0}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
    ("HardSwish", {}), ("ThresholdedRelu", {"alpha": 0.2}), ("Shrink", {"bias": 0.1}),
    ("Mish", {}), ("Softplus", {}), ("Softsign", {}),
])
@pytest.mark.parametrize("dt", [np.float32, np.float16, np.float64])
def test_activations(op, attrs, dt):
    x = (f32(3, 7) * 4).astype(dt)
    x[0, :3] = [100, -100, 0]
    opset = 18 if op == "Mish" else 21
    check(op, [x], attrs, opset=opset, rtol=2e-3 if dt == np.float16 else 1e-5, atol=1e-5)


def test_shrink_ints():
    x = np.array([-5, -1, 0, 1, 5], np.int32)
    (y,) = run("Shrink", [x], {"lambd": 1.5, "bias": 1.0})
    assert y.dtype == np.int32 and y.tolist() == [-4, 0, 0, 0, 4]


@pytest.mark.parametrize("approx", ["none", "tanh"])
@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_gelu(approx, dt):
    x = (f32(5, 6) * 3).astype(dt)
    check("Gelu", [x], {"approximate": approx}, opset=20,
          rtol=2e-3 if dt == np.float16 else 1e-5, atol=1e-5)


def test_swish_swiglu_formula():
    x, b = f32(4, 6), f32(4, 6)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    (y,) = run("Swish", [x], {"alpha": 1.5}, opset=24)
    np.testing.assert_allclose(y, x * sig(1.5 * x), rtol=1e-6)
    (y,) = run("SwiGLU", [x, b], {"alpha": 0.5}, opset=28)
    np.testing.assert_allclose(y, x * sig(0.5 * x) * b, rtol=1e-6)
    (y,) = run("SwiGLU", [x.astype(BF16), b.astype(BF16)], opset=28)
    assert y.dtype == BF16 and y.shape == x.shape


def test_prelu_versions():
    x = f32(2, 3, 4, 5)
    check("PRelu", [x, f32(5)])
    check("PRelu", [x, f32(3, 1, 1)])
    check("PRelu", [x, f32(1)])
    slope = f32(3)
    (y,) = run("PRelu", [x, slope], opset=6)   # before 7: a 1-D slope is per channel
    np.testing.assert_allclose(y, np.where(x < 0, x * slope[:, None, None], x))
    with pytest.raises(Exception):
        run("PRelu", [f32(3), f32(2, 3)])


# -- softmax family ------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("opset,axis", [(13, -1), (13, 1), (13, 0), (11, 1), (11, -2),
                                        (11, 0), (1, 2)])
def test_softmax_family(op, opset, axis):
    x = f32(2, 3, 4)
    x[0, 0, :2] = 7.0   # a tie for Hardmax: the first wins
    check(op, [x], {"axis": axis}, opset=opset, rtol=1e-5, atol=1e-6)


def test_softmax_default_axes_and_dtypes():
    x = f32(2, 3, 4)
    check("Softmax", [x], opset=11)   # default 1, coerced to 2-D
    check("LogSoftmax", [x], opset=13)
    check("Softmax", [x.astype(np.float16)], opset=13, rtol=2e-3)
    check("Softmax", [x.astype(np.float64)], opset=13)
    (y,) = run("Softmax", [x.astype(BF16)], opset=13)
    assert y.dtype == BF16
    np.testing.assert_allclose(y.astype(np.float32).sum(-1), 1, rtol=2e-2)


def test_det_and_bitcast():
    x = f32(3, 4, 4)
    check("Det", [x], rtol=1e-4)
    check("Det", [x[0]], rtol=1e-4)
    (y,) = run("Det", [x[0].astype(np.float16)])
    assert y.dtype == np.float16 and y.shape == ()
    v = f32(2, 3)
    (y,) = run("BitCast", [v], {"to": onnx.TensorProto.INT32}, opset=26)
    np.testing.assert_array_equal(y, v.view(np.int32))
    (y,) = run("BitCast", [v.astype(np.float16)], {"to": onnx.TensorProto.BFLOAT16}, opset=26)
    assert y.dtype == BF16
    with pytest.raises(Exception):
        run("BitCast", [v], {"to": onnx.TensorProto.INT64}, opset=26)


def test_plain_ufuncs_bound_directly_where_types_and_ranks_are_known():
    """Element-wise nodes whose input types and ranks (>= 1) are known run as the bare
    ufunc (no wrapper call); 0-d and integer Div keep the wrapper and its semantics."""
    from onnx import TensorProto as T
    from onnx import helper as h

    def chain(shape, dt, op2):
        nodes = [h.make_node("Neg", ["x"], ["a"]), h.make_node("Abs", ["a"], ["b"]),
                 h.make_node(op2, ["b", "x"], ["y"])]
        g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", dt, shape)],
                         [h.make_tensor_value_info("y", dt, None)])
        return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)

    for shape, dt, op2, x, direct in [
            ([3], T.FLOAT, "Add", np.array([1.5, -2.0, 0.0], np.float32), [True] * 3),
            ([2, 2], T.INT32, "Div", np.array([[7, -7], [5, 3]], np.int32),
             [True, True, False]),                       # integer Div truncates
            ([], T.FLOAT, "Mul", np.array(-2.5, np.float32), [False] * 3)]:   # 0-d
        m = chain(shape, dt, op2)
        s = onnxrt.InferenceSession(m.SerializeToString())
        fns = [st.fn for st in s._plan.steps]
        assert [isinstance(f, np.ufunc) for f in fns] == direct, fns
        y = s.run(None, {"x": x})[0]
        ref = ort.InferenceSession(m.SerializeToString(),
                                   providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        assert type(y) is np.ndarray and y.dtype == ref.dtype and y.shape == ref.shape
        np.testing.assert_array_equal(y, ref)
