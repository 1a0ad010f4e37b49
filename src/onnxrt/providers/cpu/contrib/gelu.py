"""Gelu, FastGelu, BiasGelu, QuickGelu (com.microsoft)."""

from __future__ import annotations

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.activations import gelu as _onnx_gelu

MS = "com.microsoft"


@CPU.kernel("Gelu", since=1, domain=MS)
def gelu(x: np.ndarray) -> np.ndarray:
    """0.5 * x * (1 + erf(x / sqrt(2)))."""
    return _onnx_gelu(x, approximate="none")


@CPU.kernel("BiasGelu", since=1, domain=MS)
def bias_gelu(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _onnx_gelu(a + b, approximate="none")


@CPU.kernel("FastGelu", since=1, domain=MS)
def fast_gelu(x: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """The tanh approximation of GELU, of ``x + bias`` when a bias is given."""
    return _onnx_gelu(x if bias is None else x + bias, approximate="tanh")


@CPU.kernel("QuickGelu", since=1, domain=MS)
def quick_gelu(x: np.ndarray, *, alpha: float = 1.702) -> np.ndarray:
    """x * sigmoid(alpha * x)."""
    dt = x.dtype
    xf = x.astype(np.float32) if dt.itemsize < 4 else x
    t = np.multiply(xf, -alpha, dtype=xf.dtype)
    with np.errstate(over="ignore"):
        np.exp(t, out=t)
    t += 1
    y = np.divide(xf, t, out=t)
    return y.astype(dt, copy=False)
