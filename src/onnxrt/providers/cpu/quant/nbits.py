"""Compiled products with blockwise 2/4/8-bit weights (com.microsoft MatMulNBits): the
weight stays packed as the model stores it, (N, blocks, bytes) uint8, and is unpacked block
by block inside the product; the float weight is never built.

Two paths, both float32:

- few rows of A (token-by-token decoding, M <= _GEMV_M), no g_idx: per output column and
  block, sum(a_k * q_k) over the block's raw codes, then scale * (that - zp * sum(a_k)).
  A is split per run into ``8 / bits`` planes (plane p holds the values whose codes sit at
  bit offset p * bits of each byte), so every plane's loop reads bytes and floats
  contiguously and vectorizes; the block sums of A are formed once per run.
- more rows (a prompt) or g_idx: bands of columns dequantized into a buffer that stays in
  cache (q * scale - scale * zp, onnxruntime's order), multiplied by BLAS's sgemm called
  from the compiled code (providers/cpu/blas.py) into the output's columns.

Columns are split over the session's intra-op threads (framework/parallel.py). Compiled
once per process through providers/cpu/nn/jit.py's ``compile_once`` (numba's disk cache); without
numba ``kernels()`` is None and MatMulNBits keeps its NumPy path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.framework.parallel import SERIAL, ThreadPool
from onnxrt.providers.cpu import blas
from onnxrt.providers.cpu.nn import jit
from onnxrt.providers.cpu.quant import nbits_q8

__all__ = ["kernels", "NBitsWeight"]

_GEMV_M = 4
_TILE_BYTES = 192 << 10
_PAR_MIN = 1 << 20
# decoding rows split their columns over the threads from this many codes: below it the
# split cost more than it saved (genai small int4 decode step, MatMulNBits 2.3 ms/step on
# one thread each against 3.2 split from 2**18 codes). The lm_heads of the benchmark's
# decoders are past 2**20 too and lost as well (accuracy_level 4, cold weights, one-node
# sessions under the lock, the second core shared: 512x8000 625 us on one thread against
# 898 split, 768x16000 905 against 1119), so only products past those split
_GEMV_PAR_MIN = 1 << 24
_F32 = np.float32
_NO_BIAS = np.zeros(1, _F32)    # the kernels' bias argument when there is none (never read)


def _gemv(ap, asum, b, scales, zps, bias, has_bias, y, bits, lo, hi):
    """y[m, n] for columns lo..hi-1: ap (M, per, blocks, bytes) the planes of A, asum (M,
    blocks) its block sums, b (N, blocks, bytes) the codes, scales/zps (N, blocks). Lane j
    of a block (its j-th byte) accumulates across blocks, scaled block by block: one
    horizontal sum per output instead of one per block (a block is 16 bytes at 4 bits and
    block size 32; summing each block across lanes cost 3x)."""
    m_n, per, kb, nb = ap.shape
    mask = (1 << bits) - 1
    lanes = np.empty(nb, np.float32)
    part = np.empty(nb, np.float32)
    for n in range(lo, hi):
        bn = b[n]
        sn = scales[n]
        zn = zps[n]
        for m in range(m_n):
            for j in range(nb):
                lanes[j] = 0
            corr = np.float32(0)
            for blk in range(kb):
                brow = bn[blk]
                a0 = ap[m, 0, blk]
                for j in range(nb):
                    part[j] = a0[j] * np.float32(brow[j] & mask)
                for p in range(1, per):
                    arow = ap[m, p, blk]
                    sh = bits * p
                    for j in range(nb):
                        part[j] += arow[j] * np.float32((brow[j] >> sh) & mask)
                sc = sn[blk]
                for j in range(nb):
                    lanes[j] += sc * part[j]
                corr += sc * zn[blk] * asum[m, blk]
            tot = np.float32(0)
            for j in range(nb):
                tot += lanes[j]
            tot -= corr
            if has_bias:
                tot += bias[n]
            y[m, n] = tot


def _gemv4(ap, asum, b, scales, szp, bias, has_bias, y, bits, lo, hi):
    """_gemv for 4-bit codes in blocks of 32 or more (16k bytes): each column's blocks go
    through _dot4 (vector lanes written in LLVM IR: numba's own loops over 16-byte blocks
    stayed scalar, as the lane array may alias the inputs for all LLVM knows)."""
    m_n, kb, nb = ap.shape[0], ap.shape[2], ap.shape[3]
    lanes = np.empty(16, np.float32)
    lp = lanes.ctypes.data
    for n in range(lo, hi):
        bp = b[n].ctypes.data
        sp = scales[n].ctypes.data
        zn = szp[n]
        for m in range(m_n):
            _dot4(ap[m, 0].ctypes.data, ap[m, 1].ctypes.data, bp, kb, nb // 16, sp, lp)
            am = asum[m]
            corr = np.float32(0)
            for blk in range(kb):
                corr += zn[blk] * am[blk]
            tot = np.float32(0)
            for j in range(16):
                tot += lanes[j]
            tot -= corr
            if has_bias:
                tot += bias[n]
            y[m, n] = tot


def _dot4_intrinsic(numba: Any) -> Any:
    """_dot4(a0, a1, b, kb, chunks, s, out): out[0:16] = sum over blocks k < kb of s[k] *
    sum over the block's chunks c of (a0 * low nibbles + a1 * high nibbles) of 16 bytes;
    a0/a1 float32 planes (kb * chunks * 16), b the codes, s float32 scales (addresses)."""
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    i8, i32, i64, f32 = ir.IntType(8), ir.IntType(32), ir.IntType(64), ir.FloatType()
    v16i8, v16i32, v16f = ir.VectorType(i8, 16), ir.VectorType(i32, 16), ir.VectorType(f32, 16)

    def k64(v: int) -> Any:
        return ir.Constant(i64, v)

    def vfma(module: Any) -> Any:
        """llvm.fma on 16 floats (declared once per module)."""
        fn = module.globals.get("llvm.fma.v16f32")
        if fn is None:
            fn = ir.Function(module, ir.FunctionType(v16f, [v16f] * 3), name="llvm.fma.v16f32")
        return fn

    def codegen(context, builder, signature, args):
        a0, a1, b, kb, chunks, sp, out = args
        lanes = cgutils.alloca_once_value(builder, ir.Constant(v16f, None))
        part = cgutils.alloca_once_value(builder, ir.Constant(v16f, None))
        mask = ir.Constant(v16i32, [ir.Constant(i32, 15)] * 16)
        four = ir.Constant(v16i32, [ir.Constant(i32, 4)] * 16)
        zero16 = ir.Constant(v16i32, [ir.Constant(i32, 0)] * 16)
        with cgutils.for_range(builder, kb) as blk_loop:
            blk = blk_loop.index
            builder.store(ir.Constant(v16f, None), part)
            with cgutils.for_range(builder, chunks) as c_loop:
                idx = builder.add(builder.mul(blk, chunks), c_loop.index)
                bv = builder.load(builder.inttoptr(builder.add(b, builder.mul(idx, k64(16))),
                                                   v16i8.as_pointer()), align=1)
                bz = builder.zext(bv, v16i32)
                lo = builder.sitofp(builder.and_(bz, mask), v16f)
                hi = builder.sitofp(builder.lshr(bz, four), v16f)
                off = builder.mul(idx, k64(64))
                x0 = builder.load(builder.inttoptr(builder.add(a0, off), v16f.as_pointer()),
                                  align=4)
                x1 = builder.load(builder.inttoptr(builder.add(a1, off), v16f.as_pointer()),
                                  align=4)
                fma = vfma(builder.module)
                acc = builder.call(fma, [x0, lo, builder.load(part)])
                builder.store(builder.call(fma, [x1, hi, acc]), part)
            sc = builder.load(builder.inttoptr(builder.add(sp, builder.mul(blk, k64(4))),
                                               f32.as_pointer()), align=4)
            sv = builder.insert_element(ir.Constant(v16f, ir.Undefined), sc, ir.Constant(i32, 0))
            sv = builder.shuffle_vector(sv, sv, zero16)
            fma = vfma(builder.module)
            builder.store(builder.call(fma, [sv, builder.load(part), builder.load(lanes)]),
                          lanes)
        builder.store(builder.load(lanes), builder.inttoptr(out, v16f.as_pointer()), align=4)
        return context.get_dummy_value()

    @intrinsic
    def dot4(typingctx, a0, a1, b, kb, chunks, s, out):
        return types.void(*([types.int64] * 7)), codegen
    return dot4


def _tiles(gemm, a, b, scales, zps, gidx, has_g, bias, has_bias, y, bits, blk_size, nt, lo,
           hi):
    """Bands lo..hi-1 of nt columns: dequantized into buf (nt, K), then y[:, band] = a @
    buf^T by sgemm (row-major, B transposed), plus the bias."""
    m_n, k = a.shape
    n_all = y.shape[1]
    per = 8 // bits
    mask = (1 << bits) - 1
    buf = np.empty((nt, k), np.float32)
    one = np.float32(1)
    zero = np.float32(0)
    for t in range(lo, hi):
        n0 = t * nt
        n1 = min(n0 + nt, n_all)
        for c in range(n1 - n0):
            n = n0 + c
            row = buf[c]
            if has_g:
                for kk in range(k):
                    pb = kk // blk_size
                    off = kk - pb * blk_size
                    g = gidx[kk]
                    q = np.float32((b[n, pb, off // per] >> (bits * (off % per))) & mask)
                    s = scales[n, g]
                    row[kk] = q * s - s * zps[n, g]
                continue
            for pb in range(b.shape[1]):
                s = scales[n, pb]
                sz = s * zps[n, pb]
                k0 = pb * blk_size
                brow = b[n, pb]
                if per == 2 and k0 + blk_size <= k:
                    # whole 4-bit blocks: two values a byte, no index arithmetic per value
                    seg = row[k0:k0 + blk_size]
                    for j in range(blk_size // 2):
                        v = brow[j]
                        seg[2 * j] = np.float32(np.int32(v & 15)) * s - sz
                        seg[2 * j + 1] = np.float32(np.int32(v >> 4)) * s - sz
                    continue
                for off in range(min(blk_size, k - k0)):
                    q = np.float32((brow[off // per] >> (bits * (off % per))) & mask)
                    row[k0 + off] = q * s - sz
        gemm(101, 111, 112, m_n, n1 - n0, k, one, a.ctypes.data, k, buf.ctypes.data, k, zero,
             y.ctypes.data + n0 * 4, n_all)
        if has_bias:
            for m in range(m_n):
                for c in range(n1 - n0):
                    y[m, n0 + c] += bias[n0 + c]


def _prep_a(a, block, per, level4, ap, asum):
    """ap (M, per, blocks, block / per) <- A's planes (value k of a block in plane k % per,
    position k // per; zero past K), asum (M, blocks) <- its block sums. With ``level4``
    each block is first quantized to int8 as onnxruntime's accuracy_level 4 computes it
    (scale max|a| / 127, round half to even, clipped to +-127) and scaled back."""
    m_n, k = a.shape
    kb = ap.shape[2]
    vals = np.empty(block, np.float32)
    for m in range(m_n):
        for blk in range(kb):
            k0 = blk * block
            cnt = min(block, k - k0)
            for j in range(cnt):
                vals[j] = a[m, k0 + j]
            for j in range(cnt, block):
                vals[j] = 0
            if level4:
                amax = np.float32(0)
                for j in range(block):
                    amax = max(amax, abs(vals[j]))
                sc = amax / np.float32(127)
                inv = np.float32(1) / sc if sc != 0 else np.float32(0)
                for j in range(block):
                    q = min(max(np.rint(vals[j] * inv), np.float32(-127)), np.float32(127))
                    vals[j] = q * sc
            tot = np.float32(0)
            for j in range(block):
                ap[m, j % per, blk, j // per] = vals[j]
                tot += vals[j]
            asum[m, blk] = tot


_SLOT: list[Any] = []


def _build(numba: Any) -> dict[str, Any]:
    globals()["_dot4"] = _dot4_intrinsic(numba)
    return {"gemv": jit._njit(numba, _gemv, fastmath={"reassoc", "contract"}),
            "gemv4": jit._njit(numba, _gemv4, fastmath={"reassoc", "contract"}),
            "prep": jit._njit(numba, _prep_a),
            "tiles": jit._njit(numba, _tiles)}


def kernels() -> dict[str, Any] | None:
    """The compiled kernels, or None (no numba, ONNXRT_JIT=0): the NumPy path runs."""
    if blas.gemm(np.float32) is None:
        return None
    return jit.compile_once(_SLOT, _build)


class NBitsWeight:
    """A MatMulNBits weight as the kernels read it: the codes (N, blocks, bytes) as stored,
    scales and zero points (N, blocks) as float32 (packed zero points unpacked), g_idx."""

    def __init__(self, b: np.ndarray, scales: np.ndarray, zps: np.ndarray,
                 g_idx: np.ndarray | None, k: int, n: int, bits: int, block: int) -> None:
        self.k, self.n, self.bits, self.block = k, n, bits, block
        self.kb = -(-k // block)
        self.codes = np.ascontiguousarray(b, np.uint8).reshape(n, self.kb, block * bits // 8)
        self.scales = np.ascontiguousarray(scales, _F32).reshape(n, self.kb)
        self.zps = np.ascontiguousarray(zps, _F32).reshape(n, self.kb)
        self.szp = self.scales * self.zps        # scale * zero point, the blocks' offsets
        z0 = self.zps.reshape(-1)[:1]
        # one zero point everywhere (symmetric weights: the default 2^(bits-1)): the
        # integer kernel then reads no szp
        self.zp_same = float(z0[0]) if z0.size and (self.zps == z0[0]).all() and z0[0] >= 0 \
            else -1.0
        self.zp_f32 = _F32(self.zp_same)
        self.gidx = (np.zeros(1, np.int64) if g_idx is None
                     else np.ascontiguousarray(g_idx, np.int64).reshape(-1))
        self.has_g = g_idx is not None
        self._warm()

    def _warm(self) -> None:
        k = kernels()
        if k is None:
            return
        for lv in (False, True):    # both paths compiled (or loaded) now, not in a run
            self.matmul(k, np.zeros((1, self.k), _F32), None, lv)
            self.matmul(k, np.zeros((_GEMV_M + 1, self.k), _F32), None, lv)

    def planes(self, k: dict[str, Any], a: np.ndarray, level4: bool
               ) -> tuple[np.ndarray, np.ndarray]:
        """A's planes and block sums for the gemv kernels (see _prep_a)."""
        m = a.shape[0]
        per = 8 // self.bits
        ap = np.empty((m, per, self.kb, self.block // per), _F32)
        asum = np.empty((m, self.kb), _F32)
        k["prep"](np.ascontiguousarray(a, _F32), self.block, per, level4, ap, asum)
        return ap, asum

    def quantize_a(self, k: dict[str, Any], a: np.ndarray) -> np.ndarray:
        """A as onnxruntime's accuracy_level 4 sees it (int8 per block, scaled back)."""
        ap, _ = self.planes(k, a, True)
        full = ap.transpose(0, 2, 3, 1).reshape(a.shape[0], -1)
        return np.ascontiguousarray(full[:, :self.k])

    def matmul(self, k: dict[str, Any], a: np.ndarray, bias: np.ndarray | None,
               level4: bool = False, pool: ThreadPool = SERIAL) -> np.ndarray:
        """a (M, K) float32 @ dequant(W)^T (+ bias) -> (M, N) float32, columns split over
        ``pool``; ``level4``: A quantized per block to int8 first (onnxruntime's
        accuracy_level 4)."""
        m = a.shape[0]
        y = np.empty((m, self.n), _F32)
        has_b = bias is not None
        bvec = np.ascontiguousarray(bias, _F32).reshape(-1) if has_b else _NO_BIAS
        if has_b and bvec.size != self.n:
            raise ValueError(f"MatMulNBits: bias must hold {self.n} values, got {bvec.size}")
        work = m * self.n * self.k
        spread = work >= _PAR_MIN
        if m <= _GEMV_M and not self.has_g:
            q8 = nbits_q8.kernels() if level4 and self.bits == 4 and self.block >= 32 \
                else None
            if q8 is not None:
                # accuracy_level 4 in integers, as onnxruntime computes it (nbits_q8.py)
                qa = np.empty((m, self.kb, self.block), np.int8)
                sa = np.empty((m, self.kb), _F32)
                asum = np.empty((m, self.kb), _F32)
                q8["prep"](a if a.flags.c_contiguous and a.dtype == _F32 else
                           np.ascontiguousarray(a, _F32), self.block, qa, sa, asum)
                args = (qa, sa, asum, self.codes, self.scales, self.szp, self.zp_f32, bvec,
                        has_b, y)
                if work >= _GEMV_PAR_MIN:
                    pool.for_ranges(q8["gemv"], args, self.n, True)
                else:       # one call on this thread: no pool bookkeeping on a decode step
                    q8["gemv"](*args, 0, self.n)
                return y
            ap, asum = self.planes(k, a, level4)
            four = self.bits == 4 and self.block >= 32
            pool.for_ranges(k["gemv4" if four else "gemv"],
                            (ap, asum, self.codes, self.scales,
                             self.szp if four else self.zps, bvec, has_b, y, self.bits),
                            self.n, work >= _GEMV_PAR_MIN)
            return y
        nt = max(16, min(256, (_TILE_BYTES // (4 * max(self.k, 1))) // 16 * 16))
        n_t = -(-self.n // nt)
        if spread and n_t < pool.threads and self.n > 16:
            nt = max(16, -(-self.n // pool.threads))
            n_t = -(-self.n // nt)
        if level4:
            a = self.quantize_a(k, a)
        pool.for_ranges(k["tiles"], (blas.gemm(_F32), np.ascontiguousarray(a, _F32),
                                     self.codes, self.scales, self.zps, self.gidx,
                                     self.has_g, bvec, has_b, y, self.bits, self.block, nt),
                        n_t, spread, blas=True)
        return y
