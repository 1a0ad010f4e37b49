"""com.microsoft RotaryEmbedding, and the rotation shared with GroupQueryAttention and
SparseAttention."""

from __future__ import annotations

import numpy as np

from onnxrt.providers.cpu import CPU

MS = "com.microsoft"


def rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, interleaved: bool) -> np.ndarray:
    """RoPE on the last axis of x (..., head_size): the first 2 * cos.shape[-1] dims rotate
    by the angles whose cos/sin broadcast against x[..., :rot/2]; the rest pass through.
    Interleaved: pairs (2i, 2i+1); otherwise halves (i, i + rot/2)."""
    half = cos.shape[-1]
    rot = 2 * half
    out = np.array(x, copy=True)
    if interleaved:
        a, b = x[..., 0:rot:2], x[..., 1:rot:2]
        out[..., 0:rot:2] = a * cos - b * sin
        out[..., 1:rot:2] = b * cos + a * sin
    else:
        a, b = x[..., :half], x[..., half:rot]
        out[..., :half] = a * cos - b * sin
        out[..., half:rot] = b * cos + a * sin
    return out


def positions(position_ids: np.ndarray | None, batch: int, seq: int,
              default_start: np.ndarray | int = 0) -> np.ndarray:
    """(B, S) positions: from a (B, S) tensor as given, from a 1-element tensor as a start
    (start + s), else ``default_start`` (+ s), a scalar or one value per batch."""
    if position_ids is not None:
        p = np.asarray(position_ids).astype(np.int64)
        if p.size == 1:
            return np.broadcast_to(p.reshape(()) + np.arange(seq), (batch, seq))
        if p.shape != (batch, seq):
            raise ValueError(f"position_ids must be (batch, sequence) = {(batch, seq)} or one "
                             f"value, got {p.shape}")
        return p
    start = np.asarray(default_start, np.int64).reshape(-1, 1)
    return np.broadcast_to(start + np.arange(seq), (batch, seq))


def gather_cache(cache: np.ndarray, pos: np.ndarray, what: str) -> np.ndarray:
    if pos.size and (pos.min() < 0 or pos.max() >= cache.shape[0]):
        raise IndexError(f"{what}: position ids must be in [0, {cache.shape[0]}), got "
                         f"[{pos.min()}, {pos.max()}]")
    return cache[pos]


@CPU.kernel("RotaryEmbedding", since=1, domain=MS)
def rotary_embedding(x, position_ids, cos_cache, sin_cache, *, interleaved=0, num_heads=0,
                     rotary_embedding_dim=0, is_packed_batching=0, scale=1.0):
    """RoPE on (B, S, N * H) or (B, N, S, H). The caches are (max_len, rot / 2); rot is
    rotary_embedding_dim (then num_heads gives H) or twice the cache width. ``scale`` only
    matters when the caches would need extending, which onnxruntime's CPU kernel does not
    do either; packed batching is refused."""
    op = "RotaryEmbedding"
    if int(is_packed_batching):
        raise ValueError(f"{op}: is_packed_batching=1 is not supported")
    if x.ndim not in (3, 4):
        raise ValueError(f"{op}: input must be 3-D or 4-D, got shape {x.shape}")
    cos, sin = np.asarray(cos_cache), np.asarray(sin_cache)
    if cos.ndim != 2 or cos.shape != sin.shape:
        raise ValueError(f"{op}: cos_cache and sin_cache must be equal 2-D shapes, got "
                         f"{cos.shape} and {sin.shape}")
    rot_dim, nh = int(rotary_embedding_dim), int(num_heads)
    if rot_dim > 0 and nh <= 0:
        raise ValueError(f"{op}: num_heads must be given with rotary_embedding_dim")
    b = x.shape[0]
    if x.ndim == 4:
        s, hidden = x.shape[2], x.shape[1] * x.shape[3]
    else:
        s, hidden = x.shape[1], x.shape[2]
    head = cos.shape[1] * 2 if rot_dim == 0 else hidden // nh
    rot = rot_dim if rot_dim > 0 else head
    if cos.shape[1] * 2 != rot:
        raise ValueError(f"{op}: the caches are {cos.shape[1]} wide, rotary dim {rot} needs "
                         f"{rot // 2}")
    nh = nh if nh > 0 else hidden // head
    pos = positions(position_ids, b, s)
    c = gather_cache(cos, pos, op)                 # (B, S, rot/2)
    sn = gather_cache(sin, pos, op)
    if x.ndim == 4:
        y = rotate(x, c[:, None], sn[:, None], bool(interleaved))
    else:
        xh = x.reshape(b, s, nh, head)
        y = rotate(xh, c[:, :, None], sn[:, :, None], bool(interleaved)).reshape(x.shape)
    return y.astype(x.dtype, copy=False)
