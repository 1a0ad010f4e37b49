"""Where TVM's own lowering of an op differs from the spec and the provider lowers it
otherwise (providers/tvm/legalize.py) or declines it (rules.py): each case runs on TVM
and is compared with a NumPy formula."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from providers.tvm.tvmhelpers import CPU, needs_tvm, nodes_on, tvm_session

# a group TVM fails to compile runs on the CPU provider with a warning: an error here, or
# these tests would pass on the CPU provider's numbers
pytestmark = [needs_tvm, pytest.mark.filterwarnings("error::UserWarning")]

vi = h.make_tensor_value_info


def _model(nodes: list, inputs: list, outputs: list, inits: tuple = (),
           opset: int = 21) -> onnx.ModelProto:
    g = h.make_graph(nodes, "lowering", inputs, outputs, list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


def _masked_rows(dtype: type) -> np.ndarray:
    x = np.full((3, 5), -np.inf, dtype)             # row 0: every value -inf
    x[1] = [1, 2, -np.inf, 3, 0]
    x[2] = [-np.inf, -np.inf, -np.inf, -np.inf, -7]
    return x


AXIS = numpy_helper.from_array(np.array([-1], np.int64), "axis")


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_max_min_over_infinities(op, dtype):
    # TVM's own reduction starts from the lowest finite value: -3.4e38 (float16 -65504)
    # for a row of -inf, where the spec gives -inf
    et = T.FLOAT16 if dtype == np.float16 else T.FLOAT
    x = _masked_rows(dtype) if op == "ReduceMax" else -_masked_rows(dtype)
    m = _model([h.make_node(op, ["x", "axis"], ["y"], keepdims=0)], [vi("x", et, [3, 5])],
               [vi("y", et, [3])], (AXIS,), opset=20)
    sess = tvm_session(m)
    assert nodes_on(sess) == 1, sess.placement_report()
    (y,) = sess.run(None, {"x": x})
    np.testing.assert_array_equal(y, x.max(-1) if op == "ReduceMax" else x.min(-1))


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_over_infinities(op):
    # TVM's gave index -1 for a row of infinities; the spec: the first index
    x = _masked_rows(np.float32) if op == "ArgMax" else -_masked_rows(np.float32)
    m = _model([h.make_node(op, ["x"], ["y"], axis=1, keepdims=0)], [vi("x", T.FLOAT, [3, 5])],
               [vi("y", T.INT64, [3])])
    sess = tvm_session(m)
    assert nodes_on(sess) == 1, sess.placement_report()
    (y,) = sess.run(None, {"x": x})
    np.testing.assert_array_equal(y, x.argmax(-1) if op == "ArgMax" else x.argmin(-1))


def test_global_max_pool_over_infinities():
    x = np.full((1, 2, 2, 2), -np.inf, np.float32)
    x[0, 1, 1, 0] = 4
    m = _model([h.make_node("GlobalMaxPool", ["x"], ["y"])], [vi("x", T.FLOAT, [1, 2, 2, 2])],
               [vi("y", T.FLOAT, [1, 2, 1, 1])])
    sess = tvm_session(m)
    assert nodes_on(sess) == 1, sess.placement_report()
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x.max((2, 3), keepdims=True))


def test_fully_masked_attention_row_is_zero():
    # the guard of the ONNX Attention function: Softmax of a row of -inf is NaN, and the
    # row is set to 0 where ReduceMax(bias) == -inf. With TVM's reduction the guard never
    # fired and the row stayed NaN
    et = T.FLOAT
    nodes = [
        h.make_node("Add", ["s", "bias"], ["sb"]),
        h.make_node("Softmax", ["sb"], ["p"], axis=-1),
        h.make_node("ReduceMax", ["bias", "axis"], ["bmax"]),
        h.make_node("Equal", ["bmax", "ninf"], ["masked"]),
        h.make_node("Where", ["masked", "zero", "p"], ["y"]),
    ]
    inits = (AXIS, numpy_helper.from_array(np.array(-np.inf, np.float32), "ninf"),
             numpy_helper.from_array(np.array(0, np.float32), "zero"))
    m = _model(nodes, [vi("s", et, [3, 5]), vi("bias", et, [3, 5])], [vi("y", et, [3, 5])],
               inits, opset=20)
    s = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    bias = np.where(np.isinf(_masked_rows(np.float32)), -np.inf, 0).astype(np.float32)
    sess = tvm_session(m)
    assert nodes_on(sess) == 5, sess.placement_report()
    (y,) = sess.run(None, {"s": s, "bias": bias})
    sb = s + bias
    with np.errstate(invalid="ignore"):
        e = np.exp(sb - sb.max(-1, keepdims=True))
        want = np.where(np.isinf(bias).all(-1, keepdims=True), 0, e / e.sum(-1, keepdims=True))
    assert not np.isnan(y).any()
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-7)


def _f16_rounded_once(*args: np.ndarray, fn) -> np.ndarray:
    """``fn`` in float64 on the float16 inputs, rounded to float16 once: within half a
    float16 step of the float32-accumulating computation onnxruntime does."""
    return fn(*[a.astype(np.float64) for a in args]).astype(np.float16)


def _assert_f16_close(y: np.ndarray, want: np.ndarray) -> None:
    # one float16 step (2**-10 relative) for the final rounding; TVM's float16 accumulation
    # was 40-1800 steps off on these sizes
    np.testing.assert_allclose(y.astype(np.float64), want.astype(np.float64),
                               rtol=2 ** -10, atol=1e-4)


@pytest.mark.parametrize("op", ["MatMul", "Gemm"])
def test_float16_matmul_accumulates_in_float32(op):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((16, 256)).astype(np.float16)
    b = rng.standard_normal((256, 16)).astype(np.float16)
    m = _model([h.make_node(op, ["a", "b"], ["y"])],
               [vi("a", T.FLOAT16, [16, 256]), vi("b", T.FLOAT16, [256, 16])],
               [vi("y", T.FLOAT16, [16, 16])])
    sess = tvm_session(m)
    assert nodes_on(sess) == 1, sess.placement_report()
    _assert_f16_close(sess.run(None, {"a": a, "b": b})[0],
                      _f16_rounded_once(a, b, fn=np.matmul))


def test_float16_conv_and_reduce_sum_accumulate_in_float32():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 32, 4, 4)).astype(np.float16)
    w = rng.standard_normal((8, 32, 1, 1)).astype(np.float16)
    m = _model([h.make_node("Conv", ["x", "w"], ["c"]),
                h.make_node("ReduceSum", ["x", "axis1"], ["s"], keepdims=0)],
               [vi("x", T.FLOAT16, [1, 32, 4, 4]), vi("w", T.FLOAT16, [8, 32, 1, 1])],
               [vi("c", T.FLOAT16, [1, 8, 4, 4]), vi("s", T.FLOAT16, [1, 4, 4])],
               (numpy_helper.from_array(np.array([1], np.int64), "axis1"),))
    sess = tvm_session(m)
    assert nodes_on(sess) == 2, sess.placement_report()
    c, s = sess.run(None, {"x": x, "w": w})
    _assert_f16_close(c, _f16_rounded_once(
        x, w, fn=lambda x, w: np.einsum("nchw,oc->nohw", x, w[:, :, 0, 0])))
    _assert_f16_close(s, _f16_rounded_once(x, fn=lambda x: x.sum(1)))


def test_float16_einsum_is_declined():
    # the frontend lowers Einsum itself (in float16): it stays on the CPU provider
    rng = np.random.default_rng(4)
    a = rng.standard_normal((16, 256)).astype(np.float16)
    b = rng.standard_normal((256, 16)).astype(np.float16)
    m = _model([h.make_node("Einsum", ["a", "b"], ["y"], equation="ij,jk->ik")],
               [vi("a", T.FLOAT16, [16, 256]), vi("b", T.FLOAT16, [256, 16])],
               [vi("y", T.FLOAT16, [16, 16])])
    sess = tvm_session(m)
    assert nodes_on(sess) == 0 and nodes_on(sess, CPU) == 1
    assert "Einsum sums float16 products in float16" in sess.placement_report()
    _assert_f16_close(sess.run(None, {"a": a, "b": b})[0],
                      _f16_rounded_once(a, b, fn=np.matmul))
