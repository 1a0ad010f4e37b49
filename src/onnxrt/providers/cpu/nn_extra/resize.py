"""Resize (10, 11, 13, 18, 19) and Upsample (1, 7, 9): separable resampling.

Every resized axis gets a table, built once per (input length, output length, scale, options)
and cached: for each output position the input indices it reads (``taps``) and their weights.
Resizing is then one gather-and-weighted-sum per axis over the whole tensor, never a loop over
pixels. Nearest is a plain gather; linear and cubic read 2 and 4 taps, more when antialiasing
stretches the filter while downsampling.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.nn_extra._common import cast_back, compute_dtype

_DENSE_MAX_IN = 128  # innermost rows up to this long resize by matmul instead of gathers
_CTMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
         "asymmetric", "tf_crop_and_resize", "tf_half_pixel_for_nn")


def _original_coords(n_in: int, n_out: int, scale: float, ctm: str, roi_s: float,
                     roi_e: float) -> np.ndarray:
    """x_original for every output position along one axis.

    Computed in float32, in the order onnxruntime and the reference use, so that positions
    landing exactly on a pixel (where floor/ceil/round are discontinuous) agree with them.
    ``length_resized`` in the spec's formulas is the fractional ``scale * n_in`` (it equals
    ``n_out`` when the output size came from ``sizes``).
    """
    f = np.float32
    x = np.arange(n_out, dtype=f)
    sc = f(scale)
    out_f = f(sc * f(n_in))
    if ctm == "half_pixel":
        return (x + f(0.5)) / sc - f(0.5)
    if ctm == "half_pixel_symmetric":
        adjustment = f(n_out) / out_f
        offset = f(n_in) / f(2) * (f(1) - adjustment)
        return offset + (x + f(0.5)) / sc - f(0.5)
    if ctm == "pytorch_half_pixel":
        if out_f <= 1:
            return np.zeros(n_out, dtype=f)
        return (x + f(0.5)) / sc - f(0.5)
    if ctm == "align_corners":
        if out_f <= 1:
            return np.zeros(n_out, dtype=f)
        return x * f(n_in - 1) / (out_f - f(1))
    if ctm == "asymmetric":
        return x / sc
    if ctm == "tf_half_pixel_for_nn":
        return (x + f(0.5)) / sc
    if ctm == "tf_crop_and_resize":
        rs, re = f(roi_s), f(roi_e)
        if out_f <= 1:
            return np.full(n_out, f(0.5) * (rs + re) * f(n_in - 1), dtype=f)
        return rs * f(n_in - 1) + x * (re - rs) * f(n_in - 1) / (out_f - f(1))
    raise ValueError(f"Resize: unknown coordinate_transformation_mode {ctm!r}")


def _cubic_kernel(t: np.ndarray, a: float) -> np.ndarray:
    t = np.abs(t)
    t2 = t * t
    t3 = t2 * t
    near = (a + 2.0) * t3 - (a + 3.0) * t2 + 1.0
    far = a * t3 - 5.0 * a * t2 + 8.0 * a * t - 4.0 * a
    return np.where(t <= 1.0, near, np.where(t < 2.0, far, 0.0))


@functools.lru_cache(maxsize=512)
def _axis_table(n_in: int, n_out: int, scale: float, mode: str, ctm: str, nearest_mode: str,
                cubic_a: float, exclude_outside: bool, antialias: bool, roi_s: float,
                roi_e: float, wdtype: str):
    """(taps [n_out, T] or [n_out], weights [n_out, T] or None, outside mask or None, identity,
    dense [n_in, n_out] weights for short innermost rows or None).

    Arrays are returned read-only: the cache shares them between runs and threads.
    """
    x = _original_coords(n_in, n_out, scale, ctm, roi_s, roi_e).astype(np.float64)
    outside = None
    if ctm == "tf_crop_and_resize":
        outside = (x < 0) | (x > n_in - 1)
        if not outside.any():
            outside = None
    if mode == "nearest":
        if nearest_mode == "round_prefer_floor":
            k = np.ceil(x - 0.5)
        elif nearest_mode == "round_prefer_ceil":
            k = np.floor(x + 0.5)
        elif nearest_mode == "floor":
            k = np.floor(x)
        elif nearest_mode == "ceil":
            k = np.ceil(x)
        elif nearest_mode == "simple":  # opset < 11: ceil when downsampling, else truncate
            k = np.ceil(x) if scale < 1 else np.trunc(x)
        else:
            raise ValueError(f"Resize: unknown nearest_mode {nearest_mode!r}")
        taps = np.clip(k, 0, n_in - 1).astype(np.intp)
        weights = None
        identity = n_in == n_out and outside is None and bool(
            np.array_equal(taps, np.arange(n_in)))
    else:
        support = 1.0 if mode == "linear" else 2.0
        s_eff = min(scale, 1.0) if antialias else 1.0
        start = int(math.floor(-support / s_eff)) + 1
        n_taps = 2 - 2 * start
        base = np.floor(x)
        r = x - base
        offs = np.arange(start, start + n_taps, dtype=np.float64)
        args = (offs[None, :] - r[:, None]) * s_eff
        if mode == "linear":
            w = np.clip(1.0 - np.abs(args), 0.0, 1.0)
        else:
            w = _cubic_kernel(args, cubic_a)
        if antialias and s_eff < 1.0:
            w = w / w.sum(axis=1, keepdims=True)
        raw = base[:, None].astype(np.int64) + offs.astype(np.int64)[None, :]
        if exclude_outside:
            w = np.where((raw < 0) | (raw > n_in - 1), 0.0, w)
            w = w / w.sum(axis=1, keepdims=True)
        taps = np.clip(raw, 0, n_in - 1).astype(np.intp)
        # drop tap columns whose weight is zero everywhere (e.g. the far taps of a stretched
        # filter) so applying the table does less work
        keep = np.any(w != 0.0, axis=0)
        if not keep.all() and keep.any():
            taps, w = taps[:, keep], w[:, keep]
        weights = w.astype(wdtype)
        identity = False
        if n_in == n_out and outside is None:
            on_diag = taps == np.arange(n_in)[:, None]
            identity = bool(np.all(np.where(on_diag, 0.0, w) == 0.0)
                            and np.all(np.where(on_diag, w, 0.0).sum(axis=1) == 1.0))
        weights.flags.writeable = False
    dense = None
    if weights is not None and n_in <= _DENSE_MAX_IN:
        # along the innermost axis np.take walks short rows slowly; one BLAS matmul with the
        # (mostly zero) [n_in, n_out] weight matrix is several times faster there
        dense = np.zeros((n_in, n_out), dtype=wdtype)
        np.add.at(dense, (taps, np.broadcast_to(np.arange(n_out)[:, None], taps.shape)),
                  weights)
        dense.flags.writeable = False
    taps.flags.writeable = False
    if outside is not None:
        outside.flags.writeable = False
    return taps, weights, outside, identity, dense


def _apply_axis(x: np.ndarray, axis: int, taps: np.ndarray, weights: np.ndarray | None,
                dense: np.ndarray | None = None):
    if weights is None:
        return np.take(x, taps, axis=axis)
    # (a matmul would smear an inf or NaN over its whole row: only for finite data)
    if dense is not None and axis == x.ndim - 1 and np.isfinite(x).all():
        return np.matmul(x, dense)
    shape = [1] * x.ndim
    shape[axis] = -1
    y = None
    for t in range(taps.shape[1]):
        term = np.take(x, taps[:, t], axis=axis)
        term *= weights[:, t].reshape(shape)
        if y is None:
            y = term
        else:
            y += term
    return y


def resize_core(x: np.ndarray, out_sizes: list[int], scales: list[float], *, mode: str,
                ctm: str, nearest_mode: str, cubic_a: float = -0.75,
                exclude_outside: bool = False, antialias: bool = False,
                extrapolation_value: float = 0.0, roi: list[tuple[float, float]] | None = None
                ) -> np.ndarray:
    """Resize ``x`` to ``out_sizes`` (one per axis) with per-axis ``scales`` for coordinates."""
    if mode in ("bilinear", "trilinear"):
        mode = "linear"
    if mode not in ("nearest", "linear", "cubic"):
        raise ValueError(f"Resize: unknown mode {mode!r}")
    if ctm not in _CTMS:
        raise ValueError(f"Resize: unknown coordinate_transformation_mode {ctm!r}")
    in_dtype = x.dtype
    if mode != "nearest":
        cdt = compute_dtype(in_dtype)
        y = x.astype(cdt, copy=False)
    else:
        cdt = in_dtype
        y = x
    if any(n == 0 for n in out_sizes) or x.size == 0:
        return np.zeros(tuple(out_sizes), dtype=in_dtype)
    tables = []
    for ax, (n_in, n_out) in enumerate(zip(x.shape, out_sizes)):
        rs, re = roi[ax] if roi is not None else (0.0, 1.0)
        if n_in == n_out and ctm != "tf_crop_and_resize" and float(scales[ax]) == 1.0:
            continue
        tab = _axis_table(int(n_in), int(n_out), float(scales[ax]), mode, ctm, nearest_mode,
                          float(cubic_a), bool(exclude_outside), bool(antialias), float(rs),
                          float(re), cdt.name if mode != "nearest" else "float32")
        if tab[3]:
            continue
        tables.append((ax, tab))
    # shrinking axes first (most first), so later axes work on less data; then growing axes
    # innermost first, because gathers along the innermost axis cost the most per element
    def order(t):
        ratio = t[1][0].shape[0] / max(x.shape[t[0]], 1)
        return (ratio, 0) if ratio < 1 else (1.0, -t[0])

    tables.sort(key=order)
    mask = None
    for ax, (taps, weights, outside, _, dense) in tables:
        y = _apply_axis(y, ax, taps, weights, dense)
        if outside is not None:
            shape = [1] * x.ndim
            shape[ax] = -1
            m = outside.reshape(shape)
            mask = m if mask is None else (mask | m)
    if y is x:
        y = x.copy()
    if mask is not None:
        y = np.where(mask, np.asarray(extrapolation_value, dtype=y.dtype), y)
    if mode != "nearest":
        # onnxruntime truncates integer results, except on its antialiasing path, which rounds
        y = cast_back(y, in_dtype, round_ints=antialias)
    elif mask is not None:
        y = y.astype(in_dtype, copy=False)
    return y


def _round_half_up(v: float) -> int:
    return int(math.floor(v + 0.5))


def _resize(x, roi=None, scales=None, sizes=None, *, mode="nearest",
            coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_floor",
            cubic_coeff_a=-0.75, exclude_outside=0, extrapolation_value=0.0, antialias=0,
            axes=None, keep_aspect_ratio_policy="stretch"):
    rank = x.ndim
    if axes is None:
        axes_l = list(range(rank))
    else:
        axes_l = [int(a) + rank if int(a) < 0 else int(a) for a in axes]
        if any(a < 0 or a >= rank for a in axes_l):
            raise ValueError(f"Resize: axes {list(axes)} out of range for rank {rank}")
    k = len(axes_l)
    if scales is not None and np.asarray(scales).size == 0:
        scales = None
    if sizes is not None and np.asarray(sizes).size == 0:
        sizes = None
    if scales is None and sizes is None:
        raise ValueError("Resize: one of 'scales' and 'sizes' must be given")
    if scales is not None and sizes is not None:
        raise ValueError("Resize: only one of 'scales' and 'sizes' may be given")
    ctm = coordinate_transformation_mode
    roi_pairs = [(0.0, 1.0)] * rank
    if ctm == "tf_crop_and_resize":
        if roi is None or np.asarray(roi).size == 0:
            raise ValueError("Resize: tf_crop_and_resize needs a 'roi' input")
        r = np.asarray(roi, dtype=np.float64).reshape(-1)
        if r.size != 2 * k:
            raise ValueError(f"Resize: roi has {r.size} values, expected {2 * k}")
        for i, a in enumerate(axes_l):
            roi_pairs[a] = (float(r[i]), float(r[k + i]))
    full_scales = [1.0] * rank
    out = list(x.shape)
    if scales is not None:
        s = np.asarray(scales, dtype=np.float32).reshape(-1)
        if s.size != k:
            raise ValueError(f"Resize: {s.size} scales for {k} axes")
        if np.any(s <= 0):
            raise ValueError(f"Resize: scales must be positive, got {s.tolist()}")
        for i, a in enumerate(axes_l):
            sc = float(s[i])
            full_scales[a] = sc
            # the roi does not shrink the output (onnxruntime and the reference agree, though
            # the spec's formula multiplies by the roi extent)
            out[a] = int(math.floor(x.shape[a] * sc))
    else:
        sz = np.asarray(sizes, dtype=np.int64).reshape(-1)
        if sz.size != k:
            raise ValueError(f"Resize: {sz.size} sizes for {k} axes")
        policy = keep_aspect_ratio_policy
        if policy == "stretch":
            for i, a in enumerate(axes_l):
                out[a] = int(sz[i])
                full_scales[a] = int(sz[i]) / x.shape[a] if x.shape[a] else 1.0
        elif policy in ("not_larger", "not_smaller"):
            ratios = [int(sz[i]) / x.shape[a] for i, a in enumerate(axes_l)]
            sc = min(ratios) if policy == "not_larger" else max(ratios)
            for a in axes_l:
                full_scales[a] = sc
                out[a] = _round_half_up(sc * x.shape[a])
        else:
            raise ValueError(f"Resize: unknown keep_aspect_ratio_policy {policy!r}")
    return resize_core(x, out, full_scales, mode=mode, ctm=ctm, nearest_mode=nearest_mode,
                       cubic_a=cubic_coeff_a, exclude_outside=bool(exclude_outside),
                       antialias=bool(antialias), extrapolation_value=extrapolation_value,
                       roi=roi_pairs)


@CPU.kernel("Resize", since=18, host_inputs=(1, 2, 3))
def resize_18(x, roi=None, scales=None, sizes=None, *, mode, coordinate_transformation_mode,
              nearest_mode, cubic_coeff_a, exclude_outside, extrapolation_value, antialias,
              keep_aspect_ratio_policy, axes=None):
    return _resize(x, roi, scales, sizes, mode=mode,
                   coordinate_transformation_mode=coordinate_transformation_mode,
                   nearest_mode=nearest_mode, cubic_coeff_a=cubic_coeff_a,
                   exclude_outside=exclude_outside, extrapolation_value=extrapolation_value,
                   antialias=antialias, axes=axes,
                   keep_aspect_ratio_policy=keep_aspect_ratio_policy)


@CPU.kernel("Resize", since=11, until=17, host_inputs=(1, 2, 3))
def resize_11(x, roi=None, scales=None, sizes=None, *, mode, coordinate_transformation_mode,
              nearest_mode, cubic_coeff_a, exclude_outside, extrapolation_value):
    return _resize(x, roi, scales, sizes, mode=mode,
                   coordinate_transformation_mode=coordinate_transformation_mode,
                   nearest_mode=nearest_mode, cubic_coeff_a=cubic_coeff_a,
                   exclude_outside=exclude_outside, extrapolation_value=extrapolation_value)


def _legacy(x: np.ndarray, scales, mode: str) -> np.ndarray:
    s = np.asarray(scales, dtype=np.float32).reshape(-1)
    if s.size != x.ndim:
        raise ValueError(f"{s.size} scales for an input of rank {x.ndim}")
    out = [int(math.floor(n * float(v))) for n, v in zip(x.shape, s)]
    return resize_core(x, out, [float(v) for v in s], mode=mode, ctm="asymmetric",
                       nearest_mode="simple")


@CPU.kernel("Resize", since=10, until=10, host_inputs=(1,))
def resize_10(x, scales, *, mode):
    return _legacy(x, scales, mode)


@CPU.kernel("Upsample", since=9, host_inputs=(1,))
def upsample_9(x, scales, *, mode):
    return _legacy(x, scales, mode)


@CPU.kernel("Upsample", since=7, until=8)
def upsample_7(x, *, mode, scales):
    return _legacy(x, scales, mode)


@CPU.kernel("Upsample", since=1, until=6)
def upsample_1(x, *, mode, height_scale, width_scale):
    if x.ndim != 4:
        raise ValueError("Upsample-1 needs a 4-D NCHW input")
    return _legacy(x, [1.0, 1.0, height_scale, width_scale], mode)
