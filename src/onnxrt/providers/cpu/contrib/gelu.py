"""Gelu, FastGelu, BiasGelu, QuickGelu (com.microsoft). The erf forms (Gelu, BiasGelu) run
as one compiled pass where numba is enabled."""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.activations import gelu as _onnx_gelu
from onnxrt.providers.cpu.elementwise import _ERF_A, _ERF_B

MS = "com.microsoft"


# -- erf GELU compiled: one pass over memory instead of NumPy's ~40 (the erf polynomials of
# providers/cpu/elementwise.py evaluated per element; 2.5x at 1024x3072, BERT's FFN)
_GELU: list[Any] = []
_GELU_LOCK = threading.Lock()


def _gelu_loop(x: np.ndarray, b: np.ndarray, y: np.ndarray, ca: np.ndarray,
               cb: np.ndarray) -> None:
    """y[i, j] = gelu(x[i, j] + b[j]) in float32 on 2-D arrays (b of length 0: no bias)."""
    n, m = x.shape
    r2 = np.float32(0.7071067811865476)
    half, one, four, c25 = np.float32(0.5), np.float32(1.0), np.float32(4.0), np.float32(2.5)
    has_b = b.shape[0] > 0
    for i in range(n):
        for j in range(m):
            v = x[i, j] + b[j] if has_b else x[i, j]
            t = v * r2
            a = min(abs(t), four)
            u = a * a
            if a <= one:
                p = ca[6]
                for k in range(5, -1, -1):
                    p = p * u + ca[k]
                e = a * p
            else:
                s = a - c25
                p = cb[10]
                for k in range(9, -1, -1):
                    p = p * s + cb[k]
                e = one - math.exp(-u) * p
            if t < 0:
                e = -e
            y[i, j] = half * v * (one + e)


def _gelu_kernel() -> Any:
    """The compiled loop (numba's disk cache or compiled once per process), or None where
    numba is missing or disabled (ONNXRT_JIT=0)."""
    from onnxrt.providers.cpu.nn import jit
    if not jit.enabled():
        return None
    with _GELU_LOCK:
        if not _GELU:
            try:
                import numba
                try:
                    fn = numba.njit(cache=True, error_model="numpy")(_gelu_loop)
                except Exception:   # no writable cache location
                    fn = numba.njit(error_model="numpy")(_gelu_loop)
                x = np.zeros((1, 1), np.float32)
                fn(x, np.zeros(1, np.float32), np.empty_like(x), _CA, _CB)   # compile now
            except Exception:
                fn = None
            _GELU.append(fn)
    return _GELU[0]


_CA = np.array(_ERF_A, np.float32)
_CB = np.array(_ERF_B, np.float32)
_NO_BIAS = np.zeros(0, np.float32)


class _ErfGelu:
    """gelu(x [+ bias]): compiled for float32 with a 1-D bias over the last axis, NumPy
    otherwise."""

    def __init__(self, node: Any) -> None:
        self.loop = _gelu_kernel()

    def __call__(self, x: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
        if self.loop is not None and x.dtype == np.float32 and x.ndim >= 1 and x.size and (
                bias is None or (bias.dtype == np.float32 and bias.ndim == 1
                                 and bias.shape[0] == x.shape[-1])):
            x2 = np.ascontiguousarray(x).reshape(-1, x.shape[-1])
            y = np.empty_like(x2)
            self.loop(x2, _NO_BIAS if bias is None else np.ascontiguousarray(bias), y,
                      _CA, _CB)
            return y.reshape(x.shape)
        return _onnx_gelu(x if bias is None else x + bias, approximate="none")


@CPU.kernel("Gelu", since=1, domain=MS, needs_node=True)
class Gelu(_ErfGelu):
    """0.5 * x * (1 + erf(x / sqrt(2)))."""

    def __call__(self, x: np.ndarray) -> np.ndarray:   # type: ignore[override]
        return _ErfGelu.__call__(self, x)


@CPU.kernel("BiasGelu", since=1, domain=MS, needs_node=True)
class BiasGelu(_ErfGelu):
    """Gelu(a + b), b broadcast over a's last axis."""

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:   # type: ignore[override]
        return _ErfGelu.__call__(self, a, b)


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
