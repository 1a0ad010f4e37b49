"""LayerNormalization (before opset 17), SkipLayerNormalization, SimplifiedLayerNormalization and
SkipSimplifiedLayerNormalization (com.microsoft), in float32 for float16 inputs."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU

MS = "com.microsoft"


def _norm(s: np.ndarray, axis: int, epsilon: float, simplified: bool,
          ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """(normalized, mean, inv_std) of a float array ``s`` that this call owns."""
    ax = axis + s.ndim if axis < 0 else axis
    axes = tuple(range(ax, s.ndim))
    mean = None
    if simplified:
        d = s
        var = np.mean(np.square(s), axis=axes, keepdims=True)
        d = s * 1   # s is reused as the skip sum output: keep it
    else:
        mean = np.mean(s, axis=axes, keepdims=True)
        d = s - mean
        var = np.mean(np.square(d), axis=axes, keepdims=True)
    var += s.dtype.type(epsilon)
    inv = np.sqrt(var, out=var)
    np.reciprocal(inv, out=inv)
    d *= inv
    return d, mean, inv


def _work(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype != np.float64 and x.dtype != np.float32 else x


def _affine(y: np.ndarray, gamma: np.ndarray, beta: np.ndarray | None) -> np.ndarray:
    y *= gamma.astype(y.dtype, copy=False)
    if beta is not None:
        y += beta.astype(y.dtype, copy=False)
    return y


def _outputs(node: Any, dt: np.dtype, y: np.ndarray, *rest: Any) -> Any:
    y = y.astype(dt, copy=False)
    if node.num_outputs <= 1:
        return y
    return (y,) + tuple(None if r is None else r.astype(
        np.float32 if i < 2 else dt, copy=False) for i, r in enumerate(rest))


# onnxruntime registers LayerNormalization and SimplifiedLayerNormalization as contrib ops of
# the ONNX domain for opsets before LayerNormalization-17; its fusions emit them there
@CPU.kernel("LayerNormalization", since=1, until=16, needs_node=True)
@CPU.kernel("LayerNormalization", since=1, domain=MS, needs_node=True)
def layer_normalization(x, scale, b=None, *, axis=-1, epsilon=1e-5, stash_type=1, node):
    y, mean, inv = _norm(_work(x), axis, epsilon, False)
    return _outputs(node, x.dtype, _affine(y, scale, b), mean, inv)


@CPU.kernel("SimplifiedLayerNormalization", since=1, needs_node=True)
@CPU.kernel("SimplifiedLayerNormalization", since=1, domain=MS, needs_node=True)
def simplified_layer_normalization(x, scale, *, axis=-1, epsilon=1e-5, stash_type=1, node):
    y, _, inv = _norm(_work(x), axis, epsilon, True)
    return _outputs(node, x.dtype, _affine(y, scale, None), inv)


def _skip_sum(x: np.ndarray, skip: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    s = np.add(_work(x), skip.astype(np.float32) if skip.dtype != x.dtype else skip,
               dtype=np.float64 if x.dtype == np.float64 else np.float32)
    if bias is not None:
        s += bias.astype(s.dtype, copy=False)
    return s


@CPU.kernel("SkipLayerNormalization", since=1, domain=MS, needs_node=True)
def skip_layer_normalization(x, skip, gamma, beta=None, bias=None, *, epsilon=1e-12, node):
    """LayerNorm over the last axis of x + skip (+ bias); outputs y, mean, inv_std_var and
    the sum itself (input_skip_bias_sum)."""
    s = _skip_sum(x, skip, bias)
    y, mean, inv = _norm(s, -1, epsilon, False)
    return _outputs(node, x.dtype, _affine(y, gamma, beta), mean, inv, s)


@CPU.kernel("SkipSimplifiedLayerNormalization", since=1, domain=MS, needs_node=True)
def skip_simplified_layer_normalization(x, skip, gamma, bias=None, *, epsilon=1e-12, node):
    s = _skip_sum(x, skip, bias)
    y, _, inv = _norm(s, -1, epsilon, True)
    return _outputs(node, x.dtype, _affine(y, gamma, None), None, inv, s)
