"""Softmax, LogSoftmax and Hardmax.

Opset 13 normalizes along one axis. Opsets 1 and 11 coerce the input to 2-D first
([prod(shape[:axis]), prod(shape[axis:])]) and normalize each row, so one "row" spans every
axis from ``axis`` on.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.nn import row_dot


def _norm_axis(axis: int, ndim: int, op: str) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"{op}: axis {axis} is out of range for rank {ndim}")
    return axis + ndim if axis < 0 else axis


def _row_sum(e: np.ndarray, axis: int) -> np.ndarray:
    """Sum along ``axis`` with kept dims. Along the last axis of a fresh float32/64 array a
    matrix-vector product with ones is several times faster than np.sum on short rows; long
    rows keep np.sum's pairwise (more accurate) summation."""
    n = e.shape[axis]
    if axis == e.ndim - 1 and e.dtype.kind == "f" and e.itemsize >= 4 and 1 < n <= 4096:
        s = row_dot(e.reshape(-1, n), np.ones(n, dtype=e.dtype))
        return s.reshape(e.shape[:-1] + (1,))
    return np.sum(e, axis=axis, keepdims=True)


def _softmax(w: np.ndarray, axis: int) -> np.ndarray:
    e = np.subtract(w, np.max(w, axis=axis, keepdims=True))
    np.exp(e, out=e)
    e /= _row_sum(e, axis)
    return e


def _log_softmax(w: np.ndarray, axis: int) -> np.ndarray:
    e = np.subtract(w, np.max(w, axis=axis, keepdims=True))
    s = np.exp(e)
    s = np.log(_row_sum(s, axis))
    e -= s
    return e


def _hardmax(x: np.ndarray, axis: int) -> np.ndarray:
    out = np.zeros(x.shape, dtype=x.dtype)
    if x.size:
        w = x.astype(np.float32) if x.dtype.kind == "V" else x
        idx = np.argmax(w, axis=axis, keepdims=True)   # first maximum wins, as the spec says
        np.put_along_axis(out, idx, 1, axis=axis)
    return out


def _float(fn: Callable[[np.ndarray, int], np.ndarray]) -> Callable[[np.ndarray, int], np.ndarray]:
    def run(x: np.ndarray, axis: int) -> np.ndarray:
        dt = x.dtype
        if x.size == 0:
            return np.empty(x.shape, dtype=dt)
        # float16 stays float16: NumPy rounds each step correctly, and that is what the
        # suite's expected values (and models exported with fp16 softmax) were made with.
        # Rows that are all -inf (fully masked attention) give NaN, as in onnxruntime, quietly.
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            r = fn(x.astype(np.float32) if dt.kind == "V" else x, axis)
        return r.astype(dt, copy=False)

    return run


def _axis_kernel(fn: Callable[[np.ndarray, int], np.ndarray], op: str, default: int):
    def kernel(x: np.ndarray, *, axis: int = default) -> np.ndarray:
        return fn(x, _norm_axis(axis, x.ndim, op))

    kernel.__name__ = kernel.__qualname__ = op.lower()
    return kernel


def _coerced_kernel(fn: Callable[[np.ndarray, int], np.ndarray], op: str, default: int):
    def kernel(x: np.ndarray, *, axis: int = default) -> np.ndarray:
        ax = _norm_axis(axis, x.ndim, op) if x.ndim else 0
        rows = int(np.prod(x.shape[:ax], dtype=np.int64))
        cols = int(np.prod(x.shape[ax:], dtype=np.int64))
        return fn(x.reshape(rows, cols), 1).reshape(x.shape)

    kernel.__name__ = kernel.__qualname__ = op.lower() + "_2d"
    return kernel


for _op, _fn in (("Softmax", _float(_softmax)), ("LogSoftmax", _float(_log_softmax)),
                 ("Hardmax", _hardmax)):
    CPU.register(_op, _axis_kernel(_fn, _op, -1), since=13)
    CPU.register(_op, _coerced_kernel(_fn, _op, 1), since=1)
