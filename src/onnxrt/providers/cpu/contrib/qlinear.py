"""com.microsoft QLinear* element-wise, pooling and concatenation ops on 8-bit tensors with a
per-tensor scale and zero point (what onnxruntime's QOperator quantization emits).

Each op follows onnxruntime's CPU arithmetic: the unary ops and the concatenation go through
a 256-entry table (dequantize every code, apply the function in float32, quantize by
division, round half to even, saturate); the binary ops and the average pools dequantize in
float32 and quantize once; the global average pool sums in int32 and requantizes.
QLinearAdd and QLinearMul run compiled (quant/elementwise.py: same shapes, a bias over the
last axes, a scalar); the other paths are plain NumPy: each is one function a compiled
kernel can replace.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.nn.pool import average_pool, max_pool
from onnxrt.providers.cpu.quant import elementwise, softmax
from onnxrt.providers.cpu.quant._common import int_range

MS = "com.microsoft"
_F32 = np.float32
_Q8 = (np.dtype(np.uint8), np.dtype(np.int8))


def scalar(p: np.ndarray | None, what: str, op: str, default: Any = 0) -> Any:
    """The one value of a per-tensor scale or zero point (None: ``default``)."""
    if p is None:
        return default
    a = np.asarray(p)
    if a.size != 1:
        raise ValueError(f"{op}: {what} must be a scalar or a 1-element tensor, got shape "
                         f"{a.shape}")
    return a.reshape(()).item()


def check_q8(x: np.ndarray, what: str, op: str) -> None:
    if x.dtype not in _Q8:
        raise TypeError(f"{op}: {what} has type {x.dtype}; uint8 or int8 expected")


def quantize(v: np.ndarray, scale: float, zp: int, dt: np.dtype) -> np.ndarray:
    """float32 values to ``dt`` as onnxruntime's QuantizeLinear does: v / scale (a float32
    division), round half to even, plus the zero point, saturated."""
    lo, hi = int_range(dt)
    q = np.asarray(v, _F32) / _F32(scale)
    q = np.rint(q)
    q += _F32(zp)
    return np.clip(q, lo, hi).astype(dt)


def dequantize(x: np.ndarray, scale: float, zp: int) -> np.ndarray:
    """(x - zp) * scale in float32 (the difference is exact: it fits 9 bits)."""
    return (x.astype(np.int32) - np.int32(zp)).astype(_F32) * _F32(scale)


def codes(dt: np.dtype) -> np.ndarray:
    """Every value of an 8-bit type, in the order of its bytes as unsigned indices."""
    return np.arange(256, dtype=np.uint8).view(dt)


def lookup_table(fn: Any, x_scale: float, x_zp: int, y_scale: float, y_zp: int,
                 dt: np.dtype) -> np.ndarray:
    """table[byte] = quantize(fn(dequantize(code))) for all 256 codes of ``dt``."""
    return quantize(fn(dequantize(codes(dt), x_scale, x_zp)), y_scale, y_zp, dt)


def apply_table(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    return table[x.view(np.uint8)]


class _Unary:
    """A unary QLinear op through a table, built once when the scales and zero points are
    constants, else per call."""

    op = ""

    def __init__(self, node: Any) -> None:
        self.node = node
        self.table: np.ndarray | None = None
        ci = node.constant_inputs
        if all(i in ci or not node.input_present(i) for i in (1, 2, 3, 4)) and 0 not in ci:
            zp = ci.get(2, ci.get(4))
            if zp is not None:
                self.table = self._table(np.asarray(zp).dtype, ci.get(1), ci.get(2),
                                         ci.get(3), ci.get(4))

    def fn(self, v: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _table(self, dt, xs, xz, ys, yz) -> np.ndarray:
        op = self.op
        return lookup_table(self.fn, scalar(xs, "X_scale", op), scalar(xz, "X_zero_point", op),
                            scalar(ys, "Y_scale", op), scalar(yz, "Y_zero_point", op), dt)

    def __call__(self, x, x_scale, x_zero_point=None, y_scale=None, y_zero_point=None):
        check_q8(x, "X", self.op)
        for what, z in (("X_zero_point", x_zero_point), ("Y_zero_point", y_zero_point)):
            if z is not None and z.dtype != x.dtype:
                raise TypeError(f"{self.op}: {what} has type {z.dtype}, X has {x.dtype}")
        if y_scale is None:
            raise ValueError(f"{self.op}: Y_scale is required")
        table = self.table
        if table is None or table.dtype != x.dtype:
            table = self._table(x.dtype, x_scale, x_zero_point, y_scale, y_zero_point)
        return apply_table(x, table)


@CPU.kernel("QLinearLeakyRelu", since=1, domain=MS, needs_node=True)
class QLinearLeakyRelu(_Unary):
    op = "QLinearLeakyRelu"

    def __init__(self, node: Any) -> None:
        self.alpha = _F32(node.attrs.get("alpha", 0.01))
        super().__init__(node)

    def fn(self, v: np.ndarray) -> np.ndarray:
        return np.where(v >= 0, v, v * self.alpha)


@CPU.kernel("QLinearSigmoid", since=1, domain=MS, needs_node=True)
class QLinearSigmoid(_Unary):
    op = "QLinearSigmoid"

    def fn(self, v: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return (_F32(1) / (_F32(1) + np.exp(-v))).astype(_F32)


def _binary(op: str, combine: Any, a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp):
    check_q8(a, "A", op)
    if b.dtype != a.dtype:
        raise TypeError(f"{op}: A has type {a.dtype}, B has {b.dtype}")
    sa, za = _F32(scalar(a_scale, "A_scale", op)), int(scalar(a_zp, "A_zero_point", op))
    sb, zb = _F32(scalar(b_scale, "B_scale", op)), int(scalar(b_zp, "B_zero_point", op))
    sc, zc = _F32(scalar(c_scale, "C_scale", op)), int(scalar(c_zp, "C_zero_point", op))
    lo, hi = int_range(a.dtype)
    if combine is _add:
        ra, rb = sa / sc, sb / sc
        y = elementwise.add(a, b, ra, rb, _F32(zc) - (ra * _F32(za) + rb * _F32(zb)), lo, hi)
    else:
        y = elementwise.mul(a, b, za, zb, sa * sb / sc, _F32(zc), lo, hi)
    if y is not None:
        return y
    v = np.rint(combine(a, za, sa, b, zb, sb, sc, zc))
    return np.clip(v, lo, hi).astype(a.dtype)


def _add(a, za, sa, b, zb, sb, sc, zc):
    # onnxruntime's x86 order: the zero points folded into one constant first, then each
    # side scaled by its ratio to the output scale, all in float32 (ties then round alike)
    ra, rb = sa / sc, sb / sc
    fixed = _F32(zc) - (ra * _F32(za) + rb * _F32(zb))
    v = a.astype(_F32) * ra
    v = fixed + v
    return v + b.astype(_F32) * rb


def _mul(a, za, sa, b, zb, sb, sc, zc):
    # the product of the two differences is exact in int32, scaled once, then the zero point
    p = (a.astype(np.int32) - np.int32(za)) * (b.astype(np.int32) - np.int32(zb))
    return p.astype(_F32) * (sa * sb / sc) + _F32(zc)


class _QLinearBinary:
    """The two element-wise QLinear ops: their formula and name are all that differ."""

    op = ""

    def __init__(self, node: Any) -> None:
        elementwise.prepare()       # compiled (or loaded) now: a run never compiles

    def __call__(self, a, a_scale, a_zero_point, b, b_scale, b_zero_point, c_scale,
                 c_zero_point=None):
        return _binary(self.op, self._formula, a, a_scale, a_zero_point, b, b_scale,
                       b_zero_point, c_scale, c_zero_point)


@CPU.kernel("QLinearAdd", since=1, domain=MS, needs_node=True)
class QLinearAdd(_QLinearBinary):
    """C = (A_scale (A - A_zp) + B_scale (B - B_zp)) / C_scale + C_zp, broadcasting."""

    op, _formula = "QLinearAdd", staticmethod(_add)


@CPU.kernel("QLinearMul", since=1, domain=MS, needs_node=True)
class QLinearMul(_QLinearBinary):
    """C = A_scale B_scale (A - A_zp)(B - B_zp) / C_scale + C_zp, broadcasting."""

    op, _formula = "QLinearMul", staticmethod(_mul)


def _requant_table(op: str, dt: np.dtype, xs, xz, ys, yz) -> np.ndarray | None:
    """The table that moves codes of (xs, xz) to (ys, yz); None when they are the same."""
    xs_v, xz_v = scalar(xs, "scale", op), scalar(xz, "zero point", op)
    ys_v, yz_v = scalar(ys, "scale", op), scalar(yz, "zero point", op)
    if _F32(xs_v) == _F32(ys_v) and int(xz_v) == int(yz_v):
        return None
    return lookup_table(lambda v: v, xs_v, xz_v, ys_v, yz_v, dt)


@CPU.kernel("QLinearWhere", since=1, domain=MS)
def qlinear_where(condition, x, x_scale, x_zero_point, y, y_scale, y_zero_point, z_scale,
                  z_zero_point):
    """Where(condition, X, Y) with X and Y first requantized to Z's scale and zero point."""
    op = "QLinearWhere"
    check_q8(x, "X", op)
    if y.dtype != x.dtype:
        raise TypeError(f"{op}: X has type {x.dtype}, Y has {y.dtype}")
    tx = _requant_table(op, x.dtype, x_scale, x_zero_point, z_scale, z_zero_point)
    ty = _requant_table(op, x.dtype, y_scale, y_zero_point, z_scale, z_zero_point)
    xv = x if tx is None else apply_table(x, tx)
    yv = y if ty is None else apply_table(y, ty)
    return np.where(np.asarray(condition, bool), xv, yv)


@CPU.kernel("QLinearConcat", since=1, domain=MS)
def qlinear_concat(y_scale, y_zero_point, *inputs, axis):
    """Concat of (tensor, scale, zero point) triples, each requantized to Y's."""
    op = "QLinearConcat"
    if len(inputs) < 3 or len(inputs) % 3:
        raise ValueError(f"{op}: inputs after Y_scale and Y_zero_point must be (tensor, "
                         f"scale, zero_point) triples, got {len(inputs)} inputs")
    dt = np.asarray(y_zero_point).dtype
    parts = []
    for i in range(0, len(inputs), 3):
        x, xs, xz = inputs[i:i + 3]
        if x.dtype != dt:
            raise TypeError(f"{op}: input {i // 3} has type {x.dtype}, Y_zero_point {dt}")
        t = _requant_table(op, dt, xs, xz, y_scale, y_zero_point)
        parts.append(x if t is None else apply_table(x, t))
    return np.concatenate(parts, axis=int(axis))


# -- softmax ------------------------------------------------------------------------------

def _softmax_table(x_scale: float, reduce_len: int, signed: bool) -> np.ndarray:
    """float32 exp table indexed by byte: entry i holds exp((i - 255 + shift) * x_scale),
    the shift keeping sum(exp) well inside float32 (onnxruntime's choice: log(FLT_MAX /
    reduce_len) - 5 nats, at least 0)."""
    shift = max(0.0, float(np.log(np.finfo(_F32).max / reduce_len)) - 5.0) / float(x_scale)
    i = np.arange(256, dtype=np.float64)
    vals = np.exp((i - 255 + shift) * float(x_scale)).astype(_F32)
    idx = (np.arange(256) - 128 if signed else np.arange(256)).astype(np.uint8)
    table = np.empty(256, _F32)
    table[idx] = vals
    return table


def _softmax_rows(x: np.ndarray, table: np.ndarray, inv_scale: np.float32, zp: int,
                  signed: bool) -> np.ndarray:
    """Rows of x (N, D) to quantized softmax: the table shifted so each row's max maps to
    the table's top, a sequential float32 sum (onnxruntime's order), then
    round(e * floor(1 / y_scale) / sum) + zp, saturated."""
    lo, hi = int_range(x.dtype)
    y = softmax.rows(x, table, inv_scale, zp, lo, hi)
    return y if y is not None else _softmax_rows_np(x, table, inv_scale, zp, signed)


def _softmax_rows_np(x: np.ndarray, table: np.ndarray, inv_scale: np.float32, zp: int,
                     signed: bool) -> np.ndarray:
    """_softmax_rows in NumPy steps (no numba)."""
    xi = x.astype(np.int32)
    mx = xi.max(axis=1, keepdims=True)
    if signed:
        idx = ((127 - mx) + xi).astype(np.uint8)        # wraps like a byte
    else:
        idx = xi + (255 - mx)
    e = table[idx]
    total = np.cumsum(e, axis=1, dtype=_F32)[:, -1:]  # left-to-right, as onnxruntime adds
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.rint((e * inv_scale) / total)
    q += _F32(zp)
    lo, hi = int_range(x.dtype)
    out = np.clip(np.nan_to_num(q, nan=zp), lo, hi).astype(x.dtype)
    out[(total == 0).reshape(-1)] = 0
    return out


@CPU.kernel("QLinearSoftmax", since=1, domain=MS, needs_node=True)
class QLinearSoftmax:
    def __init__(self, node: Any) -> None:
        softmax.prepare()           # compiled (or loaded) now: a run never compiles
        self.opset = node.attrs.get("opset")
        self.axis = node.attrs.get("axis", -1)

    def __call__(self, x, x_scale, x_zero_point, y_scale, y_zero_point=None):
        return qlinear_softmax(x, x_scale, x_zero_point, y_scale, y_zero_point,
                               opset=self.opset, axis=self.axis)


def qlinear_softmax(x, x_scale, x_zero_point, y_scale, y_zero_point=None, *, opset=None,
                    axis=-1):
    """Softmax of quantized X into quantized Y (scale usually 1/256). ``opset`` is the ONNX
    Softmax version it replaces: below 13 the rows are everything from ``axis`` on, from 13
    the one ``axis``. The schema's default axis is -1 whatever the opset (onnxruntime's
    behaviour). The input zero point cancels out."""
    op = "QLinearSoftmax"
    if opset is None:
        raise ValueError(f"{op}: the required attribute 'opset' is missing")
    check_q8(x, "X", op)
    if x.size == 0:
        return x.copy()
    signed = x.dtype == np.int8
    opset = int(opset)
    ax = int(axis)
    ax = ax + x.ndim if ax < 0 else ax
    if not 0 <= ax < x.ndim:
        raise ValueError(f"{op}: axis {axis} out of range for rank {x.ndim}")
    inv = _F32(np.floor(_F32(1) / _F32(scalar(y_scale, "y_scale", op))))
    zp = int(scalar(y_zero_point, "y_zero_point", op))
    if opset < 13:
        d = int(np.prod(x.shape[ax:]))
        table = _softmax_table(scalar(x_scale, "X_scale", op), d, signed)
        return _softmax_rows(x.reshape(-1, d), table, inv, zp, signed).reshape(x.shape)
    xt = np.moveaxis(x, ax, -1)
    d = xt.shape[-1]
    table = _softmax_table(scalar(x_scale, "X_scale", op), d, signed)
    y = _softmax_rows(np.ascontiguousarray(xt).reshape(-1, d), table, inv, zp, signed)
    return np.moveaxis(y.reshape(xt.shape), -1, ax)


# -- pools --------------------------------------------------------------------------------

def _to_nchw(x: np.ndarray) -> np.ndarray:
    return np.moveaxis(x, -1, 1)


def _to_nhwc(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(x, 1, -1))


@CPU.kernel("QLinearGlobalAveragePool", since=1, domain=MS)
def qlinear_global_average_pool(x, x_scale, x_zero_point, y_scale, y_zero_point, *,
                                channels_last=0):
    """Mean over the spatial axes: an int32 sum less zp * size, times x_scale / (y_scale *
    size) in float32, rounded half to even, plus y_zp, saturated."""
    op = "QLinearGlobalAveragePool"
    check_q8(x, "X", op)
    xc = _to_nchw(x) if channels_last else x
    n, c = xc.shape[:2]
    size = int(np.prod(xc.shape[2:]))
    xs, xz = _F32(scalar(x_scale, "x_scale", op)), int(scalar(x_zero_point, "x_zero_point", op))
    ys, yz = _F32(scalar(y_scale, "y_scale", op)), int(scalar(y_zero_point, "y_zero_point", op))
    acc = xc.reshape(n, c, size).astype(np.int32).sum(axis=2, dtype=np.int32)
    acc -= np.int32(xz * size)
    v = acc.astype(_F32) * (xs / (ys * _F32(size)))
    v = np.rint(v) + _F32(yz)
    lo, hi = int_range(x.dtype)
    y = np.clip(v, lo, hi).astype(x.dtype).reshape((n, c) + (1,) * (xc.ndim - 2))
    return _to_nhwc(y) if channels_last else y


_POOL_KEYS = ("kernel_shape", "strides", "pads", "auto_pad", "ceil_mode")


@CPU.kernel("QLinearAveragePool", since=1, domain=MS)
def qlinear_average_pool(x, x_scale, x_zero_point, y_scale, y_zero_point=None, *,
                         kernel_shape, strides=None, pads=None, auto_pad="NOTSET", ceil_mode=0,
                         count_include_pad=0, channels_last=0):
    """AveragePool on dequantized X (float32), quantized to Y's scale and zero point."""
    op = "QLinearAveragePool"
    check_q8(x, "X", op)
    xc = _to_nchw(x) if channels_last else x
    v = dequantize(xc, scalar(x_scale, "x_scale", op), scalar(x_zero_point, "x_zero_point", op))
    y = average_pool(v, kernel_shape=kernel_shape, strides=strides, pads=pads,
                     auto_pad=auto_pad, ceil_mode=ceil_mode,
                     count_include_pad=count_include_pad)
    # onnxruntime quantizes the pooled value as round(v / y_scale + y_zp)
    lo, hi = int_range(x.dtype)
    q = np.rint(y / _F32(scalar(y_scale, "y_scale", op))
                + _F32(scalar(y_zero_point, "y_zero_point", op)))
    q = np.clip(q, lo, hi).astype(x.dtype)
    return _to_nhwc(q) if channels_last else q


@CPU.kernel("NhwcMaxPool", since=1, domain=MS)
def nhwc_max_pool(x, *, kernel_shape, strides=None, pads=None, auto_pad="NOTSET", ceil_mode=0,
                  dilations=None, storage_order=0):
    """MaxPool on an 8-bit channels-last tensor (N, *spatial, C)."""
    check_q8(x, "x", "NhwcMaxPool")
    if int(storage_order):
        raise ValueError("NhwcMaxPool: storage_order=1 only applies to the indices output, "
                         "which this op does not have")
    y = max_pool(_to_nchw(x), kernel_shape=kernel_shape, strides=strides, pads=pads,
                 auto_pad=auto_pad, ceil_mode=ceil_mode, dilations=dilations)
    return _to_nhwc(y)
