"""Former experimental ONNX ops that onnxruntime's CPU provider keeps in the ai.onnx domain for
old models (opsets before their removal): Affine, Crop, DynamicSlice, ImageScaler,
MeanVarianceNormalization-1, ParametricSoftplus, ScaledTanh, ThresholdedRelu-1, Scale. Their
attributes follow onnxruntime's deprecated schemas (alpha/beta of ParametricSoftplus and
ScaledTanh are required there, and here)."""

from __future__ import annotations

import numpy as np

from onnxrt.providers.cpu import CPU


def _need(v, name: str, op: str):
    if v is None:
        raise ValueError(f"{op}: attribute {name!r} is required")
    return v


@CPU.kernel("Affine", since=1)
def affine(x, *, alpha=1.0, beta=0.0):
    return (x * x.dtype.type(alpha) + x.dtype.type(beta)).astype(x.dtype, copy=False)


@CPU.kernel("Scale", since=1)
def scale(x, *, scale=1.0):  # noqa: A002 - the attribute's name
    return (x * x.dtype.type(scale)).astype(x.dtype, copy=False)


@CPU.kernel("ScaledTanh", since=1)
def scaled_tanh(x, *, alpha=None, beta=None):
    a, b = _need(alpha, "alpha", "ScaledTanh"), _need(beta, "beta", "ScaledTanh")
    return (x.dtype.type(a) * np.tanh(x * x.dtype.type(b))).astype(x.dtype, copy=False)


@CPU.kernel("ParametricSoftplus", since=1)
def parametric_softplus(x, *, alpha=None, beta=None):
    a = _need(alpha, "alpha", "ParametricSoftplus")
    b = _need(beta, "beta", "ParametricSoftplus")
    z = x * x.dtype.type(b)
    return (x.dtype.type(a) * np.logaddexp(x.dtype.type(0), z)).astype(x.dtype, copy=False)


@CPU.kernel("ThresholdedRelu", since=1, until=9)
def thresholded_relu_1(x, *, alpha=1.0):
    return np.where(x > x.dtype.type(alpha), x, x.dtype.type(0))


@CPU.kernel("ImageScaler", since=1)
def image_scaler(x, *, scale=1.0, bias=None):  # noqa: A002
    """scale * X + bias[c] on (N, C, H, W)."""
    if x.ndim != 4:
        raise ValueError(f"ImageScaler: input must be 4-D (N, C, H, W), got {x.shape}")
    y = x * x.dtype.type(scale)
    if bias:
        if len(bias) != x.shape[1]:
            raise ValueError(f"ImageScaler: bias has {len(bias)} values for {x.shape[1]} "
                             f"channels")
        y = y + np.asarray(bias, x.dtype).reshape(1, -1, 1, 1)
    return y.astype(x.dtype, copy=False)


@CPU.kernel("Crop", since=1)
def crop(x, *, border=None, scale=None):  # noqa: A002
    """(N, C, H, W) cropped by border = [left, top, right, bottom], or to scale = [h, w]
    starting at (top, left)."""
    op = "Crop"
    if x.ndim != 4:
        raise ValueError(f"{op}: input must be 4-D (N, C, H, W), got {x.shape}")
    if not border or len(border) != 4:
        raise ValueError(f"{op}: attribute border needs four values, got {border}")
    left, top, right, bottom = (int(v) for v in border)
    h, w = x.shape[2:]
    if h < top + bottom or w < left + right:
        raise ValueError(f"{op}: borders {border} exceed the input's {h} x {w}")
    if scale:
        if len(scale) != 2:
            raise ValueError(f"{op}: attribute scale needs two values, got {scale}")
        bottom_lim, right_lim = top + int(scale[0]), left + int(scale[1])
        if h < bottom_lim or w < right_lim:
            raise ValueError(f"{op}: scale {scale} from ({top}, {left}) exceeds {h} x {w}")
    else:
        bottom_lim, right_lim = h - bottom, w - right
    return np.ascontiguousarray(x[:, :, top:bottom_lim, left:right_lim])


@CPU.kernel("DynamicSlice", since=1, host_inputs=(1, 2, 3))
def dynamic_slice(data, starts, ends, axes=None):
    """Slice-10 without steps: starts/ends (clamped, negative from the end) on ``axes``."""
    st = [int(v) for v in np.asarray(starts).reshape(-1)]
    en = [int(v) for v in np.asarray(ends).reshape(-1)]
    ax = list(range(len(st))) if axes is None else \
        [int(v) for v in np.asarray(axes).reshape(-1)]
    if not len(st) == len(en) == len(ax):
        raise ValueError("DynamicSlice: starts, ends and axes must have equal lengths")
    key = [slice(None)] * data.ndim
    for s, e, a in zip(st, en, ax):
        a = a + data.ndim if a < 0 else a
        if not 0 <= a < data.ndim:
            raise ValueError(f"DynamicSlice: axis {a} out of range for rank {data.ndim}")
        key[a] = slice(*slice(s, e).indices(data.shape[a])[:2])
    return np.array(data[tuple(key)])


@CPU.kernel("MeanVarianceNormalization", since=1, until=8)
def mean_variance_normalization_1(x, *, across_channels=0, normalize_variance=1):
    """(X - mean) [/ std] over (N, H, W), or (N, C, H, W) with across_channels (no epsilon,
    as onnxruntime computes it)."""
    axes = (0, 1, 2, 3) if int(across_channels) else (0, 2, 3)
    if x.ndim != 4:
        raise ValueError(f"MeanVarianceNormalization: input must be 4-D, got {x.shape}")
    xf = x.astype(np.float32)
    y = xf - xf.mean(axis=axes, keepdims=True)
    if int(normalize_variance):
        y = y / np.sqrt((y * y).mean(axis=axes, keepdims=True))
    return y.astype(x.dtype)
