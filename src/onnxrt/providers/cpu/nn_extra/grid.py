"""GridSample (16, 20, 22) and AffineGrid (20).

GridSample is vectorized over every output location at once: per spatial axis it computes the
tap indices and weights (1 tap nearest, 2 linear, 4 cubic), then loops only over the tap
combinations (at most 4**3 = 64), gathering from the flattened spatial plane.
"""

from __future__ import annotations

import itertools

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.nn_extra._common import compute_dtype

_CUBIC_A = -0.75


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Reflect coordinates into [lo, hi] (repeatedly, like a mirror at both ends)."""
    span = hi - lo
    if span <= 0:
        return np.zeros_like(x)
    d = np.abs(x - lo)
    n = np.floor(d / span)
    r = d - n * span
    odd = (n.astype(np.int64) % 2) == 1
    return np.where(odd, hi - r, lo + r)


def _cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    a = _CUBIC_A

    def near(s):
        return ((a + 2) * s - (a + 3)) * s * s + 1

    def far(s):
        return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def grid_sample_core(x: np.ndarray, grid: np.ndarray, mode: str, padding_mode: str,
                     align_corners: bool) -> np.ndarray:
    if mode == "bilinear":
        mode = "linear"
    elif mode == "bicubic":
        mode = "cubic"
    if mode not in ("nearest", "linear", "cubic"):
        raise ValueError(f"GridSample: unknown mode {mode!r}")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"GridSample: unknown padding_mode {padding_mode!r}")
    r = x.ndim - 2
    if grid.ndim != r + 2 or grid.shape[-1] != r:
        raise ValueError(f"GridSample: grid shape {grid.shape} does not fit input {x.shape}")
    n, c = x.shape[:2]
    sizes = x.shape[2:]
    out_sp = grid.shape[1:-1]
    cdt = compute_dtype(x.dtype)
    # channels-last copy: each sample then gathers one contiguous row of C values
    xt = np.ascontiguousarray(x.astype(cdt, copy=False).reshape(n, c, -1).transpose(0, 2, 1))
    bidx = np.arange(n)[:, None]
    g = grid.astype(np.float64 if cdt == np.float64 else np.float32, copy=False)
    g = g.reshape(n, -1, r)
    q = g.shape[1]
    per_axis = []  # per spatial axis (outermost first): list of (index, weight, valid)
    for ax in range(r):
        size = sizes[ax]
        gc = g[:, :, r - 1 - ax].astype(np.float64)  # grid's last entry is the outermost axis
        if align_corners:
            pos = (gc + 1.0) / 2.0 * (size - 1)
            lo, hi = 0.0, size - 1.0
        else:
            pos = ((gc + 1.0) * size - 1.0) / 2.0
            lo, hi = -0.5, size - 0.5
        if padding_mode == "border" and mode != "cubic":
            # cubic keeps the raw position; its taps are clamped to the border instead
            pos = np.clip(pos, 0.0, size - 1.0)
        elif padding_mode == "reflection":
            pos = _reflect(pos, lo, hi)
        if mode == "nearest":
            base = np.rint(pos)
            offs, ws = [0], None
        elif mode == "linear":
            base = np.floor(pos)
            t = pos - base
            offs, ws = [0, 1], [1.0 - t, t]
        else:
            base = np.floor(pos)
            t = pos - base
            offs, ws = [-1, 0, 1, 2], _cubic_weights(t)
        base = np.where(np.isfinite(base), base, -2.0 ** 40).astype(np.int64)
        taps = []
        for k, o in enumerate(offs):
            idx = base + o
            valid = (idx >= 0) & (idx < size)
            if padding_mode == "zeros":
                pass
            elif padding_mode == "border":
                idx = np.clip(idx, 0, size - 1)
                valid = None
            else:  # reflection: taps past the edge mirror back inside as well
                idx = np.rint(_reflect(idx.astype(np.float64), lo, hi)).astype(np.int64)
                valid = None
            w = None if ws is None else ws[k].astype(cdt)
            taps.append((np.clip(idx, 0, max(size - 1, 0)), w, valid))
        per_axis.append(taps)
    strides = [int(np.prod(sizes[ax + 1:], dtype=np.int64)) for ax in range(r)]
    out = np.zeros((n, q, c), dtype=cdt)
    for combo in itertools.product(*per_axis):
        flat = np.zeros((n, q), dtype=np.int64)
        w = None
        valid = None
        for ax, (idx, wa, va) in enumerate(combo):
            flat += idx * strides[ax]
            if wa is not None:
                w = wa if w is None else w * wa
            if va is not None:
                valid = va if valid is None else valid & va
        if valid is not None:
            w = valid.astype(cdt) if w is None else np.where(valid, w, cdt.type(0))
        vals = xt[bidx, flat]                       # [N, Q, C]
        if w is not None:
            vals *= w[:, :, None]
        out += vals
    out = out.transpose(0, 2, 1).reshape((n, c) + tuple(out_sp))
    return np.ascontiguousarray(out.astype(x.dtype, copy=False))


@CPU.kernel("GridSample", since=20)
def grid_sample_20(x, grid, *, align_corners, mode, padding_mode):
    return grid_sample_core(x, grid, mode, padding_mode, bool(align_corners))


@CPU.kernel("GridSample", since=16, until=19)
def grid_sample_16(x, grid, *, align_corners, mode, padding_mode):
    if x.ndim != 4:
        raise ValueError("GridSample-16 supports 4-D inputs only")
    return grid_sample_core(x, grid, mode, padding_mode, bool(align_corners))


@CPU.kernel("AffineGrid", since=20, host_inputs=(1,))
def affine_grid(theta, size, *, align_corners):
    size = [int(s) for s in np.asarray(size).reshape(-1)]
    r = len(size) - 2
    if r not in (2, 3):
        raise ValueError(f"AffineGrid: size must have 4 or 5 entries, got {size}")
    n = size[0]
    if theta.shape != (n, r, r + 1):
        raise ValueError(f"AffineGrid: theta shape {theta.shape}, expected {(n, r, r + 1)}")
    cdt = compute_dtype(theta.dtype)
    axes = []
    for s in size[2:]:  # outermost first
        if align_corners:
            v = np.linspace(-1.0, 1.0, s) if s > 1 else np.zeros(s)
        else:
            v = (np.arange(s, dtype=np.float64) * 2.0 + 1.0) / s - 1.0
        axes.append(v.astype(cdt))
    mesh = np.meshgrid(*axes, indexing="ij")
    # homogeneous coordinates in (x, y[, z], 1) order: innermost axis first
    coords = [m.reshape(-1) for m in mesh[::-1]] + [np.ones(mesh[0].size, dtype=cdt)]
    base = np.stack(coords, axis=1)  # [P, r+1]
    th = theta.astype(cdt, copy=False)
    out = np.matmul(base[None], np.swapaxes(th, 1, 2))  # [N, P, r]
    return out.reshape([n] + size[2:] + [r]).astype(theta.dtype, copy=False)
