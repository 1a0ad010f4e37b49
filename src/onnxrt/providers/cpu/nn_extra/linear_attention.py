"""LinearAttention (27) and CausalConvWithState (27): the recurrent ops of linear-attention
models (Gated DeltaNet, Mamba-style preprocessing).

LinearAttention runs the recurrence token by token for decode steps and chunk-parallel for
prefills (batched matmuls and one small triangular system per chunk for the delta rules),
always vectorized over batch and heads; grouped query heads share their kv head's state
without copying it. CausalConvWithState is k shifted multiply-adds over the whole
sequence (k = kernel size), not a loop over positions.
"""

from __future__ import annotations

import numpy as np

from onnxrt.ir.dtypes import np_dtype
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.nn_extra._common import compute_dtype

_RULES = ("linear", "gated", "delta", "gated_delta")


def _tensor_elem_dtype(tp) -> np.dtype | None:
    try:
        if tp is not None and tp.HasField("tensor_type") and tp.tensor_type.elem_type:
            return np.dtype(np_dtype(tp.tensor_type.elem_type))
    except Exception:
        return None
    return None


def _sequential(q, k, v, s, logdec, beta, delta: bool):
    """The recurrence token by token (decode steps, short inputs).

    q [B,T,H,G,dk], k [B,T,H,dk], v [B,T,H,dv], s [B,H,dk,dv], logdec [B,T,H,dk|1] or None,
    beta [B,T,H] or None. Returns (out [B,T,H,G,dv] unscaled, final state).
    """
    b, t, h, g, _ = q.shape
    out = np.empty((b, t, h, g, v.shape[-1]), dtype=q.dtype)
    for i in range(t):
        if logdec is not None:
            s = s * np.exp(logdec[:, i])[..., None]        # decay rows (per key dim or head)
        ki, vi = k[:, i], v[:, i]
        if delta:
            pred = np.einsum("bhk,bhkv->bhv", ki, s)       # S^T k
            vi = beta[:, i, :, None] * (vi - pred)
        s = s + ki[..., :, None] * vi[..., None, :]
        out[:, i] = np.matmul(q[:, i], s)                  # [B,H,G,dk] @ [B,H,dk,dv]
    return out, s


def _pair_decay(a, kc, cg, mask, dtype):
    """sum_d a[t,d] exp(G[t,d] - G[j,d]) k[j,d] for every (t, j) allowed by ``mask``.

    ``a`` is [B,H,(G,)n,dk], kc [B,H,n,dk], cg [B,H,n,dk]. The decay factors split as
    exp(G_t - G_0) * exp(G_0 - G_j), which makes this one matmul; the second factor grows with
    the decay inside the chunk, so it is taken in float64 and only while it cannot overflow
    (otherwise the [n, n, dk] factors are formed explicitly).
    """
    g64 = cg.astype(np.float64)
    ref = g64[:, :, :1]
    if float(np.ptp(g64)) < 600.0:  # exp(600) is far inside float64's range
        at = a * np.exp(g64 - ref)[:, :, None] if a.ndim == 5 else a * np.exp(g64 - ref)
        kt = kc * np.exp(ref - g64)
        prod = np.matmul(at, np.swapaxes(kt[:, :, None] if a.ndim == 5 else kt, -1, -2))
        return np.where(mask, prod, 0.0).astype(dtype)
    diff = g64[:, :, :, None, :] - g64[:, :, None, :, :]                      # [B,H,n,n,dk]
    tri = mask.reshape(mask.shape[-2:])
    gam = np.exp(np.where(tri[None, None, :, :, None], diff, -np.inf)).astype(dtype)
    if a.ndim == 5:
        return np.einsum("bhgtd,bhtjd,bhjd->bhgtj", a, gam, kc)
    return np.einsum("bhtd,bhtjd,bhjd->bhtj", a, gam, kc)


def _chunked(q, k, v, s, logdec, beta, delta: bool, chunk: int):
    """The same recurrence, a chunk of tokens at a time (prefill).

    Inside a chunk with start state S0 and cumulative log decay G_t (per key dim or head),
    the state after token t is exp(G_t) S0 + sum_{j<=t} exp(G_t - G_j) k_j u_j^T, where
    u = v for the plain rules, and for the delta rules u solves the unit lower triangular
    system (I + diag(beta) L) u = diag(beta) (v - (k * exp(G)) S0), with
    L[t, j] = sum_d exp(G_t - G_j)_d k_t,d k_j,d for j < t. Every step is a batched matmul.
    """
    b, t, h, g, dk = q.shape
    dv = v.shape[-1]
    out = np.empty((b, t, h, g, dv), dtype=q.dtype)
    per_dim = logdec is not None and logdec.shape[-1] == dk
    for c0 in range(0, t, chunk):
        c1 = min(t, c0 + chunk)
        n = c1 - c0
        qc = q[:, c0:c1].transpose(0, 2, 3, 1, 4)          # [B,H,G,n,dk]
        kc = k[:, c0:c1].transpose(0, 2, 1, 3)             # [B,H,n,dk]
        vc = v[:, c0:c1].transpose(0, 2, 1, 3)             # [B,H,n,dv]
        causal = np.tril(np.ones((n, n), dtype=bool))
        if logdec is None:
            gam = causal.astype(q.dtype)[None, None, :, :, None]  # exp(G_t - G_j), masked
            k_in = kc                                       # k_t * exp(G_t)
            q_in = qc
            k_out = kc                                      # k_j * exp(G_last - G_j)
            s_dec = None
        else:
            cg = np.cumsum(logdec[:, c0:c1], axis=1).transpose(0, 2, 1, 3)  # [B,H,n,dk|1]
            if not per_dim:
                diff = cg[:, :, :, None, :] - cg[:, :, None, :, :]           # [B,H,n,n,1]
                gam = np.exp(np.where(causal[None, None, :, :, None], diff, -np.inf))
            eg = np.exp(cg)
            k_in = kc * eg
            q_in = qc * eg[:, :, None]
            k_out = kc * np.exp(cg[:, :, -1:] - cg)
            s_dec = np.exp(cg[:, :, -1])                   # [B,H,dk|1]
        if per_dim:
            qk = _pair_decay(qc, kc, cg, causal[None, None, None], q.dtype)
        else:
            gm = gam[..., 0]
            qk = np.matmul(qc, np.swapaxes(kc, -1, -2)[:, :, None]) * gm[:, :, None]
        if delta:
            if per_dim:
                kk = _pair_decay(kc, kc, cg, causal[None, None], q.dtype)
            else:
                kk = np.matmul(kc, np.swapaxes(kc, -1, -2)) * gm
            bt = beta[:, c0:c1].transpose(0, 2, 1)[..., None]         # [B,H,n,1]
            lower = np.tril(kk, -1) * bt
            system = lower + np.eye(n, dtype=q.dtype)
            rhs = bt * (vc - np.matmul(k_in, s))
            u = np.linalg.solve(system, rhs)               # [B,H,n,dv]
        else:
            u = vc
        o = np.matmul(q_in, s[:, :, None]) + np.matmul(qk, u[:, :, None])  # [B,H,G,n,dv]
        out[:, c0:c1] = o.transpose(0, 3, 1, 2, 4)
        if s_dec is not None:
            s = s * s_dec[..., None]
        s = s + np.matmul(np.swapaxes(k_out, -1, -2), u)
    return out, s


class LinearAttention:
    """LinearAttention-27. Decode steps and short inputs run the recurrence token by token;
    longer prefills run it chunk-parallel (``chunk_size`` tokens per step), same result."""

    _CHUNK_FROM = 16  # tokens from which the chunked form pays off

    def __init__(self, node) -> None:
        a = node.attrs
        self.rule = a.get("update_rule", "gated_delta")
        if self.rule not in _RULES:
            raise ValueError(f"LinearAttention: unknown update_rule {self.rule!r}")
        self.hq = a.get("q_num_heads")
        self.hkv = a.get("kv_num_heads")
        if not self.hq or not self.hkv:
            raise ValueError("LinearAttention: q_num_heads and kv_num_heads are required")
        self.hq, self.hkv = int(self.hq), int(self.hkv)
        if self.hq % self.hkv:
            raise ValueError(f"LinearAttention: q_num_heads {self.hq} is not a multiple of "
                             f"kv_num_heads {self.hkv}")
        self.scale = float(a.get("scale", 0.0) or 0.0)
        self.chunk = max(1, int(a.get("chunk_size", 64) or 64))
        self.state_dtype = _tensor_elem_dtype(
            node.output_types[1] if len(node.output_types) > 1 else None)

    def __call__(self, query, key, value, past_state=None, decay=None, beta=None):
        b, t, _ = query.shape
        hq, hkv = self.hq, self.hkv
        g = hq // hkv
        dk = query.shape[2] // hq
        dv = value.shape[2] // hkv
        cdt = compute_dtype(query.dtype)
        q = query.astype(cdt, copy=False).reshape(b, t, hkv, g, dk)
        k = key.astype(cdt, copy=False).reshape(b, t, hkv, dk)
        v = value.astype(cdt, copy=False).reshape(b, t, hkv, dv)
        scale = self.scale if self.scale != 0.0 else 1.0 / np.sqrt(dk)
        gated = self.rule in ("gated", "gated_delta")
        delta = self.rule in ("delta", "gated_delta")
        logdec = None
        if gated:
            if decay is None:
                raise ValueError(f"LinearAttention: update_rule {self.rule!r} needs 'decay'")
            logdec = decay.astype(cdt, copy=False)
            # per key dimension [B,T,H,dk] or per head [B,T,H,1]
            if logdec.shape[2] == hkv * dk:
                logdec = logdec.reshape(b, t, hkv, dk)
            elif logdec.shape[2] == hkv:
                logdec = logdec.reshape(b, t, hkv, 1)
            else:
                raise ValueError(f"LinearAttention: decay shape {decay.shape} fits neither "
                                 f"(B, T, {hkv * dk}) nor (B, T, {hkv})")
        bt = None
        if delta:
            if beta is None:
                raise ValueError(f"LinearAttention: update_rule {self.rule!r} needs 'beta'")
            bt = np.broadcast_to(beta.astype(cdt, copy=False).reshape(b, t, -1), (b, t, hkv))
        if past_state is not None:
            s = past_state.astype(cdt, copy=True)
        else:
            s = np.zeros((b, hkv, dk, dv), dtype=cdt)
        # non-finite log decays (a -inf "reset") break the chunked algebra: go token by token
        if t >= self._CHUNK_FROM and (logdec is None or np.isfinite(logdec).all()):
            out, s = _chunked(q, k, v, s, logdec, bt, delta, self.chunk)
        else:
            out, s = _sequential(q, k, v, s, logdec, bt, delta)
        out *= cdt.type(scale)
        y = out.reshape(b, t, hq * dv).astype(query.dtype, copy=False)
        sdt = past_state.dtype if past_state is not None else (self.state_dtype or query.dtype)
        return y, s.astype(sdt, copy=False)


CPU.register("LinearAttention", LinearAttention, since=27)


@CPU.kernel("CausalConvWithState", since=27)
def causal_conv_with_state(x, weight, bias=None, past_state=None, *, activation):
    if x.ndim != 3:
        raise ValueError(f"CausalConvWithState: input must be (batch, channels, length), got "
                         f"{x.shape}")
    if activation not in ("none", "silu", "swish"):
        raise ValueError(f"CausalConvWithState: unknown activation {activation!r}")
    b, c, n = x.shape
    ks = weight.shape[-1]
    if weight.shape[0] != c:
        raise ValueError(f"CausalConvWithState: weight shape {weight.shape} does not match "
                         f"{c} channels")
    cdt = compute_dtype(x.dtype)
    if past_state is None:
        past = np.zeros((b, c, ks - 1), dtype=cdt)
    else:
        past = past_state.astype(cdt, copy=False)
    full = np.concatenate([past, x.astype(cdt, copy=False)], axis=2)  # [B, C, k-1+L]
    w = weight.astype(cdt, copy=False).reshape(c, ks)
    y = np.zeros((b, c, n), dtype=cdt)
    for j in range(ks):
        y += full[:, :, j:j + n] * w[None, :, j:j + 1]
    if bias is not None:
        y += bias.astype(cdt, copy=False).reshape(1, c, 1)
    if activation != "none":  # SiLU; exp overflow for very negative y correctly gives -0
        with np.errstate(over="ignore"):
            y = y / (1.0 + np.exp(-y))
    present = full[:, :, full.shape[2] - (ks - 1):] if ks > 1 else full[:, :, :0]
    return y.astype(x.dtype, copy=False), present.astype(x.dtype)
