"""Sequence ops (all opset 11 but SplitToSequence 24, which only widens the types).

Sequences are never changed in place: Insert and Erase build a new list (the input list may
be a session constant, a user feed or another node's output still to be read).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.ir.dtypes import np_dtype
from onnxrt.providers.cpu import CPU


def _position(pos: Any, n: int, upper: int, op: str) -> int:
    """A normalized position checked against [-n, upper]."""
    a = np.asarray(pos)
    if a.size != 1 or a.dtype.kind not in "iu":
        raise ValueError(f"{op} position must be an integer scalar, got {a.dtype} {a.shape}")
    p = int(a.reshape(-1)[0])
    if not -n <= p <= upper:
        raise ValueError(f"{op} position {p} is out of range [{-n}, {upper}] for a sequence "
                         f"of {n} tensors")
    return p + n if p < 0 else p


def _seq(s: Any, op: str) -> list[Any]:
    if not isinstance(s, (list, tuple)):
        raise TypeError(f"{op} expects a sequence, got {type(s).__name__}")
    return s  # type: ignore[return-value]


@CPU.kernel("SequenceConstruct", since=11)
def sequence_construct(*tensors: Any) -> list[Any]:
    if tensors:
        dt = np.asarray(tensors[0]).dtype
        bad = [np.asarray(t).dtype for t in tensors if np.asarray(t).dtype != dt]
        if bad:
            raise TypeError(f"SequenceConstruct inputs must share one element type: {dt} and "
                            f"{bad[0]}")
    return list(tensors)


@CPU.kernel("SequenceEmpty", since=11)
def sequence_empty(*, dtype: int | None = None) -> list[Any]:
    if dtype is not None:
        np_dtype(dtype)  # reject an unknown element type now rather than later
    return []


@CPU.kernel("SequenceLength", since=11)
def sequence_length(seq: Any) -> np.ndarray:
    return np.array(len(_seq(seq, "SequenceLength")), dtype=np.int64)


@CPU.kernel("SequenceAt", since=11, host_inputs=(1,))
def sequence_at(seq: Any, position: Any) -> Any:
    seq = _seq(seq, "SequenceAt")
    n = len(seq)
    return seq[_position(position, n, n - 1, "SequenceAt")]


@CPU.kernel("SequenceInsert", since=11, host_inputs=(2,))
def sequence_insert(seq: Any, tensor: Any, position: Any = None) -> list[Any]:
    seq = _seq(seq, "SequenceInsert")
    if seq:
        want = np.asarray(seq[0]).dtype
        got = np.asarray(tensor).dtype
        if want != got:
            raise TypeError(f"SequenceInsert: tensor of type {got} into a sequence of {want}")
    out = list(seq)
    n = len(seq)
    if position is None:
        out.append(tensor)
    else:
        out.insert(_position(position, n, n, "SequenceInsert"), tensor)
    return out


@CPU.kernel("SequenceErase", since=11, host_inputs=(1,))
def sequence_erase(seq: Any, position: Any = None) -> list[Any]:
    seq = _seq(seq, "SequenceErase")
    n = len(seq)
    if n == 0:
        raise ValueError("SequenceErase on an empty sequence")
    p = n - 1 if position is None else _position(position, n, n - 1, "SequenceErase")
    return list(seq[:p]) + list(seq[p + 1:])


@CPU.kernel("SplitToSequence", since=11, host_inputs=(1,))
def split_to_sequence(x: np.ndarray, split: Any = None, *, axis: int = 0,
                      keepdims: int = 1) -> list[np.ndarray]:
    x = np.asarray(x)
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"SplitToSequence axis {axis} is out of range for rank {x.ndim}")
    axis %= x.ndim
    dim = x.shape[axis]
    if split is None:
        # size-1 chunks; keepdims=0 drops the split axis (the views are free either way)
        moved = np.moveaxis(x, axis, 0)
        if keepdims:
            return [np.expand_dims(v, axis) for v in moved]
        return list(moved)
    s = np.asarray(split)
    if s.dtype.kind not in "iu":
        raise TypeError(f"SplitToSequence split must be int32/int64, got {s.dtype}")
    if s.ndim == 0:
        size = int(s)
        if size <= 0:
            raise ValueError(f"SplitToSequence split must be positive, got {size}")
        bounds = list(range(size, dim, size))
    elif s.ndim == 1:
        sizes = [int(v) for v in s]
        if any(v < 0 for v in sizes) or sum(sizes) != dim:
            raise ValueError(f"SplitToSequence split {sizes} must be non-negative and sum to "
                             f"the axis size {dim}")
        bounds = list(np.cumsum(sizes)[:-1]) if sizes else []
        if not sizes:
            return []
    else:
        raise ValueError(f"SplitToSequence split must be a scalar or 1-D, got shape {s.shape}")
    return np.split(x, bounds, axis=axis)


@CPU.kernel("ConcatFromSequence", since=11)
def concat_from_sequence(seq: Any, *, axis: int, new_axis: int = 0) -> np.ndarray:
    seq = _seq(seq, "ConcatFromSequence")
    if not seq:
        raise ValueError("ConcatFromSequence of an empty sequence (its element type and "
                         "shape are unknown)")
    rank = np.ndim(seq[0])
    hi = rank + 1 if new_axis else rank
    if not -hi <= axis < hi:
        raise ValueError(f"ConcatFromSequence axis {axis} is out of range [{-hi}, {hi - 1}] "
                         f"(rank {rank}, new_axis={new_axis})")
    try:
        if new_axis:
            return np.stack(seq, axis=axis)
        return np.concatenate(seq, axis=axis)
    except ValueError as e:
        shapes = [np.shape(t) for t in seq[:4]]
        raise ValueError(f"ConcatFromSequence: shapes {shapes} do not fit axis {axis}: {e}") \
            from None
