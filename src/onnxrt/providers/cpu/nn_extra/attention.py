"""Attention (23, 24, 25) and RotaryEmbedding (23).

Attention works on 4-D ``[batch, heads, seq, head_size]`` views (3-D inputs are split into
heads first). Grouped-query attention never copies the key/value heads: the query heads that
share a kv head are stacked as extra rows of one matmul against it. Masks (causal, windows,
padding, ``attn_mask``) become one additive bias; fully masked rows give zeros, not NaN.
Without the optional score output, long query sequences go in row blocks so the score
tensor stays bounded.
"""

from __future__ import annotations

import numpy as np

from onnxrt.ir.dtypes import np_dtype
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.nn_extra._common import compute_dtype

_SCORE_BLOCK = 1 << 20  # score elements per query block when no score output is wanted


def _split_heads(x: np.ndarray, heads: int | None, what: str) -> np.ndarray:
    if heads is None or heads <= 0:
        raise ValueError(f"Attention: 3-D {what} needs the q_num_heads/kv_num_heads attribute")
    b, s, hidden = x.shape
    if hidden % heads:
        raise ValueError(f"Attention: {what} hidden size {hidden} is not a multiple of "
                         f"{heads} heads")
    return x.reshape(b, s, heads, hidden // heads).transpose(0, 2, 1, 3)


def _softmax_rows(s: np.ndarray, inplace: bool = False) -> np.ndarray:
    """Softmax over the last axis; rows with no finite score (fully masked) become zeros.

    With ``inplace`` the scores array is overwritten (it must be a temporary we own).
    """
    m = np.max(s, axis=-1, keepdims=True)
    dead = ~np.isfinite(m)
    if dead.any():
        m = np.where(dead, 0.0, m).astype(s.dtype, copy=False)
    e = s if inplace else s.copy()
    e -= m
    np.exp(e, out=e)
    tot = np.sum(e, axis=-1, keepdims=True)
    if dead.any():  # only fully masked rows can sum to 0: keep them 0 instead of 0/0
        tot = np.where(tot > 0, tot, 1.0).astype(s.dtype, copy=False)
    e *= np.reciprocal(tot)  # one divide per row, then multiplies
    return e


class Attention:
    """One class for every version: later versions only add inputs and attributes."""

    def __init__(self, node) -> None:
        a = node.attrs
        self.is_causal = bool(a.get("is_causal", 0))
        self.q_heads = a.get("q_num_heads")
        self.kv_heads = a.get("kv_num_heads")
        self.mode = int(a.get("qk_matmul_output_mode", 0))
        self.scale = a.get("scale")
        self.softcap = float(a.get("softcap", 0.0) or 0.0)
        sp = a.get("softmax_precision")
        self.softmax_dtype = None if sp is None else np.dtype(np_dtype(int(sp)))
        self.left = int(a.get("left_window_size", -1))
        self.right = int(a.get("right_window_size", -1))
        self.want_qk = node.output_present(3)

    def __call__(self, q, k, v, attn_mask=None, past_key=None, past_value=None,
                 nonpad_kv_seqlen=None):
        out_dtype = q.dtype
        is3d = q.ndim == 3
        if is3d:
            q4 = _split_heads(q, self.q_heads, "Q")
            k4 = _split_heads(k, self.kv_heads, "K")
            v4 = _split_heads(v, self.kv_heads, "V")
        else:
            q4, k4, v4 = q, k, v
        if (past_key is None) != (past_value is None):
            raise ValueError("Attention: past_key and past_value must be given together")
        past_len = 0
        if past_key is not None:
            past_len = past_key.shape[2]
            k4 = np.concatenate([past_key, k4.astype(past_key.dtype, copy=False)], axis=2)
            v4 = np.concatenate([past_value, v4.astype(past_value.dtype, copy=False)], axis=2)
        present_k, present_v = k4, v4
        b, hq, sq, d = q4.shape
        hkv, t = k4.shape[1], k4.shape[2]
        if hq % hkv:
            raise ValueError(f"Attention: {hq} query heads is not a multiple of {hkv} kv heads")
        g = hq // hkv
        cdt = compute_dtype(out_dtype)
        scale = cdt.type(self.scale if self.scale is not None else 1.0 / np.sqrt(d))
        # scaling q (S x d) is cheaper than scaling the scores (S x T)
        qc = (q4.astype(cdt, copy=False) * scale).reshape(b, hkv, g, sq, d)
        # the query heads sharing a kv head are stacked as extra rows of one matmul per kv
        # head: one large BLAS call instead of a broadcast batch of small ones
        kt = np.swapaxes(k4.astype(cdt, copy=False), -1, -2)  # [B, Hkv, d, T]
        vc = v4.astype(cdt, copy=False)                         # [B, Hkv, T, dv]
        dv = vc.shape[-1]
        # without the optional score output, query rows go in blocks so the score tensor
        # stays bounded in memory (long prompts)
        step = sq
        if not self.want_qk:
            step = max(1, min(sq, _SCORE_BLOCK // max(b * hq * t, 1)))
        y = np.empty((b, hkv, g, sq, dv), dtype=cdt)
        qk_out = None
        for r0 in range(0, sq, step):
            r1 = min(sq, r0 + step)
            n = r1 - r0
            qb = qc[:, :, :, r0:r1].reshape(b, hkv, g * n, d)
            scores = np.matmul(qb, kt).reshape(b, hq, n, t)
            if self.want_qk and self.mode == 0:
                qk_out = scores.copy()
            if self.softcap > 0.0:
                c = cdt.type(self.softcap)
                scores = c * np.tanh(scores / c)
            if self.want_qk and self.mode == 1:
                qk_out = scores.copy()
            bias = self._bias(attn_mask, nonpad_kv_seqlen, sq, r0, r1, t, past_len, cdt)
            if bias is not None:
                scores += bias
            if self.want_qk and self.mode == 2:
                qk_out = scores.copy()
            if self.softmax_dtype is not None and self.softmax_dtype != cdt:
                sdt = self.softmax_dtype
                probs = _softmax_rows(scores.astype(sdt).astype(compute_dtype(sdt)), True)
                probs = probs.astype(sdt).astype(cdt)
            else:
                probs = _softmax_rows(scores, True)
            if self.want_qk and self.mode == 3:
                qk_out = probs
            # (matmul into a strided out= view would leave BLAS: assign instead)
            y[:, :, :, r0:r1] = np.matmul(probs.reshape(b, hkv, g * n, t), vc).reshape(
                b, hkv, g, n, dv)
        y = y.reshape(b, hq, sq, dv)
        if is3d:
            y = y.transpose(0, 2, 1, 3).reshape(b, sq, -1)
        y = y.astype(out_dtype, copy=False)
        if qk_out is not None:
            qk_out = qk_out.astype(out_dtype, copy=False)
        return y, present_k, present_v, qk_out

    def _bias(self, attn_mask, nonpad, sq, r0, r1, t, past_len, cdt):
        """The additive bias [.., r1 - r0, t] for query rows r0..r1 from attn_mask,
        causality, windows and padding (None when nothing is masked)."""
        bias = None
        if attn_mask is not None:
            m = np.asarray(attn_mask)
            if m.ndim >= 2 and m.shape[-2] == sq:
                m = m[..., r0:r1, :]
            if m.dtype == np.bool_:
                mb = np.where(m, cdt.type(0), cdt.type(-np.inf))
            else:
                mb = m.astype(cdt, copy=False)
            if mb.shape[-1] < t:  # a shorter key axis is padded with -inf
                pad = [(0, 0)] * (mb.ndim - 1) + [(0, t - mb.shape[-1])]
                mb = np.pad(mb, pad, constant_values=-np.inf)
            bias = mb
        allowed = None
        need_pos = self.is_causal or self.left >= 0 or self.right >= 0
        if need_pos:
            # offset per batch: past length, or the external cache's valid length minus sq
            if past_len == 0 and nonpad is not None:
                off = np.asarray(nonpad, dtype=np.int64).reshape(-1, 1, 1, 1) - sq
            else:
                off = np.full((1, 1, 1, 1), past_len, dtype=np.int64)
            i = np.arange(r0, r1, dtype=np.int64).reshape(1, 1, r1 - r0, 1)
            j = np.arange(t, dtype=np.int64).reshape(1, 1, 1, t)
            p = i + off
            allowed = np.ones((1, 1, 1, 1), dtype=bool)
            if self.is_causal:
                allowed = allowed & (j <= p)
            if self.left >= 0:
                allowed = allowed & (j >= p - self.left)
            if self.right >= 0:
                allowed = allowed & (j <= p + self.right)
        if nonpad is not None:
            n = np.asarray(nonpad, dtype=np.int64).reshape(-1, 1, 1, 1)
            valid = np.arange(t, dtype=np.int64).reshape(1, 1, 1, t) < n
            allowed = valid if allowed is None else (allowed & valid)
        if allowed is not None:
            ab = np.where(allowed, cdt.type(0), cdt.type(-np.inf))
            bias = ab if bias is None else bias + ab
        return bias


CPU.register("Attention", Attention, since=23)


class RotaryEmbedding:
    """RotaryEmbedding-23: rotate (pairs of) the first ``rotary_embedding_dim`` features."""

    def __init__(self, node) -> None:
        a = node.attrs
        self.interleaved = bool(a.get("interleaved", 0))
        self.rot_dim = int(a.get("rotary_embedding_dim", 0) or 0)
        self.num_heads = int(a.get("num_heads", 0) or 0)

    def __call__(self, x, cos_cache, sin_cache, position_ids=None):
        dt = x.dtype
        cdt = compute_dtype(dt)
        if x.ndim == 4:  # [batch, heads, seq, head]: caches broadcast over heads in place
            xv = x
        elif x.ndim == 3:  # [batch, seq, hidden] viewed as [batch, seq, heads, head]
            nh = self.num_heads
            if nh <= 0 or x.shape[2] % nh:
                raise ValueError("RotaryEmbedding: a 3-D input needs a num_heads attribute "
                                 "dividing its hidden size")
            xv = x.reshape(x.shape[0], x.shape[1], nh, x.shape[2] // nh)
        else:
            raise ValueError(f"RotaryEmbedding: input must be 3-D or 4-D, got {x.ndim}-D")
        head = xv.shape[-1]
        rd = self.rot_dim if self.rot_dim > 0 else head
        half = rd // 2
        if position_ids is not None:
            cos = np.asarray(cos_cache)[position_ids]   # [batch, seq, rd/2]
            sin = np.asarray(sin_cache)[position_ids]
        else:
            cos, sin = np.asarray(cos_cache), np.asarray(sin_cache)  # [batch, seq, rd/2]
        if cos.ndim != 3 or cos.shape[-1] != half or sin.shape != cos.shape:
            raise ValueError(f"RotaryEmbedding: cos/sin caches give {cos.shape}/{sin.shape}, "
                             f"expected (batch, seq, {half})")
        # [B, 1, S, h] against [B, H, S, D]; [B, S, 1, h] against [B, S, H, D]
        axis = 1 if x.ndim == 4 else 2
        cos = np.expand_dims(cos.astype(cdt, copy=False), axis)
        sin = np.expand_dims(sin.astype(cdt, copy=False), axis)
        rot = xv[..., :rd]
        if self.interleaved:
            x1, x2 = rot[..., 0::2], rot[..., 1::2]
        else:
            x1, x2 = rot[..., :half], rot[..., half:]
        x1 = x1.astype(cdt, copy=False)
        x2 = x2.astype(cdt, copy=False)
        out = np.empty(xv.shape, dtype=dt)
        if self.interleaved:
            out[..., 0:rd:2] = x1 * cos - x2 * sin
            out[..., 1:rd:2] = x2 * cos + x1 * sin
        else:
            out[..., :half] = x1 * cos - x2 * sin
            out[..., half:rd] = x2 * cos + x1 * sin
        out[..., rd:] = xv[..., rd:]
        return out.reshape(x.shape)


CPU.register("RotaryEmbedding", RotaryEmbedding, since=23)
