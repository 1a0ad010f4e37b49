"""The NumPy convolution algorithms the Conv kernel (nn/conv.py) falls back to where no
compiled kernel applies (weights computed at run time, 3-D, other dtypes, no numba):

* 1x1: one matmul on the reshaped input (no copy at stride 1 without padding).
* depthwise (one input channel per group): k^d multiply-adds. The padded input is split
  into stride phases so that every kernel offset reads one flat, contiguous window; the
  adds run over long rows (channels-first, in cache-sized channel blocks) or, for small
  images with many channels, over channels (channels-last). Far faster than im2col with
  batched matmuls.
* general and grouped: im2col (one strided copy per kernel offset into a preallocated
  buffer) and one BLAS matmul (batched over groups), built per image in cache-sized bands
  of output rows, the product written straight into the output.

The epilogue (bias, FusedConv's residual Z, the activation) runs on each image's band right
after its product, in one compiled pass (nn/conv_jit.py) where numba is available.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from onnxrt.framework.parallel import SERIAL, ThreadPool
from onnxrt.providers.cpu.nn import pad_spatial, resolve_pads

__all__ = ["conv_nd"]

# im2col is built in bands of output rows of about this many bytes: a band that stays in
# cache makes the copy and the matmul that reads it faster (3x on VGG-sized layers), as long
# as a band keeps at least _MIN_COLS columns for BLAS to be efficient
_COLS_LIMIT = 2 << 20
_MIN_COLS = 512
_DW_BLOCK = 512 << 10       # bytes of one depthwise accumulator block (fits L2 with tmp)
_DW_FORCE = ""              # tests: "cf" or "cl" forces the depthwise layout


class _Geometry:
    """Padding and output size for one input spatial shape (cached per shape)."""

    __slots__ = ("begin", "end", "out", "no_pad", "taps")

    def __init__(self, spatial: tuple[int, ...], kernel: tuple[int, ...], strides: list[int],
                 dilations: list[int], pads: list[int] | None, auto_pad: str) -> None:
        self.begin, self.end, _, self.out = resolve_pads(spatial, kernel, strides, dilations,
                                                         pads, auto_pad)
        self.no_pad = not any(self.begin) and not any(self.end)
        self.taps: np.ndarray | None = None     # 1-D tiny path: (K, L) column indices


class _Packed:
    """A weight re-laid out for its algorithm."""

    __slots__ = ("algo", "w", "M", "Cg", "kernel", "mult")

    def __init__(self, w: np.ndarray, group: int, cdt: np.dtype) -> None:
        self.M, self.Cg = int(w.shape[0]), int(w.shape[1])
        self.kernel = tuple(int(k) for k in w.shape[2:])
        if self.M % group:
            raise ValueError(f"output channels {self.M} not divisible by group {group}")
        kprod = int(np.prod(self.kernel)) if self.kernel else 1
        w = np.asarray(w).astype(cdt, copy=False)
        self.mult = self.M // group
        if group > 1 and self.Cg == 1:
            self.algo = "depthwise"
            # (C, mult, kprod): channel c feeds outputs c*mult .. c*mult+mult-1
            self.w = np.ascontiguousarray(w.reshape(group, self.mult, kprod))
        elif group == 1:
            self.algo = "gemm"
            self.w = np.ascontiguousarray(w.reshape(self.M, self.Cg * kprod))
        else:
            self.algo = "grouped"
            self.w = np.ascontiguousarray(w.reshape(group, self.M // group, self.Cg * kprod))


def _window(off: tuple[int, ...], dil: list[int], strides: list[int], out: list[int]
            ) -> tuple[slice, ...]:
    return tuple(slice(o * d, o * d + s * (n - 1) + 1, s)
                 for o, d, s, n in zip(off, dil, strides, out))


def _im2col(xp: np.ndarray, kernel: tuple[int, ...], dil: list[int], strides: list[int],
            out: list[int]) -> np.ndarray:
    """(N, C, *kernel, *out) columns of the padded input."""
    n, c = xp.shape[:2]
    cols = np.empty((n, c) + kernel + tuple(out), dtype=xp.dtype)
    for off in itertools.product(*(range(k) for k in kernel)):
        cols[(slice(None), slice(None)) + off] = \
            xp[(slice(None), slice(None)) + _window(off, dil, strides, out)]
    return cols


def _phases(xp: np.ndarray, kernel: tuple[int, ...], dil: list[int], strides: list[int],
            out: list[int]) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Split the padded input into stride phases so every kernel offset reads a stride-1
    window of one phase: (phases, N*C, *Q) plus, per offset, (phase, flat shift)."""
    n, c = xp.shape[:2]
    nd = len(out)
    qmax = [((k - 1) * d) // s for k, d, s in zip(kernel, dil, strides)]
    q = [o + m for o, m in zip(out, qmax)]          # per-phase extent each offset may read
    need = [qi * s for qi, s in zip(q, strides)]
    if list(xp.shape[2:]) != need:
        grown = np.zeros((n, c) + tuple(need), dtype=xp.dtype)
        src = tuple(slice(0, min(a, b)) for a, b in zip(xp.shape[2:], need))
        grown[(slice(None), slice(None)) + src] = xp[(slice(None), slice(None)) + src]
        xp = grown
    if all(s == 1 for s in strides):
        ph = xp.reshape((1, n * c) + tuple(q))
    else:
        split = xp.reshape((n * c,) + tuple(v for qi, s in zip(q, strides) for v in (qi, s)))
        order = tuple(2 + 2 * i for i in range(nd)) + (0,) + tuple(1 + 2 * i for i in range(nd))
        ph = np.ascontiguousarray(split.transpose(order)).reshape(
            (int(np.prod(strides)), n * c) + tuple(q))
    pitch = [int(np.prod(q[i + 1:])) for i in range(nd)]
    taps = []
    for off in itertools.product(*(range(k) for k in kernel)):
        phase, shift = 0, 0
        for i in range(nd):
            r = off[i] * dil[i]
            phase = phase * strides[i] + r % strides[i]
            shift += (r // strides[i]) * pitch[i]
        taps.append((phase, shift))
    return ph.reshape(ph.shape[0], n * c, -1), taps


def _taps_channels_first(ph: np.ndarray, w: np.ndarray, taps: list[tuple[int, int]], L: int,
                         full: int) -> np.ndarray:
    """Many pixels per channel: one long row per channel, channel blocks kept in cache."""
    rows = ph.shape[1]
    acc = np.empty((rows, full), dtype=ph.dtype)
    cb = max(1, min(rows, _DW_BLOCK // max(L * ph.dtype.itemsize, 1)))
    tmp = np.empty((cb, L), dtype=ph.dtype)
    for r0 in range(0, rows, cb):
        r1 = min(rows, r0 + cb)
        a = acc[r0:r1, :L]
        t = tmp[:r1 - r0]
        wb = w[r0:r1]
        for k, (phase, shift) in enumerate(taps):
            src = ph[phase, r0:r1, shift:shift + L]
            if k == 0:
                np.multiply(src, wb[:, k:k + 1], out=a)
            else:
                np.multiply(src, wb[:, k:k + 1], out=t)
                a += t
    return acc


def _taps_channels_last(ph: np.ndarray, w: np.ndarray, taps: list[tuple[int, int]], L: int,
                        full: int) -> np.ndarray:
    """Few pixels, many channels (late layers): pixels x channels so inner loops run over
    the channels instead of a handful of pixels."""
    rows = ph.shape[1]
    phl = np.ascontiguousarray(ph.transpose(0, 2, 1))
    wt = np.ascontiguousarray(w.T)
    acc = np.empty((full, rows), dtype=ph.dtype)
    a = acc[:L]
    t = np.empty((L, rows), dtype=ph.dtype)
    for k, (phase, shift) in enumerate(taps):
        src = phl[phase, shift:shift + L]
        if k == 0:
            np.multiply(src, wt[k], out=a)
        else:
            np.multiply(src, wt[k], out=t)
            a += t
    return acc.T


def _depthwise(xp: np.ndarray, pk: _Packed, dil: list[int], strides: list[int],
               out: list[int]) -> np.ndarray:
    """k^d multiply-adds over long contiguous rows (one row per image channel).

    Each offset reads a flat window of its phase; outputs are computed over whole phase
    rows (a few wasted columns at each row end) and cropped at the end.
    """
    n, c = xp.shape[:2]
    mult = pk.mult
    if mult > 1:
        xp = np.repeat(xp, mult, axis=1)
    rows = n * c * mult
    w = pk.w.reshape(c * mult, -1)
    if n > 1:
        w = np.tile(w, (n, 1))
    ph, taps = _phases(xp, pk.kernel, dil, strides, out)
    q = [o + ((k - 1) * d) // s for o, k, d, s in zip(out, pk.kernel, dil, strides)]
    pitch0 = int(np.prod(q[1:]))
    L = sum((o - 1) * int(np.prod(q[i + 1:])) for i, o in enumerate(out)) + 1
    # channels-last wins (measured) on small stride-1 images with many channels; elsewhere
    # its two transposes cost more than the short rows of channels-first
    if (_DW_FORCE == "cl") if _DW_FORCE else (ph.shape[0] == 1 and L <= 1024 and rows >= 64):
        acc = _taps_channels_last(ph, w, taps, L, out[0] * pitch0)
    else:
        acc = _taps_channels_first(ph, w, taps, L, out[0] * pitch0)
    y = acc.reshape((n, c * mult, out[0]) + tuple(q[1:]))
    return y[(Ellipsis,) + tuple(slice(0, o) for o in out[1:])]


class _Epilogue:
    """What follows the product, applied in place on each image's columns c0:c1 of the
    output (N, M, L) right after their product, while in cache: + bias per channel, + Z
    (FusedConv's residual, same shape as the output), then an in-place activation. One pass
    through the compiled kernel (nn/conv_jit.py) for float32/float64 and Relu, LeakyRelu, Clip or
    none (measured: the epilogue of a 64-channel 55x55 1x1 conv 0.9 -> 0.35 ms at batch 8),
    else NumPy's in-place ufuncs on the slice."""

    __slots__ = ("bias", "z", "act", "fast", "args")

    def __init__(self, bias: np.ndarray | None, z: np.ndarray | None, act: Any,
                 fast: Any, kind: int, alpha: Any, beta: Any, m: int, dt: np.dtype) -> None:
        self.bias = None if bias is None else bias.reshape(-1, 1)
        self.z = z
        self.act = act
        self.fast = fast
        if fast is not None:
            b = np.zeros(m, dt) if bias is None else np.ascontiguousarray(bias, dtype=dt)
            self.args = (b, z if z is not None else np.zeros((1, 1, 1), dt), z is not None,
                         kind, dt.type(alpha), dt.type(beta))

    def __call__(self, y: np.ndarray, i: int, c0: int, c1: int) -> None:
        if self.fast is not None:
            self.fast(y, i, c0, c1, 0, y.shape[1], *self.args)
            return
        y2 = y[i, :, c0:c1]
        if self.bias is not None:
            y2 += self.bias
        if self.z is not None:
            y2 += self.z[i, :, c0:c1]
        if self.act is not None:
            self.act(y2)


def _gemm_cols(xp: np.ndarray, pk: _Packed, group: int, dil: list[int], strides: list[int],
               out: list[int], epi: _Epilogue | None, pool: ThreadPool = SERIAL) -> np.ndarray:
    n, c = xp.shape[:2]
    kprod = int(np.prod(pk.kernel)) if pk.kernel else 1
    L = int(np.prod(out))
    M = pk.M
    if not out:
        cols = _im2col(xp, pk.kernel, dil, strides, out)
        return _apply(pk, group, cols.reshape(n, c * kprod, L), n, epi,
                      pool=pool).reshape((n, M))
    row_len = L // max(out[0], 1)
    # bands of one image at a time: a batch shares the cache budget no more, so each
    # product keeps as many columns as at batch 1 (measured faster at batch 8)
    row_bytes = c * kprod * row_len * xp.dtype.itemsize
    band = min(out[0], max(_COLS_LIMIT // max(row_bytes, 1), -(-_MIN_COLS // max(row_len, 1)),
                           1))
    y = np.empty((n, M, L), dtype=xp.dtype)

    def image(i: int) -> None:
        for r0 in range(0, out[0], band):
            r1 = min(out[0], r0 + band)
            sub = xp[i:i + 1, :, r0 * strides[0]:
                     (r1 - 1) * strides[0] + (pk.kernel[0] - 1) * dil[0] + 1]
            bo = [r1 - r0] + list(out[1:])
            cols = _im2col(sub, pk.kernel, dil, strides, bo)
            # the product goes straight into the output's band (a strided view BLAS writes
            # through), the epilogue right after it
            _apply(pk, group, cols.reshape(1, c * kprod, -1), 1, epi, y, r0 * row_len,
                   r1 * row_len, i)

    pool.parallel_for(n, image)
    return y.reshape((n, M) + tuple(out))


def _apply(pk: _Packed, group: int, cols: np.ndarray, n: int, epi: _Epilogue | None = None,
           y: np.ndarray | None = None, c0: int = 0, c1: int = 0, i0: int = 0,
           pool: ThreadPool = SERIAL) -> np.ndarray:
    """Weights times columns (N, C*kprod, L) -> (N, M, L), or into columns c0:c1 of images
    i0.. of ``y`` (N_full, M, L_full); the epilogue runs on each image's slice right after
    its product. Images are spread over the session's threads (``pool``)."""
    # one BLAS call per image: numpy's matmul of a matrix against a stack (broadcast
    # weights) is ~3.5x slower than this loop at batch 8
    L = cols.shape[-1]
    if y is None:
        y = np.empty((n, pk.M, L), dtype=np.result_type(pk.w, cols))
        c0, c1 = 0, L
    if pk.algo == "gemm":
        def image(i: int) -> None:
            np.matmul(pk.w, cols[i], out=y[i0 + i, :, c0:c1])
            if epi is not None:
                epi(y, i0 + i, c0, c1)
    else:
        c4 = cols.reshape(n, group, -1, L)

        def image(i: int) -> None:
            np.matmul(pk.w, c4[i], out=y[i0 + i, :, c0:c1].reshape(group, -1, L))
            if epi is not None:
                epi(y, i0 + i, c0, c1)

    pool.parallel_for(n, image)
    return y


def conv_nd(x: np.ndarray, pk: _Packed, group: int, strides: list[int], dil: list[int],
            geo: _Geometry, epi: _Epilogue | None = None,
            pool: ThreadPool = SERIAL) -> tuple[np.ndarray, bool]:
    """The convolution of ``x`` (already in the compute dtype) and whether ``epi`` was
    applied (the gemm paths apply it per slice; the depthwise path leaves it to the caller)."""
    n, c = x.shape[:2]
    if c != pk.Cg * group:
        raise ValueError(f"input has {c} channels, weight expects {pk.Cg * group} "
                         f"({pk.Cg} per group x group {group})")
    out = geo.out
    ones = all(k == 1 for k in pk.kernel)
    if ones and pk.algo != "depthwise":
        xs = x if geo.no_pad else pad_spatial(x, geo.begin, geo.end)
        if any(s != 1 for s in strides):
            xs = xs[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides)]
        xs = xs[(slice(None), slice(None)) + tuple(slice(0, o) for o in out)]
        y = _apply(pk, group, xs.reshape(n, c, -1), n, epi, pool=pool)
        return y.reshape((n, pk.M) + tuple(out)), True
    xp = x if geo.no_pad else pad_spatial(x, geo.begin, geo.end)
    if pk.algo == "depthwise":
        return _depthwise(xp, pk, dil, strides, out), False
    return _gemm_cols(xp, pk, group, dil, strides, out, epi, pool), True
