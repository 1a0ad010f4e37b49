"""A bound on what one tensor may take: a model that asks for an absurd allocation (a
ConstantOfShape of 10^12 elements, an initializer whose dims promise terabytes) fails with
a clear error before anything is allocated, instead of being killed by the OOM killer
half-way through filling it (Linux overcommits: np.zeros of 1 TiB "succeeds").

The bound is the machine's physical memory, or ``ONNXRT_MAX_ALLOC_BYTES`` when set.
"""

from __future__ import annotations

import math
import os
from typing import Any, Sequence

import numpy as np

__all__ = ["max_bytes", "check_alloc"]

_CACHE: list[int] = []


def max_bytes() -> int:
    env = os.environ.get("ONNXRT_MAX_ALLOC_BYTES")
    if env:
        return int(env)
    if not _CACHE:
        try:
            _CACHE.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            _CACHE.append(1 << 40)
    return _CACHE[0]


def check_alloc(shape: Sequence[Any], dtype: Any, what: str) -> None:
    """Raise MemoryError naming ``what`` when a tensor of ``shape`` and ``dtype`` would
    not fit the bound (negative dims raise ValueError)."""
    dims = [int(d) for d in shape]
    if any(d < 0 for d in dims):
        raise ValueError(f"{what}: negative dim in shape {dims}")
    item = np.dtype(dtype).itemsize if np.dtype(dtype).kind != "O" else 8
    need = math.prod(dims) * max(item, 1)
    limit = max_bytes()
    if need > limit:
        raise MemoryError(f"{what}: a tensor of shape {dims} ({np.dtype(dtype)}) needs "
                          f"{need / 2**30:.1f} GiB, more than the {limit / 2**30:.1f} GiB "
                          f"this machine allows one tensor (ONNXRT_MAX_ALLOC_BYTES)")
