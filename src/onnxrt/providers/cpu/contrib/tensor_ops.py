"""com.microsoft tensor ops: the older doubles of ONNX ops that models still carry
(ExpandDims, Range, Pad, Unique, GatherND, Trilu), and the small numeric ops of
onnxruntime's CPU provider (Inverse, CDist, MurmurHash3, UnfoldTensor, DynamicTimeWarping,
SampleOp)."""

from __future__ import annotations

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.tensor.indexing import gather_nd
from onnxrt.providers.cpu.tensor.layout import pad_array, trilu

MS = "com.microsoft"


def _one(v: np.ndarray, what: str, op: str) -> np.ndarray:
    a = np.asarray(v)
    if a.size != 1:
        raise ValueError(f"{op}: {what} must be a scalar or a 1-element tensor, got shape "
                         f"{a.shape}")
    return a.reshape(())


@CPU.kernel("SampleOp", since=1, domain=MS)
def sample_op(x):
    """onnxruntime's sample kernel: a copy of X."""
    return np.array(x)


@CPU.kernel("ExpandDims", since=1, domain=MS, host_inputs=(1,))
def expand_dims(x, axis):
    """X with a dimension of 1 inserted at ``axis`` (in [-rank - 1, rank])."""
    ax = int(_one(axis, "axis", "ExpandDims"))
    r = np.ndim(x)
    if not -r - 1 <= ax <= r:
        raise ValueError(f"ExpandDims: axis {ax} out of range [{-r - 1}, {r}] for rank {r}")
    return np.expand_dims(np.asarray(x), ax if ax >= 0 else ax + r + 1)


@CPU.kernel("Range", since=1, domain=MS, host_inputs=(0, 1, 2))
def range_ms(start, limit, delta=None):
    """start, start + delta, ... up to limit (exclusive); delta defaults to 1."""
    s = _one(start, "start", "Range")
    lim = _one(limit, "limit", "Range")
    d = _one(delta, "delta", "Range") if delta is not None else np.ones((), s.dtype)
    if lim.dtype != s.dtype or d.dtype != s.dtype:
        raise TypeError(f"Range: start, limit and delta must share a type, got {s.dtype}, "
                        f"{lim.dtype}, {d.dtype}")
    if d == 0:
        raise ValueError("Range: delta must not be 0")
    if s.dtype.kind == "f":
        n = max(int(np.ceil((float(lim) - float(s)) / float(d))), 0)
        return (s + np.arange(n, dtype=s.dtype) * d).astype(s.dtype)
    n = max(-(-(int(lim) - int(s)) // int(d)), 0)
    return (int(s) + np.arange(n, dtype=np.int64) * int(d)).astype(s.dtype)


@CPU.kernel("Pad", since=1, domain=MS, host_inputs=(1, 2))
def pad_ms(data, pads, value=None, *, mode="constant"):
    """Pad with ``pads`` given as an input: [2 * rank] or [1, 2 * rank] (begins, then ends)."""
    p = np.asarray(pads).astype(np.int64)
    r = np.ndim(data)
    if p.ndim == 2 and p.shape[0] == 1:
        p = p[0]
    if p.ndim != 1 or p.shape[0] != 2 * r:
        raise ValueError(f"Pad: pads must have shape [{2 * r}] or [1, {2 * r}] for an input "
                         f"of rank {r}, got {np.shape(pads)}")
    if mode not in ("constant", "reflect", "edge"):
        raise ValueError(f"Pad: mode {mode!r} is not one of constant, reflect, edge")
    v = 0.0 if value is None else _one(value, "value", "Pad").item()
    return pad_array(np.asarray(data), [int(i) for i in p], mode, v)


@CPU.kernel("Unique", since=1, domain=MS)
def unique_ms(x):
    """Unique values of a 1-D tensor in order of first occurrence, each input's index into
    them, and their counts."""
    x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"Unique: x must be 1-D, got shape {x.shape}")
    _, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                          return_counts=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return (x[first[order]], rank[inverse.reshape(-1)].astype(np.int64),
            counts[order].astype(np.int64))


@CPU.kernel("GatherND", since=1, domain=MS)
def gather_nd_ms(data, indices):
    """ONNX GatherND without batch dimensions (int32 or int64 indices)."""
    if np.asarray(indices).dtype not in (np.int32, np.int64):
        raise TypeError(f"GatherND: indices must be int32 or int64, got "
                        f"{np.asarray(indices).dtype}")
    return gather_nd(data, np.asarray(indices).astype(np.int64), batch_dims=0)


@CPU.kernel("Trilu", since=1, domain=MS, host_inputs=(1,))
def trilu_ms(x, k=None, *, upper=1):
    return trilu(x, k, upper=upper)


@CPU.kernel("Inverse", since=1, domain=MS)
def inverse(x):
    """The inverse of each matrix in a batch [*, M, M] (float16 computed in float32)."""
    x = np.asarray(x)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"Inverse: X must be a batch of square matrices, got shape {x.shape}")
    if x.dtype == np.float16:
        return np.linalg.inv(x.astype(np.float32)).astype(np.float16)
    return np.linalg.inv(x)


@CPU.kernel("CDist", since=1, domain=MS)
def cdist(a, b, *, metric="sqeuclidean"):
    """Pairwise distances between the rows of A (M, N) and B (K, N): ``sqeuclidean`` or
    ``euclidean``, the two metrics onnxruntime's CPU kernel has."""
    if metric not in ("sqeuclidean", "euclidean"):
        raise ValueError(f"CDist: metric {metric!r} is not supported (sqeuclidean, "
                         f"euclidean are)")
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"CDist: A (M, N) and B (K, N) expected, got {a.shape} and {b.shape}")
    d = (a * a).sum(axis=1)[:, None] + (b * b).sum(axis=1)[None, :] - 2 * (a @ b.T)
    np.maximum(d, 0, out=d)
    return np.sqrt(d) if metric == "euclidean" else d


# -- MurmurHash3 (x86, 32 bits) ------------------------------------------------------------

_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _fmix(h: np.ndarray) -> np.ndarray:
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h


def _mix_block(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    k = k * _C1
    k = _rotl(k, 15)
    k *= _C2
    h ^= k
    h = _rotl(h, 13)
    return h * np.uint32(5) + np.uint32(0xE6546B64)


def murmur3_words(words: np.ndarray, seed: int) -> np.ndarray:
    """MurmurHash3_x86_32 of keys made of whole 4-byte little-endian words, one key per
    row of ``words`` (uint32, shape (n, w)), all rows at once."""
    with np.errstate(over="ignore"):
        h = np.full(words.shape[0], seed, np.uint32)
        for j in range(words.shape[1]):
            h = _mix_block(h, words[:, j])
        h ^= np.uint32(4 * words.shape[1])
        return _fmix(h)


def murmur3_bytes(data: bytes, seed: int) -> int:
    """MurmurHash3_x86_32 of one byte string (tail bytes folded in as the algorithm says)."""
    n = len(data)
    nb = n // 4
    with np.errstate(over="ignore"):
        h = np.array([seed], np.uint32)
        if nb:
            blocks = np.frombuffer(data[:4 * nb], dtype="<u4")
            for k in blocks:
                h = _mix_block(h, np.array([k], np.uint32))
        tail = data[4 * nb:]
        if tail:
            k = np.array([int.from_bytes(tail, "little")], np.uint32)
            k *= _C1
            k = _rotl(k, 15)
            k *= _C2
            h ^= k
        h ^= np.uint32(n)
        return int(_fmix(h)[0])


@CPU.kernel("MurmurHash3", since=1, domain=MS)
def murmur_hash3(x, *, seed=0, positive=1):
    """The 32-bit MurmurHash3 of each element: of its raw little-endian bytes (4- and 8-byte
    numbers) or of its UTF-8 bytes (strings); uint32 output when ``positive``, else int32."""
    x = np.asarray(x)
    seed = int(seed) & 0xFFFFFFFF
    out_dt = np.uint32 if int(positive) else np.int32
    if x.dtype == object or x.dtype.kind in "US":
        flat = [s.encode("utf-8") if isinstance(s, str) else bytes(s) for s in x.reshape(-1)]
        h = np.array([murmur3_bytes(b, seed) for b in flat], np.uint32)
        return h.view(out_dt).reshape(x.shape)
    if x.dtype.itemsize not in (4, 8) or x.dtype.kind not in "iuf":
        raise TypeError(f"MurmurHash3: X has type {x.dtype} (int32, uint32, int64, uint64, "
                        f"float, double or string expected)")
    words = np.ascontiguousarray(x.reshape(-1)).astype(x.dtype.newbyteorder("<")) \
        .view("<u4").astype(np.uint32).reshape(x.size, -1)
    return murmur3_words(words, seed).view(out_dt).reshape(x.shape)


@CPU.kernel("UnfoldTensor", since=1, domain=MS)
def unfold_tensor(x, *, size, dim=-1, step=1):
    """All slices of length ``size`` along ``dim``, ``step`` apart: that axis becomes the
    slice count and a new last axis of length ``size`` holds each slice."""
    x = np.asarray(x)
    d = int(dim) + x.ndim if int(dim) < 0 else int(dim)
    size, step = int(size), int(step)
    if not 0 <= d < x.ndim:
        raise ValueError(f"UnfoldTensor: dim {dim} out of range for rank {x.ndim}")
    if size <= 0 or step <= 0 or size > x.shape[d]:
        raise ValueError(f"UnfoldTensor: size {size} and step {step} must be positive, size "
                         f"at most the dimension ({x.shape[d]})")
    win = np.lib.stride_tricks.sliding_window_view(x, size, axis=d)
    sl = [slice(None)] * win.ndim
    sl[d] = slice(None, None, step)
    return np.ascontiguousarray(win[tuple(sl)])


@CPU.kernel("DynamicTimeWarping", since=1, domain=MS)
def dynamic_time_warping(x):
    """The cheapest monotone path from (0, 0) through an M x N cost matrix, as [2, L]
    int32 (rows, then columns). Ties prefer the diagonal only when it is strictly cheapest,
    then a step down, else a step right; the path is traced back until a border is hit."""
    x = np.asarray(x, np.float32)
    if not (x.ndim == 2 or (x.ndim == 3 and x.shape[0] == 1)):
        raise ValueError(f"DynamicTimeWarping: input must be M x N or 1 x M x N, got "
                         f"{x.shape}")
    c = x.reshape(x.shape[-2:])
    rows, cols = c.shape
    cost = np.full((rows + 1, cols + 1), np.inf, np.float32)
    cost[0, 0] = 0
    trace = np.full((rows + 1, cols + 1), -1, np.int8)
    # anti-diagonal order is not needed: column by column, each cell reads finished cells
    for j in range(1, cols + 1):
        for i in range(1, rows + 1):
            c0, c1, c2 = cost[i - 1, j - 1], cost[i - 1, j], cost[i, j - 1]
            if c0 < c1 and c0 < c2:
                best, t = c0, 0
            elif c1 < c0 and c1 < c2:
                best, t = c1, 1
            else:
                best, t = c2, 2
            cost[i, j] = best + c[i - 1, j - 1]
            trace[i, j] = t
    i, j = rows, cols
    path = []
    while i > 0 and j > 0:
        path.append((i - 1, j - 1))
        t = trace[i, j]
        if t == 0:
            i, j = i - 1, j - 1
        elif t == 1:
            i -= 1
        else:
            j -= 1
    path.reverse()
    return np.array(path, np.int32).reshape(-1, 2).T.copy()


@CPU.kernel("ShrunkenGather", since=1, domain=MS)
def shrunken_gather(data, indices, *, axis=0):
    """Gather with 1-D indices no longer than the gathered axis (what onnxruntime's training
    builds write when they shrink a gather; its inference builds do not register it)."""
    data = np.asarray(data)
    idx = np.asarray(indices)
    if data.ndim < 1 or idx.ndim != 1:
        raise ValueError(f"ShrunkenGather: data of rank >= 1 and 1-D indices expected, got "
                         f"{data.shape} and {idx.shape}")
    ax = int(axis) + data.ndim if int(axis) < 0 else int(axis)
    dim = data.shape[ax]
    if idx.size > dim:
        raise ValueError(f"ShrunkenGather: {idx.size} indices for a dimension of {dim}")
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        raise IndexError(f"ShrunkenGather: indices must be in [{-dim}, {dim - 1}]")
    return np.take(data, np.where(idx < 0, idx + dim, idx).astype(np.int64), axis=ax)
