"""com.microsoft.nchwc ops: what onnxruntime's NCHWc layout optimizer (graph optimization level
"all") writes into a saved optimized model: ReorderInput, Conv, MaxPool, AveragePool,
GlobalMaxPool, GlobalAveragePool, Upsample, ReorderOutput.

onnxruntime keeps such tensors in a blocked layout of its CPU's block size (8 channels, 16
with AVX-512), with the channel count padded to a multiple of it. Here they stay plain NCHW
arrays with the padded channels zero: only ReorderInput/ReorderOutput show them to other ops,
so the layout is private to these kernels. The convolution filters, though, are stored
blocked in the model (OIHWBiBo, or OIHWBo for depthwise convolutions and for inputs too
narrow to reorder): they are unblocked once per session with the block size onnxruntime
would use on this CPU (as a model saved at that level is only valid on its machine type);
ONNXRT_NCHWC_BLOCK_SIZE overrides it for a model saved elsewhere.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.contrib.fused import activation_fn
from onnxrt.providers.cpu.nn.conv import Conv as _Conv
from onnxrt.providers.cpu.nn.pool import average_pool, max_pool

NCHWC = "com.microsoft.nchwc"
_F32 = np.float32


@functools.lru_cache(maxsize=1)
def block_size() -> int:
    """onnxruntime's NCHWc block size on this CPU: 16 with AVX-512F, else 8."""
    env = os.environ.get("ONNXRT_NCHWC_BLOCK_SIZE")
    if env:
        return int(env)
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return 16 if " avx512f" in line else 8
    except OSError:
        pass
    return 8


def _pad_channels(c: int) -> int:
    bs = block_size()
    return (c + bs - 1) // bs * bs


def unblock_filter(w: np.ndarray, bi_bo: bool) -> np.ndarray:
    """The (O, I, kh, kw) filter of a blocked one stored with those dims: OIHWBiBo holds
    [O/bs][I/bs][kh][kw][bi][bo], OIHWBo holds [O/bs][I][kh][kw][bo]."""
    bs = block_size()
    o, i, kh, kw = w.shape
    flat = np.ascontiguousarray(w).reshape(-1)
    if o % bs or (bi_bo and i % bs):
        raise ValueError(f"nchwc Conv: filter {w.shape} is not blocked by {bs} (the block "
                         f"size of this CPU; set ONNXRT_NCHWC_BLOCK_SIZE for a model saved on "
                         f"another)")
    if bi_bo:
        b = flat.reshape(o // bs, i // bs, kh, kw, bs, bs)
        return b.transpose(0, 5, 1, 4, 2, 3).reshape(o, i, kh, kw)
    b = flat.reshape(o // bs, i, kh, kw, bs)
    return b.transpose(0, 4, 1, 2, 3).reshape(o, i, kh, kw)


@CPU.kernel("ReorderInput", since=1, domain=NCHWC)
def reorder_input(x, *, channels_last=0):
    """NCHW (or NHWC) to the padded NCHWc tensor."""
    xc = np.moveaxis(x, -1, 1) if int(channels_last) else x
    c = xc.shape[1]
    cp = _pad_channels(c)
    out = np.zeros((xc.shape[0], cp) + xc.shape[2:], _F32)
    out[:, :c] = xc
    return out


@CPU.kernel("ReorderOutput", since=1, domain=NCHWC)
def reorder_output(x, *, channels=0, channels_last=0):
    """The first ``channels`` channels, as NCHW (or NHWC)."""
    c = int(channels)
    if c <= 0 or c > x.shape[1]:
        raise ValueError(f"ReorderOutput: channels={c} for a tensor of {x.shape[1]} channels")
    y = x[:, :c]
    return np.ascontiguousarray(np.moveaxis(y, 1, -1) if int(channels_last) else y)


@CPU.kernel("Conv", since=1, domain=NCHWC, needs_node=True, threads=True)
class NchwcConv:
    """2-D convolution of an NCHWc (or, for narrow inputs, NCHW) tensor with a blocked
    filter; ``Sum`` (same shape as the output) is added before the fused activation."""

    def __init__(self, node: Any) -> None:
        a = dict(node.attrs)
        act = a.pop("activation", None)
        params = list(a.pop("activation_params", None) or [])
        if act in ("LeakyRelu", "HardSigmoid", "Clip") and not params:
            raise ValueError(f"nchwc Conv: activation {act} needs activation_params")
        params += [0.0] * (2 - len(params))
        self.act = activation_fn(act, params[0], params[1])
        self.attrs = a
        self.node = node
        w = node.constant_inputs.get(1)
        if w is None:
            raise ValueError("nchwc Conv: the filter must be a constant (a reordered "
                             "initializer)")
        self.w_blocked = np.asarray(w, _F32)
        b = node.constant_inputs.get(2)
        self.b = None if b is None else np.asarray(b, _F32)
        self._conv: dict[int, tuple[Any, np.ndarray, np.ndarray | None]] = {}

    def _prepare(self, in_channels: int) -> tuple[Any, np.ndarray, np.ndarray | None]:
        hit = self._conv.get(in_channels)
        if hit is not None:
            return hit
        w = self.w_blocked
        group = int(self.attrs.get("group", 1))
        # OIHWBiBo when the input is reordered and the filter's input channels are blocked
        bi_bo = not (group > 1 and w.shape[1] == 1) and in_channels >= block_size()
        wu = unblock_filter(w, bi_bo)
        b = None
        if self.b is not None:
            b = np.zeros(wu.shape[0], _F32)
            b[:self.b.shape[0]] = self.b
        attrs = dict(self.attrs)
        attrs.setdefault("group", 1)
        attrs.setdefault("auto_pad", "NOTSET")
        conv = _Conv(dataclasses.replace(self.node, op_type="Conv", domain="", attrs=attrs,
                                         constant_inputs={1: wu} if b is None else
                                         {1: wu, 2: b}))
        hit = self._conv[in_channels] = (conv, wu, b)
        return hit

    def __call__(self, x, w, b=None, s=None, ctx=None):
        conv, wu, bp = self._prepare(x.shape[1])
        y = conv(x, wu, bp, ctx=ctx)
        if s is not None:
            if s.shape != y.shape:
                raise ValueError(f"nchwc Conv: Sum has shape {s.shape}, the output {y.shape}")
            y = y + s
        y = np.array(y, _F32)
        return self.act(y) if self.act is not None else y


_POOL = ("kernel_shape", "strides", "pads", "auto_pad", "ceil_mode", "dilations")


@CPU.kernel("MaxPool", since=1, domain=NCHWC)
def nchwc_max_pool(x, *, kernel_shape, strides=None, pads=None, auto_pad="NOTSET",
                   ceil_mode=0, dilations=None, storage_order=0):
    return max_pool(x, kernel_shape=kernel_shape, strides=strides, pads=pads,
                    auto_pad=auto_pad, ceil_mode=ceil_mode, dilations=dilations)


@CPU.kernel("AveragePool", since=1, domain=NCHWC)
def nchwc_average_pool(x, *, kernel_shape, strides=None, pads=None, auto_pad="NOTSET",
                       ceil_mode=0, dilations=None, count_include_pad=0):
    return average_pool(x, kernel_shape=kernel_shape, strides=strides, pads=pads,
                        auto_pad=auto_pad, ceil_mode=ceil_mode, dilations=dilations,
                        count_include_pad=count_include_pad)


@CPU.kernel("GlobalMaxPool", since=1, domain=NCHWC)
def nchwc_global_max_pool(x):
    return x.max(axis=(2, 3), keepdims=True)


@CPU.kernel("GlobalAveragePool", since=1, domain=NCHWC)
def nchwc_global_average_pool(x):
    return x.mean(axis=(2, 3), keepdims=True, dtype=_F32).astype(_F32)


def _coords(n_in: int, scale: int, mode: str) -> np.ndarray:
    n_out = n_in * scale
    o = np.arange(n_out, dtype=_F32)
    if scale == 1:
        return o
    if mode == "align_corners":
        return o * _F32(n_in - 1) / _F32(n_out - 1)
    if mode == "half_pixel":
        return np.maximum(_F32(0), (o + _F32(0.5)) / _F32(scale) - _F32(0.5))
    return o / _F32(scale)


@CPU.kernel("Upsample", since=1, domain=NCHWC)
def nchwc_upsample(x, *, scales=None, mode="nearest", coordinate_transformation_mode="asymmetric"):
    """Integer upsampling of H and W: nearest (repeat) or linear with asymmetric,
    align_corners or half_pixel coordinates."""
    if not scales or len(scales) != 4 or scales[0] != 1 or scales[1] != 1 or \
            min(scales[2:]) < 1:
        raise ValueError(f"nchwc Upsample: scales must be [1, 1, sh >= 1, sw >= 1], got "
                         f"{scales}")
    sh, sw = int(scales[2]), int(scales[3])
    if mode == "nearest":
        return np.repeat(np.repeat(x, sh, axis=2), sw, axis=3)
    if mode != "linear":
        raise ValueError(f"nchwc Upsample: mode {mode!r} (nearest, linear)")
    ctm = coordinate_transformation_mode
    if ctm not in ("asymmetric", "align_corners", "half_pixel"):
        raise ValueError(f"nchwc Upsample: coordinate_transformation_mode {ctm!r}")
    h, w = x.shape[2:]

    def axis(n, s):
        c = _coords(n, s, ctm)
        i0 = np.minimum(np.floor(c).astype(np.int64), n - 1)
        i1 = np.minimum(i0 + 1, n - 1)
        return i0, i1, (c - i0).astype(_F32)
    h0, h1, dh = axis(h, sh)
    w0, w1, dw = axis(w, sw)
    top = x[:, :, h0][:, :, :, w0] * (1 - dw) + x[:, :, h0][:, :, :, w1] * dw
    bot = x[:, :, h1][:, :, :, w0] * (1 - dw) + x[:, :, h1][:, :, :, w1] * dw
    return (top * (1 - dh)[:, None] + bot * dh[:, None]).astype(_F32)
