"""com.microsoft DecoderMaskedMultiHeadAttention: one decoding step (sequence length 1) of
multi-head attention, as onnxruntime's CPU kernel computes it.

Self-attention: the new key and value are written at ``past_sequence_length`` of a cache of
the maximum length (past_present_share_buffer=1, which onnxruntime requires) and the query
attends to the P + 1 positions; with beams, position j < P of beam i reads the cache of the
beam cache_indirection[batch, i, j]. Cross-attention (no past, no present): key and value
arrive already split into heads (B, N, L, H).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.contrib.gqa import softmax_rows

MS = "com.microsoft"
_F32 = np.float32


@CPU.kernel("DecoderMaskedMultiHeadAttention", since=1, domain=MS, needs_node=True)
class DecoderMaskedMultiHeadAttention:
    def __init__(self, node: Any) -> None:
        a = node.attrs
        self.n = int(a["num_heads"])
        self.mask_filter = _F32(a.get("mask_filter_value", -10000.0))
        self.scale = float(a.get("scale", 0.0))
        self.share = int(a.get("past_present_share_buffer", 0))
        self.output_qk = int(a.get("output_qk", 0))
        self.n_out = node.num_outputs

    def __call__(self, query, key=None, value=None, mask_index=None, attention_bias=None,
                 past_key=None, past_value=None, past_sequence_length=None, beam_width=None,
                 cache_indirection=None, bias=None):
        op = "DecoderMaskedMultiHeadAttention"
        dt = query.dtype
        n = self.n
        q = query.astype(_F32)
        if q.ndim != 3 or q.shape[1] != 1:
            raise ValueError(f"{op}: query must be (batch, 1, hidden), got {q.shape}")
        b, _, d = q.shape
        h = d // n
        if bias is not None:
            bb = bias.astype(_F32)
            q = q + bb[:d]
        qh = q.reshape(b, n, h)
        scale = _F32(self.scale) if self.scale else _F32(1.0 / np.sqrt(h))
        beam = 1 if beam_width is None else int(np.asarray(beam_width).reshape(-1)[0])
        if beam > 1 and cache_indirection is None:
            raise ValueError(f"{op}: beam width > 1 needs cache_indirection")
        if mask_index is not None and np.ndim(mask_index) != 2:
            raise ValueError(f"{op}: only a 2-D key padding mask (batch, total) is supported")
        if past_key is None:
            return self._cross(qh, key, value, mask_index, attention_bias, scale, dt)
        if not self.share:
            raise ValueError(f"{op}: a past needs past_present_share_buffer=1")
        if past_value is None or past_sequence_length is None:
            raise ValueError(f"{op}: past_key needs past_value and past_sequence_length")
        p = int(np.asarray(past_sequence_length).reshape(-1)[0])
        mx = past_key.shape[2]
        if past_key.shape != (b, n, mx, h) or not 0 <= p < mx:
            raise ValueError(f"{op}: past_key must be (B, N, max_len, H) = {(b, n, mx, h)} with "
                             f"past_sequence_length < max_len, got {past_key.shape}, {p}")
        k, v = key.astype(_F32), value.astype(_F32)
        if bias is not None:
            k = k + bb[d:2 * d]
            v = v + bb[2 * d:]
        kn, vn = k.reshape(b, n, h), v.reshape(b, n, h)
        pk = past_key.astype(_F32, copy=True)
        pv = past_value.astype(_F32, copy=True)
        t = p + 1
        if beam > 1:
            ind = np.asarray(cache_indirection).astype(np.int64).reshape(b, -1)[:, :p]
            base = (np.arange(b) // beam * beam)[:, None]
            src = base + ind                                   # (B, P): the beam read
            kp = pk[src, :, np.arange(p)[None, :]]              # (B, P, N, H)
            vp = pv[src, :, np.arange(p)[None, :]]
            kp, vp = kp.transpose(0, 2, 1, 3), vp.transpose(0, 2, 1, 3)
        else:
            kp, vp = pk[:, :, :p], pv[:, :, :p]
        kall = np.concatenate([kp, kn[:, :, None]], axis=2)     # (B, N, T, H)
        vall = np.concatenate([vp, vn[:, :, None]], axis=2)
        sc = np.einsum("bnh,bnth->bnt", qh, kall) * scale
        if attention_bias is not None:
            ab = attention_bias.astype(_F32)
            if ab.shape[0] not in (1, b):
                raise ValueError(f"{op}: attention_bias dimension 0 must be 1 or {b}")
            # with beams onnxruntime reads the bias row of the beam's batch, b // beam
            rows = np.arange(b) // beam if beam > 1 else np.arange(b)
            ab = ab[rows if ab.shape[0] > 1 else np.zeros(b, np.int64)]
            sc = sc + ab.reshape(b, ab.shape[1], -1)[:, :, :t]
        if mask_index is not None:
            m = np.asarray(mask_index).reshape(b, -1)[:, :t]
            sc = sc + np.where(m == 0, self.mask_filter, _F32(0))[:, None, :]
        qk = sc.copy()
        probs = softmax_rows(sc, None)
        out = np.einsum("bnt,bnth->bnh", probs, vall).reshape(b, 1, d)
        pk[:, :, p] = kn
        pv[:, :, p] = vn
        res = [out.astype(dt), pk.astype(dt), pv.astype(dt),
               qk[:, :, None].astype(dt) if self.output_qk else None]
        return tuple(res[:self.n_out]) if self.n_out > 1 else res[0]

    def _cross(self, qh, key, value, mask_index, attention_bias, scale, dt):
        op = "DecoderMaskedMultiHeadAttention"
        if attention_bias is not None:
            raise ValueError(f"{op}: attention bias is not supported for cross-attention")
        if key is None or value is None or key.ndim != 4:
            raise ValueError(f"{op}: cross-attention needs key and value as (B, N, L, H)")
        b, n, h = qh.shape
        k, v = key.astype(_F32), value.astype(_F32)
        sc = np.einsum("bnh,bnth->bnt", qh, k) * scale
        if mask_index is not None:
            m = np.asarray(mask_index).reshape(b, -1)[:, :k.shape[2]]
            sc = sc + np.where(m == 0, self.mask_filter, _F32(0))[:, None, :]
        qk = sc.copy()
        out = np.einsum("bnt,bnth->bnh", softmax_rows(sc, None), v).reshape(b, 1, n * h)
        res = [out.astype(dt), None, None, qk[:, :, None].astype(dt) if self.output_qk else None]
        return tuple(res[:self.n_out]) if self.n_out > 1 else res[0]
