"""Dense NN kernels: convolution, pooling, matrix products, normalization, dropout.

The helpers here are shared by the conv and pool modules: padding resolution (auto_pad,
ceil_mode) and the compute dtype for reduced-precision floats.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from onnxrt.framework.blas_threads import blas_threads_unused, single_blas

__all__ = ["compute_dtype", "resolve_pads", "pad_spatial", "row_mean", "row_dot"]

_F32 = np.dtype(np.float32)


def compute_dtype(dt: np.dtype) -> np.dtype:
    """The dtype to compute in: float16 and the ml_dtypes floats (bfloat16, float8...) widen
    to float32; float32, float64 and integers stay as they are."""
    dt = np.dtype(dt)
    if dt.kind == "f":
        return _F32 if dt.itemsize < 4 else dt
    if dt.kind == "V":   # ml_dtypes' custom floats
        return _F32
    return dt


def resolve_pads(in_shape: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                 dilations: Sequence[int], pads: Sequence[int] | None, auto_pad: str,
                 ceil_mode: int = 0) -> tuple[list[int], list[int], list[int], list[int]]:
    """Begin pads, end pads (explicit), extra end pads (ceil_mode) and output sizes.

    The extra pads make the padded input long enough for every window of ``ceil_mode``
    (they are not part of the explicit padding: averages never count them).
    """
    nd = len(in_shape)
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode()
    begin, end, extra, out = [0] * nd, [0] * nd, [0] * nd, [0] * nd
    for i in range(nd):
        n, s, dk = int(in_shape[i]), int(strides[i]), (int(kernel[i]) - 1) * int(dilations[i]) + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-n // s)
            total = max(0, (o - 1) * s + dk - n)
            small = total // 2
            if auto_pad == "SAME_UPPER":
                begin[i], end[i] = small, total - small
            else:
                begin[i], end[i] = total - small, small
        elif auto_pad == "VALID":
            begin[i] = end[i] = 0
        elif auto_pad in ("NOTSET", ""):
            if pads:
                begin[i], end[i] = int(pads[i]), int(pads[i + nd])
        else:
            raise ValueError(f"unsupported auto_pad {auto_pad!r}")
        if s < 1 or int(dilations[i]) < 1 or begin[i] < 0 or end[i] < 0:
            # validated at session creation (onnxrt/validate); kept for direct callers
            raise ValueError(f"strides {list(strides)}, dilations {list(dilations)} and "
                             f"pads {begin + end} must be >= 1, >= 1 and >= 0")
        span = n + begin[i] + end[i] - dk
        if ceil_mode and auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-span // s) + 1
            # the last window must start inside the input or the begin padding
            if o > 0 and (o - 1) * s >= n + begin[i]:
                o -= 1
        else:
            o = span // s + 1
        if o < 0:
            raise ValueError(f"the dilated kernel ({dk}) is longer than the padded input "
                             f"({n + begin[i] + end[i]}) along spatial axis {i}: the output "
                             f"size would be {o} (kernel_shape, pads, strides and dilations)")
        out[i] = max(o, 0)
        extra[i] = max(0, (o - 1) * s + dk - (n + begin[i] + end[i]))
    return begin, end, extra, out


def pad_spatial(x: np.ndarray, begin: Sequence[int], end: Sequence[int], value: float = 0
                ) -> np.ndarray:
    """``x`` (N, C, *spatial) padded on the spatial axes; ``x`` itself when there is none.

    Negative pads crop (ONNX allows them for Conv).
    """
    if not any(begin) and not any(end):
        return x
    nd = len(begin)
    if min(begin) < 0 or min(end) < 0:
        sl = tuple(slice(max(0, -b), x.shape[2 + i] - max(0, -e))
                   for i, (b, e) in enumerate(zip(begin, end)))
        x = x[(slice(None), slice(None)) + sl]
        begin = [max(0, b) for b in begin]
        end = [max(0, e) for e in end]
        if not any(begin) and not any(end):
            return x
    shape = x.shape[:2] + tuple(x.shape[2 + i] + begin[i] + end[i] for i in range(nd))
    if value == 0:
        out = np.zeros(shape, dtype=x.dtype)
    else:
        out = np.full(shape, value, dtype=x.dtype)
    out[(slice(None), slice(None))
        + tuple(slice(b, b + x.shape[2 + i]) for i, b in enumerate(begin))] = x
    return out


def row_mean(x: np.ndarray) -> np.ndarray:
    """Mean of each row of a 2-D float array, shape (rows,).

    A matrix-vector product with 1/n weights runs in BLAS: 5-6x faster than ``np.mean`` on
    the short rows of pooling and normalization (e.g. 2048 rows of 49).
    """
    n = x.shape[1]
    if x.dtype.kind == "f" and x.dtype.itemsize >= 4 and n > 0:
        return row_dot(x, np.full(n, 1.0 / n, dtype=x.dtype))
    return np.mean(x, axis=1)


def row_dot(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """x @ v for a 2-D x, a row reduction, with BLAS single-threaded: a big one (squeezenet's
    batch-8 global pool, 8,000 rows of 169) woke BLAS's threads, which (with
    OPENBLAS_THREAD_TIMEOUT unset: numpy imported before onnxrt) then spin ~0.1 s and took
    the cores from the next run (59 ms instead of 33)."""
    if blas_threads_unused(x.size):
        return x @ v
    with single_blas():
        return x @ v
