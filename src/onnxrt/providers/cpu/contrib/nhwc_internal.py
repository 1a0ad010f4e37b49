"""Pools of onnxruntime's internal channels-last domain, com.ms.internal.nhwc: MaxPool,
AveragePool and GlobalAveragePool on (N, *spatial, C) tensors. onnxruntime registers them
for float16 on ARM64, where its layout transformer rewrites NCHW pools into them; a model
optimized and saved there carries them. ONNX semantics otherwise (float16 and float32)."""

from __future__ import annotations

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.nn.pool import average_pool, max_pool

NHWC = "com.ms.internal.nhwc"


def _nchw(x: np.ndarray) -> np.ndarray:
    return np.moveaxis(x, -1, 1)


def _nhwc(y: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(y, 1, -1))


@CPU.kernel("MaxPool", since=12, domain=NHWC)
def nhwc_max_pool(x, *, kernel_shape, strides=None, pads=None, auto_pad="NOTSET",
                  ceil_mode=0, dilations=None, storage_order=0):
    return _nhwc(max_pool(_nchw(x), kernel_shape=kernel_shape, strides=strides, pads=pads,
                          auto_pad=auto_pad, ceil_mode=ceil_mode, dilations=dilations))


@CPU.kernel("AveragePool", since=11, domain=NHWC)
def nhwc_average_pool(x, *, kernel_shape, strides=None, pads=None, auto_pad="NOTSET",
                      ceil_mode=0, count_include_pad=0, dilations=None):
    return _nhwc(average_pool(_nchw(x), kernel_shape=kernel_shape, strides=strides, pads=pads,
                              auto_pad=auto_pad, ceil_mode=ceil_mode,
                              count_include_pad=count_include_pad, dilations=dilations))


@CPU.kernel("GlobalAveragePool", since=1, domain=NHWC)
def nhwc_global_average_pool(x):
    axes = tuple(range(1, x.ndim - 1))
    return x.astype(np.float32).mean(axis=axes, keepdims=True).astype(x.dtype)
