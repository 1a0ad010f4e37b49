"""ConvInteger and QLinearConv, exact int32 sums.

With a constant weight and a per-tensor input zero point, 1-D and 2-D convs run through the
compiled integer product (quant/igemm.py: im2col bands into int16 panels, or a direct
depthwise loop, the requantization fused in), the weight shifted and packed once per
session. Otherwise (no numba, 3-D, a computed weight): im2col + one batched BLAS product per
group of the inputs shifted by their zero points (so padding is a plain zero pad), in a
float type where the int32 accumulation is exact (see qmatmul.acc_dtype).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from onnxrt.framework.kernel import NodeInfo
from onnxrt.framework.parallel import ThreadPool, pool_of
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.quant import igemm
from onnxrt.providers.cpu.quant._common import int_range, requantize
from onnxrt.providers.cpu.quant.qmatmul import acc_dtype, max_shift

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


class _ConvGeometry:
    """Conv attributes, resolved against actual spatial sizes at run time."""

    def __init__(self, attrs: dict[str, Any]) -> None:
        self.auto_pad = attrs.get("auto_pad", "NOTSET")
        if isinstance(self.auto_pad, bytes):
            self.auto_pad = self.auto_pad.decode()
        self.dilations = attrs.get("dilations")
        self.group = int(attrs.get("group", 1))
        self.kernel_shape = attrs.get("kernel_shape")
        self.pads = attrs.get("pads")
        self.strides = attrs.get("strides")

    def resolve(self, spatial: tuple[int, ...], ks: tuple[int, ...]) -> tuple[list[int], ...]:
        nd = len(ks)
        if self.kernel_shape is not None and tuple(self.kernel_shape) != ks:
            raise ValueError(f"kernel_shape {self.kernel_shape} does not match the weight's "
                             f"spatial shape {ks}")
        dil = list(self.dilations) if self.dilations else [1] * nd
        st = list(self.strides) if self.strides else [1] * nd
        ext = [(k - 1) * d + 1 for k, d in zip(ks, dil)]
        ap = self.auto_pad
        if ap in ("SAME_UPPER", "SAME_LOWER"):
            begin, end = [], []
            for n, s, e in zip(spatial, st, ext):
                out = -(-n // s)
                total = max(0, (out - 1) * s + e - n)
                small = total // 2
                begin.append(small if ap == "SAME_UPPER" else total - small)
                end.append(total - begin[-1])
            pads = begin + end
        elif ap == "VALID":
            pads = [0] * (2 * nd)
        else:
            pads = list(self.pads) if self.pads else [0] * (2 * nd)
        return dil, st, ext, pads


def _im2col(x: np.ndarray, group: int, ks: tuple[int, ...], dil: list[int], st: list[int],
            ext: list[int], pads: list[int]) -> tuple[np.ndarray, tuple[int, ...]]:
    """(N, G, P, Cg*prod(ks)) patches of an already shifted, float input."""
    n, c = x.shape[:2]
    nd = len(ks)
    if any(pads):
        x = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)])
    spatial = x.shape[2:]
    outs = tuple((spatial[i] - ext[i]) // st[i] + 1 for i in range(nd))
    if any(o <= 0 for o in outs):
        raise ValueError(f"kernel extent {ext} exceeds the padded input {spatial}")
    cg = c // group
    if all(k == 1 for k in ks):  # 1x1: a strided view, no window
        v = x[(slice(None), slice(None)) + tuple(slice(0, o * s, s) for o, s in zip(outs, st))]
        cols = v.reshape(n, group, cg, -1).transpose(0, 1, 3, 2)
        return cols, outs
    w = sliding_window_view(x, ext, axis=tuple(range(2, 2 + nd)))
    sl = (slice(None), slice(None))
    sl += tuple(slice(0, o * s, s) for o, s in zip(outs, st))
    sl += tuple(slice(None, None, d) for d in dil)
    w = w[sl]  # (N, C, O..., K...)
    w = w.reshape((n, group, cg) + outs + ks)
    perm = (0, 1) + tuple(range(3, 3 + nd)) + (2,) + tuple(range(3 + nd, 3 + 2 * nd))
    cols = w.transpose(perm).reshape(n, group, int(np.prod(outs)), cg * int(np.prod(ks)))
    return cols, outs


class _Packed:
    """Shifted weights as (G, Cg*prod(ks), Mg), in float32 and (lazily) float64."""

    def __init__(self, w: np.ndarray, w_zp: np.ndarray | None, group: int) -> None:
        m = w.shape[0]
        if m % group:
            raise ValueError(f"{m} output channels do not split into {group} groups")
        self.k = int(np.prod(w.shape[1:]))
        self.ks = tuple(w.shape[2:])
        self.m = m
        wi = w.astype(np.int32)
        if w_zp is not None:
            z = np.asarray(w_zp).astype(np.int32)
            if z.ndim == 1 and z.size > 1:
                if z.size != m:
                    raise ValueError(f"w_zero_point has {z.size} values for {m} channels")
                z = z.reshape((m,) + (1,) * (w.ndim - 1))
            else:
                z = z.reshape(())
            wi = wi - z
        # the exact bound of this weight, not of its type: most weights allow float32
        self.bound = int(np.abs(wi).max()) if wi.size else 0
        self.w = wi.reshape(group, m // group, self.k).transpose(0, 2, 1)
        self._cache: dict[np.dtype, np.ndarray] = {}

    def as_type(self, dt: np.dtype) -> np.ndarray:
        arr = self._cache.get(dt)
        if arr is None:  # a benign race: two threads build the same array
            arr = np.ascontiguousarray(self.w.astype(dt))
            self._cache[dt] = arr
        return arr


def _conv_acc(x: np.ndarray, x_zp: np.ndarray | None, pk: _Packed,
              geo: _ConvGeometry) -> np.ndarray:
    """Exact integer convolution of shifted operands, as float (N, M, O...)."""
    if x.ndim < 3:
        raise ValueError(f"conv input must have rank >= 3, got shape {x.shape}")
    g = geo.group
    ks = pk.ks
    if x.shape[1] % g or x.shape[1] // g * int(np.prod(ks)) != pk.k:
        raise ValueError(f"input channels {x.shape[1]} do not match the weight "
                         f"(group {g}, kernel {ks})")
    if x_zp is not None and np.size(x_zp) != 1:
        raise ValueError("x_zero_point must be a scalar (per-tensor quantization)")
    dt = acc_dtype(pk.k, max_shift(x.dtype, x_zp), pk.bound)
    wp = pk.as_type(dt)
    xf = x.astype(dt)
    if x_zp is not None:
        z = np.asarray(x_zp).reshape(()).astype(dt)
        if z != 0:
            xf -= z
    dil, st, ext, pads = geo.resolve(x.shape[2:], ks)
    if g > 1 and g == x.shape[1] and pk.m == g:
        return _depthwise(xf, wp[:, :, 0], ks, dil, st, ext, pads)
    cols, outs = _im2col(xf, g, ks, dil, st, ext, pads)
    y = np.matmul(cols, wp)  # (N, G, P, Mg)
    n = x.shape[0]
    return y.transpose(0, 1, 3, 2).reshape((n, pk.m) + outs)


def _depthwise(x: np.ndarray, w: np.ndarray, ks: tuple[int, ...], dil: list[int],
               st: list[int], ext: list[int], pads: list[int]) -> np.ndarray:
    """One channel per group: a multiply-add of strided input views per kernel offset,
    which beats a batch of G tiny matrix products. w: (C, prod(ks))."""
    nd = len(ks)
    if any(pads):
        x = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)])
    outs = tuple((x.shape[2 + i] - ext[i]) // st[i] + 1 for i in range(nd))
    if any(o <= 0 for o in outs):
        raise ValueError(f"kernel extent {ext} exceeds the padded input {x.shape[2:]}")
    acc = np.zeros(x.shape[:2] + outs, x.dtype)
    tmp = np.empty_like(acc)
    wcol = w.reshape((1, w.shape[0]) + (1,) * nd + (-1,))
    for j, off in enumerate(np.ndindex(*ks)):
        view = x[(slice(None), slice(None)) +
                 tuple(slice(o * d, o * d + (n - 1) * s + 1, s)
                       for o, d, n, s in zip(off, dil, outs, st))]
        np.multiply(view, wcol[..., j], out=tmp)
        acc += tmp
    return acc


class _QConvBase:
    W = 1
    WZP = 3

    def __init__(self, node: NodeInfo) -> None:
        self.geo = _ConvGeometry(node.attrs)
        ci = node.constant_inputs
        self.packed = None
        self.fast: igemm.PackedConvW | None = None
        if self.W in ci and (self.WZP in ci or not node.input_present(self.WZP)):
            w, zw = np.asarray(ci[self.W]), ci.get(self.WZP)
            if (w.dtype in igemm._Q8 and w.ndim in (3, 4) and igemm.kernels() is not None
                    and w.shape[0] % self.geo.group == 0
                    and (zw is None or np.size(zw) in (1, w.shape[0]))):
                self.fast = igemm.PackedConvW(w, zw, self.geo.group)
                q = node.op_type == "QLinearConv"
                dt = igemm.out_dtype(node, np.uint8 if q else np.int32)
                try:
                    igemm.warm_conv(self.fast, igemm._a_dtype(node), igemm.Epilogue(
                        igemm.MODE_QUANT if q else igemm.MODE_INT, dt))
                except Exception:   # a kernel failed to compile here: the NumPy path
                    self.fast = None
            if self.fast is None:
                self.packed = _Packed(w, zw, self.geo.group)

    def _compiled(self, x: np.ndarray, x_zp: np.ndarray | None,
                  epi: igemm.Epilogue, pool: ThreadPool) -> np.ndarray | None:
        """The compiled integer conv split over ``pool``, or None where it does not
        apply."""
        if self.fast is None or (x_zp is not None and np.size(x_zp) != 1):
            return None
        dil, st, _, pads = self.geo.resolve(x.shape[2:], self.fast.ks)
        xz = 0 if x_zp is None else int(np.asarray(x_zp).reshape(()))
        return igemm.conv2d(x, xz, self.fast, dil, st, pads, epi, pool)

    def _weights(self, w: np.ndarray, w_zp: np.ndarray | None) -> _Packed:
        if self.packed is None:     # computed, or packed for the compiled path only
            return _Packed(w, w_zp, self.geo.group)
        return self.packed


@CPU.kernel("ConvInteger", since=10, threads=True)
class ConvInteger(_QConvBase):
    W, WZP = 1, 3

    def __call__(self, x: np.ndarray, w: np.ndarray, x_zero_point: np.ndarray | None = None,
                 w_zero_point: np.ndarray | None = None, *, ctx: Any = None) -> np.ndarray:
        y = self._compiled(x, x_zero_point, igemm.Epilogue.raw(), pool_of(ctx))
        if y is not None:
            return y
        return _conv_acc(x, x_zero_point, self._weights(w, w_zero_point),
                         self.geo).astype(np.int32)


@CPU.kernel("QLinearConv", since=10, threads=True)
class QLinearConv(_QConvBase):
    W, WZP = 3, 5

    def __call__(self, x: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray,
                 w: np.ndarray, w_scale: np.ndarray, w_zero_point: np.ndarray,
                 y_scale: np.ndarray, y_zero_point: np.ndarray,
                 b: np.ndarray | None = None, *, ctx: Any = None) -> np.ndarray:
        # multiplier per output channel, formed in float32 like the scales
        mult = (np.asarray(x_scale, _F32) * np.asarray(w_scale, _F32)
                / np.asarray(y_scale, _F32))
        if self.fast is not None and np.size(y_zero_point) == 1:
            if b is not None and (b.dtype != np.int32 or b.size != self.fast.m):
                raise ValueError(f"QLinearConv: B must be int32 of {self.fast.m} values, got "
                                 f"{b.dtype} {b.shape}")
            dt = np.asarray(y_zero_point).dtype
            epi = igemm.Epilogue(igemm.MODE_QUANT, dt, scale=mult.reshape(-1), ibias=b,
                                 zp=float(np.asarray(y_zero_point).reshape(())),
                                 qrange=int_range(dt))
            y = self._compiled(x, x_zero_point, epi, pool_of(ctx))
            if y is not None:
                return y
        acc = _conv_acc(x, x_zero_point, self._weights(w, w_zero_point), self.geo)
        chan = (1, -1) + (1,) * (acc.ndim - 2)
        if b is not None:
            # the bias joins the int32 accumulation before its one rounding to float32
            acc = acc.astype(_F64) + b.astype(_F64).reshape(chan)
        mult = mult.reshape(chan) if mult.ndim == 1 and mult.size > 1 else mult.reshape(())
        return requantize(acc, mult, np.asarray(y_zero_point).reshape(()), y_zero_point.dtype)
