"""GroupQueryAttention's token-by-token step (one new position per batch), compiled: per
(batch, KV head), the present K/V written once (the past rows copied, the new position's
key rotated in place), then each query head of the group rotated, scored against the
positions in its window, softmax-ed and summed over V, without the NumPy path's
temporaries (a repeated KV per query head, full score matrices, masks): that path's ~40
array operations per layer were most of a small decoder's step. Arithmetic as
contrib/gqa.py's (float32, the same rotation, softcap and softmax formulas)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from onnxrt.framework.parallel import SERIAL, ThreadPool
from onnxrt.providers.cpu.nn import jit

__all__ = ["kernel"]

_F32 = np.float32


def _rot(x, out, cos, sin, pos, interleaved):
    """out <- x rotated by position pos (the first 2 * cos.shape[1] dims; rest copied)."""
    h = x.shape[0]
    half = cos.shape[1]
    c = cos[pos]
    s = sin[pos]
    for i in range(2 * half, h):
        out[i] = x[i]
    if interleaved:
        for i in range(half):
            a = x[2 * i]
            b = x[2 * i + 1]
            out[2 * i] = a * c[i] - b * s[i]
            out[2 * i + 1] = b * c[i] + a * s[i]
    else:
        for i in range(half):
            a = x[i]
            b = x[i + half]
            out[i] = a * c[i] - b * s[i]
            out[i + half] = b * c[i] + a * s[i]


def _decode(q, k, v, past_k, past_v, past_len, cos, sin, do_rot, interleaved, scale, softcap,
            window, out, pk, pv, lo, hi):
    """Items lo..hi-1 = batch * N_kv + kv head: q (B, N, H), k/v (B, N_kv, H) the new
    position, past_k/v (B, N_kv, P, H), present pk/pv (B, N_kv, P_out, H) (rows past the
    new position zeroed), out (B, N, H)."""
    n_kv = k.shape[1]
    group = q.shape[1] // n_kv
    hd = q.shape[2]
    p_out = pk.shape[2]
    qr = np.empty(hd, _F32)
    o = np.empty(hd, _F32)
    sc = np.empty(p_out, _F32)
    for it in range(lo, hi):
        b = it // n_kv
        g = it - b * n_kv
        pl = past_len[b]
        # 2-D views hoisted and flat index loops: a view or slice copy per position (a
        # few tens of ns each, 1000+ a layer) cost more than the arithmetic
        kg = pk[b, g]
        vg = pv[b, g]
        pkg = past_k[b, g]
        pvg = past_v[b, g]
        for t in range(pl):
            for i in range(hd):
                kg[t, i] = pkg[t, i]
                vg[t, i] = pvg[t, i]
        if do_rot:
            _rot(k[b, g], kg[pl], cos, sin, pl, interleaved)
        else:
            for i in range(hd):
                kg[pl, i] = k[b, g, i]
        for i in range(hd):
            vg[pl, i] = v[b, g, i]
        for t in range(pl + 1, p_out):
            for i in range(hd):
                kg[t, i] = 0
                vg[t, i] = 0
        total = pl + 1
        t0 = total - window if window >= 0 and total > window else 0
        for hh in range(group):
            h = g * group + hh
            if do_rot:
                _rot(q[b, h], qr, cos, sin, pl, interleaved)
            else:
                for i in range(hd):
                    qr[i] = q[b, h, i]
            mx = -np.inf
            for t in range(t0, total):
                d = _F32(0)
                for i in range(hd):
                    d += qr[i] * kg[t, i]
                d *= scale
                if softcap > 0:
                    d = softcap * math.tanh(d / softcap)
                sc[t] = d
                mx = max(mx, d)
            tot = _F32(0)
            for t in range(t0, total):
                e = math.exp(sc[t] - mx)
                sc[t] = e
                tot += e
            for i in range(hd):
                o[i] = 0
            for t in range(t0, total):
                p = sc[t] / tot
                for i in range(hd):
                    o[i] += p * vg[t, i]
            for i in range(hd):
                out[b, h, i] = o[i]


_SLOT: list[Any] = []


def _build(numba: Any) -> Any:
    globals()["_rot"] = numba.njit(error_model="numpy")(_rot)
    fn = jit._njit(numba, _decode, fastmath={"reassoc", "contract"})
    z = np.zeros((1, 1, 2), _F32)
    p = np.zeros((1, 1, 1, 2), _F32)
    c = np.ones((2, 1), _F32)
    fn(z, z, z, p, p, np.zeros(1, np.int64), c, c, True, False, _F32(1), _F32(0), -1, z,
       np.zeros((1, 1, 1, 2), _F32), np.zeros((1, 1, 1, 2), _F32), 0, 1)
    return fn


def kernel() -> Any:
    """The compiled step, or None (numba missing or off: the NumPy path runs)."""
    return jit.compile_once(_SLOT, _build)


def decode(q: np.ndarray, k: np.ndarray, v: np.ndarray, past_k: np.ndarray | None,
           past_v: np.ndarray | None, past_len: np.ndarray, p_out: int, cos: np.ndarray | None,
           sin: np.ndarray | None, interleaved: bool, scale: float, softcap: float,
           window: int, pool: ThreadPool = SERIAL
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(out (B, N, H), present_k, present_v) of one new position per batch (the (batch,
    KV head) items split over ``pool``), all float32
    and already validated by the caller (shapes, past lengths within the buffers, the
    caches covering position past_len); None where the kernel is missing."""
    fn = kernel()
    if fn is None:
        return None
    b, n_kv, hd = k.shape
    if past_k is None:
        past_k = past_v = np.zeros((b, n_kv, 0, hd), _F32)
    do_rot = cos is not None
    if not do_rot:
        cos = sin = np.ones((1, 1), _F32)
    out = np.empty(q.shape, _F32)
    pk = np.empty((b, n_kv, p_out, hd), _F32)
    pv = np.empty((b, n_kv, p_out, hd), _F32)
    args = (np.ascontiguousarray(q, _F32), np.ascontiguousarray(k, _F32),
            np.ascontiguousarray(v, _F32), np.ascontiguousarray(past_k, _F32),
            np.ascontiguousarray(past_v, _F32), np.ascontiguousarray(past_len, np.int64),
            np.ascontiguousarray(cos, _F32), np.ascontiguousarray(sin, _F32), do_rot,
            bool(interleaved), _F32(scale), _F32(softcap), int(window), out, pk, pv)
    work = b * q.shape[1] * p_out * hd
    pool.for_ranges(fn, args, b * n_kv, work >= (1 << 20))
    return out, pk, pv
