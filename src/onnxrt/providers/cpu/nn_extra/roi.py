"""RoiAlign (10, 16, 22) and MaxRoiPool (1, 22).

RoiAlign: rois sharing a sampling grid size are processed together, a chunk at a time, from
a channels-last copy of the map. Avg pooling gathers each roi's tap rows x tap columns once
and contracts them with separable (y, x) weights; max pooling takes, as onnxruntime does, the
largest weighted corner of each sample and then the largest sample. Out-of-map samples count
as zeros.
"""

from __future__ import annotations

import math

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.nn_extra._common import compute_dtype

_CHUNK_ELEMS = 1 << 22  # gathered elements per chunk: bounds the temporary memory


def _axis_samples(start: np.ndarray, size: np.ndarray, pooled: int, grid: int, limit: int):
    """Sample taps along one axis for a group of rois.

    Returns (low, high, w_low, w_high) of shape [R, pooled * grid]; w_* are zero for samples
    outside (-1, limit].
    """
    bin_sz = size / pooled
    p = np.arange(pooled, dtype=np.float64)[:, None]
    g = (np.arange(grid, dtype=np.float64)[None, :] + 0.5) / grid
    pos = start[:, None, None] + (p + g)[None] * bin_sz[:, None, None]   # [R, P, G]
    pos = pos.reshape(pos.shape[0], -1)
    outside = (pos < -1.0) | (pos > limit)
    pos = np.maximum(pos, 0.0)
    low = np.floor(pos).astype(np.int64)
    at_edge = low >= limit - 1
    low = np.where(at_edge, limit - 1, low)
    high = np.where(at_edge, limit - 1, low + 1)
    pos = np.where(at_edge, low.astype(np.float64), pos)
    frac = pos - low
    w_low = np.where(outside, 0.0, 1.0 - frac)
    w_high = np.where(outside, 0.0, frac)
    return low, high, w_low, w_high


def _bin_weights(low, high, w_low, w_high, pooled: int, grid: int):
    """Taps [R, 2S] and averaging weights [R, pooled, 2S] along one axis (S = pooled*grid)."""
    r, n_s = low.shape
    taps = np.concatenate([low, high], axis=1)
    wts = np.concatenate([w_low, w_high], axis=1) / grid         # [R, 2S]
    owner = np.tile(np.arange(n_s) // grid, 2)                     # bin of each tap
    onehot = owner[None, :] == np.arange(pooled)[:, None]          # [pooled, 2S]
    return taps, np.where(onehot[None], wts[:, None, :], 0.0)


def _avg_pool_separable(xc, b, ys, xs, ph, pw, g_h, g_w, cdt):
    """Average pooling of bilinear samples as two small contractions per roi: the weights are
    separable in y and x, so gather the tap rows/columns once and contract each axis."""
    yt, wy = _bin_weights(*ys, ph, g_h)
    xt, wx = _bin_weights(*xs, pw, g_w)
    g = xc[b, yt[:, :, None], xt[:, None, :]]                      # [R, 2SY, 2SX, C]
    k, ny, nx, c = g.shape
    # einsum's own loops, not BLAS: these are many tiny matrices, where BLAS threading costs
    # more than it saves
    t = np.einsum("rpy,ryxc->rpxc", wy.astype(cdt), g)             # [R, PH, 2SX, C]
    o = np.einsum("rqx,rpxc->rcpq", wx.astype(cdt), t)             # [R, C, PH, PW]
    return o


def roi_align_core(x, rois, batch_indices, *, mode, output_height, output_width,
                   sampling_ratio, spatial_scale, half_pixel):
    if x.ndim != 4:
        raise ValueError(f"RoiAlign: X must be 4-D, got shape {x.shape}")
    if rois.ndim != 2 or rois.shape[1] != 4:
        raise ValueError(f"RoiAlign: rois must be [num_rois, 4], got {rois.shape}")
    if mode not in ("avg", "max"):
        raise ValueError(f"RoiAlign: unknown mode {mode!r}")
    n, c, h, w = x.shape
    r = rois.shape[0]
    ph, pw = int(output_height), int(output_width)
    cdt = compute_dtype(x.dtype)
    out = np.zeros((r, c, ph, pw), dtype=cdt)
    if r == 0:
        return out.astype(x.dtype)
    bidx = np.asarray(batch_indices).astype(np.int64).reshape(-1)
    if bidx.size != r:
        raise ValueError("RoiAlign: batch_indices must have one entry per roi")
    if np.any((bidx < 0) | (bidx >= n)):
        raise ValueError(f"RoiAlign: batch_indices out of range [0, {n})")
    off = 0.5 if half_pixel else 0.0
    rr = rois.astype(np.float64) * float(spatial_scale) - off
    x0, y0, x1, y1 = rr[:, 0], rr[:, 1], rr[:, 2], rr[:, 3]
    rw, rh = x1 - x0, y1 - y0
    if not half_pixel:  # the legacy mode forces rois at least one pixel wide
        rw, rh = np.maximum(rw, 1.0), np.maximum(rh, 1.0)
    if sampling_ratio > 0:
        gh = np.full(r, int(sampling_ratio))
        gw = np.full(r, int(sampling_ratio))
    else:
        gh = np.ceil(rh / ph).astype(np.int64)
        gw = np.ceil(rw / pw).astype(np.int64)
    # NHWC copy: each gathered sample is one contiguous row of channels
    xc = np.ascontiguousarray(x.astype(cdt, copy=False).transpose(0, 2, 3, 1))
    keys = np.stack([gh, gw], 1)
    for key in np.unique(keys, axis=0):
        sel = np.nonzero((keys == key).all(1))[0]
        g_h, g_w = int(key[0]), int(key[1])
        if g_h <= 0 or g_w <= 0:
            continue  # an empty sampling grid pools to 0
        per_roi = ph * g_h * pw * g_w * c * 4
        step = max(1, _CHUNK_ELEMS // max(per_roi, 1))
        for s0 in range(0, sel.size, step):
            ids = sel[s0:s0 + step]
            yl, yh, wyl, wyh = _axis_samples(y0[ids], rh[ids], ph, g_h, h)
            xl, xh, wxl, wxh = _axis_samples(x0[ids], rw[ids], pw, g_w, w)
            b = bidx[ids][:, None, None]
            k = ids.size
            if mode == "avg":
                out[ids] = _avg_pool_separable(xc, b, (yl, yh, wyl, wyh), (xl, xh, wxl, wxh),
                                               ph, pw, g_h, g_w, cdt)
                continue
            v_ll = xc[b, yl[:, :, None], xl[:, None, :]]   # [R, SY, SX, C]
            v_lh = xc[b, yl[:, :, None], xh[:, None, :]]
            v_hl = xc[b, yh[:, :, None], xl[:, None, :]]
            v_hh = xc[b, yh[:, :, None], xh[:, None, :]]
            w_ll = (wyl[:, :, None] * wxl[:, None, :]).astype(cdt)[..., None]
            w_lh = (wyl[:, :, None] * wxh[:, None, :]).astype(cdt)[..., None]
            w_hl = (wyh[:, :, None] * wxl[:, None, :]).astype(cdt)[..., None]
            w_hh = (wyh[:, :, None] * wxh[:, None, :]).astype(cdt)[..., None]
            # max: the largest weighted corner of each sample, then the largest sample
            val = np.maximum(np.maximum(v_ll * w_ll, v_lh * w_lh),
                             np.maximum(v_hl * w_hl, v_hh * w_hh))
            val = val.reshape(k, ph, g_h, pw, g_w, c).max(axis=(2, 4))
            out[ids] = val.transpose(0, 3, 1, 2)
    return out.astype(x.dtype, copy=False)


@CPU.kernel("RoiAlign", since=16)
def roi_align_16(x, rois, batch_indices, *, coordinate_transformation_mode, mode,
                 output_height, output_width, sampling_ratio, spatial_scale):
    if coordinate_transformation_mode not in ("half_pixel", "output_half_pixel"):
        raise ValueError(f"RoiAlign: unknown coordinate_transformation_mode "
                         f"{coordinate_transformation_mode!r}")
    return roi_align_core(x, rois, batch_indices, mode=mode, output_height=output_height,
                          output_width=output_width, sampling_ratio=sampling_ratio,
                          spatial_scale=spatial_scale,
                          half_pixel=coordinate_transformation_mode == "half_pixel")


@CPU.kernel("RoiAlign", since=10, until=15)
def roi_align_10(x, rois, batch_indices, *, mode, output_height, output_width,
                 sampling_ratio, spatial_scale):
    return roi_align_core(x, rois, batch_indices, mode=mode, output_height=output_height,
                          output_width=output_width, sampling_ratio=sampling_ratio,
                          spatial_scale=spatial_scale, half_pixel=False)


def _round_away(v: float) -> int:
    """Round half away from zero (C's round), which the roi corners use."""
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


@CPU.kernel("MaxRoiPool", since=1)
def max_roi_pool(x, rois, *, pooled_shape=None, spatial_scale):
    if pooled_shape is None or len(pooled_shape) != 2:
        raise ValueError("MaxRoiPool: pooled_shape must give (height, width)")
    if x.ndim != 4 or rois.ndim != 2 or rois.shape[1] != 5:
        raise ValueError(f"MaxRoiPool: X must be 4-D and rois [num_rois, 5], got {x.shape}, "
                         f"{rois.shape}")
    n, c, h, w = x.shape
    ph, pw = int(pooled_shape[0]), int(pooled_shape[1])
    r = rois.shape[0]
    out = np.zeros((r, c, ph, pw), dtype=x.dtype)
    rv = rois.astype(np.float64)
    for i in range(r):  # per roi; the bins are reduced separably (columns, then rows)
        b = int(rv[i, 0])
        if b < 0 or b >= n:
            raise ValueError(f"MaxRoiPool: roi {i} batch index {b} out of range")
        sw, sh, ew, eh = (_round_away(v * spatial_scale) for v in rv[i, 1:])
        rh = max(eh - sh + 1, 1)
        rw = max(ew - sw + 1, 1)
        bh, bw = rh / ph, rw / pw
        hs = [min(max(int(math.floor(p * bh)) + sh, 0), h) for p in range(ph)]
        he = [min(max(int(math.ceil((p + 1) * bh)) + sh, 0), h) for p in range(ph)]
        ws = [min(max(int(math.floor(p * bw)) + sw, 0), w) for p in range(pw)]
        we = [min(max(int(math.ceil((p + 1) * bw)) + sw, 0), w) for p in range(pw)]
        lo, hi = min(hs), max(he)
        if hi <= lo:
            continue
        plane = x[b, :, lo:hi]
        cols = np.zeros((c, hi - lo, pw), dtype=x.dtype)
        empty_w = [we[q] <= ws[q] for q in range(pw)]
        for q in range(pw):
            if not empty_w[q]:
                cols[:, :, q] = plane[:, :, ws[q]:we[q]].max(axis=2)
        for p in range(ph):
            if he[p] > hs[p]:
                out[i, :, p] = cols[:, hs[p] - lo:he[p] - lo].max(axis=1)
        for q in range(pw):
            if empty_w[q]:
                out[i, :, :, q] = 0
    return out
