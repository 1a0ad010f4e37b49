"""The kernel registry shared by the torch-backed providers, and the dtype sets kernels
declare. Importing this module does not import torch: the kernels' modules do, and they are
imported only when a torch-backed provider is created (``load_kernels``)."""

from __future__ import annotations

import importlib
import threading

import ml_dtypes
import numpy as np

from onnxrt.framework.kernel import KernelRegistry

__all__ = ["TORCH", "load_kernels", "FLOAT", "INT", "BOOL", "ALL", "IDX", "NUM"]

TORCH = KernelRegistry("TorchExecutionProvider")

# element types the kernels claim: torch computes these natively on CPU and CUDA. uint16/32/64
# are "limited" dtypes in torch (no arithmetic), strings/int4/float8 have no torch kernels.
FLOAT = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64,
                                         ml_dtypes.bfloat16))
INT = frozenset(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8))
BOOL = frozenset({np.dtype(np.bool_)})
NUM = FLOAT | INT
ALL = NUM | BOOL
IDX = frozenset({np.dtype(np.int64), np.dtype(np.int32)})   # indices, axes, shapes

_MODULES = ("elementwise", "nn", "tensor", "reduce")
_LOCK = threading.Lock()
_LOADED = False


def load_kernels() -> KernelRegistry:
    """Import every kernel module once (each registers on ``TORCH``); needs torch."""
    global _LOADED
    if not _LOADED:
        with _LOCK:
            if not _LOADED:
                for m in _MODULES:
                    importlib.import_module(f"onnxrt.providers.torch.{m}")
                _LOADED = True
    return TORCH
