"""MaxPool 2x2 stride 2 without padding (nn/pool.py ``_max_2x2``, the small CNNs' pool)
against onnxruntime: even and odd sizes, float and 8-bit integer types, explicit zero pads
and auto_pad VALID, the Indices output (which keeps the general path), and the shapes that
do not take it."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import onnxrt
from onnxrt.providers.cpu.nn import pool as pool_mod

_TYPES = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE,
          np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}


def _model(dt, attrs, indices=False):
    outs = ["y", "i"] if indices else ["y"]
    node = helper.make_node("MaxPool", ["x"], outs, kernel_shape=[2, 2], **attrs)
    vis = [helper.make_tensor_value_info("y", _TYPES[dt], None)]
    if indices:
        vis.append(helper.make_tensor_value_info("i", TensorProto.INT64, None))
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", _TYPES[dt], [None, None, None, None])], vis)
    return helper.make_model(g, ir_version=8, opset_imports=[helper.make_opsetid("", 12)]
                             ).SerializeToString()


def _run_both(mb, x):
    ours = onnxrt.InferenceSession(mb)
    ref = onnxruntime.InferenceSession(mb, providers=["CPUExecutionProvider"])
    return ours, ours.run(None, {"x": x}), ref.run(None, {"x": x})


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.uint8, np.int8])
@pytest.mark.parametrize("shape", [(1, 64, 24, 24), (2, 3, 7, 9), (1, 1, 2, 2), (1, 5, 3, 2)])
@pytest.mark.parametrize("attrs", [{"strides": [2, 2]},
                                   {"strides": [2, 2], "pads": [0, 0, 0, 0]},
                                   {"strides": [2, 2], "auto_pad": "VALID"}],
                         ids=["plain", "zero_pads", "valid"])
def test_max_2x2_matches_onnxruntime(dt, shape, attrs):
    rng = np.random.default_rng(0)
    if np.dtype(dt).kind == "f":
        x = rng.standard_normal(shape).astype(dt)
    else:
        x = rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, size=shape, dtype=dt)
    ours, got, want = _run_both(_model(dt, attrs), x)
    assert ours._plan.steps[0].fn._pair
    assert got[0].dtype == want[0].dtype and got[0].shape == want[0].shape
    np.testing.assert_array_equal(got[0], want[0])


def test_max_2x2_nan_as_numpy_path():
    """NaN inside a window gives NaN, as the general NumPy path gives it."""
    x = np.random.default_rng(1).standard_normal((1, 2, 6, 6)).astype(np.float32)
    x[0, 0, 2, 3] = np.nan
    y = pool_mod._max_2x2(x)
    ref = pool_mod.max_pool(x, kernel_shape=[2, 2], strides=[2, 2])
    np.testing.assert_array_equal(y, ref)
    assert np.isnan(y[0, 0, 1, 1])


@pytest.mark.parametrize("attrs,indices", [
    ({"strides": [1, 1]}, False),                        # overlapping windows
    ({"strides": [2, 2], "pads": [1, 1, 1, 1]}, False),  # padded
    ({"strides": [2, 2], "ceil_mode": 1}, False),        # ceil_mode keeps the odd edge
    ({"strides": [2, 2]}, True),                         # Indices wanted
])
def test_other_pools_keep_the_general_path(attrs, indices):
    x = np.random.default_rng(2).standard_normal((1, 3, 7, 9)).astype(np.float32)
    ours, got, want = _run_both(_model(np.float32, attrs, indices), x)
    assert not ours._plan.steps[0].fn._pair
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
