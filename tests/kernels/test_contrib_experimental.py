"""The former experimental ONNX ops that onnxruntime keeps for old models (ai.onnx domain,
opsets before their removal) against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.contrib_oracle import assert_close, both

RNG = np.random.default_rng(88)


def _f(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def _both(op, ins, **attrs):
    return both(op, ins, domain="", onnx_opset=7, **attrs)


@pytest.mark.parametrize("op,attrs", [
    ("Affine", {"alpha": 2.0, "beta": -0.5}), ("Affine", {}), ("Scale", {"scale": 3.0}),
    ("ScaledTanh", {"alpha": 1.5, "beta": 0.7}),
    ("ParametricSoftplus", {"alpha": 2.0, "beta": 0.5}),
    ("ThresholdedRelu", {"alpha": 0.3}), ("ThresholdedRelu", {})])
def test_elementwise(op, attrs):
    assert_close(*_both(op, [("x", _f(3, 4) * 4)], **attrs), rtol=1e-5, atol=1e-6)


def test_image_scaler():
    assert_close(*_both("ImageScaler", [("x", _f(2, 3, 4, 5))], scale=2.0,
                        bias=[1.0, -2.0, 0.5]), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("attrs", [{"border": [1, 2, 0, 1]},
                                   {"border": [1, 2, 0, 0], "scale": [3, 2]}])
def test_crop(attrs):
    assert_close(*_both("Crop", [("x", _f(2, 3, 6, 5))], **attrs))


@pytest.mark.parametrize("axes", [None, [0, 2], [-1]])
def test_dynamic_slice(axes):
    n = 2 if axes is None or len(axes) == 2 else 1
    st = np.array([1, -3][:n], np.int64)
    en = np.array([100, -1][:n], np.int64)
    ins = [("x", _f(4, 5, 6)), ("s", st), ("e", en),
           ("a", None if axes is None else np.array(axes, np.int64))]
    assert_close(*_both("DynamicSlice", ins))


@pytest.mark.parametrize("across", [0, 1])
@pytest.mark.parametrize("nv", [0, 1])
def test_mean_variance_normalization_1(across, nv):
    assert_close(*_both("MeanVarianceNormalization", [("x", _f(2, 3, 4, 5))],
                        across_channels=across, normalize_variance=nv), rtol=1e-4, atol=1e-5)
