"""com.microsoft float matrix products: FusedMatMul (and its older name TransposeMatMul),
SparseToDenseMatMul and MatMulFpQ4 (int4 weights in onnxruntime's blob format)."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU

MS = "com.microsoft"
_F32 = np.float32


def _operand(x: np.ndarray, trans: int, trans_batch: int) -> np.ndarray:
    """The operand as the product sees it: with ``trans_batch`` the first axis moves to just
    before the last ([d0, d1.., M, K] -> [d1.., d0, K] for rank > 2), then ``trans`` swaps the
    last two axes."""
    if x.ndim > 2 and trans_batch:
        x = np.moveaxis(x, 0, -2)
    if trans and x.ndim >= 2:
        x = np.swapaxes(x, -1, -2)
    return x


def fused_matmul_core(a, b, alpha, trans_a, trans_b, batch_a, batch_b):
    a2 = _operand(a, int(trans_a), int(batch_a))
    b2 = _operand(b, int(trans_b), int(batch_b))
    y = np.matmul(a2, b2)
    if float(alpha) != 1.0:
        y = y * y.dtype.type(alpha)
    return y


@CPU.kernel("FusedMatMul", since=1, domain=MS)
def fused_matmul(a, b, *, alpha=1.0, transA=0, transB=0, transBatchA=0, transBatchB=0):
    """alpha * op(A) @ op(B), NumPy-style broadcasting of batch dimensions."""
    return fused_matmul_core(a, b, alpha, transA, transB, transBatchA, transBatchB)


@CPU.kernel("TransposeMatMul", since=1, domain=MS)
def transpose_matmul(a, b, *, alpha=1.0, transA=0, transB=0):
    """FusedMatMul's older name (no batch transposition)."""
    return fused_matmul_core(a, b, alpha, transA, transB, 0, 0)


@CPU.kernel("SparseToDenseMatMul", since=1, domain=MS)
def sparse_to_dense_matmul(a, b, *, alpha=1.0, transA=0, transB=0):
    """alpha * op(A) @ op(B) for a 2-D sparse A (a SparseTensor when fed as a sparse graph
    input; a sparse initializer arrives dense) and a dense 2-D B."""
    to_dense = getattr(a, "to_dense", None)
    a = np.asarray(to_dense() if callable(to_dense) else a)
    b = np.asarray(b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"SparseToDenseMatMul: A and B must be 2-D, got {a.shape} and "
                         f"{b.shape}")
    return fused_matmul_core(a, b, alpha, transA, transB, 0, 0).astype(b.dtype, copy=False)


# -- MatMulFpQ4 ---------------------------------------------------------------------------
# blob per (column n, block of K): float32 scale, [uint8 zero point,] BlkLen / 2 bytes; in
# each run of 32 values the byte l holds value l (low nibble) and value l + 16 (high nibble)
_Q4_TYPES = {0: (32, False), 1: (32, True), 2: (64, False), 4: (128, False)}


def unpack_fpq4(blob: np.ndarray, qtype: int, k: int, n: int) -> np.ndarray:
    """The float32 (K, N) weight of a MatMulFpQ4 blob."""
    if qtype not in _Q4_TYPES:
        raise ValueError(f"MatMulFpQ4: blk_quant_type {qtype} (0, 1, 2 or 4)")
    blk, has_zp = _Q4_TYPES[qtype]
    size = 4 + (1 if has_zp else 0) + blk // 2
    nb = -(-k // blk)
    raw = np.asarray(blob, np.uint8).reshape(-1)
    if raw.size < n * nb * size:
        raise ValueError(f"MatMulFpQ4: blob holds {raw.size} bytes, {n * nb * size} needed "
                         f"for a {k} x {n} weight of type {qtype}")
    r = raw[:n * nb * size].reshape(n, nb, size)
    scale = np.ascontiguousarray(r[:, :, :4]).view("<f4").reshape(n, nb).astype(_F32)
    zp = r[:, :, 4].astype(_F32) if has_zp else np.full((n, nb), 8.0, _F32)
    data = r[:, :, size - blk // 2:].reshape(n, nb, blk // 32, 16)
    vals = np.concatenate([data & 0x0F, data >> 4], axis=-1).reshape(n, nb * blk)[:, :k]
    w = (vals.astype(_F32) - np.repeat(zp, blk, axis=1)[:, :k]) * \
        np.repeat(scale, blk, axis=1)[:, :k]
    return np.ascontiguousarray(w.T)


@CPU.kernel("MatMulFpQ4", since=1, domain=MS, needs_node=True, host_inputs=(2,))
class MatMulFpQ4:
    """A @ B with B a (K, N) int4 weight packed by onnxruntime's MlasQ4GemmPackB."""

    def __init__(self, node: Any) -> None:
        self.qtype = int(node.attrs.get("blk_quant_type", 1))
        ci = node.constant_inputs
        self.w = None
        if 1 in ci and 2 in ci:
            self.w = self._weight(ci[1], ci[2])

    def _weight(self, blob, shape) -> np.ndarray:
        s = [int(v) for v in np.asarray(shape).reshape(-1)]
        if len(s) != 2:
            raise ValueError(f"MatMulFpQ4: B_shape must be [K, N], got {s}")
        return unpack_fpq4(blob, self.qtype, s[0], s[1])

    def __call__(self, a, b, b_shape):
        w = self.w if self.w is not None else self._weight(b, b_shape)
        return np.matmul(a.astype(_F32), w)
