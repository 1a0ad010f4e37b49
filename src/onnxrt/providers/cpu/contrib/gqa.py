"""com.microsoft GroupQueryAttention: causal self-attention where groups of query heads
share a key/value head, with a KV cache, rotary embedding inside, a local window, softcap,
an additive bias, smooth softmax / head sinks and the QK output, as onnxruntime's CPU kernel
computes it (float32 inside; float16 in and out).

The KV cache: past_key/past_value (B, N_kv, P, H) hold each batch's first
``seqlens_k[b] + 1 - S`` positions (a token-generation step) and may be longer (a buffer of
the maximum length, as when onnxruntime shares past and present); present_key/value have
max(total_sequence_length, P) positions: the past, then the new keys, then zeros.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from onnxrt.framework.parallel import ThreadPool, pool_of
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.contrib import gqa_decode
from onnxrt.providers.cpu.contrib.rotary import gather_cache, positions, rotate

MS = "com.microsoft"
_F32 = np.float32


def _f32(x: np.ndarray | None) -> np.ndarray | None:
    return None if x is None else np.asarray(x).astype(_F32, copy=False)


def softmax_rows(s: np.ndarray, sink: np.ndarray | None) -> np.ndarray:
    """Softmax over the last axis; with ``sink`` (broadcasting to s[..., :1]) an extra logit
    joins the max and the denominator only (smooth softmax)."""
    m = s.max(axis=-1, keepdims=True)
    if sink is not None:
        m = np.maximum(m, sink)
    e = np.exp(s - m)
    d = e.sum(axis=-1, keepdims=True)
    if sink is not None:
        d = d + np.exp(sink - m)
    return e / d


def attend_rows(scores: np.ndarray, lo: np.ndarray, hi: np.ndarray, sink: np.ndarray | None,
                width: int) -> np.ndarray:
    """Row-wise softmax of scores (..., S, T) restricted to columns [lo[s], hi[s]), zeros
    elsewhere; ``width`` pads the result's last axis (columns past T stay 0)."""
    t = scores.shape[-1]
    cols = np.arange(t)
    keep = (cols[None, :] >= lo[:, None]) & (cols[None, :] < hi[:, None])    # (S, T)
    masked = np.where(keep, scores, -np.inf)
    p = softmax_rows(masked, sink)
    p = np.where(keep, p, 0).astype(_F32)
    if width > t:
        p = np.concatenate([p, np.zeros(p.shape[:-1] + (width - t,), _F32)], axis=-1)
    return p


def softcap_(s: np.ndarray, cap: float) -> np.ndarray:
    return (_F32(cap) * np.tanh(s / _F32(cap))).astype(_F32)


@CPU.kernel("GroupQueryAttention", since=1, domain=MS, needs_node=True, threads=True)
class GroupQueryAttention:
    """Inputs: query (B, S, N*H) or packed QKV (B, S, (N + 2 N_kv) H) with key/value absent;
    key/value (B, S, N_kv*H); past_key/past_value; seqlens_k (B,) int32 = total length - 1
    per batch; total_sequence_length (scalar int32); cos/sin caches (max_len, rot/2);
    position_ids (B, S); attention_bias (B|1, N|1, S, T); head_sink (N,).
    Outputs: output (B, S, N*H), present_key, present_value, output_qk (B, N, S, total)."""

    _EXTRA = ("k_scale", "v_scale", "q_norm_weight", "k_norm_weight", "query_seqlens")

    def __init__(self, node: Any) -> None:
        a = node.attrs
        self.n = int(a["num_heads"])
        self.nkv = int(a["kv_num_heads"])
        if self.n <= 0 or self.nkv <= 0 or self.n % self.nkv:
            raise ValueError(f"GroupQueryAttention: num_heads {self.n} must be a positive "
                             f"multiple of kv_num_heads {self.nkv}")
        self.scale = float(a.get("scale", 0.0))
        self.softcap = float(a.get("softcap", 0.0))
        self.window = int(a.get("local_window_size", -1))
        self.do_rotary = bool(int(a.get("do_rotary", 0)))
        self.interleaved = bool(int(a.get("rotary_interleaved", 0)))
        self.smooth = int(a.get("smooth_softmax", 0)) == 1
        self.qk_output = int(a.get("qk_output", 0))
        if self.qk_output not in (0, 1, 2):
            raise ValueError(f"GroupQueryAttention: qk_output {self.qk_output} (0, 1, 2)")
        # attributes of later onnxruntime versions (quantized caches, QK norms...) are refused
        # unless they hold their neutral value
        for name, neutral in (("causal", 1), ("sliding_window_cache", 0),
                              ("k_quant_type", "NONE"), ("v_quant_type", "NONE"),
                              ("kv_cache_bit_width", None)):
            if name in a and a[name] != neutral:
                raise ValueError(f"GroupQueryAttention: attribute {name}={a[name]!r} is not "
                                 f"supported")
        for i, name in enumerate(self._EXTRA, start=12):
            if node.input_present(i):
                raise ValueError(f"GroupQueryAttention: input {name} is not supported")
        self.want_qk = node.output_present(3)
        self.n_out = node.num_outputs
        # what a token-by-token step may take through _decode_step
        self.fast_step = not self.smooth and not self.want_qk

    def __call__(self, query, key=None, value=None, past_key=None, past_value=None,
                 seqlens_k=None, total_sequence_length=None, cos_cache=None, sin_cache=None,
                 position_ids=None, attention_bias=None, head_sink=None, *rest, ctx=None):
        if (query.ndim == 3 and query.shape[1] == 1 and query.dtype == _F32
                and position_ids is None and attention_bias is None and head_sink is None
                and self.fast_step and seqlens_k is not None
                and total_sequence_length is not None):
            r = self._decode_step(query, key, value, past_key, past_value, seqlens_k,
                                  total_sequence_length, cos_cache, sin_cache, pool_of(ctx))
            if r is not None:
                return r
        op = "GroupQueryAttention"
        if seqlens_k is None or total_sequence_length is None:
            raise ValueError(f"{op}: seqlens_k and total_sequence_length are required")
        dt = query.dtype
        n, nkv = self.n, self.nkv
        q = _f32(query)
        b, s = q.shape[:2]
        if key is None:
            if value is not None:
                raise ValueError(f"{op}: packed QKV (key absent) takes no value input")
            h = q.shape[2] // (n + 2 * nkv)
            q, k, v = np.split(q, [n * h, (n + nkv) * h], axis=2)
        else:
            h = q.shape[2] // n
            k, v = _f32(key), _f32(value)
            if k.shape != (b, s, nkv * h) or v.shape != (b, s, nkv * h):
                raise ValueError(f"{op}: key and value must be {(b, s, nkv * h)}, got "
                                 f"{k.shape} and {v.shape}")
        qh = q.reshape(b, s, n, h)
        kh = k.reshape(b, s, nkv, h)
        vh = v.reshape(b, s, nkv, h)
        total = int(np.asarray(total_sequence_length).reshape(-1)[0])
        lens = np.asarray(seqlens_k).astype(np.int64).reshape(-1) + 1     # total per batch
        if lens.size != b:
            raise ValueError(f"{op}: seqlens_k must hold {b} values, got {lens.size}")
        first_prompt = s == total
        if not first_prompt and s > 1 and b != 1:
            raise ValueError(f"{op}: a subsequent prompt (1 < S < total) needs batch size 1")
        past_len = np.zeros(b, np.int64) if first_prompt else lens - s
        if (past_len < 0).any():
            raise ValueError(f"{op}: seqlens_k {lens - 1} shorter than the new tokens ({s})")
        if (past_key is None) != (past_value is None):
            raise ValueError(f"{op}: past_key and past_value go together")
        p_buf = 0 if past_key is None else past_key.shape[2]
        if past_key is not None and past_key.shape != (b, nkv, p_buf, h):
            raise ValueError(f"{op}: past_key must be {(b, nkv, p_buf, h)}, got "
                             f"{past_key.shape}")
        p_out = max(total, p_buf)
        if (past_len + s > p_out).any() or (lens > p_out).any():
            raise ValueError(f"{op}: seqlens_k {lens - 1} do not fit the present length {p_out}")
        if (past_len > p_buf).any():
            raise ValueError(f"{op}: the past holds {p_buf} positions, seqlens_k needs "
                             f"{past_len.max()}")

        scale = _F32(self.scale) if self.scale else _F32(1.0 / np.sqrt(h))
        if self.do_rotary and (cos_cache is None or sin_cache is None):
            raise ValueError(f"{op}: do_rotary needs cos_cache and sin_cache")
        if (s == 1 and position_ids is None and attention_bias is None and head_sink is None
                and not self.smooth and not self.want_qk and dt == np.float32):
            r = self._step(qh, kh, vh, past_key, past_value, past_len, p_out, cos_cache,
                           sin_cache, scale, pool_of(ctx))
            if r is not None:
                out, pk, pv = r
                res = [out.reshape(b, s, n * h), pk, pv, None]
                return tuple(res[:self.n_out]) if self.n_out > 1 else res[0]
        if self.do_rotary:
            cos, sin = _f32(cos_cache), _f32(sin_cache)
            if first_prompt:
                start = 0 if position_ids is None else \
                    int(np.asarray(position_ids).reshape(-1)[0])
                pos = positions(None, b, s, start)
            else:
                pos = positions(position_ids, b, s, past_len)
            c = gather_cache(cos, pos, op)[:, :, None]         # (B, S, 1, rot/2)
            sn = gather_cache(sin, pos, op)[:, :, None]
            qh = rotate(qh, c, sn, self.interleaved)
            kh = rotate(kh, c, sn, self.interleaved)

        pk = np.zeros((b, nkv, p_out, h), _F32)
        pv = np.zeros((b, nkv, p_out, h), _F32)
        pkf, pvf = _f32(past_key), _f32(past_value)
        for i in range(b):
            pl = int(past_len[i])
            if pl:
                pk[i, :, :pl] = pkf[i, :, :pl]
                pv[i, :, :pl] = pvf[i, :, :pl]
            pk[i, :, pl:pl + s] = kh[i].transpose(1, 0, 2)
            pv[i, :, pl:pl + s] = vh[i].transpose(1, 0, 2)

        group = n // nkv
        bias = _f32(attention_bias)
        sink = None
        if head_sink is not None or self.smooth:
            hs = np.zeros(n, _F32) if head_sink is None else _f32(head_sink).reshape(n)
            sink = hs.reshape(n, 1, 1)
        out = np.zeros((b, s, n, h), _F32)
        qk = np.zeros((b, n, s, total), _F32) if self.want_qk else None
        for i in range(b):
            t = int(lens[i])
            kk = np.repeat(pk[i, :, :t], group, axis=0)            # (N, T, H)
            vv = np.repeat(pv[i, :, :t], group, axis=0)
            sc = np.matmul(qh[i].transpose(1, 0, 2), kk.transpose(0, 2, 1)) * scale
            causal = past_len[i] + np.arange(s) + 1                   # (S,)
            if self.window >= 0:
                lo = np.where(causal > self.window, causal - self.window, 0)
            else:
                lo = np.zeros(s, np.int64)
            if self.softcap > 0:
                sc = softcap_(sc, self.softcap)
            if bias is not None:
                bb = bias[i if bias.shape[0] > 1 else 0]            # (N|1, S, Tb)
                sc = sc + bb[:, :, :t]
            if qk is not None and self.qk_output == 1:
                cols = np.arange(t)
                keep = (cols[None, :] >= lo[:, None]) & (cols[None, :] < causal[:, None])
                qk[i, :, :, :t] = np.where(keep, sc, 0)
            p = attend_rows(sc, lo, causal, sink, t)
            if qk is not None and self.qk_output == 2:
                qk[i, :, :, :t] = p
            out[i] = np.matmul(p, vv).transpose(1, 0, 2)
        res = [out.reshape(b, s, n * h).astype(dt), pk.astype(dt), pv.astype(dt),
               None if qk is None else qk.astype(dt)]
        return tuple(res[:self.n_out]) if self.n_out > 1 else res[0]

    def _decode_step(self, query: np.ndarray, key: Any, value: Any, past_key: Any,
                     past_value: Any, seqlens_k: Any, total: Any, cos_cache: Any,
                     sin_cache: Any, pool: ThreadPool) -> Any:
        """A float32 token-generation step (one new position after a past) with the checks
        of the general path in plain Python, straight into the compiled step; None where
        anything is off the common case (the general path then runs, and raises its
        errors)."""
        n, nkv = self.n, self.nkv
        b, _, width = query.shape
        if key is None:
            if value is not None:
                return None
            h = width // (n + 2 * nkv)
            if h * (n + 2 * nkv) != width:
                return None
            row = query.reshape(b, width)
            q = row[:, :n * h]
            k = row[:, n * h:(n + nkv) * h]
            v = row[:, (n + nkv) * h:]
        else:
            h = width // n
            if (h * n != width or type(key) is not np.ndarray or type(value) is not np.ndarray
                    or key.dtype != _F32 or value.dtype != _F32
                    or key.shape != (b, 1, nkv * h) or value.shape != (b, 1, nkv * h)):
                return None
            q = query.reshape(b, width)
            k = key.reshape(b, nkv * h)
            v = value.reshape(b, nkv * h)
        if (type(seqlens_k) is not np.ndarray or seqlens_k.size != b
                or seqlens_k.dtype.kind not in "iu"
                or type(total) is not np.ndarray or total.size != 1):
            return None
        t = int(total.reshape(-1)[0])
        past_len = seqlens_k.reshape(b).astype(np.int64)     # seqlens_k + 1 - S, S = 1
        lo, hi = (int(past_len[0]),) * 2 if b == 1 else \
            (int(past_len.min()), int(past_len.max()))
        if t <= 1 or lo < 0 or past_key is None or past_value is None:
            return None
        p_buf = past_key.shape[2] if past_key.ndim == 4 else -1
        if (past_key.dtype != _F32 or past_value.dtype != _F32
                or past_key.shape != (b, nkv, p_buf, h) or past_value.shape != past_key.shape
                or hi > p_buf):
            return None
        p_out = max(t, p_buf)
        if hi + 1 > p_out:
            return None
        cos = sin = None
        if self.do_rotary:
            cos, sin = cos_cache, sin_cache
            if (cos is None or sin is None or cos.dtype != _F32 or sin.dtype != _F32
                    or cos.ndim != 2 or cos.shape != sin.shape or 2 * cos.shape[1] > h
                    or hi >= cos.shape[0]):
                return None
        scale = _F32(self.scale) if self.scale else _F32(1.0 / math.sqrt(h))
        r = gqa_decode.decode(q.reshape(b, n, h), k.reshape(b, nkv, h), v.reshape(b, nkv, h),
                              past_key, past_value, past_len, p_out, cos, sin,
                              self.interleaved, float(scale), self.softcap, self.window, pool)
        if r is None:
            return None
        out, pk, pv = r
        res = (out.reshape(b, 1, n * h), pk, pv, None)
        return res[:self.n_out] if self.n_out > 1 else res[0]

    def _step(self, qh: np.ndarray, kh: np.ndarray, vh: np.ndarray, past_key: Any,
              past_value: Any, past_len: np.ndarray, p_out: int, cos_cache: Any,
              sin_cache: Any, scale: Any, pool: ThreadPool) -> tuple | None:
        """One new position per batch through the compiled step (contrib/gqa_decode.py),
        or None (no numba; positions past the rotary caches: the NumPy path's error)."""
        cos = sin = None
        if self.do_rotary:
            cos, sin = _f32(cos_cache), _f32(sin_cache)
            if cos.ndim != 2 or cos.shape != sin.shape or 2 * cos.shape[1] > qh.shape[3] \
                    or past_len.max(initial=0) >= cos.shape[0]:
                return None
        return gqa_decode.decode(qh[:, 0], kh[:, 0], vh[:, 0], _f32(past_key),
                                 _f32(past_value), past_len, p_out, cos, sin,
                                 self.interleaved, float(scale), self.softcap, self.window,
                                 pool)
