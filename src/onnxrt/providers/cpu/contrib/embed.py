"""com.microsoft BERT embedding layers: EmbedLayerNormalization (word + position + segment
embeddings, then LayerNormalization, and the mask's token counts) and its 8-bit twin
QEmbedLayerNormalization."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU

MS = "com.microsoft"
_F32 = np.float32


def _lookup(table: np.ndarray, ids: np.ndarray, what: str) -> np.ndarray:
    if ids.size and (ids.min() < 0 or ids.max() >= table.shape[0]):
        raise IndexError(f"EmbedLayerNormalization: {what} must be in [0, {table.shape[0]}), "
                         f"got [{ids.min()}, {ids.max()}]")
    return table[ids]


def embed_layer_norm(input_ids, segment_ids, word, position, segment, gamma, beta, mask,
                     position_ids, epsilon: float, want_sum: bool) -> tuple[Any, ...]:
    """(output, mask_index, embedding_sum or None) with float32 tables."""
    ids = np.asarray(input_ids).astype(np.int64)
    if ids.ndim != 2:
        raise ValueError(f"EmbedLayerNormalization: input_ids must be (batch, sequence), got "
                         f"{ids.shape}")
    b, s = ids.shape
    if position_ids is None:
        pos = np.broadcast_to(np.arange(s), (b, s))
    else:
        pos = np.broadcast_to(np.asarray(position_ids).astype(np.int64), (b, s))
    x = _lookup(word, ids, "input_ids") + _lookup(position, pos, "position ids")
    if segment is not None and segment_ids is not None:
        x = x + _lookup(segment, np.asarray(segment_ids).astype(np.int64), "segment_ids")
    emb = x.astype(_F32)
    mean = emb.mean(axis=-1, keepdims=True)
    d = emb - mean
    var = (d * d).mean(axis=-1, keepdims=True)
    y = d / np.sqrt(var + _F32(epsilon)) * gamma + beta
    if mask is not None:
        mask_index = (np.asarray(mask) == 1).sum(axis=1).astype(np.int32)
    else:
        mask_index = np.zeros(b, np.int32)
    return y.astype(_F32), mask_index, emb if want_sum else None


@CPU.kernel("EmbedLayerNormalization", since=1, domain=MS, needs_node=True)
def embed_layer_normalization(input_ids, segment_ids, word_embedding, position_embedding,
                              segment_embedding=None, gamma=None, beta=None, mask=None,
                              position_ids=None, *, epsilon=1e-12, mask_index_type=1,
                              node: Any = None):
    """Outputs: (B, S, hidden); mask_index (B,) = count of ones in each mask row (zeros
    without a mask); embedding_sum before the normalization."""
    dt = word_embedding.dtype
    f = lambda a: None if a is None else np.asarray(a).astype(_F32)  # noqa: E731
    y, mi, emb = embed_layer_norm(input_ids, segment_ids, f(word_embedding),
                                  f(position_embedding), f(segment_embedding), f(gamma),
                                  f(beta), mask, position_ids, float(epsilon),
                                  node is not None and node.output_present(2))
    outs = [y.astype(dt), mi, None if emb is None else emb.astype(dt)]
    n = node.num_outputs if node is not None else 1
    return tuple(outs[:n]) if n > 1 else outs[0]


def _dq(q: np.ndarray | None, scale: np.ndarray | None, zp: np.ndarray | None,
        what: str) -> np.ndarray | None:
    if q is None:
        return None
    if scale is None or np.size(scale) != 1 or (zp is not None and np.size(zp) != 1):
        raise ValueError(f"QEmbedLayerNormalization: {what} needs a per-tensor scale and "
                         f"zero point")
    z = 0 if zp is None else int(np.asarray(zp).reshape(()))
    return ((np.asarray(q).astype(np.int32) - z).astype(_F32)
            * _F32(np.asarray(scale).reshape(())))


@CPU.kernel("QEmbedLayerNormalization", since=1, domain=MS)
def qembed_layer_normalization(input_ids, segment_ids, word_q, position_q, segment_q, gamma_q,
                               beta_q, mask, word_scale, position_scale, segment_scale,
                               gamma_scale, beta_scale, word_zp, position_zp, segment_zp,
                               gamma_zp, beta_zp, *, epsilon=1e-12):
    """EmbedLayerNormalization on 8-bit tables dequantized per tensor ((q - zp) * scale)."""
    y, mi, _ = embed_layer_norm(
        input_ids, segment_ids, _dq(word_q, word_scale, word_zp, "word_embedding"),
        _dq(position_q, position_scale, position_zp, "position_embedding"),
        _dq(segment_q, segment_scale, segment_zp, "segment_embedding"),
        _dq(gamma_q, gamma_scale, gamma_zp, "gamma"), _dq(beta_q, beta_scale, beta_zp, "beta"),
        mask, None, float(epsilon), False)
    return y, mi
