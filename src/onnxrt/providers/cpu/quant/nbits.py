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

Columns are split over the session's intra-op threads (execute/intra.py). Compiled once per
process through providers/cpu/nn/jit.py's ``compile_once`` (numba's disk cache); without
numba ``kernels()`` is None and MatMulNBits keeps its NumPy path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.execute import intra
from onnxrt.providers.cpu import blas
from onnxrt.providers.cpu.nn import jit

__all__ = ["kernels", "NBitsWeight"]

_GEMV_M = 4
_TILE_BYTES = 192 << 10
_PAR_MIN = 1 << 20
_F32 = np.float32


def _gemv(ap, asum, b, scales, zps, bias, has_bias, y, bits, lo, hi):
    """y[m, n] for columns lo..hi-1: ap (M, per, blocks, bytes) the planes of A, asum (M,
    blocks) its block sums, b (N, blocks, bytes) the codes, scales/zps (N, blocks)."""
    m_n, per, kb, nb = ap.shape
    mask = (1 << bits) - 1
    for n in range(lo, hi):
        for m in range(m_n):
            tot = np.float32(0)
            for blk in range(kb):
                acc = np.float32(0)
                brow = b[n, blk]
                for p in range(per):
                    arow = ap[m, p, blk]
                    sh = bits * p
                    for j in range(nb):
                        acc += arow[j] * np.float32((brow[j] >> sh) & mask)
                tot += scales[n, blk] * (acc - zps[n, blk] * asum[m, blk])
            if has_bias:
                tot += bias[n]
            y[m, n] = tot


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
            for kk in range(k):
                pb = kk // blk_size
                off = kk - pb * blk_size
                g = gidx[kk] if has_g else pb
                q = np.float32((b[n, pb, off // per] >> (bits * (off % per))) & mask)
                s = scales[n, g]
                row[kk] = q * s - s * zps[n, g]
        gemm(101, 111, 112, m_n, n1 - n0, k, one, a.ctypes.data, k, buf.ctypes.data, k, zero,
             y.ctypes.data + n0 * 4, n_all)
        if has_bias:
            for m in range(m_n):
                for c in range(n1 - n0):
                    y[m, n0 + c] += bias[n0 + c]


_SLOT: list[Any] = []


def _build(numba: Any) -> dict[str, Any]:
    return {"gemv": jit._njit(numba, _gemv, fastmath={"reassoc", "contract"}),
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
        self.gidx = (np.zeros(1, np.int64) if g_idx is None
                     else np.ascontiguousarray(g_idx, np.int64).reshape(-1))
        self.has_g = g_idx is not None
        self._warm()

    def _warm(self) -> None:
        k = kernels()
        if k is None:
            return
        a = np.zeros((1, self.k), _F32)
        self.matmul(k, a, None)                  # the gemv path compiled (or loaded) now
        self.matmul(k, np.zeros((_GEMV_M + 1, self.k), _F32), None)

    def _planes(self, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = a.shape[0]
        per = 8 // self.bits
        kp = self.kb * self.block
        ap = np.zeros((m, kp), _F32)
        ap[:, :self.k] = a
        blocks = ap.reshape(m, self.kb, self.block // per, per)
        asum = blocks.sum(axis=(2, 3), dtype=_F32)
        return np.ascontiguousarray(blocks.transpose(0, 3, 1, 2)), asum

    def matmul(self, k: dict[str, Any], a: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        """a (M, K) float32 @ dequant(W)^T (+ bias) -> (M, N) float32."""
        m = a.shape[0]
        y = np.empty((m, self.n), _F32)
        has_b = bias is not None
        bvec = np.ascontiguousarray(bias, _F32).reshape(-1) if has_b else np.zeros(1, _F32)
        if has_b and bvec.size != self.n:
            raise ValueError(f"MatMulNBits: bias must hold {self.n} values, got {bvec.size}")
        work = m * self.n * self.k
        spread = work >= _PAR_MIN
        if m <= _GEMV_M and not self.has_g:
            ap, asum = self._planes(a)
            intra.for_ranges(k["gemv"], (ap, asum, self.codes, self.scales, self.zps, bvec,
                                         has_b, y, self.bits), self.n, spread)
            return y
        nt = max(16, min(256, (_TILE_BYTES // (4 * max(self.k, 1))) // 16 * 16))
        n_t = -(-self.n // nt)
        if spread and n_t < intra.threads() and self.n > 16:
            nt = max(16, -(-self.n // intra.threads()))
            n_t = -(-self.n // nt)
        intra.for_ranges(k["tiles"], (blas.gemm(_F32), np.ascontiguousarray(a, _F32),
                                      self.codes, self.scales, self.zps, self.gidx,
                                      self.has_g, bvec, has_b, y, self.bits, self.block, nt),
                         n_t, spread, blas=True)
        return y
