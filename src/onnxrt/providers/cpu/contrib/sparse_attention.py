"""com.microsoft SparseAttention: block-sparse causal attention (Phi-3-small) over a KV
cache of the maximum length, with rotary inside, as onnxruntime's CPU kernel computes it.

The block mask is given per layout in CSR form (block_row_indices, block_col_indices); head h
uses layout h mod num_layouts. Like onnxruntime, a layout with every lower-triangular block
set is plain causal attention, and a query row whose block row holds as many blocks as a
dense causal row is not masked further.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.contrib.gqa import attend_rows
from onnxrt.providers.cpu.contrib.rotary import gather_cache, rotate

MS = "com.microsoft"
_F32 = np.float32


def _block_masks(rows: np.ndarray, cols: np.ndarray, block: int) -> list[np.ndarray | None]:
    """Per layout: a (max_blocks, max_blocks) bool block mask, or None for a dense causal
    layout."""
    out: list[np.ndarray | None] = []
    nb = rows.shape[1] - 1
    for lay in range(rows.shape[0]):
        r, c = rows[lay], cols[lay]
        if r[-1] >= nb * (nb + 1) // 2:
            out.append(None)
            continue
        m = np.zeros((nb, nb), bool)
        for i in range(nb):
            cs = c[r[i]:r[i + 1]]
            cs = cs[(cs >= 0) & (cs < nb)]
            if cs.size != i + 1:            # onnxruntime masks only rows with fewer blocks
                m[i, cs] = True
            else:
                m[i, :] = True
        out.append(m)
    return out


@CPU.kernel("SparseAttention", since=1, domain=MS, needs_node=True)
class SparseAttention:
    """Inputs: query (B, S, N*H) or packed QKV; key/value (B, S, N_kv*H); past_key/
    past_value (B, N_kv, max_cache, H); block_row_indices (L, max_blocks + 1) and
    block_col_indices (L, nnz) int32; total_sequence_length (scalar); key_total_sequence_
    lengths (B,); cos/sin caches. Outputs: output (B, S, N*H), present_key/value
    (B, N_kv, max_cache, H): the past buffer with the new keys written at each batch's
    past length."""

    def __init__(self, node: Any) -> None:
        a = node.attrs
        self.n, self.nkv = int(a["num_heads"]), int(a["kv_num_heads"])
        if self.n <= 0 or self.nkv <= 0 or self.n % self.nkv:
            raise ValueError(f"SparseAttention: num_heads {self.n} must be a positive multiple "
                             f"of kv_num_heads {self.nkv}")
        self.block = int(a["sparse_block_size"])
        self.scale = float(a.get("scale", 0.0))
        self.do_rotary = bool(int(a.get("do_rotary", 0)))
        self.interleaved = bool(int(a.get("rotary_interleaved", 0)))

    def __call__(self, query, key, value, past_key, past_value, block_row_indices,
                 block_col_indices, total_sequence_length, key_total_sequence_lengths,
                 cos_cache=None, sin_cache=None):
        op = "SparseAttention"
        dt = query.dtype
        n, nkv = self.n, self.nkv
        q = query.astype(_F32)
        b, s = q.shape[:2]
        if key is None:
            h = q.shape[2] // (n + 2 * nkv)
            q, k, v = np.split(q, [n * h, (n + nkv) * h], axis=2)
        else:
            h = q.shape[2] // n
            k, v = key.astype(_F32), value.astype(_F32)
        qh, kh, vh = (x.reshape(b, s, -1, h) for x in (q, k, v))
        total = int(np.asarray(total_sequence_length).reshape(-1)[0])
        lens = np.asarray(key_total_sequence_lengths).astype(np.int64).reshape(-1)
        cache = past_key.shape[2]
        if past_key.shape != (b, nkv, cache, h) or past_value.shape != past_key.shape:
            raise ValueError(f"{op}: past_key/past_value must be (B, N_kv, max_cache, H) = "
                             f"{(b, nkv, cache, h)}, got {past_key.shape}, {past_value.shape}")
        if lens.size != b or (lens > cache).any() or (lens < s).any() or total > cache:
            raise ValueError(f"{op}: key_total_sequence_lengths {lens.tolist()} must hold {b} "
                             f"values in [{s}, {cache}]")
        rows = np.asarray(block_row_indices).astype(np.int64)
        cols = np.asarray(block_col_indices).astype(np.int64)
        if rows.ndim != 2 or cols.ndim != 2 or rows.shape[0] != cols.shape[0] or \
                n % rows.shape[0]:
            raise ValueError(f"{op}: block_row_indices {rows.shape} and block_col_indices "
                             f"{cols.shape} must be (layouts, .) with num_heads a multiple of "
                             f"the layouts")
        if (rows.shape[1] - 1) * self.block < total:
            raise ValueError(f"{op}: the block mask covers {(rows.shape[1] - 1) * self.block} "
                             f"positions, total_sequence_length is {total}")
        prompt = total == s
        past_len = np.zeros(b, np.int64) if prompt else lens - s
        if self.do_rotary:
            if cos_cache is None or sin_cache is None:
                raise ValueError(f"{op}: do_rotary needs cos_cache and sin_cache")
            pos = np.arange(s)[None, :] + past_len[:, None]
            c = gather_cache(cos_cache.astype(_F32), pos, op)[:, :, None]
            sn = gather_cache(sin_cache.astype(_F32), pos, op)[:, :, None]
            qh = rotate(qh, c, sn, self.interleaved)
            kh = rotate(kh, c, sn, self.interleaved)
        pk = past_key.astype(_F32, copy=True)
        pv = past_value.astype(_F32, copy=True)
        for i in range(b):
            pl = int(past_len[i])
            pk[i, :, pl:pl + s] = kh[i].transpose(1, 0, 2)
            pv[i, :, pl:pl + s] = vh[i].transpose(1, 0, 2)
        masks = _block_masks(rows, cols, self.block)
        scale = _F32(self.scale) if self.scale else _F32(1.0 / np.sqrt(h))
        group = n // nkv
        out = np.zeros((b, s, n, h), _F32)
        for i in range(b):
            t = int(lens[i])
            kk = np.repeat(pk[i, :, :t], group, axis=0)
            vv = np.repeat(pv[i, :, :t], group, axis=0)
            sc = np.matmul(qh[i].transpose(1, 0, 2), kk.transpose(0, 2, 1)) * scale
            qpos = past_len[i] + np.arange(s)
            causal = qpos + 1
            lo = np.zeros(s, np.int64)
            for head in range(n):
                m = masks[head % len(masks)]
                row = sc[head]
                if m is not None:
                    allowed = np.repeat(m[qpos // self.block], self.block, axis=1)[:, :t]
                    row = np.where(allowed, row, np.finfo(_F32).min)
                p = attend_rows(row[None], lo, causal, None, t)[0]
                out[i, :, head] = p @ vv[head]
        return (out.reshape(b, s, n * h).astype(dt), pk.astype(dt), pv.astype(dt))
