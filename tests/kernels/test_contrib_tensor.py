"""com.microsoft tensor ops (ExpandDims, Range, Pad, Unique, GatherND, Trilu, Inverse, CDist,
MurmurHash3, UnfoldTensor, DynamicTimeWarping, SampleOp) against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.contrib_oracle import assert_close, both

RNG = np.random.default_rng(5)


def _f(*shape):
    return RNG.normal(size=shape).astype(np.float32)


@pytest.mark.parametrize("axis", [0, 2, -1, -3])
def test_expand_dims(axis):
    assert_close(*both("ExpandDims", [("x", _f(2, 3)), ("a", np.array(axis, np.int32))]))


@pytest.mark.parametrize("dt,vals", [(np.float32, (0.5, 7.2, 1.3)), (np.int64, (10, -4, -3)),
                                     (np.int32, (2, 20, 4)), (np.float64, (1, 2, None)),
                                     (np.int16, (5, 1, -1))])
def test_range(dt, vals):
    ins = [(n, None if v is None else np.array(v, dt)) for n, v in zip("sld", vals)]
    assert_close(*both("Range", ins))


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("pads", [[0, 2, 1, 0, 1, 2], [[1, 0, 0, 0, 2, 1]]])
def test_pad(mode, pads):
    ins = [("x", _f(3, 4, 5)), ("p", np.array(pads, np.int64))]
    if mode == "constant":
        ins.append(("v", np.array([1.5], np.float32)))
    assert_close(*both("Pad", ins, mode=mode))


def test_unique():
    x = np.array([2, 1, 1, 3, 4, 3, 0.5, 2], np.float32)
    assert_close(*both("Unique", [("x", x)], outputs=3))


@pytest.mark.parametrize("idt", [np.int64, np.int32])
def test_gather_nd(idt):
    data = _f(3, 4, 5)
    idx = np.array([[[0, 1], [2, 3]], [[1, 0], [2, -1]]], idt)
    assert_close(*both("GatherND", [("d", data), ("i", idx)]))


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 1, -2])
def test_trilu(upper, k):
    ins = [("x", _f(2, 4, 5)), ("k", None if k is None else np.array(k, np.int64))]
    assert_close(*both("Trilu", ins, upper=upper))


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16])
def test_inverse(dt):
    x = (RNG.normal(size=(2, 3, 3)) + 3 * np.eye(3)).astype(dt)
    tol = 2e-3 if dt == np.float16 else 1e-5
    assert_close(*both("Inverse", [("x", x)]), rtol=tol, atol=tol)


@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_cdist(metric, dt):
    ins = [("a", _f(5, 3).astype(dt)), ("b", _f(4, 3).astype(dt))]
    assert_close(*both("CDist", ins, metric=metric), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("x", [
    np.array([0, 1, -7, 2 ** 31 - 1], np.int32), np.array([3, 2 ** 40, -1], np.int64),
    np.array([7, 2 ** 32 - 1], np.uint32), np.array([1.5, -0.0, 3e8], np.float32),
    np.array([[2.5, np.pi]], np.float64),
    np.array(["", "a", "ab", "abc", "abcd", "hello world", "\u00e9t\u00e9"], object)])
@pytest.mark.parametrize("seed,positive", [(0, 1), (42, 0), (2 ** 32 - 5, 1)])
def test_murmur_hash3(x, seed, positive):
    assert_close(*both("MurmurHash3", [("x", x)], seed=seed, positive=positive))


@pytest.mark.parametrize("dim,size,step", [(1, 2, 1), (-1, 3, 2), (0, 4, 3)])
def test_unfold_tensor(dim, size, step):
    assert_close(*both("UnfoldTensor", [("x", _f(5, 4, 6))], dim=dim, size=size, step=step))


@pytest.mark.parametrize("shape", [(6, 9), (1, 7, 4), (5, 5)])
def test_dynamic_time_warping(shape):
    x = RNG.random(shape).astype(np.float32)
    if shape == (5, 5):
        x = np.round(x * 2) / 2    # ties between the three moves
    assert_close(*both("DynamicTimeWarping", [("x", x)]))


def test_sample_op():
    assert_close(*both("SampleOp", [("x", _f(3, 4))]))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_shrunken_gather(axis):
    """Not registered in onnxruntime's inference builds: its ONNX Gather is the oracle."""
    from kernels.contrib_oracle import ms_model, run_ours
    data = _f(4, 5, 6)
    idx = np.array([3, 0, -1], np.int64)
    ref = both("Gather", [("d", data), ("i", idx)], domain="", axis=axis)[0]
    got = run_ours(ms_model("ShrunkenGather", [("d", data), ("i", idx)], axis=axis),
                   {"d": data, "i": idx})
    assert_close(ref, got)
