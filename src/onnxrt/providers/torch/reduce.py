"""Reductions, ArgMax and ArgMin on torch tensors (axes as attribute or host input)."""

from __future__ import annotations

import numpy as np
import torch

from onnxrt.providers.torch.registry import BOOL, FLOAT, IDX, NUM, TORCH

K = TORCH.kernel


def _dims(x, axes, noop):
    """The reduced dims, or None for "return the input as is"."""
    if axes is None or len(axes) == 0:
        return None if noop else tuple(range(x.dim()))
    r = x.dim()
    return tuple(sorted({int(a) + r if int(a) < 0 else int(a) for a in axes}))


def _lowp(fn):
    """Reduce float16/bfloat16 in float32 (sums of many halves lose too much), cast back."""
    def wrapped(x, dims, keep):
        if x.dtype in (torch.float16, torch.bfloat16):
            return fn(x.float(), dims, keep).to(x.dtype)
        return fn(x, dims, keep)
    return wrapped


def _prod(x, dims, keep):
    y = x
    for d in sorted(dims, reverse=True):
        y = torch.prod(y, d, keepdim=keep)
    return y


def _logsum(x, d, k):
    return torch.log(torch.sum(x, d, keepdim=k))


_OPS = {
    "ReduceSum": (_lowp(lambda x, d, k: torch.sum(x, d, keepdim=k, dtype=x.dtype)), NUM),
    "ReduceMean": (_lowp(lambda x, d, k: torch.mean(x, d, keepdim=k)), FLOAT),
    "ReduceMax": (lambda x, d, k: torch.amax(x, d, keepdim=k), NUM | BOOL),
    "ReduceMin": (lambda x, d, k: torch.amin(x, d, keepdim=k), NUM | BOOL),
    "ReduceProd": (_prod, NUM),
    "ReduceL1": (lambda x, d, k: torch.sum(torch.abs(x), d, keepdim=k, dtype=x.dtype), NUM),
    "ReduceL2": (_lowp(lambda x, d, k: torch.sqrt(torch.sum(x * x, d, keepdim=k))), FLOAT),
    "ReduceLogSum": (_lowp(_logsum), FLOAT),
    "ReduceLogSumExp": (_lowp(lambda x, d, k: torch.logsumexp(x, d, keepdim=k)), FLOAT),
    "ReduceSumSquare": (_lowp(lambda x, d, k: torch.sum(x * x, d, keepdim=k,
                                                        dtype=x.dtype)), NUM),
}


def _make(fn, empty):
    def with_input(x, axes=None, *, keepdims=1, noop_with_empty_axes=0):
        ax = None if axes is None else np.asarray(axes).reshape(-1)
        dims = _dims(x, ax, noop_with_empty_axes)
        if dims is None:
            return x
        if empty is not None and any(x.shape[d] == 0 for d in dims):
            return _empty(x, dims, keepdims, empty)
        return fn(x, dims, bool(keepdims))

    def with_attr(x, *, axes=None, keepdims=1, noop_with_empty_axes=0):
        return with_input(x, axes, keepdims=keepdims, noop_with_empty_axes=noop_with_empty_axes)

    return with_input, with_attr


def _empty(x, dims, keepdims, sign):
    # torch refuses max/min over an empty axis; ONNX gives the reduction's identity
    shape = [1 if i in dims else n for i, n in enumerate(x.shape) if keepdims or i not in dims]
    if x.dtype == torch.bool:
        v = sign > 0
    elif x.is_floating_point():
        v = sign * float("inf")
    else:
        info = torch.iinfo(x.dtype)
        v = info.max if sign > 0 else info.min
    return torch.full(shape, v, dtype=x.dtype, device=x.device)


_EMPTY = {"ReduceMax": -1, "ReduceMin": 1}
for _op, (_fn, _dt) in _OPS.items():
    _inp, _att = _make(_fn, _EMPTY.get(_op))
    _since_input = 13 if _op == "ReduceSum" else 18
    TORCH.register(_op, _inp, since=_since_input, dtypes=_dt | IDX, host_inputs=(1,))
    TORCH.register(_op, _att, since=1, until=_since_input - 1, dtypes=_dt)


def _arg(fn):
    def kernel(x, *, axis=0, keepdims=1, select_last_index=0):
        ax = int(axis) + x.dim() if int(axis) < 0 else int(axis)
        if select_last_index:
            n = x.shape[ax]
            return (n - 1) - fn(x.flip(ax), dim=ax, keepdim=bool(keepdims))
        return fn(x, dim=ax, keepdim=bool(keepdims))
    return kernel


TORCH.register("ArgMax", _arg(torch.argmax), since=1, dtypes=NUM)
TORCH.register("ArgMin", _arg(torch.argmin), since=1, dtypes=NUM)
