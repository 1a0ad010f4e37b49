"""Training losses usable at inference: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss.

The spec defines both as context-dependent functions; direct kernels avoid planning a body
per input type and gather the target entries with one ``take_along_axis``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU


def _compute_dtype(dt: np.dtype) -> np.dtype:
    # half-precision inputs (float16, bfloat16) are reduced in float32
    return np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)


def _nll(logp: np.ndarray, target: np.ndarray, weight: np.ndarray | None,
         ignore_index: int | None, reduction: str) -> np.ndarray:
    """``-logp[n, target[n, ...], ...] * weight[target]`` reduced; ``logp`` in compute type."""
    if logp.ndim < 2:
        raise ValueError(f"input must be at least 2-D (N, C, ...), got shape {logp.shape}")
    if target.shape != (logp.shape[0],) + logp.shape[2:]:
        raise ValueError(f"target shape {target.shape} does not match input shape "
                         f"{logp.shape} (expected (N, d1, ...))")
    C = logp.shape[1]
    t = target.astype(np.int64, copy=False)
    keep = None
    if ignore_index is not None:
        keep = t != ignore_index
        if not keep.all():
            t = np.where(keep, t, 0)  # any valid class: its term is zeroed below
        else:
            keep = None
    if t.size and (t.min() < 0 or t.max() >= C):
        bad = t[(t < 0) | (t >= C)].reshape(-1)[0]
        raise ValueError(f"target value {bad} is out of range [0, {C})")
    loss = np.take_along_axis(logp, t[:, None], axis=1)[:, 0]
    np.negative(loss, out=loss)
    w = None
    if weight is not None:
        if weight.shape != (C,):
            raise ValueError(f"weight must have shape ({C},), got {weight.shape}")
        w = weight.astype(logp.dtype, copy=False)[t]
    if keep is not None:
        w = keep.astype(logp.dtype) if w is None else w * keep
    if w is not None:
        loss *= w
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.asarray(loss.sum(dtype=logp.dtype))
    if reduction == "mean":
        total = loss.sum(dtype=logp.dtype)
        denom = loss.size if w is None else w.sum(dtype=logp.dtype)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(total / logp.dtype.type(denom))
    raise ValueError(f"reduction must be 'none', 'sum' or 'mean', got {reduction!r}")


@CPU.kernel("NegativeLogLikelihoodLoss", since=12)
def negative_log_likelihood_loss(input: np.ndarray, target: np.ndarray,
                                 weight: np.ndarray | None = None, *,
                                 ignore_index: int | None = None,
                                 reduction: str = "mean") -> np.ndarray:
    cdt = _compute_dtype(input.dtype)
    out = _nll(input.astype(cdt, copy=False), target, weight, ignore_index, reduction)
    return out.astype(input.dtype, copy=False)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max(axis=1, keepdims=True)
    y = x - m
    y -= np.log(np.exp(y).sum(axis=1, keepdims=True))
    return y


@CPU.kernel("SoftmaxCrossEntropyLoss", since=12)
def softmax_cross_entropy_loss(scores: np.ndarray, labels: np.ndarray,
                               weights: np.ndarray | None = None, *,
                               ignore_index: int | None = None,
                               reduction: str = "mean") -> tuple[Any, ...]:
    cdt = _compute_dtype(scores.dtype)
    logp = _log_softmax(scores.astype(cdt, copy=False))
    loss = _nll(logp, labels, weights, ignore_index, reduction)
    return (loss.astype(scores.dtype, copy=False), logp.astype(scores.dtype, copy=False))
