"""com.microsoft MoE and QMoE: mixture of experts as onnxruntime's CPU kernels compute it.

Routing: softmax over each token's router logits, the top k experts, their probabilities as
weights (renormalized over the k with normalize_routing_weights). Each expert: FC1 (x @ W1^T
+ b1), the activation (relu, gelu in its tanh form, silu, identity, or SwiGLU on interleaved
gate/linear columns with alpha, beta and the clamp limit), FC2; the token's output is the
weighted sum. onnxruntime's CPU kernels accept use_sparse_mixer (k = 2) and route by the
same plain top-k; so does this. FC3 gating is refused, as there.
QMoE's weights are 4- or 8-bit (low nibble first), per row or per block of ``block_size``
along the input features, zero points packed the same way (default 8 or 128).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.contrib.quant_matmul import unpack_bits

MS = "com.microsoft"
_F32 = np.float32
_ACTS = ("relu", "gelu", "silu", "identity", "swiglu")


class _MoEBase:
    op = "MoE"

    def __init__(self, node: Any) -> None:
        a = node.attrs
        self.k = int(a.get("k", 1))
        self.act = a.get("activation_type", "relu")
        if self.act not in _ACTS:
            raise ValueError(f"{self.op}: activation_type {self.act!r} ({', '.join(_ACTS)})")
        self.normalize = int(a.get("normalize_routing_weights", 0)) == 1
        if int(a.get("use_sparse_mixer", 0)) and self.k != 2:
            raise ValueError(f"{self.op}: use_sparse_mixer needs k=2")
        fusion = int(a.get("swiglu_fusion", 0))
        if self.act == "swiglu" and fusion != 1:
            raise ValueError(f"{self.op}: SwiGLU needs swiglu_fusion=1 (interleaved), as "
                             f"onnxruntime's CPU kernel does")
        if int(a.get("swiglu_limit_after_activation", 0)):
            raise ValueError(f"{self.op}: swiglu_limit_after_activation=1 is not supported")
        self.limit = float(a["swiglu_limit"]) if a.get("swiglu_limit") is not None \
            else np.inf
        self.alpha = _F32(a.get("activation_alpha", 1.0))
        self.beta = _F32(a.get("activation_beta", 0.0))

    def activation(self, h: np.ndarray) -> np.ndarray:
        if self.act == "relu":
            return np.maximum(h, 0)
        if self.act == "gelu":
            return _F32(0.5) * h * (1 + np.tanh(_F32(0.7978845608) *
                                                (h + _F32(0.044715) * h * h * h)))
        if self.act == "silu":
            return h / (1 + np.exp(-h))
        if self.act == "identity":
            return h
        gate, lin = h[..., 0::2], h[..., 1::2]
        gate = np.minimum(gate, _F32(self.limit))
        lin = np.clip(lin, -_F32(self.limit), _F32(self.limit))
        with np.errstate(over="ignore"):
            sig = 1 / (1 + np.exp(-self.alpha * gate))
        return (gate * sig * (lin + self.beta)).astype(_F32)

    def route(self, logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(experts (T, k), weights (T, k)) from router logits (T, E)."""
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        p = (e / e.sum(axis=1, keepdims=True)).astype(_F32)
        if self.k > p.shape[1]:
            raise ValueError(f"{self.op}: k={self.k} exceeds the {p.shape[1]} experts")
        idx = np.argsort(-p, axis=1, kind="stable")[:, :self.k]
        w = np.take_along_axis(p, idx, axis=1)
        if self.normalize:
            w = w / w.sum(axis=1, keepdims=True)
        return idx, w

    def run(self, x, router, w1, b1, w2, b2) -> np.ndarray:
        """x (..., hidden); w1 (E, F1, hidden), w2 (E, hidden, inter) float32."""
        shape = x.shape
        xf = x.reshape(-1, shape[-1]).astype(_F32)
        logits = np.asarray(router, _F32).reshape(xf.shape[0], -1)
        idx, wts = self.route(logits)
        out = np.zeros(xf.shape, np.float64)
        for e in np.unique(idx):
            rows, slot = np.nonzero(idx == e)
            keep = wts[rows, slot] > 0
            rows, slot = rows[keep], slot[keep]
            if rows.size == 0:
                continue
            h = xf[rows] @ w1[e].T
            if b1 is not None:
                h = h + b1[e]
            h = self.activation(h.astype(_F32))
            y = h @ w2[e].T
            if b2 is not None:
                y = y + b2[e]
            np.add.at(out, rows, (wts[rows, slot][:, None] * y).astype(_F32))
        return out.astype(_F32).reshape(shape)


@CPU.kernel("MoE", since=1, domain=MS, needs_node=True)
class MoE(_MoEBase):
    def __call__(self, x, router_probs, fc1_w, fc1_b=None, fc2_w=None, fc2_b=None,
                 fc3_w=None, fc3_b=None):
        if fc3_w is not None or fc3_b is not None:
            raise ValueError("MoE: FC3 gating is not supported (nor by onnxruntime's CPU "
                             "kernel)")
        f = lambda a: None if a is None else np.asarray(a).astype(_F32)  # noqa: E731
        y = self.run(x, router_probs, f(fc1_w), f(fc1_b), f(fc2_w), f(fc2_b))
        return y.astype(x.dtype)


def dequant_experts(q: np.ndarray, scales: np.ndarray, zp: np.ndarray | None, bits: int,
                    block: int, cols: int, what: str) -> np.ndarray:
    """(E, rows, cols) float32 from packed (E, rows, cols * bits / 8) uint8 codes; scales
    (E, rows) or (E, rows, blocks); zero points packed along their last axis."""
    e, rows = q.shape[:2]
    vals = unpack_bits(q, bits, cols).astype(_F32)
    s = np.asarray(scales).astype(_F32)
    nblk = -(-cols // block) if block > 0 else 1
    if block > 0:
        if s.shape != (e, rows, nblk):
            raise ValueError(f"QMoE: {what} scales must be {(e, rows, nblk)}, got {s.shape}")
    elif s.shape != (e, rows):
        raise ValueError(f"QMoE: {what} scales must be {(e, rows)}, got {s.shape}")
    if zp is None:
        z = np.full(s.shape, float(1 << (bits - 1)), _F32)
    else:
        n = s.shape[-1]
        z = unpack_bits(np.asarray(zp, np.uint8), bits, n).astype(_F32).reshape(s.shape)
    if block > 0:
        s = np.repeat(s, block, axis=2)[:, :, :cols]
        z = np.repeat(z, block, axis=2)[:, :, :cols]
    else:
        s, z = s[:, :, None], z[:, :, None]
    return (s * (vals - z)).astype(_F32)


@CPU.kernel("QMoE", since=1, domain=MS, needs_node=True)
class QMoE(_MoEBase):
    op = "QMoE"

    def __init__(self, node: Any) -> None:
        super().__init__(node)
        a = node.attrs
        self.bits = int(a.get("expert_weight_bits", 4))
        if self.bits not in (4, 8):
            raise ValueError(f"QMoE: expert_weight_bits {self.bits} (4 or 8)")
        self.block = int(a.get("block_size", 0) or 0)
        if self.block and (self.block < 16 or self.block & (self.block - 1)):
            raise ValueError(f"QMoE: block_size {self.block} must be a power of 2, >= 16")
        for name, neutral in (("quant_type", "int"), ("weights_prepacked", -1)):
            if name in a and a[name] != neutral:
                raise ValueError(f"QMoE: attribute {name}={a[name]!r} is not supported")
        for i in range(14, node.num_inputs):
            if node.input_present(i):
                raise ValueError(f"QMoE: input {i} ({node.inputs[i]}) is not supported")

    def __call__(self, x, router_probs, fc1_w, fc1_s=None, fc1_b=None, fc2_w=None, fc2_s=None,
                 fc2_b=None, fc3_w=None, fc3_s=None, fc3_b=None, fc1_zp=None, fc2_zp=None,
                 fc3_zp=None, *rest):
        if fc3_w is not None:
            raise ValueError("QMoE: FC3 gating is not supported (nor by onnxruntime's CPU "
                             "kernel)")
        if fc1_s is None or fc2_s is None:
            raise ValueError("QMoE: fc1_scales and fc2_scales are required")
        hidden = x.shape[-1]
        inter = fc2_w.shape[2] * (8 // self.bits)
        w1 = dequant_experts(fc1_w, fc1_s, fc1_zp, self.bits, self.block, hidden, "fc1")
        w2 = dequant_experts(fc2_w, fc2_s, fc2_zp, self.bits, self.block, inter, "fc2")
        f = lambda a: None if a is None else np.asarray(a).astype(_F32)  # noqa: E731
        y = self.run(x, router_probs, w1, f(fc1_b), w2, f(fc2_b))
        return y.astype(x.dtype)
