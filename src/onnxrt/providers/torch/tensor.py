"""Shape and layout ops, indexing, scatter, CumSum and TopK on torch tensors. Shapes, axes,
pads and repeats arrive as host arrays (``host_inputs``)."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from onnxrt.providers.torch.registry import ALL, IDX, NUM, TORCH

K = TORCH.kernel
_ALLI = ALL | IDX


def _axis(a: int, r: int) -> int:
    a = int(a)
    return a + r if a < 0 else a


@K("Reshape", since=5, dtypes=_ALLI, host_inputs=(1,))
def reshape(x, shape, *, allowzero=0):
    dims = [int(v) for v in shape]
    if not allowzero:
        dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return x.reshape(dims)


@K("Flatten", since=1, dtypes=ALL)
def flatten(x, *, axis=1):
    ax = _axis(axis, x.dim())
    return x.reshape(math.prod(x.shape[:ax]), math.prod(x.shape[ax:]))


@K("Squeeze", since=13, dtypes=_ALLI, host_inputs=(1,))
def squeeze(x, axes=None):
    if axes is None:
        return x.squeeze()
    dims = tuple(_axis(a, x.dim()) for a in np.asarray(axes).reshape(-1))
    return x.squeeze(dims) if dims else x


@K("Squeeze", since=1, until=12, dtypes=ALL)
def squeeze_v1(x, *, axes=None):
    return squeeze(x, axes)


@K("Unsqueeze", since=13, dtypes=_ALLI, host_inputs=(1,))
def unsqueeze(x, axes):
    axes = np.asarray(axes).reshape(-1)
    r = x.dim() + len(axes)
    shape = list(x.shape)
    for a in sorted(_axis(a, r) for a in axes):
        shape.insert(a, 1)
    return x.reshape(shape)


@K("Unsqueeze", since=1, until=12, dtypes=ALL)
def unsqueeze_v1(x, *, axes):
    return unsqueeze(x, axes)


@K("Transpose", since=1, dtypes=ALL)
def transpose(x, *, perm=None):
    if perm is None:
        perm = list(reversed(range(x.dim())))
    return x.permute(*[int(p) for p in perm])


@K("Concat", since=4, dtypes=_ALLI)
def concat(*xs, axis):
    return torch.cat(xs, dim=_axis(axis, xs[0].dim()))


def _split(x, axis, sizes, n_out):
    ax = _axis(axis, x.dim())
    if sizes is None:
        n = x.shape[ax]
        sizes = [-(-n // n_out)] * n_out
        sizes[-1] = n - sizes[0] * (n_out - 1)
    return tuple(torch.split(x, [int(s) for s in sizes], dim=ax))


@K("Split", since=13, dtypes=_ALLI, host_inputs=(1,), needs_node=True)
def split(x, sizes=None, *, axis=0, num_outputs=None, node=None):
    return _split(x, axis, None if sizes is None or not len(sizes) else sizes,
                  node.num_outputs)


@K("Split", since=2, until=12, dtypes=ALL, needs_node=True)
def split_v2(x, *, axis=0, split=None, node=None):
    return _split(x, axis, split or None, node.num_outputs)


@K("Slice", since=10, dtypes=_ALLI, host_inputs=(1, 2, 3, 4))
def slice_(x, starts, ends, axes=None, steps=None):
    r = x.dim()
    axes = list(range(len(starts))) if axes is None else [_axis(a, r) for a in axes]
    steps = [1] * len(starts) if steps is None else [int(s) for s in steps]
    index: list = [slice(None)] * r
    flips = []
    for a, s, e, st in zip(axes, starts, ends, steps):
        rng = range(*slice(int(s), int(e), st).indices(x.shape[a]))
        if st > 0:
            index[a] = slice(rng.start, max(rng.start, rng.stop), st)
        else:
            flips.append((a, rng))
    y = x[tuple(index)]
    for a, rng in flips:  # torch slices have no negative steps: gather those axes
        y = y.index_select(a, torch.arange(rng.start, rng.stop, rng.step, device=y.device))
    return y


@K("Slice", since=1, until=9, dtypes=ALL)
def slice_v1(x, *, starts, ends, axes=None):
    return slice_(x, starts, ends, axes)


def _fix(idx, n):
    idx = idx.to(torch.int64)
    return torch.where(idx < 0, idx + n, idx)


@K("Gather", since=1, dtypes=_ALLI)
def gather(x, idx, *, axis=0):
    ax = _axis(axis, x.dim())
    n = x.shape[ax]
    flat = _fix(idx, n).reshape(-1)
    y = x.index_select(ax, flat)
    return y.reshape(tuple(x.shape[:ax]) + tuple(idx.shape) + tuple(x.shape[ax + 1:]))


@K("GatherElements", since=11, dtypes=_ALLI)
def gather_elements(x, idx, *, axis=0):
    ax = _axis(axis, x.dim())
    return torch.gather(x, ax, _fix(idx, x.shape[ax]))


@K("GatherND", since=11, dtypes=_ALLI)
def gather_nd(x, idx, *, batch_dims=0):
    b = int(batch_dims)
    k = idx.shape[-1]
    bshape = tuple(x.shape[:b])
    nb = math.prod(bshape)
    xs = x.reshape((nb,) + tuple(x.shape[b:]))
    ii = idx.to(torch.int64).reshape(nb, -1, k)
    bidx = torch.arange(nb, device=x.device).reshape(nb, 1).expand(nb, ii.shape[1])
    y = xs[(bidx,) + tuple(ii[..., j] for j in range(k))]
    return y.reshape(tuple(idx.shape[:-1]) + tuple(x.shape[b + k:]))


@K("Expand", since=8, dtypes=_ALLI, host_inputs=(1,))
def expand(x, shape):
    out = torch.broadcast_shapes(tuple(x.shape), tuple(int(v) for v in shape))
    return x.expand(out)


@K("Tile", since=6, dtypes=_ALLI, host_inputs=(1,))
def tile(x, repeats):
    return x.repeat(*[int(v) for v in repeats])


def _pad_index(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """Source positions of a padded axis for reflect, edge and wrap."""
    pos = np.arange(-before, n + after)
    if mode == "edge":
        return np.clip(pos, 0, n - 1)
    if mode == "wrap":
        return pos % n
    if n == 1:
        return np.zeros_like(pos)
    period = 2 * (n - 1)
    m = pos % period
    return np.where(m < n, m, period - m)


def _pad(x, pads, mode, value, axes=None):
    r = x.dim()
    pads = [int(p) for p in pads]
    axes = list(range(r)) if axes is None else [_axis(a, r) for a in axes]
    na = len(axes)
    begins = dict(zip(axes, pads[:na]))
    ends = dict(zip(axes, pads[na:]))
    if mode == "constant":
        tp = []
        for a in reversed(range(r)):
            tp += [begins.get(a, 0), ends.get(a, 0)]
        return F.pad(x, tp, value=value)
    y = x
    for a in axes:
        b, e = begins[a], ends[a]
        if b == 0 and e == 0:
            continue
        if b < 0 or e < 0:  # cropping part first, then the padding
            y = y.narrow(a, max(0, -b), y.shape[a] - max(0, -b) - max(0, -e))
            b, e = max(b, 0), max(e, 0)
        src = _pad_index(y.shape[a], b, e, mode)
        y = y.index_select(a, torch.from_numpy(src).to(y.device))
    return y


@K("Pad", since=11, dtypes=_ALLI, host_inputs=(1, 2, 3))
def pad(x, pads, value=None, axes=None, *, mode="constant"):
    v = 0 if value is None or np.size(value) == 0 else np.asarray(value).reshape(()).item()
    if x.dtype == torch.bool:
        v = bool(v)
    return _pad(x, pads, mode, v, None if axes is None else [int(a) for a in axes])


@K("Pad", since=2, until=10, dtypes=ALL)
def pad_v2(x, *, pads, mode="constant", value=0.0):
    return _pad(x, pads, mode, value)


@K("Trilu", since=14, dtypes=_ALLI, host_inputs=(1,))
def trilu(x, k=None, *, upper=1):
    kk = 0 if k is None else int(np.asarray(k).reshape(()))
    return torch.triu(x, kk) if upper else torch.tril(x, kk)


@K("NonZero", since=9, dtypes=ALL)
def nonzero(x):
    return torch.nonzero(x.reshape(1) if x.dim() == 0 else x).t().contiguous()


_REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


@K("ScatterND", since=11, dtypes=_ALLI)
def scatter_nd(data, idx, upd, *, reduction="none"):
    k = idx.shape[-1]
    shape = tuple(data.shape)
    ii = idx.to(torch.int64).reshape(-1, k)
    dims = torch.tensor(shape[:k], dtype=torch.int64, device=data.device)
    ii = torch.where(ii < 0, ii + dims, ii)
    rest = math.prod(shape[k:])
    u = upd.reshape(ii.shape[0], rest)
    strides = torch.tensor([math.prod(shape[j + 1:k]) for j in range(k)], dtype=torch.int64,
                           device=data.device)
    lin = (ii * strides).sum(dim=1)
    out = data.reshape(math.prod(shape[:k]), rest).clone()
    if reduction == "none":
        out[lin] = u
    else:
        out.scatter_reduce_(0, lin.reshape(-1, 1).expand(-1, rest), u, _REDUCE[reduction],
                            include_self=True)
    return out.reshape(shape)


@K("ScatterElements", since=11, dtypes=_ALLI)
def scatter_elements(data, idx, upd, *, axis=0, reduction="none"):
    ax = _axis(axis, data.dim())
    ii = _fix(idx, data.shape[ax])
    if reduction == "none":
        return torch.scatter(data, ax, ii, upd)
    return torch.scatter_reduce(data, ax, ii, upd, _REDUCE[reduction], include_self=True)


@K("Scatter", since=9, until=10, dtypes=_ALLI)
def scatter_v9(data, idx, upd, *, axis=0):
    return scatter_elements(data, idx, upd, axis=axis)


@K("CumSum", since=11, dtypes=NUM - {np.dtype(np.int8), np.dtype(np.int16),
                                      np.dtype(np.uint8)} | IDX, host_inputs=(1,))
def cumsum(x, axis, *, exclusive=0, reverse=0):
    ax = _axis(int(np.asarray(axis).reshape(())), x.dim())
    y = x.flip(ax) if reverse else x
    c = torch.cumsum(y, ax, dtype=x.dtype)
    if exclusive:
        n = c.shape[ax]
        c = torch.cat([torch.zeros_like(c.narrow(ax, 0, min(1, n))),
                       c.narrow(ax, 0, max(0, n - 1))], ax)
    return c.flip(ax) if reverse else c


@K("TopK", since=10, dtypes=NUM | IDX, host_inputs=(1,))
def topk(x, k, *, axis=-1, largest=1, sorted=1):  # noqa: A002
    ax = _axis(axis, x.dim())
    kk = int(np.asarray(k).reshape(-1)[0])
    # a stable sort keeps equal values in index order, as ONNX requires
    vals, idx = torch.sort(x, dim=ax, descending=bool(largest), stable=True)
    return vals.narrow(ax, 0, kk), idx.narrow(ax, 0, kk)


@K("TopK", since=1, until=9, dtypes=NUM)
def topk_v1(x, *, k, axis=-1):
    return topk(x, np.array([k]), axis=axis)

