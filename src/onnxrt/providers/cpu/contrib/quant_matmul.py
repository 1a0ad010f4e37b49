"""com.microsoft quantized matrix products and lookups: MatMulInteger16,
MatMulIntegerToFloat, DynamicQuantizeMatMul, QGemm (8-bit operands, exact int32 sums),
MatMulNBits (2/4/8-bit blocked weights, zero points packed or typed, g_idx),
MatMulBnb4 (FP4/NF4), GatherBlockQuantized, and com.microsoft's QuantizeLinear,
DequantizeLinear and channels-last QLinearConv.

The integer sums are exact, whatever the CPU: with a constant B the compiled integer
product (quant/igemm.py, B packed once per session, the scaling or requantization fused
in), else quant/qmatmul.py's float BLAS product of the zero-point-shifted operands, exact
in the width it picks. onnxruntime's u8s8 kernels on CPUs
without VNNI add pairs of products in saturating int16 and can differ from the exact sum; this
module never does.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import ml_dtypes
import numpy as np

from onnxrt.framework.parallel import pool_of
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.quant import igemm, nbits
from onnxrt.providers.cpu.quant._common import int_range
from onnxrt.providers.cpu.quant.linear import (DequantizeLinear, QuantizeLinear,
                                               dynamic_quantize_linear)
from onnxrt.providers.cpu.quant.qconv import QLinearConv
from onnxrt.providers.cpu.quant.qmatmul import matmul_integer

MS = "com.microsoft"
_F32 = np.float32
_Q8 = (np.dtype(np.uint8), np.dtype(np.int8))


def _check8(x: np.ndarray, what: str, op: str) -> None:
    if x.dtype not in _Q8:
        raise TypeError(f"{op}: {what} has type {x.dtype}; uint8 or int8 expected")


def _per_tensor(p: np.ndarray | None, what: str, op: str) -> np.ndarray | None:
    if p is not None and np.size(p) != 1:
        raise ValueError(f"{op}: {what} must be a scalar or a 1-element tensor, got shape "
                         f"{np.shape(p)}")
    return None if p is None else np.asarray(p).reshape(())


def _per_column(p: np.ndarray | None, n: int, what: str, op: str) -> np.ndarray | None:
    """A scalar, or a vector of one value per output column (shape broadcasting to (.., N))."""
    if p is None:
        return None
    p = np.asarray(p)
    if p.size == 1:
        return p.reshape(())
    if p.shape[-1] != n:
        raise ValueError(f"{op}: {what} of shape {p.shape} is neither a scalar nor one value "
                         f"per column ({n})")
    return p


@CPU.kernel("MatMulInteger16", since=1, domain=MS)
def matmul_integer16(a, b):
    """int16 x int16 -> int32 matrix product (NumPy broadcasting of batch dimensions), sums
    wrapped to int32 as a 32-bit accumulator does."""
    for what, x in (("A", a), ("B", b)):
        if x.dtype not in (np.int16, np.uint16):
            raise TypeError(f"MatMulInteger16: {what} has type {x.dtype}; int16 expected")
    y = np.matmul(a.astype(np.int64), b.astype(np.int64))
    return y.astype(np.int32)


def _int_to_float(acc: np.ndarray, mult: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """float32(acc) * multiplier (+ bias): onnxruntime's scale-and-bias output step."""
    y = acc.astype(_F32)
    y *= mult
    if bias is not None:
        y += bias
    return y


_FLOAT_OUT = igemm.Epilogue(igemm.MODE_FLOAT, _F32)     # the output type, to compile for


def _float_epilogue(pb: igemm.PackedB, mult: np.ndarray, bias: np.ndarray | None,
                    ibias: np.ndarray | None = None) -> igemm.Epilogue | None:
    """float32(acc + ibias) * mult + bias, per tensor or per column; None for other
    shapes (the NumPy path runs)."""
    if (mult.size not in (1, pb.n) or (bias is not None and np.size(bias) not in (1, pb.n))
            or (ibias is not None and np.size(ibias) not in (1, pb.n))):
        return None
    return igemm.Epilogue(igemm.MODE_FLOAT, _F32, scale=mult, ibias=ibias,
                          fbias=None if bias is None else np.asarray(bias, _F32), per_col=True)


@CPU.kernel("MatMulIntegerToFloat", since=1, domain=MS, threads=True)
class MatMulIntegerToFloat:
    """(A - a_zp) @ (B - b_zp) summed exactly, times a_scale * b_scale (per tensor or per
    column of B) in float32, plus bias."""

    def __init__(self, node: Any) -> None:
        self.packed = igemm.prepack(node, 1, 5, warm=_FLOAT_OUT)

    def __call__(self, a, b, a_scale, b_scale, a_zero_point=None, b_zero_point=None,
                 bias=None, *, ctx=None):
        op = "MatMulIntegerToFloat"
        _check8(a, "A", op)
        _check8(b, "B", op)
        pb = self.packed
        if pb is not None and np.size(a_scale) == 1 and igemm.usable(a, a_zero_point):
            mult = (np.asarray(a_scale, _F32).reshape(()) *
                    np.asarray(b_scale, _F32).reshape(-1)).astype(_F32)
            epi = _float_epilogue(pb, mult, bias)
            if epi is not None:
                return igemm.product(a, a_zero_point, pb, epi, pool_of(ctx))
        return matmul_integer_to_float(a, b, a_scale, b_scale, a_zero_point, b_zero_point,
                                       bias)


@CPU.kernel("DynamicQuantizeMatMul", since=1, domain=MS, threads=True)
class DynamicQuantizeMatMul:
    """A (float32) quantized to uint8 over the whole tensor as DynamicQuantizeLinear does,
    then MatMulIntegerToFloat with B's per-tensor or per-column scale and zero point."""

    def __init__(self, node: Any) -> None:
        self.packed = igemm.prepack(node, 1, 3, warm=_FLOAT_OUT)

    def __call__(self, a, b, b_scale, b_zero_point=None, bias=None, *, ctx=None):
        op = "DynamicQuantizeMatMul"
        if a.dtype != np.float32:
            raise TypeError(f"{op}: A has type {a.dtype}; float32 expected")
        _check8(b, "B", op)
        pb = self.packed
        if pb is not None and igemm.kernels() is not None:
            qa, sa, za = dynamic_quantize_linear(a)
            mult = (sa * np.asarray(b_scale, _F32).reshape(-1)).astype(_F32)
            epi = _float_epilogue(pb, mult, bias)
            if epi is not None:
                return igemm.product(qa, za, pb, epi, pool_of(ctx))
        return dynamic_quantize_matmul(a, b, b_scale, b_zero_point, bias)


@CPU.kernel("QGemm", since=1, domain=MS, needs_node=True, threads=True)
class QGemm:
    """alpha * a_scale * b_scale * ((A' - a_zp) @ (B' - b_zp) + C), C an int32 bias; float32
    out without y_scale, else requantized to y_zero_point's type."""

    def __init__(self, node: Any) -> None:
        a = node.attrs
        self.alpha = float(a.get("alpha", 1.0))
        self.trans_a, self.trans_b = int(a.get("transA", 0)), int(a.get("transB", 0))
        q = node.input_present(7)
        warm = igemm.Epilogue(igemm.MODE_QUANT, igemm.out_dtype(node, np.uint8)) if q \
            else _FLOAT_OUT
        self.packed = igemm.prepack(node, 3, 5, trans=bool(self.trans_b), warm=warm)

    def __call__(self, a, a_scale, a_zero_point, b, b_scale, b_zero_point, c=None,
                 y_scale=None, y_zero_point=None, *, ctx=None):
        op = "QGemm"
        _check8(a, "A", op)
        _check8(b, "B", op)
        pb = self.packed
        if (pb is not None and a.ndim == 2 and np.size(a_scale) == 1
                and (c is None or (c.dtype == np.int32 and c.size in (1, pb.n)
                                   and (c.ndim == 0 or c.shape[-1] == c.size)))
                and (y_scale is None or np.size(y_scale) == 1)
                and (y_zero_point is None or np.size(y_zero_point) == 1)
                and igemm.usable(a, a_zero_point)):
            a2 = a.T if self.trans_a else a
            mult = (_F32(self.alpha) * np.asarray(a_scale, _F32).reshape(()) *
                    np.asarray(b_scale, _F32).reshape(-1)).astype(_F32)
            if y_scale is None and y_zero_point is None:
                epi = _float_epilogue(pb, mult, None, c)
            elif y_scale is not None and y_zero_point is not None:
                mult = (mult / np.asarray(y_scale, _F32).reshape(())).astype(_F32)
                dt = y_zero_point.dtype
                epi = igemm.Epilogue(igemm.MODE_QUANT, dt, scale=mult, ibias=c, per_col=True,
                                     zp=float(np.asarray(y_zero_point).reshape(())),
                                     qrange=int_range(dt))
            else:
                epi = None
            if epi is not None:
                return igemm.product(a2, a_zero_point, pb, epi, pool_of(ctx))
        return qgemm(a, a_scale, a_zero_point, b, b_scale, b_zero_point, c, y_scale,
                     y_zero_point, alpha=self.alpha, transA=self.trans_a, transB=self.trans_b)


def matmul_integer_to_float(a, b, a_scale, b_scale, a_zero_point=None, b_zero_point=None,
                            bias=None):
    """(A - a_zp) @ (B - b_zp) summed exactly, times a_scale * b_scale (per tensor or per
    column of B) in float32, plus bias."""
    op = "MatMulIntegerToFloat"
    _check8(a, "A", op)
    _check8(b, "B", op)
    n = b.shape[-1]
    za = _per_tensor(a_zero_point, "a_zero_point", op)
    zb = _per_column(b_zero_point, n, "b_zero_point", op)
    acc = matmul_integer(a, b, za, zb)
    sa = np.asarray(a_scale, _F32)
    sb = np.asarray(b_scale, _F32)
    if sa.size == 1:
        mult = sa.reshape(()) * _per_column(sb, n, "b_scale", op)
    else:
        # a per-row scale of A (onnxruntime applies it after the product)
        mult = _per_column(sb, n, "b_scale", op) * sa
    return _int_to_float(acc, mult.astype(_F32), bias)


def dynamic_quantize_matmul(a, b, b_scale, b_zero_point=None, bias=None):
    """A (float32) quantized to uint8 over the whole tensor as DynamicQuantizeLinear does, then
    MatMulIntegerToFloat with B's per-tensor or per-column scale and zero point."""
    op = "DynamicQuantizeMatMul"
    if a.dtype != np.float32:
        raise TypeError(f"{op}: A has type {a.dtype}; float32 expected")
    _check8(b, "B", op)
    qa, sa, za = dynamic_quantize_linear(a)
    n = b.shape[-1]
    acc = matmul_integer(qa, b, za, _per_column(b_zero_point, n, "b_zero_point", op))
    mult = sa * _per_column(np.asarray(b_scale, _F32), n, "b_scale", op)
    return _int_to_float(acc, mult.astype(_F32), bias)


def qgemm(a, a_scale, a_zero_point, b, b_scale, b_zero_point, c=None, y_scale=None,
          y_zero_point=None, *, alpha=1.0, transA=0, transB=0):
    """alpha * a_scale * b_scale * ((A' - a_zp) @ (B' - b_zp) + C), C an int32 bias; float32
    out without y_scale, else requantized to y_zero_point's type."""
    op = "QGemm"
    _check8(a, "A", op)
    _check8(b, "B", op)
    a2 = a.T if int(transA) else a
    b2 = b.T if int(transB) else b
    if a2.ndim != 2 or b2.ndim != 2 or a2.shape[1] != b2.shape[0]:
        raise ValueError(f"{op}: A {a.shape} and B {b.shape} (transA={transA}, "
                         f"transB={transB}) do not multiply")
    n = b2.shape[1]
    za = _per_tensor(a_zero_point, "a_zero_point", op)
    zb = _per_column(b_zero_point, n, "b_zero_point", op)
    acc = matmul_integer(a2, b2, za, zb)
    if c is not None:
        if c.dtype != np.int32:
            raise TypeError(f"{op}: C has type {c.dtype}; int32 expected")
        acc = (acc.astype(np.int64) + c).astype(np.int32)
    sa = _per_tensor(np.asarray(a_scale, _F32), "a_scale", op)
    sb = _per_column(np.asarray(b_scale, _F32), n, "b_scale", op)
    mult = (_F32(alpha) * sa * sb).astype(_F32)
    if y_scale is None:
        if y_zero_point is not None:
            raise ValueError(f"{op}: y_zero_point given without y_scale")
        return _int_to_float(acc, mult, None)
    mult = (mult / _per_tensor(np.asarray(y_scale, _F32), "y_scale", op)).astype(_F32)
    if y_zero_point is None:
        raise ValueError(f"{op}: a quantized output needs y_zero_point with y_scale")
    zy = _per_tensor(y_zero_point, "y_zero_point", op)
    v = np.rint(acc.astype(_F32) * mult) + _F32(zy)
    lo, hi = int_range(y_zero_point.dtype)
    return np.clip(v, lo, hi).astype(y_zero_point.dtype)


# -- blocked low-bit weights -----------------------------------------------------------

def unpack_bits(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The first ``count`` unsigned ``bits``-wide values of each row of a uint8 array (last
    axis), least significant bits first."""
    p = np.asarray(packed, np.uint8)
    if bits == 8:
        return p[..., :count].astype(np.int32)
    per = 8 // bits
    shifts = (np.arange(per, dtype=np.uint8) * bits).astype(np.uint8)
    v = (p[..., None] >> shifts) & np.uint8((1 << bits) - 1)
    return v.reshape(p.shape[:-1] + (-1,))[..., :count].astype(np.int32)


@CPU.kernel("MatMulNBits", since=1, domain=MS, needs_node=True, threads=True)
class MatMulNBits:
    """Y = A @ dequant(B)^T (+ bias): B (N, k_blocks, blob) holds ``bits``-wide weights packed
    along K, block by block; each (n, block) has a scale and a zero point (packed uint8 of the
    same width, or typed like A; default 2^(bits-1)); g_idx, when given, names the block of
    each row k. The dequantized weight is built once per session when B, the scales and
    the zero points are constants. ``accuracy_level`` 4 quantizes A to int8 per block of K
    (symmetric, round half to even) before the product, as onnxruntime's int8 compute does;
    the other levels compute in float32."""

    def __init__(self, node: Any) -> None:
        a = node.attrs
        self.k, self.n = int(a["K"]), int(a["N"])
        self.bits = int(a.get("bits", 4))
        self.block = int(a["block_size"])
        self.level = int(a.get("accuracy_level", 0))
        if self.bits not in (2, 4, 8):
            raise ValueError(f"MatMulNBits: bits={self.bits} (2, 4 or 8 are supported)")
        if self.block < 16 or self.block & (self.block - 1):
            raise ValueError(f"MatMulNBits: block_size {self.block} must be a power of 2, >= 16")
        if int(a.get("weight_prepacked", 0)):
            raise ValueError("MatMulNBits: weight_prepacked=1 (an execution provider's own "
                             "packed layout) is not supported")
        self.kb = -(-self.k // self.block)
        ci = node.constant_inputs
        self.w: np.ndarray | None = None
        self.packed: nbits.NBitsWeight | None = None
        if all(i in ci or not node.input_present(i) for i in (1, 2, 3, 4)):
            b, scales, zp, g_idx = ci[1], ci[2], ci.get(3), ci.get(4)
            if nbits.kernels() is not None:
                # the codes stay packed; the compiled product unpacks them block by block
                self._check(b, scales, g_idx)
                try:
                    self.packed = nbits.NBitsWeight(
                        b, np.asarray(scales).astype(_F32), self._zero_points(zp), g_idx,
                        self.k, self.n, self.bits, self.block)
                except ValueError:
                    raise
                except Exception:   # the compiled kernels failed to build here: NumPy path
                    self.packed = None
            if self.packed is None:
                self.w = self.dequant(b, scales, zp, g_idx)

    def _check(self, b: np.ndarray, scales: np.ndarray,
               g_idx: np.ndarray | None) -> np.ndarray:
        """B, the scales and g_idx validated; the block of each row k."""
        n, k, kb, blk, bits = self.n, self.k, self.kb, self.block, self.bits
        blob = blk * bits // 8
        if b.dtype != np.uint8 or b.size != n * kb * blob:
            raise ValueError(f"MatMulNBits: B must be uint8 of shape ({n}, {kb}, {blob}), "
                             f"got {b.dtype} {b.shape}")
        if np.size(scales) != n * kb:
            raise ValueError(f"MatMulNBits: scales must hold {n} x {kb} values, got "
                             f"{np.shape(scales)}")
        if g_idx is not None:
            gi = np.asarray(g_idx).astype(np.int64).reshape(-1)
            if gi.size != k or gi.min(initial=0) < 0 or gi.max(initial=0) >= kb:
                raise ValueError(f"MatMulNBits: g_idx must hold {k} block indices in "
                                 f"[0, {kb}), got shape {np.shape(g_idx)}")
            return gi
        return np.arange(k) // blk

    def dequant(self, b: np.ndarray, scales: np.ndarray, zp: np.ndarray | None,
                g_idx: np.ndarray | None) -> np.ndarray:
        """The float32 weight (K, N) (the NumPy path)."""
        n, k, kb, blk, bits = self.n, self.k, self.kb, self.block, self.bits
        gi = self._check(b, scales, g_idx)
        q = unpack_bits(b.reshape(n, -1), bits, kb * blk)[:, :k]      # (N, K)
        s = np.asarray(scales).astype(_F32).reshape(n, kb)
        z = self._zero_points(zp)
        sk, zk = s[:, gi], z[:, gi]
        # q * scale - scale * zp: onnxruntime's dequantization order
        w = q.astype(_F32) * sk + (-sk * zk)
        return np.ascontiguousarray(w.T)

    def _zero_points(self, zp: np.ndarray | None) -> np.ndarray:
        """(N, k_blocks) float32 zero points: default 2^(bits-1), unpacked, or as typed."""
        n, kb, bits = self.n, self.kb, self.bits
        if zp is None:
            z = np.full((n, kb), float(1 << (bits - 1)), _F32)
        elif zp.dtype == np.uint8:
            z = unpack_bits(zp.reshape(n, -1), bits, kb).astype(_F32)
            if z.shape[1] != kb:
                raise ValueError(f"MatMulNBits: packed zero_points too short: "
                                 f"{np.shape(zp)} for {kb} blocks")
        else:
            z = np.asarray(zp).astype(_F32).reshape(n, -1)
            if z.shape[1] != kb:
                raise ValueError(f"MatMulNBits: zero_points must hold {n} x {kb} values")
        return z

    def _quantize_a(self, a: np.ndarray) -> np.ndarray:
        """A as onnxruntime's int8 compute sees it: each block of K scaled by max|a| / 127,
        rounded half to even, then scaled back."""
        k, blk = self.k, self.block
        pad = self.kb * blk - k
        ap = np.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, pad)]) if pad else a
        ab = ap.reshape(a.shape[:-1] + (self.kb, blk))
        amax = np.abs(ab).max(axis=-1, keepdims=True)
        scale = (amax / _F32(127)).astype(_F32)
        inv = np.where(scale != 0, _F32(1) / np.where(scale != 0, scale, 1), 0).astype(_F32)
        q = np.clip(np.rint(ab * inv), -127, 127)
        return (q * scale).reshape(ap.shape)[..., :k].astype(_F32)

    def __call__(self, a, b, scales, zero_points=None, g_idx=None, bias=None, *, ctx=None):
        if a.shape[-1] != self.k:
            raise ValueError(f"MatMulNBits: A's last dimension is {a.shape[-1]}, K={self.k}")
        af = a if a.dtype == _F32 else a.astype(_F32)
        level4 = self.level == 4 and self.bits in (4, 8)
        if self.packed is not None:
            y = self.packed.matmul(nbits.kernels(), af.reshape(-1, self.k), bias, level4,
                                   pool_of(ctx))
            return y.reshape(a.shape[:-1] + (self.n,)).astype(a.dtype, copy=False)
        if level4:
            af = self._quantize_a(af)
        w = self.w if self.w is not None else self.dequant(b, scales, zero_points, g_idx)
        y = np.matmul(af, w)
        if bias is not None:
            y += bias.astype(_F32)
        return y.astype(a.dtype, copy=False)


# FP4 and NF4 code books of MatMulBnb4 (the bitsandbytes values)
_FP4 = np.array([0.0, 5.208333333e-03, 0.66666667, 1.0, 0.33333333, 0.5, 0.16666667, 0.25,
                 -0.0, -5.208333333e-03, -0.66666667, -1.0, -0.33333333, -0.5, -0.16666667,
                 -0.25], _F32)
_NF4 = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                 -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                 0.07958029955625534, 0.16093020141124725, 0.24611230194568634,
                 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                 0.7229568362236023, 1.0], _F32)


@CPU.kernel("MatMulBnb4", since=1, domain=MS, needs_node=True)
class MatMulBnb4:
    """A @ dequant(B)^T (transB=1) or A @ dequant(B): B (N x K, flattened) as 4-bit codes of
    FP4 (quant_type 0) or NF4 (1), two per byte with the first in the high nibble, times the
    absmax of its block."""

    def __init__(self, node: Any) -> None:
        a = node.attrs
        self.k, self.n = int(a["K"]), int(a["N"])
        self.block = int(a["block_size"])
        qt = int(a["quant_type"])
        if qt not in (0, 1):
            raise ValueError(f"MatMulBnb4: quant_type {qt} (0: FP4, 1: NF4)")
        self.book = _FP4 if qt == 0 else _NF4
        self.trans_b = int(a.get("transB", 1))
        ci = node.constant_inputs
        self.w = self.dequant(ci[1], ci[2]) if 1 in ci and 2 in ci else None

    def dequant(self, b: np.ndarray, absmax: np.ndarray) -> np.ndarray:
        numel = self.n * self.k
        p = np.asarray(b, np.uint8).reshape(-1)
        if p.size != (numel + 1) // 2:
            raise ValueError(f"MatMulBnb4: B must hold {(numel + 1) // 2} bytes, got {p.size}")
        codes = np.stack([p >> 4, p & 0xF], axis=1).reshape(-1)[:numel]
        am = np.asarray(absmax).astype(_F32).reshape(-1)
        nb = -(-numel // self.block)
        if am.size != nb:
            raise ValueError(f"MatMulBnb4: absmax must hold {nb} values, got {am.size}")
        w = self.book[codes] * np.repeat(am, self.block)[:numel]
        return w.reshape(self.n, self.k)

    def __call__(self, a, b, absmax):
        w = self.w if self.w is not None else self.dequant(b, absmax)
        y = np.matmul(a.astype(_F32), w.T if self.trans_b else w)
        return y.astype(a.dtype, copy=False)


@CPU.kernel("GatherBlockQuantized", since=1, domain=MS)
def gather_block_quantized(data, indices, scales, zero_points=None, *, bits=4, block_size=128,
                           gather_axis=0, quantize_axis=1):
    """Gather(data, indices) dequantized block-wise along ``quantize_axis``: (q - zp) * scale.
    uint8 data with bits=4 holds two values per byte (low nibble first) along its last axis,
    and so do its zero points; the default zero point is 0 for int4/uint4 and 2^(bits-1)
    for uint8."""
    op = "GatherBlockQuantized"
    bits, blk = int(bits), int(block_size)
    if bits not in (4, 8):
        raise ValueError(f"{op}: bits={bits} (4 or 8)")
    if blk < 16 or blk & (blk - 1):
        raise ValueError(f"{op}: block_size {blk} must be a power of 2, >= 16")
    r = data.ndim
    gax = int(gather_axis) + r if int(gather_axis) < 0 else int(gather_axis)
    qax = int(quantize_axis) + r if int(quantize_axis) < 0 else int(quantize_axis)
    if not (0 <= gax < r and 0 <= qax < r) or gax == qax:
        raise ValueError(f"{op}: gather_axis {gather_axis} and quantize_axis {quantize_axis} "
                         f"must be distinct axes of a rank-{r} tensor")
    packed = data.dtype == np.uint8 and bits == 4
    if data.dtype == np.uint8:
        if gax != 0 or qax != r - 1:
            raise ValueError(f"{op}: uint8 data needs gather_axis 0 and quantize_axis last")
        q = unpack_bits(data, 4, data.shape[-1] * 2) if packed else data.astype(np.int32)
        default_zp = 1 << (bits - 1)
    elif data.dtype in (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4)):
        q = data.astype(np.int32)
        default_zp = 0
    else:
        raise TypeError(f"{op}: data has type {data.dtype} (uint8, int4, uint4 expected)")
    s = np.asarray(scales)
    nblk = -(-q.shape[qax] // blk)
    if s.ndim != r or s.shape[qax] != nblk:
        raise ValueError(f"{op}: scales of shape {s.shape} do not match {nblk} blocks along "
                         f"axis {qax} of data {q.shape}")
    if zero_points is None:
        z = np.full(s.shape, default_zp, np.int32)
    elif packed:
        z = unpack_bits(zero_points, 4, s.shape[-1])
    else:
        z = np.asarray(zero_points).astype(np.int32)
    idx = np.asarray(indices).astype(np.int64)
    dim = q.shape[gax]
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        raise IndexError(f"{op}: indices must be in [{-dim}, {dim - 1}]")
    idx = np.where(idx < 0, idx + dim, idx)
    rep = lambda p: np.repeat(p, blk, axis=qax).take(range(q.shape[qax]), axis=qax)  # noqa
    deq = (q - rep(z)).astype(_F32) * rep(s.astype(_F32))
    return np.take(deq, idx, axis=gax).astype(s.dtype)


# -- com.microsoft doubles of ONNX quantization ops ---------------------------------------

@CPU.kernel("QuantizeLinear", since=1, domain=MS, needs_node=True)
class QuantizeLinearMS(QuantizeLinear):
    """ONNX QuantizeLinear (per tensor or per axis) under com.microsoft: int8/uint8/int16/
    uint16/int4/uint4 outputs."""


@CPU.kernel("DequantizeLinear", since=1, domain=MS, needs_node=True)
class DequantizeLinearMS(DequantizeLinear):
    """ONNX DequantizeLinear (per tensor or per axis) under com.microsoft."""


@CPU.kernel("QLinearConv", since=1, domain=MS, needs_node=True, threads=True)
class QLinearConvMS(QLinearConv):
    """ONNX QLinearConv, with ``channels_last`` = 1 taking and giving (N, *spatial, C)."""

    def __init__(self, node: Any) -> None:
        attrs = dict(node.attrs)
        self.channels_last = int(attrs.pop("channels_last", 0))
        attrs.setdefault("group", 1)
        attrs.setdefault("auto_pad", "NOTSET")
        super().__init__(dataclasses.replace(node, attrs=attrs))

    def __call__(self, x, *rest, ctx=None):
        if not self.channels_last:
            return super().__call__(x, *rest, ctx=ctx)
        y = super().__call__(np.moveaxis(x, -1, 1), *rest, ctx=ctx)
        return np.ascontiguousarray(np.moveaxis(y, 1, -1))
