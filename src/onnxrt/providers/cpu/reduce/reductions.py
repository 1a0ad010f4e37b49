"""ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare, every schema version.

Axes come from the ``axes`` attribute (ReduceSum < 13, the others < 18) or from the optional
second input. No axes (or an empty axes input) reduces everything unless
``noop_with_empty_axes`` is set, which makes the op an identity. Reducing an empty set gives
the operation's identity: 0 for sums, 1 for products, -inf/+inf (or the integer type's
bounds) for Max/Min, -inf for the log sums.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from onnxrt.framework.kernel import NodeInfo
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.elementwise import trunc_divide

Axes = tuple[int, ...]


_F32 = np.dtype(np.float32)
_F16 = np.dtype(np.float16)


def _acc_dtype(dt: np.dtype) -> np.dtype:
    """Accumulate narrow floats in float32; every other type in itself (NumPy would widen
    small integers to int64)."""
    if dt.kind == "V" or dt == _F16:
        return _F32
    return dt


def _sum(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    return np.add.reduce(x, axis=axes, dtype=_acc_dtype(x.dtype), keepdims=keep)


def _count(x: np.ndarray, axes: Axes) -> int:
    n = 1
    for a in axes:
        n *= x.shape[a]
    return n


def r_sum(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    return _sum(x, axes, keep)


def r_mean(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    s = _sum(x, axes, keep)
    n = _count(x, axes)
    if s.dtype.kind in "iu":
        if n == 0:
            return np.zeros_like(s)
        return trunc_divide(s, np.asarray(n, dtype=s.dtype))
    if n == 0:
        with np.errstate(invalid="ignore"):   # the mean of nothing is NaN
            return s / n
    return np.divide(s, n, out=s) if s.ndim else s / n


def r_prod(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    return np.multiply.reduce(x, axis=axes, dtype=_acc_dtype(x.dtype), keepdims=keep)


def _extreme(uf: np.ufunc, lowest: bool) -> Callable[[np.ndarray, Axes, bool], np.ndarray]:
    def red(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
        if x.size and all(x.shape[a] for a in axes):
            return uf.reduce(x, axis=axes, keepdims=keep)
        dt = x.dtype
        if dt.kind == "b":
            init: Any = not lowest
        elif dt.kind == "f":
            init = np.inf if not lowest else -np.inf
        else:
            info = np.iinfo(dt)
            init = info.min if lowest else info.max
        return uf.reduce(x, axis=axes, keepdims=keep, initial=init)

    return red


r_max = _extreme(np.maximum, lowest=True)
r_min = _extreme(np.minimum, lowest=False)


def r_l1(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    return _sum(np.absolute(x), axes, keep)


def r_sum_square(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    if x.dtype.kind == "V" or x.dtype == np.float16:
        x = x.astype(np.float32)
    return _sum(np.multiply(x, x), axes, keep)


def r_l2(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    if x.dtype.kind in "iu":
        s = r_sum_square(x.astype(np.float64), axes, keep)
        return np.sqrt(s).astype(x.dtype)
    s = r_sum_square(x, axes, keep)
    return np.sqrt(s, out=s) if s.ndim else np.sqrt(s)


def r_log_sum(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    s = _sum(x, axes, keep)
    with np.errstate(divide="ignore"):   # log(0) = -inf is the answer for an empty set
        return np.log(s)


def r_log_sum_exp(x: np.ndarray, axes: Axes, keep: bool) -> np.ndarray:
    if x.dtype.kind == "V" or x.dtype == np.float16:
        x = x.astype(np.float32)
    m = r_max(x, axes, True)
    m = np.where(np.isfinite(m), m, 0).astype(x.dtype, copy=False)   # all -inf rows, empty sets
    e = np.subtract(x, m)
    np.exp(e, out=e)
    s = np.add.reduce(e, axis=axes, keepdims=True)
    with np.errstate(divide="ignore"):
        s = np.log(s)
    s += m
    return s if keep else s.reshape([d for i, d in enumerate(s.shape) if i not in axes])


def _norm_axes(axes: Any, ndim: int) -> Axes:
    out = []
    for a in np.asarray(axes, dtype=np.int64).reshape(-1).tolist():
        if not -max(ndim, 1) <= a < max(ndim, 1):
            raise ValueError(f"axis {a} is out of range for a tensor of rank {ndim}")
        out.append(a + ndim if a < 0 else a)
    return tuple(sorted(set(out))) if ndim else ()


class _Reduce:
    """One reduction node: attributes read once; constant axes normalized per rank."""

    red: Callable[[np.ndarray, Axes, bool], np.ndarray]

    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        self.keep = bool(a.get("keepdims", 1))
        self.noop = bool(a.get("noop_with_empty_axes", 0))
        self.axes_attr = a.get("axes")
        self.op = node.op_type
        # the attribute's axes normalized per input rank (~3 us a call through _norm_axes)
        self._axes_by_rank: dict[int, Axes] = {}

    def __call__(self, x: np.ndarray, axes: Any = None) -> np.ndarray:
        if self.axes_attr is not None:
            ax = self._axes_by_rank.get(x.ndim)
            if ax is not None:
                return self._reduce(x, ax)
            axes = self.axes_attr
        if axes is None or np.size(axes) == 0:
            if self.noop:
                return x
            ax: Axes = tuple(range(x.ndim))
        else:
            ax = _norm_axes(axes, x.ndim)
            if self.axes_attr is not None:
                self._axes_by_rank[x.ndim] = ax
        return self._reduce(x, ax)

    def _reduce(self, x: np.ndarray, ax: Axes) -> np.ndarray:
        dt = x.dtype
        if dt.kind == "V":   # bfloat16 and the float8s: compute in float32 (exact widening)
            x = x.astype(np.float32)
        r = type(self).red(x, ax, self.keep)
        if type(r) is not np.ndarray:
            r = np.asarray(r)
        return r if r.dtype == dt else r.astype(dt)


def _register(op: str, red: Callable[[np.ndarray, Axes, bool], np.ndarray]) -> None:
    cls = type(op, (_Reduce,), {"red": staticmethod(red), "__doc__": f"{op}, every version."})
    CPU.register(op, cls, since=1, host_inputs=(1,))


for _op, _red in (("ReduceSum", r_sum), ("ReduceMean", r_mean), ("ReduceProd", r_prod),
                  ("ReduceMax", r_max), ("ReduceMin", r_min), ("ReduceL1", r_l1),
                  ("ReduceL2", r_l2), ("ReduceSumSquare", r_sum_square),
                  ("ReduceLogSum", r_log_sum), ("ReduceLogSumExp", r_log_sum_exp)):
    _register(_op, _red)
