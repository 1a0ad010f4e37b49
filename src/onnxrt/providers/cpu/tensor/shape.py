"""Shape ops: Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Expand, Identity,
ConstantOfShape, EyeLike. Reshape/Flatten/Squeeze/Unsqueeze return views, never copies.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from onnxrt.ir.dtypes import np_dtype
from onnxrt.providers.cpu import CPU
from onnxrt.validate.alloc import check_alloc


def _ints(v: Any) -> list[int]:
    """A host shape/axes value (array, list or scalar) as a list of Python ints."""
    return [int(i) for i in np.asarray(v).reshape(-1).tolist()]


def _norm_axes(axes: Sequence[int], rank: int, op: str) -> list[int]:
    out = []
    for a in axes:
        if not -rank <= a < rank:
            raise ValueError(f"{op}: axis {a} is out of range for rank {rank}")
        out.append(a + rank if a < 0 else a)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axes {list(axes)}")
    return out


# -- Shape, Size -----------------------------------------------------------------------------

@CPU.kernel("Shape", since=1)
def shape(x, *, start=0, end=None):
    dims = np.shape(x)
    if start == 0 and end is None:
        return np.array(dims, dtype=np.int64)
    r = len(dims)
    s = min(max(start + r if start < 0 else start, 0), r)
    e = r if end is None else min(max(end + r if end < 0 else end, 0), r)
    return np.array(dims[s:e], dtype=np.int64)


@CPU.kernel("Size", since=1)
def size(x):
    return np.array(np.size(x), dtype=np.int64)


# -- Reshape, Flatten ----------------------------------------------------------------------

def reshape_target(in_shape: tuple[int, ...], shape: Sequence[int], allowzero: int) -> list[int]:
    """The output shape of Reshape: 0 copies the input dim (unless allowzero), -1 is inferred."""
    out = list(shape)
    infer = -1
    for i, d in enumerate(out):
        if d == 0 and not allowzero:
            if i >= len(in_shape):
                raise ValueError(f"Reshape: shape {list(shape)} copies dim {i} (0) but the "
                                 f"input has rank {len(in_shape)}")
            out[i] = in_shape[i]
        elif d == -1:
            if infer >= 0:
                raise ValueError(f"Reshape: shape {list(shape)} has more than one -1")
            infer = i
        elif d < 0:
            raise ValueError(f"Reshape: invalid dim {d} in shape {list(shape)}")
    total = 1
    for d in in_shape:
        total *= d
    if infer >= 0:
        known = 1
        for i, d in enumerate(out):
            if i != infer:
                known *= d
        if known == 0 or total % known:
            raise ValueError(f"Reshape: cannot reshape input of shape {list(in_shape)} to "
                             f"{list(shape)}")
        out[infer] = total // known
    return out


def _reshape(x, shape, allowzero):
    target = reshape_target(x.shape, shape, allowzero)
    try:
        return x.reshape(target)
    except ValueError:
        raise ValueError(f"Reshape: cannot reshape input of shape {list(x.shape)} to "
                         f"{list(shape)} (target {target})") from None


@CPU.kernel("Reshape", since=5, host_inputs=(1,))
class Reshape:
    def __init__(self, node: Any) -> None:
        self.allowzero = int(node.attrs.get("allowzero", 0))
        c = node.constant_inputs.get(1)
        self.shape = None if c is None else _ints(c)
        # a constant shape without 0 or -1 needs no work per run
        self.fixed = (self.shape if self.shape is not None
                      and all(d > 0 for d in self.shape) else None)

    def __call__(self, x, shape=None):
        if self.fixed is not None:
            try:
                return x.reshape(self.fixed)
            except ValueError:
                pass  # fall through for the full error message
        return _reshape(x, self.shape if self.shape is not None else _ints(shape),
                        self.allowzero)


@CPU.kernel("Reshape", since=1, until=4)
def reshape_v1(x, *, shape=None, consumed_inputs=None):
    if shape is None:
        raise ValueError("Reshape-1 needs the 'shape' attribute")
    return _reshape(x, shape, 0)


@CPU.kernel("Flatten", since=1)
def flatten(x, *, axis=1):
    r = x.ndim
    if not -r <= axis <= r:
        raise ValueError(f"Flatten: axis {axis} is out of range for rank {r}")
    if axis < 0:
        axis += r
    outer = 1
    for d in x.shape[:axis]:
        outer *= d
    inner = 1
    for d in x.shape[axis:]:
        inner *= d
    return x.reshape(outer, inner)


# -- Squeeze, Unsqueeze ----------------------------------------------------------------------

def _squeeze(x, axes):
    if axes is None:
        return x.reshape([d for d in x.shape if d != 1])
    ax = _norm_axes(axes, x.ndim, "Squeeze")
    for a in ax:
        if x.shape[a] != 1:
            raise ValueError(f"Squeeze: dim {a} of input shape {list(x.shape)} is not 1")
    return x.reshape([d for i, d in enumerate(x.shape) if i not in ax])


def _unsqueeze(x, axes):
    r = x.ndim + len(axes)
    ax = set(_norm_axes(axes, r, "Unsqueeze"))
    it = iter(x.shape)
    return x.reshape([1 if i in ax else next(it) for i in range(r)])


# output shapes of Squeeze/Unsqueeze by (input shape, axes bytes): the shape chains around a
# streaming model's LSTM run a dozen of them per chunk, each ~3 us of axis checks in Python
_SHAPES: dict[tuple[Any, ...], tuple[int, ...]] = {}
_SHAPES_KEPT = 4096


def _memo_reshape(op: Any, x: np.ndarray, axes: Any) -> np.ndarray:
    if type(axes) is np.ndarray and axes.dtype == np.int64 and axes.size <= 8:
        key = (op, x.shape, axes.tobytes())
        out = _SHAPES.get(key)
        if out is None:
            out = op(x, _ints(axes)).shape      # raises on bad axes: nothing is kept
            if len(_SHAPES) < _SHAPES_KEPT:
                _SHAPES[key] = out
        return x.reshape(out)
    return op(x, _ints(axes))


@CPU.kernel("Squeeze", since=1, until=12)
def squeeze_v1(x, *, axes=None):
    return _squeeze(np.asarray(x), axes)


@CPU.kernel("Squeeze", since=13, host_inputs=(1,))
def squeeze(x, axes=None):
    x = np.asarray(x)
    return _squeeze(x, None) if axes is None else _memo_reshape(_squeeze, x, axes)


@CPU.kernel("Unsqueeze", since=1, until=12)
def unsqueeze_v1(x, *, axes=None):
    if axes is None:
        raise ValueError("Unsqueeze needs the 'axes' attribute")
    return _unsqueeze(np.asarray(x), axes)


@CPU.kernel("Unsqueeze", since=13, host_inputs=(1,))
def unsqueeze(x, axes):
    return _memo_reshape(_unsqueeze, np.asarray(x), axes)


# -- Expand, Identity ------------------------------------------------------------------------

@CPU.kernel("Expand", since=8, host_inputs=(1,))
def expand(x, shape):
    x = np.asarray(x)
    target = _ints(shape)
    try:
        out_shape = np.broadcast_shapes(x.shape, tuple(target))
    except ValueError:
        raise ValueError(f"Expand: input shape {list(x.shape)} cannot be broadcast to "
                         f"{target}") from None
    if out_shape == x.shape:
        return x
    check_alloc(out_shape, x.dtype, "Expand")
    # materialized (like onnxruntime): a zero-stride view would be read-only for users
    out = np.empty(out_shape, dtype=x.dtype)
    out[...] = x
    return out


@CPU.kernel("Identity", since=1)
def identity(x):
    return x


# -- ConstantOfShape, EyeLike ----------------------------------------------------------------

@CPU.kernel("ConstantOfShape", since=9, host_inputs=(0,))
def constant_of_shape(shape, *, value=None):
    dims = _ints(shape)
    if any(d < 0 for d in dims):
        raise ValueError(f"ConstantOfShape: negative dim in shape {dims}")
    v = np.zeros(1, np.float32) if value is None else np.asarray(value)
    check_alloc(dims, v.dtype, "ConstantOfShape")
    if value is None:
        return np.zeros(dims, dtype=np.float32)
    if v.size != 1:
        raise ValueError(f"ConstantOfShape: 'value' must hold one element, not {v.size}")
    return np.full(dims, v.reshape(-1)[0], dtype=v.dtype)


@CPU.kernel("EyeLike", since=9)
def eye_like(x, *, dtype=None, k=0):
    if x.ndim != 2:
        raise ValueError(f"EyeLike: input must be 2-D, got shape {list(x.shape)}")
    dt = x.dtype if dtype is None else np_dtype(int(dtype))
    n, m = x.shape
    out = np.zeros((n, m), dtype=dt)
    # the k-th diagonal as flat positions: row i, column i + k
    i0 = max(0, -k)
    cnt = max(0, min(n - i0, m - (i0 + k)))
    if cnt:
        flat = out.reshape(-1)
        start = i0 * m + i0 + k
        flat[start:start + cnt * (m + 1):m + 1] = np.ones(1, dtype=dt)
    return out
