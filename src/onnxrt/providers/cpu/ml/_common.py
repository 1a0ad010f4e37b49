"""Shared pieces of the ai.onnx.ml kernels: score post-transforms, label arrays."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

__all__ = ["ML", "post_transform", "transform_name", "probit", "as_2d_float", "labels_array",
           "string_array"]

ML = "ai.onnx.ml"

_TRANSFORMS = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")


def transform_name(v: Any) -> str:
    """post_transform as a name (TreeEnsemble-5 encodes it as an int)."""
    if isinstance(v, (int, np.integer)):
        if not 0 <= int(v) < len(_TRANSFORMS):
            raise ValueError(f"unknown post_transform {v}")
        return _TRANSFORMS[int(v)]
    if isinstance(v, bytes):
        v = v.decode()
    if v not in _TRANSFORMS:
        raise ValueError(f"unknown post_transform {v!r}; expected one of {_TRANSFORMS}")
    return v


def probit(p: np.ndarray) -> np.ndarray:
    """sqrt(2) * erfinv(2p - 1), with the closed-form erfinv approximation (a = 0.147) that
    onnxruntime uses, so scores agree with it to float precision."""
    x = 2.0 * p - 1.0
    sgn = np.where(x < 0, -1.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ln = np.log((1.0 - x) * (1.0 + x))
        v = 2.0 / (3.14159 * 0.147) + 0.5 * ln
        v3 = -v + np.sqrt(v * v - ln / 0.147)
        return 1.41421356 * sgn * np.sqrt(v3)


def softmax(s: np.ndarray) -> np.ndarray:
    # ufunc reductions: the array methods' Python wrappers cost as much as a batch-1 row
    e = np.exp(s - np.maximum.reduce(s, axis=1, keepdims=True))
    e /= np.add.reduce(e, axis=1, keepdims=True)
    return e


def softmax_zero(s: np.ndarray) -> np.ndarray:
    """Softmax over the non-zero scores of a row; a zero score is only rescaled by
    exp(-max), as onnxruntime does (so it stays zero, or tiny where it was tiny)."""
    m = s.max(axis=1, keepdims=True)
    nz = np.abs(s) > 1e-7
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        e = np.where(nz, np.exp(s - m), s * np.exp(-m))
        tot = np.where(nz, e, 0).sum(axis=1, keepdims=True)
        return e / tot


def post_transform(s: np.ndarray, name: str) -> np.ndarray:
    """Apply a post_transform to a 2-D [N, C] float score array (a new array)."""
    if name == "NONE":
        return s
    if name == "LOGISTIC":
        with np.errstate(over="ignore"):
            return 1.0 / (1.0 + np.exp(-s))
    if name == "SOFTMAX":
        return softmax(s) if s.shape[1] else s
    if name == "SOFTMAX_ZERO":
        return softmax_zero(s) if s.shape[1] else s
    if name == "PROBIT":
        return probit(s)
    raise ValueError(f"unknown post_transform {name!r}")


def as_2d_float(x: np.ndarray, dtype: Any = np.float64) -> np.ndarray:
    """The [N, F] feature matrix of an ML op's input (a 1-D input is one sample)."""
    x = np.asarray(x)
    if x.ndim == 0:
        x = x.reshape(1, 1)
    elif x.ndim == 1:
        x = x.reshape(1, -1)
    elif x.ndim > 2:
        x = x.reshape(x.shape[0], -1)
    return x.astype(dtype, copy=False)


def string_array(values: Sequence[str]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


def labels_array(attrs: dict[str, Any], ints: str, strings: str) -> np.ndarray | None:
    """Class labels from an int64 or a string attribute (whichever is given and non-empty)."""
    s = attrs.get(strings)
    if s:
        return string_array(s)
    i = attrs.get(ints)
    if i:
        return np.asarray(i, dtype=np.int64)
    return None
