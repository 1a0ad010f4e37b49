"""MultiHeadAttention and Attention (com.microsoft): batched matmuls over all heads at once
and one in-place softmax, in float32 (float16 inputs widen). Attention's common case (no
past, no 3-D mask) runs compiled: per (batch, head), two BLAS products read the heads
straight out of the packed QKV projection and write straight into the output, with the
scaled, masked softmax in between, the heads split over the session's threads."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from onnxrt.framework.parallel import SERIAL, ThreadPool, pool_of
from onnxrt.providers.cpu import CPU, vmath
from onnxrt.providers.cpu.nn.matmul import matmul
from onnxrt.validate import SpecError

MS = "com.microsoft"
_exp_nonpos = vmath.exp_nonpos     # compiled into _softmax_row by _heads_kernel


def _softmax_row(row, bits, scale):
    """Softmax of one float32 row in place, every loop branch-free so that it vectorizes
    (the exp is providers/cpu/vmath.py's; libm's exp per element made the row 2.3x
    slower over BERT's 128-wide rows). ``bits`` (int32) and ``scale`` (its float32 view)
    are scratch of the row's length. A NaN gives a NaN row, as the plain formula does."""
    n = row.shape[0]
    mx = row[0]
    for j in range(n):
        v = row[j]
        mx = v if v > mx else mx
    for j in range(n):
        row[j] -= mx
    _exp_nonpos(row, bits, scale)
    tot = np.float32(0)
    for j in range(n):
        tot += row[j]
    inv = np.float32(1) / tot
    for j in range(n):
        row[j] *= inv


def _heads(gemm, qkv, out, ab, has_ab, scale, causal, mask_value, n, dq, dk, dv, lo, hi):
    """Heads lo..hi-1 (item = batch * n + head) of self-attention over the packed
    projection qkv (B, S, dq+dk+dv) into out (B, S, dv): scores = scale * Q K^T (one gemm
    on the strided head slices), + ab[b, h] (the additive bias, broadcast view), causal
    positions set to mask_value, softmax per row, then scores @ V into the head's columns
    of out (another gemm).

    Preconditions (checked by Attention.__call__; BLAS reads through raw pointers): n >= 1,
    qkv C-contiguous with exactly dq + dk + dv columns, dq == dk, dq and dv divisible by n,
    out (B, S, dv) C-contiguous, ab (B, n, S, S) (a broadcast view is fine), 0 <= lo <= hi
    <= B * n."""
    bsz, s_n, d3 = qkv.shape
    hq = dq // n
    hv = dv // n
    qf = qkv.reshape(-1)
    of = out.reshape(-1)
    sc = np.empty((s_n, s_n), dtype=qkv.dtype)
    bits = np.empty(s_n, np.int32)
    fbits = bits.view(np.float32)
    one = qkv.dtype.type(1)
    zero = qkv.dtype.type(0)
    for it in range(lo, hi):
        bi = it // n
        h = it - bi * n
        base = bi * s_n * d3
        gemm(101, 111, 112, s_n, s_n, hq, scale, qf[base + h * hq:].ctypes.data, d3,
             qf[base + dq + h * hq:].ctypes.data, d3, zero, sc.ctypes.data, s_n)
        for i in range(s_n):
            row = sc[i]
            if has_ab:
                abr = ab[bi, h, i]
                for j in range(s_n):
                    row[j] += abr[j]
            if causal:
                for j in range(i + 1, s_n):
                    row[j] = mask_value
            _softmax_row(row, bits, fbits)
        gemm(101, 111, 111, s_n, hv, s_n, one, sc.ctypes.data, s_n,
             qf[base + dq + dk + h * hv:].ctypes.data, d3, zero,
             of[bi * s_n * dv + h * hv:].ctypes.data, dv)


_HEADS: list[Any] = []


def _heads_kernel() -> Any:
    """(the compiled _heads, the gemm it calls) from numba's disk cache or compiled once per
    process, or None where numba is missing or disabled, or no BLAS has a cblas gemm to
    call (providers/cpu/blas.py)."""
    from onnxrt.providers.cpu import blas
    from onnxrt.providers.cpu.nn import jit

    def build(numba: Any) -> Any:
        gemm = blas.gemm(np.float32)
        if gemm is None:
            return None
        # _heads calls the compiled row softmax (reassociation lets its sum vectorize;
        # contraction gives fused multiply-adds), which inlines vmath's exp
        globals()["_exp_nonpos"] = vmath.compiled()
        globals()["_softmax_row"] = jit._njit(numba, _softmax_row,
                                              fastmath={"reassoc", "contract"})
        fn = jit._njit(numba, _heads)
        q = np.zeros((1, 1, 3), np.float32)
        fn(gemm, q, np.empty((1, 1, 1), np.float32), np.zeros((1, 1, 1, 1), np.float32),
           False, np.float32(1), False, np.float32(0), 1, 1, 1, 1, 0, 1)
        return fn, gemm

    return jit.compile_once(_HEADS, build)


def _softmax_(s: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, in place on ``s`` (owned by the caller)."""
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return s


def _f32(x: np.ndarray | None) -> np.ndarray | None:
    if x is None:
        return None
    return x if x.dtype in (np.float32, np.float64) else x.astype(np.float32)


def attend(qh: np.ndarray, kt: np.ndarray, vh: np.ndarray, scale: float,
           bias: np.ndarray | None, pad: np.ndarray | None, causal: bool,
           mask_value: float) -> np.ndarray:
    """softmax(scale * Q K^T + bias) V over heads: qh (B,N,S,H), kt (B,N,H,L), vh (B,N,L,Hv)
    -> (B,N,S,Hv). ``pad``: additive (B,1,1,L) mask; ``causal``: query i sees keys <= i
    (aligned to the end, as with a past)."""
    # NumPy's stacked matmul uses BLAS only on contiguous operands: the head-split views
    # are copied once (10x faster than the strided fallback loop)
    qh, kt, vh = (np.ascontiguousarray(a) for a in (qh, kt, vh))
    s = np.matmul(qh, kt)
    s *= s.dtype.type(scale)
    if bias is not None:
        s += bias
    if pad is not None:
        s += pad
    if causal:
        sq, lk = s.shape[-2], s.shape[-1]
        future = np.triu(np.ones((sq, lk), bool), k=lk - sq + 1)
        s[..., future] = mask_value
    return np.matmul(_softmax_(s), vh)


@CPU.kernel("MultiHeadAttention", since=1, domain=MS, needs_node=True)
def multi_head_attention(query, key=None, value=None, bias=None, key_padding_mask=None,
                         attention_bias=None, past_key=None, past_value=None, *rest,
                         num_heads, scale=0.0, mask_filter_value=-10000.0, unidirectional=0,
                         node: Any = None, **_):
    """Unpacked query (B,S,D), key (B,L,D), value (B,L,Dv) or key/value already split into
    heads (B,N,L,H); optional bias (D+D+Dv,), key_padding_mask (B,L) or (B,) lengths,
    attention_bias (B|1,N|1,S,L), past_key/past_value (B,N,P,H). Outputs: output
    (B,S,N*Hv) and, when asked, present_key/present_value (B,N,P+L,H)."""
    dt = query.dtype
    n = int(num_heads)
    q = _f32(query)
    if q.ndim != 3:
        raise ValueError(f"MultiHeadAttention: packed query of rank {q.ndim} is not supported")
    b, sq, d = q.shape
    if key is None or value is None:
        raise ValueError("MultiHeadAttention: packed QKV (key and value absent) is not "
                         "supported")
    k, v = _f32(key), _f32(value)
    hd = d // n
    if bias is not None:
        bb = _f32(bias)
        q = q + bb[:d]
        if k.ndim == 3:
            k = k + bb[d:2 * d]
            v = v + bb[2 * d:]
    qh = q.reshape(b, sq, n, hd).transpose(0, 2, 1, 3)
    if k.ndim == 3:
        kh = k.reshape(b, k.shape[1], n, -1).transpose(0, 2, 1, 3)
        vh = v.reshape(b, v.shape[1], n, -1).transpose(0, 2, 1, 3)
    else:
        kh, vh = k, v
    if past_key is not None and past_value is not None:
        kh = np.concatenate([_f32(past_key), kh], axis=2)
        vh = np.concatenate([_f32(past_value), vh], axis=2)
    lk = kh.shape[2]
    pad = None
    if key_padding_mask is not None:
        m = np.asarray(key_padding_mask)
        if m.ndim == 1:   # valid lengths per batch
            keep = np.arange(lk)[None, :] < m.astype(np.int64)[:, None]
        else:
            keep = m.reshape(m.shape[0], -1)[:, -lk:] != 0
        pad = np.where(keep, np.float32(0), np.float32(mask_filter_value)).astype(
            qh.dtype)[:, None, None, :]
    ab = _f32(attention_bias)
    sc = float(scale) if scale else 1.0 / np.sqrt(hd)
    ctx = attend(qh, kh.transpose(0, 1, 3, 2), vh, sc, ab, pad, bool(unidirectional),
                 float(mask_filter_value))
    out = ctx.transpose(0, 2, 1, 3).reshape(b, sq, -1).astype(dt, copy=False)
    if node is None or node.num_outputs <= 1:
        return out
    return out, kh.astype(dt, copy=False), vh.astype(dt, copy=False)


@CPU.kernel("Attention", since=1, domain=MS, needs_node=True, threads=True)
class Attention:
    """Packed-weight self-attention: input (B,S,H) @ weights (H, D+D+Dv) + bias, then
    attention over ``num_heads``; mask_index as (B,) lengths, (B,L) 0/1, or (B,S,L) 0/1;
    attention_bias (B|1,N|1,S,L); past (2,B,N,P,H) and ``unidirectional`` for decoders."""

    def __init__(self, node: Any) -> None:
        a = node.attrs
        self.n = int(a["num_heads"])
        self.scale = float(a.get("scale", 0.0) or 0.0)
        self.causal = bool(a.get("unidirectional", 0))
        self.mask_value = float(a.get("mask_filter_value", -10000.0))
        sizes = a.get("qkv_hidden_sizes")
        self.sizes = list(sizes) if sizes else None
        self.num_outputs = node.num_outputs
        w = node.constant_inputs.get(1)
        self.w = None if w is None else np.ascontiguousarray(_f32(np.asarray(w)))
        self.heads = _heads_kernel() if self.num_outputs <= 1 else None

    def __call__(self, x, weights, bias=None, mask_index=None, past=None,
                 attention_bias=None, past_sequence_length=None, *rest, ctx=None):
        dt = x.dtype
        xf = _f32(x)
        w = self.w if self.w is not None else _f32(weights)
        pool = pool_of(ctx)
        qkv = matmul(xf, w, pool)   # one GEMM over the (B*S, H) rows
        if bias is not None:
            qkv += _f32(bias)
        return self.attend_qkv(qkv, mask_index, past, attention_bias, dt, pool)

    def attend_qkv(self, qkv: np.ndarray, mask_index: Any, past: Any, attention_bias: Any,
                   dt: np.dtype, pool: ThreadPool = SERIAL) -> Any:
        """The attention after the input projection: qkv (B, S, Dq + Dk + Dv) float32
        (QAttention enters here with its dequantized projection)."""
        b, s = qkv.shape[:2]
        if self.sizes:
            dq, dk, dv = self.sizes
        else:
            dq = dk = dv = qkv.shape[-1] // 3
        n = self.n
        # _heads reads qkv at these offsets through BLAS: they must lie inside its rows
        if (n < 1 or min(dq, dk, dv) < 1 or dq + dk + dv != qkv.shape[-1] or dq % n
                or dk % n or dv % n or dq != dk):
            raise SpecError("attribute qkv_hidden_sizes", [dq, dk, dv],
                            f"the projection has {qkv.shape[-1]} columns: expected Q, K, V "
                            f"sizes summing to it, Q's equal to K's, each divisible by "
                            f"num_heads {n}")
        if (self.heads is not None and qkv.dtype == np.float32 and mask_index is None
                and (past is None or past.size == 0) and dq == dk
                and dq % n == 0 and dv % n == 0):
            return self._compiled(qkv, attention_bias, b, s, n, dq, dk, dv, dt, pool)
        q, k, v = qkv[..., :dq], qkv[..., dq:dq + dk], qkv[..., dq + dk:]
        qh = q.reshape(b, s, n, -1).transpose(0, 2, 1, 3)
        kh = k.reshape(b, s, n, -1).transpose(0, 2, 1, 3)
        vh = v.reshape(b, s, n, -1).transpose(0, 2, 1, 3)
        if past is not None and past.size:
            pf = _f32(past)
            kh = np.concatenate([pf[0], kh], axis=2)
            vh = np.concatenate([pf[1], vh], axis=2)
        lk = kh.shape[2]
        pad = None
        if mask_index is not None:
            m = np.asarray(mask_index)
            if m.ndim == 1 and m.shape[0] == b:
                keep = np.arange(lk)[None, :] < m.astype(np.int64)[:, None]
                pad = np.where(keep, 0, self.mask_value).astype(qh.dtype)[:, None, None, :]
            elif m.ndim == 2:
                pad = np.where(m != 0, 0, self.mask_value).astype(qh.dtype)[:, None, None, :]
            elif m.ndim == 3:
                pad = np.where(m != 0, 0, self.mask_value).astype(qh.dtype)[:, None, :, :]
            else:
                raise ValueError(f"Attention: mask_index of shape {m.shape} is not supported")
        sc = self.scale or 1.0 / np.sqrt(qh.shape[-1])
        ctx = attend(qh, kh.transpose(0, 1, 3, 2), vh, sc, _f32(attention_bias), pad,
                     self.causal, self.mask_value)
        out = ctx.transpose(0, 2, 1, 3).reshape(b, s, -1).astype(dt, copy=False)
        if self.num_outputs <= 1:
            return out
        present = np.stack([kh, vh]).astype(dt, copy=False)
        return out, present

    def _compiled(self, qkv, attention_bias, b, s, n, dq, dk, dv, dt, pool):
        fn, gemm = self.heads
        qkv = np.ascontiguousarray(qkv)
        out = np.empty((b, s, dv), np.float32)
        ab = np.zeros((1, 1, 1, 1), np.float32)
        if attention_bias is not None:
            ab = np.broadcast_to(_f32(attention_bias).astype(np.float32, copy=False),
                                 (b, n, s, s))
        sc = self.scale or 1.0 / math.sqrt(dq // n)
        args = (gemm, qkv, out, ab, attention_bias is not None, np.float32(sc), self.causal,
                np.float32(self.mask_value), n, dq, dk, dv)
        pool.for_ranges(fn, args, b * n, blas=True)
        return out.astype(dt, copy=False)
