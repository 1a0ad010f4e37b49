"""Layout ops: Transpose, Concat, Split, Slice, Tile, Pad, DepthToSpace, SpaceToDepth,
CenterCropPad, ReverseSequence, Trilu. Transpose, Slice and Split return views.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from onnxrt.framework.parallel import ThreadPool, split
from onnxrt.providers.cpu import CPU
from onnxrt.validate.alloc import check_alloc


def _ints(v: Any) -> list[int]:
    return [int(i) for i in np.asarray(v).reshape(-1).tolist()]


def _axis(a: int, rank: int, op: str) -> int:
    if not -rank <= a < rank:
        raise ValueError(f"{op}: axis {a} is out of range for rank {rank}")
    return a + rank if a < 0 else a


# -- Transpose, Concat -----------------------------------------------------------------------

@CPU.kernel("Transpose", since=1)
def transpose(x, *, perm=None):
    x = np.asarray(x)
    if perm is None:
        return x.T
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"Transpose: perm {perm} is not a permutation of rank {x.ndim}")
    return x.transpose(perm)


# outputs at least this big are copied by the session's threads (each a range of the
# dimensions before the axis): the copy is bandwidth-bound on one core (squeezenet's
# 8x128x55x55: 0.86 ms on one thread)
_PAR_CONCAT_BYTES = 2 << 20


@CPU.kernel("Concat", since=4, threads=True)
def concat(*xs, axis, ctx=None):
    if not xs:
        raise ValueError("Concat needs at least one input")
    if len(xs) == 1:
        return xs[0]
    ax = _axis(axis, np.ndim(xs[0]), "Concat")
    x0 = xs[0]
    if (ax > 0 and isinstance(x0, np.ndarray) and x0.nbytes * len(xs) >= _PAR_CONCAT_BYTES
            and ctx is not None and ctx.thread_pool.threads > 1):
        out = _concat_split(xs, ax, ctx.thread_pool)
        if out is not None:
            return out
    return np.concatenate(xs, axis=ax)


def _concat_split(xs: Sequence[Any], ax: int, pool: ThreadPool) -> np.ndarray | None:
    """np.concatenate(xs, ax) copied in parallel: the leading dimensions (before ``ax``)
    in one contiguous range per thread; None where the inputs do not fit that (other
    dtypes or ranks, a leading extent of 1, shapes that do not concatenate)."""
    x0 = xs[0]
    lead = x0.shape[:ax]
    rest = x0.shape[ax + 1:]
    if (int(np.prod(lead)) < 2 or any(not isinstance(x, np.ndarray) or x.dtype != x0.dtype
                                      or x.shape[:ax] != lead or x.shape[ax + 1:] != rest
                                      for x in xs)):
        return None
    n = int(np.prod(lead))
    widths = [int(x.shape[ax]) for x in xs]
    inner = int(np.prod(rest))
    out = np.empty(lead + (sum(widths),) + rest, x0.dtype)
    o3 = out.reshape(n, -1, inner)
    srcs = [np.ascontiguousarray(x).reshape(n, w, inner) for x, w in zip(xs, widths)]
    offs = np.cumsum([0] + widths)
    parts = split(n, pool.threads)

    def copy(k: int) -> None:
        lo, hi = parts[k]
        for x3, a, b in zip(srcs, offs[:-1], offs[1:]):
            np.copyto(o3[lo:hi, a:b], x3[lo:hi])

    pool.parallel_for(len(parts), copy)
    return out


@CPU.kernel("Concat", since=1, until=3)
def concat_v1(*xs, axis=1):
    return concat(*xs, axis=axis)


# -- Split -----------------------------------------------------------------------------------

def _split_sizes(dim: int, split: list[int] | None, n_out: int, num_outputs: int | None
                 ) -> list[int]:
    if split is not None:
        if sum(split) != dim or any(s < 0 for s in split):
            raise ValueError(f"Split: sizes {split} do not add up to the dim {dim}")
        return split
    if num_outputs is not None:
        n = int(num_outputs)
        if n < 1:
            raise ValueError(f"Split: num_outputs must be positive, not {n}")
        chunk = -(-dim // n)  # the last chunk is the smaller one when dim is uneven
        sizes = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
        # onnxruntime refuses an empty last chunk (4 split into 3 would be 2, 2, 0)
        if sizes[-1] < 0 or (sizes[-1] == 0 and chunk > 0):
            raise ValueError(f"Split: a dim of {dim} cannot be split into {n} outputs")
        return sizes
    if dim % n_out:
        raise ValueError(f"Split: a dim of {dim} cannot be split evenly into {n_out} outputs")
    return [dim // n_out] * n_out


@CPU.kernel("Split", since=1, host_inputs=(1,))
class Split:
    def __init__(self, node: Any) -> None:
        a = node.attrs
        self.axis = int(a.get("axis", 0))
        self.num_outputs = a.get("num_outputs")
        self.n_out = node.num_outputs
        split = a.get("split")
        if split is None and 1 in node.constant_inputs:
            split = node.constant_inputs[1]
        self.split = None if split is None else _ints(split)

    def __call__(self, x, split=None):
        x = np.asarray(x)
        axis = _axis(self.axis, x.ndim, "Split")
        sp = self.split
        if sp is None and split is not None and np.size(split):
            sp = _ints(split)
        sizes = _split_sizes(x.shape[axis], sp, self.n_out, self.num_outputs)
        pre = (slice(None),) * axis
        outs = []
        start = 0
        for s in sizes:
            outs.append(x[pre + (slice(start, start + s),)])
            start += s
        return tuple(outs)


# -- Slice -----------------------------------------------------------------------------------

def _slice_key(ndim: int | None, starts: Sequence[int], ends: Sequence[int],
               axes: Sequence[int] | None, steps: Sequence[int] | None) -> tuple[slice, ...]:
    n = len(starts)
    if len(ends) != n:
        raise ValueError(f"Slice: starts {list(starts)} and ends {list(ends)} differ in length")
    if axes is None:
        axes = range(n)
    elif len(axes) != n:
        raise ValueError(f"Slice: axes {list(axes)} and starts {list(starts)} differ in length")
    if steps is None:
        steps = [1] * n
    elif len(steps) != n:
        raise ValueError(f"Slice: steps {list(steps)} and starts {list(starts)} differ in length")
    if ndim is None:  # axes known non-negative: a key as long as the largest axis needs
        ndim = max(axes, default=-1) + 1
    key = [slice(None)] * ndim
    seen = set()
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = _axis(a, ndim, "Slice")
        if a in seen:
            raise ValueError(f"Slice: axis {a} repeated in axes {list(axes)}")
        seen.add(a)
        if st == 0:
            raise ValueError("Slice: steps must not be 0")
        # Python's slice clamping is exactly ONNX's (negatives count from the end; for a
        # negative step the start clamps to dim-1 and the end to "before the first")
        key[a] = slice(s, e, st)
    return tuple(key)


@CPU.kernel("Slice", since=10, host_inputs=(1, 2, 3, 4))
class Slice:
    def __init__(self, node: Any) -> None:
        c = node.constant_inputs
        self.key = None  # the index, when every parameter is a constant
        self.params = None  # the constants, when some axis is negative (needs the rank)
        if all(i in c or not node.input_present(i) for i in range(1, len(node.inputs))):
            params = tuple(None if i not in c else _ints(c[i]) for i in range(1, 5))
            axes = params[2] if params[2] is not None else range(len(params[0] or ()))
            if params[0] is not None and params[1] is not None:
                if all(a >= 0 for a in axes):
                    self.key = _slice_key(None, *params)
                else:
                    self.params = params

    def __call__(self, x, starts=None, ends=None, axes=None, steps=None):
        x = np.asarray(x)
        if self.key is not None:
            if len(self.key) > x.ndim:
                raise ValueError(f"Slice: axes exceed the input rank {x.ndim}")
            return x[self.key]
        if self.params is not None:
            return x[_slice_key(x.ndim, *self.params)]
        return x[_slice_key(x.ndim, _ints(starts), _ints(ends),
                            None if axes is None else _ints(axes),
                            None if steps is None else _ints(steps))]


@CPU.kernel("Slice", since=1, until=9)
def slice_v1(x, *, starts, ends, axes=None):
    x = np.asarray(x)
    return x[_slice_key(x.ndim, starts, ends, axes, None)]


# -- Tile ------------------------------------------------------------------------------------

@CPU.kernel("Tile", since=6, host_inputs=(1,))
def tile(x, repeats):
    x = np.asarray(x)
    reps = _ints(repeats)
    if len(reps) != x.ndim:
        raise ValueError(f"Tile: repeats {reps} must have one entry per dim of rank {x.ndim}")
    if any(r < 0 for r in reps):
        raise ValueError(f"Tile: repeats {reps} must not be negative")
    return _tile(x, reps)


def _tile(x: np.ndarray, reps: list[int]) -> np.ndarray:
    # one copy: broadcast (1, d0, 1, d1, ...) to (r0, d0, r1, d1, ...) and fold the pairs
    inter = [v for d in x.shape for v in (1, d)]
    big = [v for r, d in zip(reps, x.shape) for v in (r, d)]
    check_alloc(big, x.dtype, "Tile")
    out = np.empty(big, dtype=x.dtype)
    out[...] = x.reshape(inter)
    return out.reshape([r * d for r, d in zip(reps, x.shape)])


@CPU.kernel("Tile", since=1, until=5, host_inputs=(1, 2))
def tile_v1(x, tiles, axis):
    x = np.asarray(x)
    reps = [1] * x.ndim
    reps[_axis(int(np.asarray(axis).reshape(-1)[0]), x.ndim, "Tile")] = int(
        np.asarray(tiles).reshape(-1)[0])
    return _tile(x, reps)


# -- Pad -------------------------------------------------------------------------------------

def pad_array(x: np.ndarray, pads: Sequence[int], mode: str = "constant", value: Any = 0,
              axes: Sequence[int] | None = None) -> np.ndarray:
    """ONNX Pad: ``pads`` = begins then ends (for ``axes``, default all); negative pads crop."""
    r = x.ndim
    ax = list(range(r)) if axes is None else [_axis(int(a), r, "Pad") for a in axes]
    if len(pads) != 2 * len(ax):
        raise ValueError(f"Pad: {len(pads)} pads for {len(ax)} axes (need twice as many)")
    begin = [0] * r
    end = [0] * r
    for i, a in enumerate(ax):
        begin[a] = int(pads[i])
        end[a] = int(pads[i + len(ax)])
    if min(begin) < 0 or min(end) < 0:  # negative pads crop first
        if any(d + min(b, 0) + min(e, 0) < 0 for b, e, d in zip(begin, end, x.shape)):
            raise ValueError(f"Pad: negative pads {list(pads)} remove more than the whole "
                             f"dim of shape {list(x.shape)}")
        key = tuple(slice(-b if b < 0 else 0, d + e if e < 0 else d)
                    for b, e, d in zip(begin, end, x.shape))
        x = x[key]
        begin = [max(b, 0) for b in begin]
        end = [max(e, 0) for e in end]
    if not any(begin) and not any(end):
        return x
    if mode == "constant":
        out = np.full([d + b + e for d, b, e in zip(x.shape, begin, end)], value,
                      dtype=x.dtype)
        out[tuple(slice(b, b + d) for b, d in zip(begin, x.shape))] = x
        return out
    if mode not in ("reflect", "edge", "wrap"):
        raise ValueError(f"Pad: unknown mode {mode!r} (constant, reflect, edge or wrap)")
    for a, (b, e) in enumerate(zip(begin, end)):
        d = x.shape[a]
        if (b or e) and d == 0:
            raise ValueError(f"Pad: cannot {mode}-pad axis {a}: it is empty")
        if mode == "reflect" and max(b, e) > d - 1:  # onnxruntime refuses this too
            raise ValueError(f"Pad: reflect pads ({b}, {e}) exceed dim {d} - 1 on axis {a}")
    if mode == "wrap" and any(b > d or e > d for b, e, d in zip(begin, end, x.shape)):
        return np.pad(x, list(zip(begin, end)), mode=mode)     # wraps more than once
    return _pad_copy(x, begin, end, mode)


def _pad_copy(x: np.ndarray, begin: list[int], end: list[int], mode: str) -> np.ndarray:
    """Edge, reflect or wrap padding as slice copies inside the output, one axis after the
    other (np.pad's Python costs ~30-60 us a call: a streaming detector pads every chunk).
    Each axis copies whole extents of the others: what it copies from a later axis's pads
    is overwritten when that axis is filled from its (by then complete) interior."""
    out = np.empty([d + b + e for d, b, e in zip(x.shape, begin, end)], dtype=x.dtype)
    out[tuple([slice(b, b + d) for b, d in zip(begin, x.shape)])] = x
    pre: tuple[slice, ...] = ()
    for b, e, d in zip(begin, end, x.shape):
        if b or e:
            lo, hi = b, b + d           # the interior along this axis
            if mode == "edge":
                if b:
                    out[pre + (slice(0, lo),)] = out[pre + (slice(lo, lo + 1),)]
                if e:
                    out[pre + (slice(hi, hi + e),)] = out[pre + (slice(hi - 1, hi),)]
            elif mode == "reflect":     # the edge element itself is not repeated
                if b:
                    out[pre + (slice(0, lo),)] = out[pre + (slice(2 * lo, lo, -1),)]
                if e:
                    stop = hi - 2 - e
                    out[pre + (slice(hi, hi + e),)] = out[
                        pre + (slice(hi - 2, stop if stop >= 0 else None, -1),)]
            else:                       # wrap, each pad at most the dim
                if b:
                    out[pre + (slice(0, lo),)] = out[pre + (slice(hi - b, hi),)]
                if e:
                    out[pre + (slice(hi, hi + e),)] = out[pre + (slice(lo, lo + e),)]
        pre += (slice(None),)
    return out


def _pad_value(x: np.ndarray, v: Any) -> Any:
    if v is None:
        return "" if x.dtype == object else 0
    v = np.asarray(v)
    if v.size == 0:
        return "" if x.dtype == object else 0
    return v.reshape(-1)[0]


@CPU.kernel("Pad", since=11, host_inputs=(1, 2, 3))
class Pad:
    """Constant pads, value and axes read once; per input shape, the checked begin/end pads
    kept, so a repeated call is one copy (a streaming detector reflect-pads
    every 32 ms chunk: ~11 us a call through pad_array, most of it checks)."""

    def __init__(self, node: Any) -> None:
        self.mode = str(node.attrs.get("mode", "constant"))
        c = node.constant_inputs
        self.const = all(i in c or not node.input_present(i) for i in range(1, 4))
        self.pads = _ints(c[1]) if self.const and 1 in c else None
        self.axes = _ints(c[3]) if self.const and 3 in c else None
        self.value = c.get(2) if self.const else None
        self._plans: dict[tuple[int, ...], tuple[list[int], list[int], str]] = {}

    def __call__(self, x, pads=None, constant_value=None, axes=None):
        x = np.asarray(x)
        if self.pads is None:
            return pad_array(x, _ints(pads), self.mode, _pad_value(x, constant_value),
                             None if axes is None else _ints(axes))
        plan = self._plans.get(x.shape)
        if plan is not None:
            return _pad_copy(x, *plan)
        out = pad_array(x, self.pads, self.mode, _pad_value(x, self.value), self.axes)
        if self.mode in ("reflect", "edge") and len(self._plans) < 16:
            # pad_array checked these pads for this shape and took the plain copy
            # (no crops: a negative pad is not kept)
            if min(self.pads) >= 0 and out is not x:
                self._plans[x.shape] = self._begin_end(x.ndim) + (self.mode,)
        return out

    def _begin_end(self, r: int) -> tuple[list[int], list[int]]:
        ax = list(range(r)) if self.axes is None else [_axis(a, r, "Pad") for a in self.axes]
        begin, end = [0] * r, [0] * r
        for i, a in enumerate(ax):
            begin[a] = self.pads[i]
            end[a] = self.pads[i + len(ax)]
        return begin, end


@CPU.kernel("Pad", since=2, until=10)
def pad_v2(x, *, pads, mode="constant", value=0.0):
    x = np.asarray(x)
    return pad_array(x, pads, mode, value)


@CPU.kernel("Pad", since=1, until=1)
def pad_v1(x, *, paddings, mode="constant", value=0.0):
    x = np.asarray(x)
    return pad_array(x, paddings, mode, value)


# -- DepthToSpace, SpaceToDepth, CenterCropPad -------------------------------------------------

@CPU.kernel("DepthToSpace", since=1)
def depth_to_space(x, *, blocksize, mode="DCR"):
    if x.ndim != 4:
        raise ValueError(f"DepthToSpace: input must be 4-D, got shape {list(x.shape)}")
    b, c, h, w = x.shape
    bs = int(blocksize)
    if bs <= 0 or c % (bs * bs):
        raise ValueError(f"DepthToSpace: channels {c} not divisible by blocksize^2 ({bs}^2)")
    if mode == "DCR":
        t = x.reshape(b, bs, bs, c // (bs * bs), h, w).transpose(0, 3, 4, 1, 5, 2)
    elif mode == "CRD":
        t = x.reshape(b, c // (bs * bs), bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
    else:
        raise ValueError(f"DepthToSpace: mode must be DCR or CRD, not {mode!r}")
    return t.reshape(b, c // (bs * bs), h * bs, w * bs)


@CPU.kernel("SpaceToDepth", since=1)
def space_to_depth(x, *, blocksize, mode="DCR"):
    if x.ndim != 4:
        raise ValueError(f"SpaceToDepth: input must be 4-D, got shape {list(x.shape)}")
    b, c, h, w = x.shape
    bs = int(blocksize)
    if bs <= 0 or h % bs or w % bs:
        raise ValueError(f"SpaceToDepth: spatial dims {h}x{w} not divisible by blocksize {bs}")
    t = x.reshape(b, c, h // bs, bs, w // bs, bs)
    if mode == "DCR":
        t = t.transpose(0, 3, 5, 1, 2, 4)
    elif mode == "CRD":
        t = t.transpose(0, 1, 3, 5, 2, 4)
    else:
        raise ValueError(f"SpaceToDepth: mode must be DCR or CRD, not {mode!r}")
    return t.reshape(b, c * bs * bs, h // bs, w // bs)


@CPU.kernel("CenterCropPad", since=18, host_inputs=(1,))
def center_crop_pad(x, shape, *, axes=None):
    x = np.asarray(x)
    target = _ints(shape)
    ax = (list(range(x.ndim)) if axes is None
          else [_axis(int(a), x.ndim, "CenterCropPad") for a in axes])
    if len(target) != len(ax):
        raise ValueError(f"CenterCropPad: shape {target} does not match axes {ax}")
    key = [slice(None)] * x.ndim
    out_shape = list(x.shape)
    place = [slice(None)] * x.ndim
    for a, t in zip(ax, target):
        d = x.shape[a]
        if t < d:  # crop: the window starts rounded down
            s = (d - t) // 2
            key[a] = slice(s, s + t)
        elif t > d:  # pad: the odd pixel goes to the end
            s = (t - d) // 2
            place[a] = slice(s, s + d)
        out_shape[a] = t
    cropped = x[tuple(key)]
    if tuple(out_shape) == cropped.shape:
        return cropped
    out = np.zeros(out_shape, dtype=x.dtype)
    out[tuple(place)] = cropped
    return out


# -- ReverseSequence, Trilu ------------------------------------------------------------------

@CPU.kernel("ReverseSequence", since=10)
def reverse_sequence(x, sequence_lens, *, batch_axis=1, time_axis=0):
    x = np.asarray(x)
    if {batch_axis, time_axis} != {0, 1}:
        raise ValueError(f"ReverseSequence: batch_axis/time_axis must be 0 and 1, got "
                         f"{batch_axis}/{time_axis}")
    lens = np.asarray(sequence_lens).astype(np.int64).reshape(-1)
    t_len, n_b = x.shape[time_axis], x.shape[batch_axis]
    if lens.shape[0] != n_b:
        raise ValueError(f"ReverseSequence: {lens.shape[0]} sequence_lens for batch {n_b}")
    if np.any(lens < 0) or np.any(lens > t_len):
        raise ValueError(f"ReverseSequence: sequence_lens must lie in [0, {t_len}]")
    t = np.arange(t_len)[:, None]
    src = np.where(t < lens[None, :], lens[None, :] - 1 - t, t)  # [time, batch]
    b = np.arange(n_b)[None, :]
    if time_axis == 0:
        return x[src, b]
    return x[b.T, src.T]


@CPU.kernel("Trilu", since=14, host_inputs=(1,))
def trilu(x, k=None, *, upper=1):
    x = np.asarray(x)
    if x.ndim < 2:
        raise ValueError(f"Trilu: input must have rank >= 2, got shape {list(x.shape)}")
    kk = 0 if k is None else int(np.asarray(k).reshape(-1)[0])
    n, m = x.shape[-2:]
    rows = np.arange(n)[:, None]
    cols = np.arange(m)[None, :]
    keep = (cols - rows >= kk) if upper else (cols - rows <= kk)
    return np.where(keep, x, np.zeros((), dtype=x.dtype))
