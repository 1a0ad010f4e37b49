"""Small helpers shared by this package: compute dtypes for narrow floats."""

from __future__ import annotations

import numpy as np


def compute_dtype(dt: np.dtype) -> np.dtype:
    """float64 stays float64; every other float (float16, bfloat16, float8) computes in float32."""
    dt = np.dtype(dt)
    if dt == np.float64:
        return dt
    return np.dtype(np.float32)


def cast_back(y: np.ndarray, dt: np.dtype, round_ints: bool = False) -> np.ndarray:
    """Cast a float result to ``dt``; integer targets truncate toward zero (or round to nearest
    with ``round_ints``) and saturate."""
    dt = np.dtype(dt)
    if y.dtype == dt:
        return y
    if dt.kind in "iu":
        info = np.iinfo(dt)
        y = np.rint(y) if round_ints else np.trunc(y)
        return np.clip(y, info.min, info.max).astype(dt)
    if dt == np.bool_:
        return y != 0
    return y.astype(dt)
