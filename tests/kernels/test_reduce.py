"""Reductions, ArgMax/ArgMin, CumSum/CumProd and TopK beyond the ONNX suite: old opsets
(axes as attribute), integer and half types, keepdims=0, empty sets, ties."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from kernels.test_elementwise import check, run

BF16 = ml_dtypes.bfloat16
RNG = np.random.default_rng(1)

REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
          "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]


def _data(dt, shape=(3, 4, 5)):
    if np.dtype(dt).kind in "iu":
        return RNG.integers(1, 4, shape).astype(dt)
    return (RNG.random(shape) + 0.5).astype(dt)


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axes", [None, [1], [0, -1]])
def test_reduce_axes_input(op, keepdims, axes):
    x = _data(np.float32)
    ins = [x] if axes is None else [x, np.array(axes, np.int64)]
    check(op, ins, {"keepdims": keepdims}, opset=18, const=(1,) if axes else (), rtol=1e-5)


@pytest.mark.parametrize("op", REDUCE)
def test_reduce_axes_attribute(op):
    x = _data(np.float32)
    check(op, [x], {"axes": [2, 0], "keepdims": 0}, opset=11, rtol=1e-5)
    check(op, [x], {"keepdims": 1}, opset=1, rtol=1e-5)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
                                "ReduceProd", "ReduceL1", "ReduceSumSquare"])
@pytest.mark.parametrize("dt", [np.int32, np.int64])
def test_reduce_ints_keep_type(op, dt):
    x = _data(dt)
    x[0, 0, 0] = -3
    check(op, [x, np.array([1], np.int64)], {"keepdims": 0}, opset=18)


def test_reduce_mean_int_truncates():
    x = np.array([[-3, -4], [3, 4]], np.int32)
    (y,) = run("ReduceMean", [x, np.array([1], np.int64)], opset=18)
    assert y.dtype == np.int32 and y.ravel().tolist() == [-3, 3]


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceL2",
                                "ReduceLogSumExp"])
def test_reduce_half_types(op):
    x = _data(np.float32, (4, 64))
    (y,) = run(op, [x.astype(np.float16), np.array([1], np.int64)], opset=18)
    assert y.dtype == np.float16
    (w,) = run(op, [x.astype(np.float16).astype(np.float32), np.array([1], np.int64)], opset=18)
    np.testing.assert_allclose(y.astype(np.float32), w, rtol=2e-3)
    (y,) = run(op, [x.astype(BF16), np.array([1], np.int64)], opset=18)
    assert y.dtype == BF16
    np.testing.assert_allclose(y.astype(np.float32), w, rtol=2e-2)


def test_reduce_noop_and_all():
    x = _data(np.float32)
    empty = np.array([], np.int64)
    (y,) = run("ReduceSum", [x, empty], {"noop_with_empty_axes": 1}, opset=13)
    np.testing.assert_array_equal(y, x)
    check("ReduceSum", [x, empty], {"keepdims": 0}, opset=13)
    (y,) = run("ReduceMax", [x], {"noop_with_empty_axes": 1}, opset=18)
    np.testing.assert_array_equal(y, x)
    (y,) = run("ReduceSum", [np.array(2.5, np.float32)], {"keepdims": 0}, opset=13)
    assert y.shape == () and float(y) == 2.5


def test_reduce_bool_and_empty():
    b = RNG.integers(0, 2, (3, 4)).astype(bool)
    for op, fn in [("ReduceMax", np.any), ("ReduceMin", np.all)]:
        (y,) = run(op, [b, np.array([1], np.int64)], {"keepdims": 0}, opset=20)
        np.testing.assert_array_equal(y, fn(b, axis=1))
    e = np.zeros((2, 0, 3), np.int32)
    (y,) = run("ReduceMax", [e, np.array([1], np.int64)], opset=18)
    assert y.shape == (2, 1, 3) and (y == np.iinfo(np.int32).min).all()
    (y,) = run("ReduceMin", [e.astype(np.float32), np.array([1], np.int64)], opset=18)
    assert (y == np.inf).all()
    (y,) = run("ReduceProd", [e, np.array([1], np.int64)], opset=18)
    assert (y == 1).all() and y.dtype == np.int32


def test_reduce_log_sum_exp_infinite():
    x = np.array([[-np.inf, -np.inf], [1000.0, 1000.0]], np.float32)
    (y,) = run("ReduceLogSumExp", [x, np.array([1], np.int64)], {"keepdims": 0}, opset=18)
    assert y[0] == -np.inf
    np.testing.assert_allclose(y[1], 1000 + np.log(2), rtol=1e-6)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize("dt", [np.float32, np.int8, np.uint16])
def test_arg(op, last, dt):
    x = RNG.integers(0, 3, (3, 4, 5)).astype(dt)   # many ties
    for axis, keep in [(0, 1), (-1, 0), (1, 1)]:
        check(op, [x], {"axis": axis, "keepdims": keep, "select_last_index": last}, opset=13)


def test_arg_old_opset_and_bf16():
    x = RNG.random((3, 4)).astype(np.float32)
    check("ArgMax", [x], {"axis": 1, "keepdims": 0}, opset=1)
    (y,) = run("ArgMin", [x.astype(BF16)], {"axis": 0}, opset=13)
    assert y.dtype == np.int64 and y.shape == (1, 4)


@pytest.mark.parametrize("op", ["CumSum", "CumProd"])
@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("dt", [np.float32, np.int32, np.int64, np.float64])
def test_cumulative(op, exclusive, reverse, dt):
    x = _data(dt, (3, 4))
    opset = 26 if op == "CumProd" else 14
    for axis in (np.array(1, np.int64), np.array([0], np.int32), np.array(-1, np.int64)):
        ours = run(op, [x, axis], {"exclusive": exclusive, "reverse": reverse}, opset=opset)[0]
        ax = int(axis.reshape(-1)[0])
        fn = np.cumsum if op == "CumSum" else np.cumprod
        w = np.flip(x, ax) if reverse else x
        want = fn(w.astype(np.float64), axis=ax)
        if exclusive:
            want = np.concatenate([np.ones_like(np.take(want, [0], ax)) * (op == "CumProd"),
                                   np.delete(want, -1, ax)], axis=ax)
        if reverse:
            want = np.flip(want, ax)
        assert ours.dtype == x.dtype
        np.testing.assert_allclose(ours.astype(np.float64), want, rtol=1e-6)
        if op == "CumSum":
            check(op, [x, axis], {"exclusive": exclusive, "reverse": reverse}, opset=opset,
                  rtol=1e-6)


def test_cumsum_half():
    x = _data(np.float32, (2, 50))
    (y,) = run("CumSum", [x.astype(np.float16), np.array(1, np.int64)], opset=14)
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.astype(np.float32), np.cumsum(x.astype(np.float16)
                                                               .astype(np.float32), 1), rtol=2e-3)


@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("dt", [np.float32, np.int32, np.uint8, np.float64, np.int64])
def test_topk_ties(largest, dt):
    x = RNG.integers(0, 4, (3, 10)).astype(dt)
    for axis, k in [(-1, 4), (0, 2), (1, 10), (1, 0)]:
        check("TopK", [x, np.array([k], np.int64)], {"axis": axis, "largest": largest},
              n_out=2, opset=11)


def test_topk_v1_and_bf16():
    x = RNG.random((4, 6)).astype(np.float32)
    check("TopK", [x], {"k": 3, "axis": 0}, n_out=2, opset=1)
    v, i = run("TopK", [x.astype(BF16), np.array([2], np.int64)], n_out=2, opset=24)
    assert v.dtype == BF16 and i.dtype == np.int64
    np.testing.assert_array_equal(i, np.argsort(-x.astype(BF16).astype(np.float32), 1,
                                                kind="stable")[:, :2])
    with pytest.raises(Exception):
        run("TopK", [x, np.array([7], np.int64)], n_out=2, opset=11)


@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("dt", [np.float32, np.int64, np.uint8])
def test_topk_partition_path(largest, dt):
    # n >= 64 and k <= n/8 takes the linear-time selection; few distinct values: many ties
    for hi in (4, 1000):
        x = RNG.integers(0, hi, (5, 200)).astype(dt)
        check("TopK", [x, np.array([7], np.int64)], {"axis": 1, "largest": largest},
              n_out=2, opset=11)
        check("TopK", [x.T.copy(), np.array([3], np.int64)], {"axis": 0, "largest": largest},
              n_out=2, opset=11)
    x = RNG.standard_normal((3, 100)).astype(np.float32)
    x[1, 5] = np.nan   # NaN ranks above everything, as in a sort: the sorting path handles it
    v, i = run("TopK", [x, np.array([4], np.int64)], n_out=2, opset=11)
    assert i[1, 0] == 5 and np.isnan(v[1, 0])
