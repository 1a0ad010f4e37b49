"""MatMulInteger and QLinearMatMul.

With a constant B (and its zero point), an 8-bit A with a per-tensor zero point, and numba,
the product is the compiled integer one (quant/igemm.py), B packed once per session and the
requantization fused in. Otherwise integer products are accumulated exactly in a float BLAS
product: operands shifted by their
zero points fit in 9 bits, so float64 is exact for any K below 2**35, and float32 (twice as
fast) whenever K * max|a - a_zp| * max|b - b_zp| stays below 2**24, which the zero points
usually allow for K up to about 1000.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.framework.kernel import NodeInfo
from onnxrt.framework.parallel import SERIAL, ThreadPool, pool_of
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.nn.matmul import matmul as float_matmul
from onnxrt.providers.cpu.quant import igemm
from onnxrt.providers.cpu.quant._common import (float_of, int_range, is_float_q, requantize,
                                               to_quantized)

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_F32_EXACT = 1 << 24


def max_shift(dt: np.dtype, zp: np.ndarray | None) -> int:
    """The largest |v - zp| over every value v of integer type ``dt``."""
    info = np.iinfo(dt)
    if zp is None or np.size(zp) == 0:
        return max(abs(int(info.min)), abs(int(info.max)))
    z = np.asarray(zp).astype(np.int64)
    return int(max(int(info.max) - int(z.min()), int(z.max()) - int(info.min)))


def acc_dtype(k: int, bound_a: int = 255, bound_b: int = 255) -> np.dtype:
    """Float type in which a sum of k products bounded by bound_a * bound_b is exact."""
    return _F32 if k * bound_a * bound_b < _F32_EXACT else _F64


def shift(a: np.ndarray, zp: np.ndarray | None, dt: np.dtype, row: bool) -> np.ndarray:
    """``a - zp`` as float ``dt``; a 1-D zero point is per row (A) or per column (B)."""
    af = a.astype(dt)
    if zp is None:
        return af
    zp = np.asarray(zp)
    if zp.ndim == 0 or zp.size == 1:
        z = zp.reshape(()).astype(dt)
        if z != 0:
            af -= z
        return af
    z = zp.astype(dt)
    if row and z.ndim == 1:
        z = z.reshape(-1, 1)
    return af - z


def matmul_integer(a: np.ndarray, b: np.ndarray, a_zero_point: np.ndarray | None = None,
                   b_zero_point: np.ndarray | None = None, pool: ThreadPool = SERIAL
                   ) -> np.ndarray:
    """(a - a_zp) @ (b - b_zp) as int32 (NumPy broadcasting), exact."""
    k = a.shape[-1] if a.ndim else 1
    dt = acc_dtype(k, max_shift(a.dtype, a_zero_point), max_shift(b.dtype, b_zero_point))
    y = _product(shift(a, a_zero_point, dt, a.ndim >= 2), shift(b, b_zero_point, dt, False),
                 pool)
    return y.astype(np.int32)


@CPU.kernel("MatMulInteger", since=10, threads=True)
class MatMulInteger:
    def __init__(self, node: NodeInfo) -> None:
        self.packed = igemm.prepack(node, 1, 3)

    def __call__(self, a: np.ndarray, b: np.ndarray, a_zero_point: np.ndarray | None = None,
                 b_zero_point: np.ndarray | None = None, *, ctx: Any = None) -> np.ndarray:
        if self.packed is not None and igemm.usable(a, a_zero_point):
            return igemm.product(a, a_zero_point, self.packed, igemm.Epilogue.raw(),
                                 pool_of(ctx))
        return matmul_integer(a, b, a_zero_point, b_zero_point, pool_of(ctx))


def _product(a: np.ndarray, b: np.ndarray, pool: ThreadPool) -> np.ndarray:
    """The float product of the shifted operands: the float MatMul's (stacks of attention
    heads on one BLAS thread or split over the session's threads; numpy's own stacked
    matmul let BLAS's threads spin against the session's: 25 ms instead of ~1 for BERT's
    12 x 128x64x128 scores on this 2-core machine); 0-D and 1-D operands through numpy."""
    if a.ndim < 2 or b.ndim < 2:
        return np.matmul(a, b)
    return float_matmul(a, b, pool)


@CPU.kernel("QLinearMatMul", since=10, threads=True)
class QLinearMatMul:
    def __init__(self, node: NodeInfo) -> None:
        dt = igemm.out_dtype(node, np.uint8)
        self.packed = igemm.prepack(node, 3, 5, warm=igemm.Epilogue(igemm.MODE_QUANT, dt)) \
            if dt in igemm._Q8 else None

    def __call__(self, a: np.ndarray, a_scale: np.ndarray, a_zero_point: np.ndarray,
                 b: np.ndarray, b_scale: np.ndarray, b_zero_point: np.ndarray,
                 y_scale: np.ndarray, y_zero_point: np.ndarray, *, ctx: Any = None
                 ) -> np.ndarray:
        pb = self.packed
        if (pb is not None and igemm.usable(a, a_zero_point) and np.size(a_scale) == 1
                and np.size(y_scale) == 1 and np.size(y_zero_point) == 1
                and np.asarray(y_zero_point).dtype in igemm._Q8):
            sa = float_of(np.asarray(a_scale)).astype(_F32)
            sb = float_of(np.asarray(b_scale)).astype(_F32)
            sy = float_of(np.asarray(y_scale)).astype(_F32)
            dt = np.asarray(y_zero_point).dtype
            epi = igemm.Epilogue(igemm.MODE_QUANT, dt, scale=sa * sb / sy, per_col=True,
                                 zp=float(np.asarray(y_zero_point).reshape(())),
                                 qrange=int_range(dt))
            return igemm.product(a, a_zero_point, pb, epi, pool_of(ctx))
        return qlinear_matmul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
                              y_zero_point, pool_of(ctx))


def qlinear_matmul(a: np.ndarray, a_scale: np.ndarray, a_zero_point: np.ndarray,
                   b: np.ndarray, b_scale: np.ndarray, b_zero_point: np.ndarray,
                   y_scale: np.ndarray, y_zero_point: np.ndarray, pool: ThreadPool = SERIAL
                   ) -> np.ndarray:
    """The NumPy path: exact sums in a float BLAS product, then requantized."""
    out_dt = y_zero_point.dtype
    if is_float_q(a.dtype) or is_float_q(b.dtype) or is_float_q(out_dt):
        return _qlinear_matmul_float8(a, a_scale, a_zero_point, b, b_scale, b_zero_point,
                                      y_scale, y_zero_point)
    k = a.shape[-1] if a.ndim else 1
    dt = acc_dtype(k, max_shift(a.dtype, a_zero_point), max_shift(b.dtype, b_zero_point))
    acc = _product(shift(a, a_zero_point, dt, a.ndim >= 2),
                   shift(b, b_zero_point, dt, False), pool)
    # the requantization multiplier, formed in float32 as the scales' type implies
    sa = _row(float_of(np.asarray(a_scale)).astype(_F32), a.ndim)
    sb = float_of(np.asarray(b_scale)).astype(_F32)
    sy = float_of(np.asarray(y_scale)).astype(_F32)
    return requantize(acc, sa * sb / sy, y_zero_point, out_dt)


def _qlinear_matmul_float8(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
                           y_zero_point):
    """float8 operands (QLinearMatMul-21): dequantize, multiply in float32, requantize."""
    af = (a.astype(_F32) - a_zero_point.astype(_F32)) * _row(float_of(a_scale), a.ndim)
    bf = (b.astype(_F32) - b_zero_point.astype(_F32)) * float_of(b_scale)
    y = np.matmul(af, bf) / float_of(y_scale).astype(_F32)
    return to_quantized(y + y_zero_point.astype(_F32), y_zero_point.dtype)


def _row(p: np.ndarray, ndim: int) -> np.ndarray:
    """A 1-D per-row parameter of a matrix operand, shaped to broadcast over its rows."""
    if p.ndim == 1 and p.size > 1 and ndim >= 2:
        return p.reshape(-1, 1)
    return p
