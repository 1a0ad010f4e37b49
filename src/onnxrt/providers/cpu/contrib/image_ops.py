"""com.microsoft image ops: GridSample (the pre-ONNX version), CropAndResize,
MaxpoolWithMask and ConvTransposeWithDynamicPads."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.nn.conv_transpose import ConvTranspose
from onnxrt.providers.cpu.nn_extra.grid import grid_sample_16

MS = "com.microsoft"


@CPU.kernel("GridSample", since=1, domain=MS)
def grid_sample_ms(x, grid, *, align_corners=0, mode="bilinear", padding_mode="zeros"):
    """GridSample on 4-D inputs: mode bilinear, nearest or bicubic; padding zeros, border or
    reflection (ONNX GridSample-16's semantics, which it became)."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"GridSample: mode {mode!r} (bilinear, nearest, bicubic)")
    return grid_sample_16(x, grid, align_corners=align_corners, mode=mode,
                          padding_mode=padding_mode)


def _crop_coords(start: float, end: float, size: int, out: int, dt: Any) -> np.ndarray:
    """Source coordinates of ``out`` samples from start to end (normalized), corner
    aligned; one sample takes the middle. The first and last are set exactly."""
    if out > 1:
        step = dt((end - start) * (size - 1) / (out - 1))
        c = dt(start * (size - 1)) + np.arange(out, dtype=dt) * step
        c[0] = start * (size - 1)
        c[-1] = end * (size - 1)
        return c.astype(dt)
    return np.array([0.5 * (start + end) * (size - 1)], dt)


@CPU.kernel("CropAndResize", since=1, domain=MS, host_inputs=(3,))
def crop_and_resize(x, rois, batch_indices, crop_size, *, mode="bilinear",
                    extrapolation_value=0.0):
    """Crops of X (N, C, H, W) at normalized boxes [y1, x1, y2, x2], each resized to
    crop_size (bilinear or nearest, corner aligned); samples outside the image take
    ``extrapolation_value``. Output (num_rois, C, crop_h, crop_w)."""
    op = "CropAndResize"
    if mode not in ("bilinear", "nearest"):
        raise ValueError(f"{op}: mode {mode!r} (bilinear, nearest)")
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"{op}: X must be 4-D (N, C, H, W), got {x.shape}")
    cs = np.asarray(crop_size).reshape(-1)
    if cs.size != 2 or (cs <= 0).any():
        raise ValueError(f"{op}: crop_size must be 2 positive values, got {cs.tolist()}")
    ch, cw = int(cs[0]), int(cs[1])
    n, c, h, w = x.shape
    rois = np.asarray(rois)
    bi = np.asarray(batch_indices).reshape(-1).astype(np.int64)
    if rois.ndim != 2 or rois.shape[1] != 4 or rois.shape[0] != bi.size:
        raise ValueError(f"{op}: rois must be (num_rois, 4) matching batch_indices, got "
                         f"{rois.shape} and {bi.shape}")
    if bi.size and (bi.min() < 0 or bi.max() >= n):
        raise IndexError(f"{op}: batch_indices must be in [0, {n})")
    dt = x.dtype.type
    out = np.full((rois.shape[0], c, ch, cw), extrapolation_value, x.dtype)
    ev = dt(extrapolation_value)
    for r in range(rois.shape[0]):
        y1, x1, y2, x2 = (float(v) for v in rois[r])
        ys = _crop_coords(y1, y2, h, ch, dt)
        xs = _crop_coords(x1, x2, w, cw, dt)
        img = x[bi[r]].astype(np.float32)
        yok = (ys >= 0) & (ys <= h - 1)
        xok = (xs >= 0) & (xs <= w - 1)
        yc = np.clip(ys, 0, h - 1)
        xc = np.clip(xs, 0, w - 1)
        if mode == "bilinear":
            t, b = np.floor(yc).astype(np.int64), np.ceil(yc).astype(np.int64)
            lft, rgt = np.floor(xc).astype(np.int64), np.ceil(xc).astype(np.int64)
            yl = (yc - t).astype(np.float32)[:, None]
            xl = (xc - lft).astype(np.float32)[None, :]
            tl, tr = img[:, t][:, :, lft], img[:, t][:, :, rgt]
            bl, br = img[:, b][:, :, lft], img[:, b][:, :, rgt]
            top = tl + (tr - tl) * xl
            bot = bl + (br - bl) * xl
            v = top + (bot - top) * yl
        else:
            # roundf: halves away from zero
            yi = np.floor(yc.astype(np.float32) + np.float32(0.5)).astype(np.int64)
            xi = np.floor(xc.astype(np.float32) + np.float32(0.5)).astype(np.int64)
            v = img[:, yi][:, :, xi]
        ok = yok[:, None] & xok[None, :]
        out[r] = np.where(ok, v.astype(x.dtype), ev)
    return out


@CPU.kernel("MaxpoolWithMask", since=1, domain=MS)
def maxpool_with_mask(x, m, *, kernel_shape=None, strides=None, pads=None, auto_pad="NOTSET",
                      storage_order=0):
    """2-D max pooling (onnxruntime's internal op) where a window's scan along W stops at the
    first position whose mask is 0 (all but the image's first position): for each window
    row, the values before that position count. The mask plane of channel c starts at
    element (c * H * W) mod (mask N * mask C) of M."""
    op = "MaxpoolWithMask"
    x = np.asarray(x, np.float32)
    if x.ndim != 4 or kernel_shape is None or len(kernel_shape) != 2:
        raise ValueError(f"{op}: 4-D input with a 2-D kernel_shape is supported, got input "
                         f"{x.shape}, kernel_shape {kernel_shape}")
    if auto_pad not in ("NOTSET", "VALID"):
        raise ValueError(f"{op}: auto_pad {auto_pad!r} is not supported (NOTSET, VALID)")
    kh, kw = (int(k) for k in kernel_shape)
    sh, sw = (int(s) for s in (strides or [1, 1]))
    p = [int(v) for v in (pads or [0, 0, 0, 0])] if auto_pad == "NOTSET" else [0, 0, 0, 0]
    n, c, h, w = x.shape
    oh = (h + p[0] + p[2] - kh) // sh + 1
    ow = (w + p[1] + p[3] - kw) // sw + 1
    mflat = np.asarray(m).astype(np.int32).reshape(-1)
    mch = int(np.prod(np.shape(m)[:2])) if np.ndim(m) >= 2 else 1
    planes = x.reshape(n * c, h * w)
    offs = (np.arange(n * c, dtype=np.int64) * (h * w)) % max(mch, 1)
    idx = np.arange(h * w, dtype=np.int64)
    # mask value of every (plane, position): planes may overlap in M, read by offset
    mv = mflat[np.minimum(offs[:, None] + idx[None, :], mflat.size - 1)]
    y = np.full((n * c, oh, ow), np.finfo(np.float32).min, np.float32)
    for ph in range(oh):
        h0 = ph * sh - p[0]
        hs, he = max(h0, 0), min(h0 + kh, h)
        for pw in range(ow):
            w0 = pw * sw - p[1]
            ws, we = max(w0, 0), min(w0 + kw, w)
            best = y[:, ph, pw]
            for hh in range(hs, he):
                alive = np.ones(n * c, bool)
                for ww in range(ws, we):
                    i = hh * w + ww
                    if i > 0:
                        alive &= mv[:, i] != 0
                    np.maximum(best, np.where(alive, planes[:, i], best), out=best)
    return y.reshape(n, c, oh, ow)


@CPU.kernel("ConvTransposeWithDynamicPads", since=1, domain=MS, needs_node=True,
            host_inputs=(2,))
class ConvTransposeWithDynamicPads:
    """ConvTranspose whose pads come from the input Pads (begins then ends). The schema calls
    Pads optional, but onnxruntime's kernel refuses to run without it, and so does this."""

    def __init__(self, node: Any) -> None:
        self.ct = ConvTranspose(node)

    def __call__(self, x, w, pads=None, b=None):
        ct = self.ct
        if pads is None:
            raise ValueError("ConvTransposeWithDynamicPads: the Pads input is required")
        nd = x.ndim - 2
        p = [int(v) for v in np.asarray(pads).reshape(-1)]
        if len(p) != 2 * nd:
            raise ValueError(f"ConvTransposeWithDynamicPads: Pads must hold {2 * nd} values, "
                             f"got {len(p)}")
        ct = copy.copy(ct)          # per call: concurrent runs may pass other pads
        ct.pads = p
        return ct(x, w, b)
