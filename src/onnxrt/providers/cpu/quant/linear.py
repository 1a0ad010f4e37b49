"""QuantizeLinear, DequantizeLinear (every version: per tensor, per axis, blocked; int2..int16,
float8, float4, float6 targets) and DynamicQuantizeLinear."""

from __future__ import annotations

from typing import Iterator, Optional, Tuple

import ml_dtypes
import numpy as np

from onnxrt.framework.kernel import NodeInfo
from onnxrt.ir.dtypes import np_dtype
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.quant._common import (expand_param, float_of, int_range, is_float_q,
                                               to_quantized)

_F32 = np.dtype(np.float32)
_NARROW_FLOATS = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
_CHUNK = 1 << 16  # elements per block: the float temporaries stay in cache

_Block = Tuple[np.ndarray, Tuple[Optional[np.ndarray], ...], slice]


def _blocks(x: np.ndarray, *params: np.ndarray | None) -> Iterator[_Block]:
    """(x block, matching param blocks, out slice) over blocks of axis 0 (of the flattened
    input when every param is a scalar). One pass per block keeps temporaries in cache."""
    if all(p is None or p.ndim == 0 for p in params):
        flat = x.reshape(-1)
        for i in range(0, flat.size, _CHUNK):
            sl = slice(i, i + _CHUNK)
            yield flat[sl], params, sl
        return
    rows = x.shape[0] if x.ndim else 1
    step = max(1, _CHUNK // max(1, x.size // max(1, rows)))
    for i in range(0, rows, step):
        sl = slice(i, i + step)
        yield x[sl], tuple(p if p is None or p.ndim == 0 or p.shape[0] == 1 else p[sl]
                           for p in params), sl


@CPU.kernel("QuantizeLinear", since=10)
class QuantizeLinear:
    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        self.axis = int(a.get("axis", 1))
        self.block_size = int(a.get("block_size", 0))
        self.saturate = bool(a.get("saturate", 1))
        code = int(a.get("output_dtype", 0))
        self.out_dtype = np_dtype(code) if code else None
        prec = int(a.get("precision", 0))
        self.precision = np_dtype(prec) if prec else None

    def __call__(self, x: np.ndarray, y_scale: np.ndarray,
                 y_zero_point: np.ndarray | None = None) -> np.ndarray:
        if y_zero_point is not None:
            dt = y_zero_point.dtype
            if self.out_dtype is not None and self.out_dtype != dt:
                raise ValueError(f"output_dtype {self.out_dtype} differs from the zero point's "
                                 f"type {dt}")
        else:
            dt = self.out_dtype if self.out_dtype is not None else np.dtype(np.uint8)
        # the division runs in the precision numpy promotion (or `precision`) gives; narrow
        # floats are emulated by rounding the float32 quotient, which is correctly rounded
        prec = self.precision
        if prec is None:
            sdt = y_scale.dtype
            prec = x.dtype if x.dtype == sdt and sdt in _NARROW_FLOATS else _F32
        narrow = prec in _NARROW_FLOATS
        s = expand_param(float_of(np.asarray(y_scale)).astype(_F32, copy=False), x.shape,
                         self.axis, self.block_size, "y_scale")
        zp = None
        if y_zero_point is not None:
            zp = expand_param(y_zero_point.astype(_F32), x.shape, self.axis, self.block_size,
                              "y_zero_point")
            if not np.any(zp):
                zp = None
        if is_float_q(dt):
            v = x.astype(_F32) / s
            if narrow:
                v = v.astype(prec).astype(_F32)
            return to_quantized(v if zp is None else v + zp, dt, self.saturate)
        lo, hi = int_range(dt)
        out = np.empty(x.shape, dt)
        flat_out = out.reshape(-1) if all(p is None or p.ndim == 0 for p in (s, zp)) else out
        direct = dt.kind in "iu"  # ml_dtypes int4 / int2 need an explicit astype
        for xb, (sb, zb), sl in _blocks(x, s, zp):
            v = np.divide(xb, sb, dtype=_F32)
            if narrow:
                v = v.astype(prec).astype(_F32)
            np.rint(v, out=v)
            if zb is not None:
                v += zb
            np.clip(v, lo, hi, out=v)
            flat_out[sl] = v if direct else v.astype(dt)
        return out


def _dequant_out(code: int, scale_dtype: np.dtype) -> np.dtype:
    if code:
        return np_dtype(code)
    if scale_dtype in (_F32, np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)):
        return scale_dtype
    return _F32  # float8e8m0 scales: the spec's output types are float, float16, bfloat16


@CPU.kernel("DequantizeLinear", since=10)
class DequantizeLinear:
    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        self.axis = int(a.get("axis", 1))
        self.block_size = int(a.get("block_size", 0))
        self.code = int(a.get("output_dtype", 0))

    def __call__(self, x: np.ndarray, x_scale: np.ndarray,
                 x_zero_point: np.ndarray | None = None) -> np.ndarray:
        x_scale = np.asarray(x_scale)
        out_dt = _dequant_out(self.code, x_scale.dtype)
        s = expand_param(float_of(x_scale).astype(_F32, copy=False), x.shape, self.axis,
                         self.block_size, "x_scale")
        zp = None
        if x_zero_point is not None:
            zp = expand_param(np.asarray(x_zero_point).astype(_F32), x.shape, self.axis,
                              self.block_size, "x_zero_point")
            if not np.any(zp):
                zp = None
        if x.dtype == np.int32 and zp is not None:
            # (x - zp) exactly in int64, then one rounding to float
            zi = expand_param(np.asarray(x_zero_point).astype(np.int64), x.shape, self.axis,
                              self.block_size, "x_zero_point")
            y = (x.astype(np.int64) - zi).astype(_F32) * s
            return y.astype(out_dt, copy=False)
        # up to 16-bit integers and the narrow floats are exact in float32: x - zp is exact
        out = np.empty(x.shape, out_dt)
        flat_out = out.reshape(-1) if all(p is None or p.ndim == 0 for p in (s, zp)) else out
        for xb, (sb, zb), sl in _blocks(x, s, zp):
            d = xb.astype(_F32)
            if zb is not None:
                d -= zb
            d *= sb
            flat_out[sl] = d
        return out


@CPU.kernel("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xf = x.astype(_F32, copy=False)
    if xf.size:
        lo = min(0.0, float(xf.min()))
        hi = max(0.0, float(xf.max()))
    else:
        lo = hi = 0.0
    scale = np.float32((np.float32(hi) - np.float32(lo)) / np.float32(255.0))
    if scale == 0:
        # an all-zero input: onnxruntime reports scale 1 rather than dividing by zero
        scale = np.float32(1.0)
        zp = np.float32(0.0)
        q = np.zeros(x.shape, np.uint8)
    else:
        zp = np.float32(np.clip(np.rint(np.float32(0.0) - np.float32(lo) / scale), 0, 255))
        v = xf / scale
        np.rint(v, out=v)
        v += zp
        np.clip(v, 0, 255, out=v)
        q = v.astype(np.uint8)
    return q, np.array(scale, dtype=_F32), np.array(zp, dtype=np.uint8)
