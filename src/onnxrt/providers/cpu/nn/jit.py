"""Compiled (numba) loop nests for the kernels NumPy cannot make fast: dense, grouped and
depthwise Conv, MaxPool/AveragePool over 1-D and 2-D images, and Conv's epilogue.

numba is a dependency, yet the code runs without it: nothing here imports it until a
session asks for a compiled kernel (importing numba costs 0.3-0.6 s, as much as importing
onnxrt). Kernels are chosen in the class kernels' ``__init__`` (``gemm_conv_kernel``,
``conv_kernel`` and ``pool_kernel`` return None when numba is
missing, disabled with ``ONNXRT_JIT=0``, or the node is not one where a compiled kernel won
by measurement), and they are compiled or loaded from numba's on-disk cache there, so a run
never compiles. The cache lives beside this file, or in the user's cache dir when the
package dir is read-only (numba's own fallback; ``NUMBA_CACHE_DIR`` overrides both); with
neither writable the kernels compile once per process.

Results match the NumPy path: depthwise conv and max pooling bit for bit (the same products
summed in the same order); average pooling and the BLAS-based convs within float32 rounding
(other summation orders).

Threads: every kernel is compiled ``nogil`` and takes a range of planes (or images) as its
last two arguments; a big enough call is split into one contiguous range per thread of the
session (the ThreadPool of framework/parallel.py its run context gives the kernel,
``intra_op_num_threads``). numba's own ``prange`` lost here: its
OpenMP layer's spinning threads fight the other work on a 2-core machine (median 7-17x
slower than serial), its workqueue layer was at parity and must not be entered from two
threads at once.
"""

from __future__ import annotations

import importlib.util
import math
import os
import threading
from typing import Any, Callable

import numpy as np

from onnxrt.framework import hotpool, warmup
from onnxrt.framework.blas_threads import blas_threads_unused
from onnxrt.framework.parallel import SERIAL, ThreadPool, split
from onnxrt.ir.dtypes import np_dtype
from onnxrt.providers.cpu import blas, vmath

__all__ = ["available", "enabled", "set_enabled", "input_dtype", "conv_kernel", "pool_kernel",
           "epilogue_kernel", "gemm_conv_kernel", "compile_once", "EPI_KINDS", "wait_compiled"]

_HAVE = importlib.util.find_spec("numba") is not None
_ENABLED = [_HAVE and os.environ.get("ONNXRT_JIT", "1") != "0"]
_LOAD_LOCK = threading.Lock()
_K: dict[str, Any] = {}             # name -> dispatcher, built once
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
# below this many multiply-adds a kernel runs on one thread: waking another costs more
# (about 40 us per wake on this machine)
_PAR_MIN_WORK = 1 << 19
# grouped conv with several input channels per group stays on the NumPy path's batched
# matmuls (measured: 4 channels per group at 56x56, 1.5x slower compiled)
_MAX_CG = 1
# depthwise outputs narrower than this run channels-last (_dwcl_image): per-plane loops
# are a few pixels long there (measured, one thread: 7 wide 0.85x the planar loops, 14
# wide 1.3-1.8x, 28 wide 2.7x)
_MIN_OUT_W = 10


def available() -> bool:
    """numba is installed (it is imported only when a session needs a compiled kernel)."""
    return _HAVE


def enabled() -> bool:
    """Compiled kernels may be chosen now: numba there, not turned off, and its cache
    filled or compiling allowed here (framework/warmup.py: on a new machine the kernels
    compile in a child process while sessions take the NumPy paths)."""
    return _ENABLED[0] and warmup.ready()


def wait_compiled(timeout: float | None = None) -> bool:
    """Block until the compiled kernels are ready (benchmarks before timing); False where
    they will not be (numba missing, turned off, the compile failed) or on timeout."""
    return _ENABLED[0] and warmup.wait(timeout)


def set_enabled(on: bool) -> None:
    """Choose the compiled paths for sessions created from now on (tests, benchmarks)."""
    _ENABLED[0] = bool(on) and _HAVE


# -- the loop nests (plain Python, compiled by _load) --------------------------------------
#
# One plane at a time, the NumPy depthwise path's algorithm without its temporaries: the
# padded plane is split into its stride phases, flattened, so that every kernel tap is one
# long contiguous multiply-add (or max) loop over all output rows at once; the few columns
# computed past each row's end are dropped when the plane is written out. Loops index flat
# arrays with unsigned offsets (or slices from 0 with range variables): numba then drops
# its negative-index check and LLVM vectorizes them; views and integer divisions inside
# row loops cost more than the short rows they serve.

def _fill(xf, base, hh, ww, buf, sh, sw, ph, pw, qh_n, qw_n, val):
    """buf (flat, sh*sw planes of QH x QW) <- the stride phases of the plane at ``base`` of
    the flat input xf (H, W), padded with ``val``:
    buf[(rh*sw + rw)*QH*QW + qh*QW + qw] = x[qh*sh + rh - ph, qw*sw + rw - pw]."""
    pl = qh_n * qw_n
    for rh in range(sh):
        for rw in range(sw):
            # the columns qw whose input column qw*sw + off lies in 0..W-1
            off = rw - pw
            lo = 0 if off >= 0 else (sw - 1 - off) // sw
            lo = min(lo, qw_n)
            hi = (ww - 1 - off) // sw + 1 if ww - 1 - off >= 0 else 0
            hi = max(min(hi, qw_n), lo)
            usw = np.uint64(sw)
            for qh in range(qh_n):
                d0 = np.uint64((rh * sw + rw) * pl + qh * qw_n)
                ih = qh * sh + rh - ph
                if ih < 0 or ih >= hh:
                    for j in range(np.uint64(qw_n)):
                        buf[d0 + j] = val
                    continue
                for j in range(np.uint64(lo)):
                    buf[d0 + j] = val
                s0 = np.uint64(base + ih * ww + lo * sw + off)
                dl = d0 + np.uint64(lo)
                if sw == 1:
                    for j in range(np.uint64(hi - lo)):
                        buf[dl + j] = xf[s0 + j]
                else:
                    for j in range(np.uint64(hi - lo)):
                        buf[dl + j] = xf[s0 + j * usw]
                for j in range(np.uint64(hi), np.uint64(qw_n)):
                    buf[d0 + j] = val


def _conv_planes(x, w, b, out, mg, sh, sw, dh, dw, ph, pw, lo, hi):
    """Output planes lo..hi-1 (p = n * M + m) of a depthwise conv (one input channel per
    group, ``mg`` outputs per channel): x (N, C, H, W), w (M, 1, KH, KW). Each plane's
    input is padded and split into its stride phases (_fill), flattened, so that every
    kernel tap is one long contiguous multiply-add over all output rows at once (the
    columns computed past each row's end are dropped when the plane is written out); taps
    go a kernel row to a pass where it has three or five. Flat unsigned indices, tap offsets
    computed once per call: views and integer divisions per row made the earlier loops
    3x slower (shufflenet's 8x136x28x28 3x3: 1.88 -> 0.72 ms on one thread). Taps are
    summed in the NumPy path's order, bias last: bit-identical results.

    Preconditions: check_window's (JitConv.__call__), out (N, M, OH, OW) with M = C * mg,
    w (M, 1, KH, KW), b (M,), 0 <= lo <= hi <= N * M, OH and OW >= 1."""
    c_n, hh, ww = x.shape[1], x.shape[2], x.shape[3]
    m_all = out.shape[1]
    oh_n, ow_n = out.shape[2], out.shape[3]
    kh_n, kw_n = w.shape[2], w.shape[3]
    if (kh_n == 3 and kw_n == 3 and sh == 1 and sw == 1 and dh == 1 and dw == 1 and ph == 1
            and pw == 1 and oh_n == hh and ow_n == ww and hh >= 3 and ww >= _DW3_MIN_W):
        xf = x.reshape(-1)
        of = out.reshape(-1)
        wf = w.reshape(-1)
        for p in range(lo, hi):
            n = p // m_all
            m = p - n * m_all
            _dw3_plane(xf, of, wf, b[m], (n * c_n + m // mg) * hh * ww, p * hh * ww, m * 9,
                       hh, ww)
        return
    qh_n = oh_n + ((kh_n - 1) * dh) // sh
    qw_n = ow_n + ((kw_n - 1) * dw) // sw
    pl = qh_n * qw_n
    taps = kh_n * kw_n
    # tap (kh, kw) reads phase (rh % sh) * sw + rw % sw, shifted (rh // sh) rows and
    # rw // sw columns (rh = kh * dh, rw = kw * dw)
    toff = np.empty(taps, np.uint64)
    for kh in range(kh_n):
        for kw in range(kw_n):
            rh = kh * dh
            rw = kw * dw
            toff[kh * kw_n + kw] = ((rh % sh) * sw + rw % sw) * pl + (rh // sh) * qw_n + \
                rw // sw
    buf = np.empty(sh * sw * pl, dtype=x.dtype)
    acc = np.empty(pl, dtype=x.dtype)
    xf = x.reshape(-1)
    of = out.reshape(-1)
    wf = w.reshape(-1)
    zero = x.dtype.type(0)
    length = np.uint64((oh_n - 1) * qw_n + ow_n)
    for p in range(lo, hi):
        n = p // m_all
        m = p - n * m_all
        _fill(xf, (n * c_n + m // mg) * hh * ww, hh, ww, buf, sh, sw, ph, pw, qh_n, qw_n,
              zero)
        w0 = m * taps
        for kh in range(kh_n):
            t = kh * kw_n
            if kw_n == 3:
                t0, t1, t2 = toff[t], toff[t + 1], toff[t + 2]
                v0, v1, v2 = wf[w0 + t], wf[w0 + t + 1], wf[w0 + t + 2]
                if kh == 0:
                    for i in range(length):
                        acc[i] = buf[t0 + i] * v0 + buf[t1 + i] * v1 + buf[t2 + i] * v2
                else:
                    for i in range(length):
                        acc[i] = acc[i] + buf[t0 + i] * v0 + buf[t1 + i] * v1 + \
                            buf[t2 + i] * v2
                continue
            if kw_n == 5:       # MobileNetV3's and EfficientNet's 5x5: a row per pass
                t0, t1, t2, t3, t4 = toff[t], toff[t + 1], toff[t + 2], toff[t + 3], \
                    toff[t + 4]
                v0, v1, v2, v3, v4 = wf[w0 + t], wf[w0 + t + 1], wf[w0 + t + 2], \
                    wf[w0 + t + 3], wf[w0 + t + 4]
                if kh == 0:
                    for i in range(length):
                        acc[i] = buf[t0 + i] * v0 + buf[t1 + i] * v1 + buf[t2 + i] * v2 + \
                            buf[t3 + i] * v3 + buf[t4 + i] * v4
                else:
                    for i in range(length):
                        acc[i] = acc[i] + buf[t0 + i] * v0 + buf[t1 + i] * v1 + \
                            buf[t2 + i] * v2 + buf[t3 + i] * v3 + buf[t4 + i] * v4
                continue
            for kw in range(kw_n):
                t0 = toff[t + kw]
                v0 = wf[w0 + t + kw]
                if kh == 0 and kw == 0:
                    for i in range(length):
                        acc[i] = buf[t0 + i] * v0
                else:
                    for i in range(length):
                        acc[i] = acc[i] + buf[t0 + i] * v0
        bias = b[m]
        obase = (n * m_all + m) * oh_n * ow_n
        for oh in range(oh_n):
            a0 = np.uint64(oh * qw_n)
            o0 = np.uint64(obase + oh * ow_n)
            for i in range(np.uint64(ow_n)):
                of[o0 + i] = acc[a0 + i] + bias


_DW3_MIN_W = 8


def _dw3_tap(xf, xb, hh, ww, r, c):
    """Input pixel (r, c) of the plane at xb, 0 outside it (the padding)."""
    if r < 0 or r >= hh or c < 0 or c >= ww:
        return xf.dtype.type(0)
    return xf[xb + r * ww + c]


def _dw3_pixel(xf, xb, wf, w0, bias, hh, ww, r, c):
    """Output (r, c) of a 3x3 stride-1 depthwise conv padded by one, the taps summed in
    _conv_planes' order (three per kernel row, rows in order, bias last)."""
    acc = _dw3_tap(xf, xb, hh, ww, r - 1, c - 1) * wf[w0] + \
        _dw3_tap(xf, xb, hh, ww, r - 1, c) * wf[w0 + 1] + \
        _dw3_tap(xf, xb, hh, ww, r - 1, c + 1) * wf[w0 + 2]
    for k in range(1, 3):
        acc = acc + _dw3_tap(xf, xb, hh, ww, r - 1 + k, c - 1) * wf[w0 + 3 * k] + \
            _dw3_tap(xf, xb, hh, ww, r - 1 + k, c) * wf[w0 + 3 * k + 1] + \
            _dw3_tap(xf, xb, hh, ww, r - 1 + k, c + 1) * wf[w0 + 3 * k + 2]
    return acc + bias


def _dw3_plane(xf, of, wf, bias, xb, ob, w0, hh, ww):
    """One plane of a 3x3 stride-1 depthwise conv padded by one pixel (output as large as
    the input), read and written in place: the inner pixels in one long loop over the flat
    plane (its first and last column read across row ends there and are redone), the
    first and last rows in a loop each, the first and last columns pixel by pixel. No
    padded copy and no loop per row (on one thread, with a session's overhead: 272
    planes of 14x14 92 -> 41 us, 136 of 28x28 128 -> 71 us, 68 of 28x28 78 -> 45 us). The
    taps are summed in _conv_planes' order, padding zeros included, so results are
    bit-identical to it and to the NumPy path."""
    v0, v1, v2 = wf[w0], wf[w0 + 1], wf[w0 + 2]
    v3, v4, v5 = wf[w0 + 3], wf[w0 + 4], wf[w0 + 5]
    v6, v7, v8 = wf[w0 + 6], wf[w0 + 7], wf[w0 + 8]
    uw = np.uint64(ww)
    one = np.uint64(1)
    ux = np.uint64(xb)
    uo = np.uint64(ob)
    for i in range(uw + one, np.uint64((hh - 1) * ww) - one):
        a = ux + i
        acc = xf[a - uw - one] * v0 + xf[a - uw] * v1 + xf[a - uw + one] * v2
        acc = acc + xf[a - one] * v3 + xf[a] * v4 + xf[a + one] * v5
        acc = acc + xf[a + uw - one] * v6 + xf[a + uw] * v7 + xf[a + uw + one] * v8
        of[uo + i] = acc + bias
    # the first and last rows but their corners: one loop each (the padded row's taps add
    # zeros, kept so that the sums are the padded path's)
    zero = xf.dtype.type(0)
    za = zero * v0 + zero * v1 + zero * v2
    lb = np.uint64((hh - 1) * ww)
    lt = lb - uw
    for c in range(one, uw - one):
        acc = za + xf[ux + c - one] * v3 + xf[ux + c] * v4 + xf[ux + c + one] * v5
        acc = acc + xf[ux + uw + c - one] * v6 + xf[ux + uw + c] * v7 + \
            xf[ux + uw + c + one] * v8
        of[uo + c] = acc + bias
        acc = xf[ux + lt + c - one] * v0 + xf[ux + lt + c] * v1 + xf[ux + lt + c + one] * v2
        acc = acc + xf[ux + lb + c - one] * v3 + xf[ux + lb + c] * v4 + \
            xf[ux + lb + c + one] * v5
        acc = acc + zero * v6 + zero * v7 + zero * v8
        of[uo + lb + c] = acc + bias
    # the first and last columns of the rows between, then the four corners
    for r in range(1, hh - 1):
        a = ux + np.uint64(r * ww)
        acc = zero * v0 + xf[a - uw] * v1 + xf[a - uw + one] * v2
        acc = acc + zero * v3 + xf[a] * v4 + xf[a + one] * v5
        acc = acc + zero * v6 + xf[a + uw] * v7 + xf[a + uw + one] * v8
        of[uo + a - ux] = acc + bias
        a = a + uw - one
        acc = xf[a - uw - one] * v0 + xf[a - uw] * v1 + zero * v2
        acc = acc + xf[a - one] * v3 + xf[a] * v4 + zero * v5
        acc = acc + xf[a + uw - one] * v6 + xf[a + uw] * v7 + zero * v8
        of[uo + a - ux] = acc + bias
    for r in (0, hh - 1):
        for c in (0, ww - 1):
            of[ob + r * ww + c] = _dw3_pixel(xf, xb, wf, w0, bias, hh, ww, r, c)


def _dwcl_image(x, wt, b, out, n, mult, sh, sw, dh, dw, ph, pw):
    """Image n of a depthwise conv channels-last, for small planes with many channels
    (per-plane loops would be a few pixels long): x (N, C, H, W), wt (KH, KW, M), out
    (N, M, OH, OW); every tap is one loop over the M channels. Same products in the same
    order as the NumPy path (its padded taps add zeros, skipped here).

    Preconditions: check_window's (JitConv.__call__), wt (KH, KW, M), out (N, M, OH, OW),
    b (M,), 0 <= n < N."""
    hh, ww = x.shape[2], x.shape[3]
    m_n, oh_n, ow_n = out.shape[1], out.shape[2], out.shape[3]
    kh_n, kw_n = wt.shape[0], wt.shape[1]
    xt = np.empty((hh, ww, m_n), dtype=x.dtype)
    for m in range(m_n):
        xc = x[n, m // mult]
        for ih in range(hh):
            for iw in range(ww):
                xt[ih, iw, m] = xc[ih, iw]
    acc = np.empty((oh_n, ow_n, m_n), dtype=x.dtype)
    for oh in range(oh_n):
        for ow in range(ow_n):
            a = acc[oh, ow]
            for m in range(m_n):
                a[m] = 0.0
            for kh in range(kh_n):
                ih = oh * sh - ph + kh * dh
                if ih < 0 or ih >= hh:
                    continue
                for kw in range(kw_n):
                    iw = ow * sw - pw + kw * dw
                    if iw < 0 or iw >= ww:
                        continue
                    xs = xt[ih, iw]
                    ws = wt[kh, kw]
                    for m in range(m_n):
                        a[m] += ws[m] * xs[m]
    for m in range(m_n):
        o = out[n, m]
        bias = b[m]
        for oh in range(oh_n):
            for ow in range(ow_n):
                o[oh, ow] = acc[oh, ow, m] + bias


def _dwcl_images(x, wt, b, out, mult, sh, sw, dh, dw, ph, pw, lo, hi):
    """Images lo..hi-1."""
    for n in range(lo, hi):
        _dwcl_image(x, wt, b, out, n, mult, sh, sw, dh, dw, ph, pw)


def _mx(a, v):
    """max(a, v) with NaN winning like np.maximum; this form vectorizes."""
    return a if (a >= v or a != a) else v


def _dpool_planes(x, out, div, is_max, kh_n, kw_n, sh, sw, dh, dw, ph, pw, lo, hi):
    """Planes lo..hi-1 of a max (is_max=1) or average pool, directly: x (P, H, W), out
    (P, OH, OW); averages divide by ``div`` (OH, OW), the NumPy path's count-aware divisor.

    Per output row, the kh input rows it reads are combined (max or sum, contiguous and
    vectorized) into a row buffer padded with the pad value, then the kw taps along that
    row at stride 1 (vectorized), and every sw-th value is picked (measured 2.4x faster
    than taps gathered at the stride). 3x3 windows take fused loops (several times faster
    than a pass per tap). The buffers are made once per call, not per plane, and every
    access is a flat unsigned index: views per row cost more than the small rows (7-56
    wide) they hold (192x56x56 3x3/2: 217 -> 100 us on one thread).

    Preconditions: check_window's (JitPool.__call__, with the end pads), x (P, H, W), out
    (P, OH, OW) with OH, OW >= 1, div (OH, OW) or (1, 1) for max, 0 <= lo <= hi <= P."""
    hh, ww = x.shape[1], x.shape[2]
    oh_n, ow_n = out.shape[1], out.shape[2]
    span = (ow_n - 1) * sw + 1                   # stride-1 results the picks read
    width = max(span + (kw_n - 1) * dw, pw + ww)
    tmp = np.empty(width, dtype=x.dtype)
    hrow = np.empty(span, dtype=x.dtype)
    pad = x.dtype.type(-np.inf) if is_max else x.dtype.type(0)
    for i in range(width):
        tmp[i] = pad
    xf = x.reshape(-1)
    of = out.reshape(-1)
    df = div.reshape(-1)
    uww = np.uint64(ww)
    uspan = np.uint64(span)
    mid = np.uint64(pw)
    u1 = np.uint64(dw)
    u2 = np.uint64(2 * dw)
    usw = np.uint64(sw)
    for p in range(lo, hi):
        xb = p * hh * ww
        ob = p * oh_n * ow_n
        for oh in range(oh_n):
            h0 = oh * sh - ph
            if kh_n == 3 and h0 >= 0 and h0 + 2 * dh < hh:
                r0 = np.uint64(xb + h0 * ww)
                r1 = np.uint64(xb + (h0 + dh) * ww)
                r2 = np.uint64(xb + (h0 + 2 * dh) * ww)
                if is_max:
                    for i in range(uww):
                        tmp[mid + i] = _mx(_mx(xf[r0 + i], xf[r1 + i]), xf[r2 + i])
                else:
                    for i in range(uww):
                        tmp[mid + i] = xf[r0 + i] + xf[r1 + i] + xf[r2 + i]
            else:
                first = True
                for k in range(kh_n):
                    ih = h0 + k * dh
                    if ih < 0 or ih >= hh:
                        continue
                    r = np.uint64(xb + ih * ww)
                    if first:
                        for i in range(uww):
                            tmp[mid + i] = xf[r + i]
                        first = False
                    elif is_max:
                        for i in range(uww):
                            tmp[mid + i] = _mx(tmp[mid + i], xf[r + i])
                    else:
                        for i in range(uww):
                            tmp[mid + i] += xf[r + i]
                if first:    # a window of padding only: -inf (max) or 0, like NumPy's
                    for i in range(uww):
                        tmp[mid + i] = pad
            if kw_n == 3:
                if is_max:
                    for i in range(uspan):
                        hrow[i] = _mx(_mx(tmp[i], tmp[u1 + i]), tmp[u2 + i])
                else:
                    for i in range(uspan):
                        hrow[i] = tmp[i] + tmp[u1 + i] + tmp[u2 + i]
            else:
                _shift_reduce(hrow, tmp, span, kw_n, dw, is_max)
            o0 = np.uint64(ob + oh * ow_n)
            if is_max:
                for i in range(np.uint64(ow_n)):
                    of[o0 + i] = hrow[i * usw]
            else:
                d0 = np.uint64(oh * ow_n)
                for i in range(np.uint64(ow_n)):
                    of[o0 + i] = hrow[i * usw] / df[d0 + i]


def _shift_reduce(dst, src, n, taps, step, is_max):
    """dst[i] = max (is_max) or sum of src[i + k * step] over k < taps, for i < n: one
    pass along a pool window's axis over flat buffers."""
    for i in range(n):
        dst[i] = src[i]
    for k in range(1, taps):
        off = np.uint64(k * step)
        if is_max:
            for i in range(np.uint64(n)):
                dst[i] = _mx(dst[i], src[off + i])
        else:
            for i in range(np.uint64(n)):
                dst[i] += src[off + i]


_POOL3_MIN_W = 8


def _spool_planes(x, out, div, is_max, kh_n, kw_n, dh, dw, ph, pw, lo, hi):
    """Planes lo..hi-1 of a stride-1 max or average pool, in blocks of planes that keep
    the buffers in cache (_spool_block); measured 3x faster than per-row loops on
    inception's 3x3/1 averages over 28x28 and 14x14 planes, and blocks 2.5x faster than one
    pass over all the planes of a batch (4,608 planes of 14x14: 3.3 -> 1.3 ms). The 3x3
    window with one pixel of padding keeping the size (inception's pool branches) takes
    _pool3_plane on planes at least _POOL3_MIN_W wide.

    Preconditions: as _dpool_planes', at stride 1."""
    oh_n, ow_n = out.shape[1], out.shape[2]
    if (kh_n == 3 and kw_n == 3 and dh == 1 and dw == 1 and ph == 1 and pw == 1
            and oh_n == x.shape[1] and ow_n == x.shape[2] and ow_n >= _POOL3_MIN_W):
        v = np.empty(oh_n * ow_n, dtype=x.dtype)
        for p in range(lo, hi):
            _pool3_plane(x, out, div, is_max, p, v)
        return
    plane = (oh_n + (kh_n - 1) * dh) * (ow_n + (kw_n - 1) * dw)
    blk = max(1, (64 << 10) // plane)
    buf = np.empty(blk * plane, dtype=x.dtype)
    v = np.empty(blk * plane, dtype=x.dtype)
    h = np.empty(blk * plane, dtype=x.dtype)
    for q0 in range(lo, hi, blk):
        _spool_block(x, out, div, is_max, kh_n, kw_n, dh, dw, ph, pw, q0, min(hi, q0 + blk),
                     buf, v, h)


def _pool3_plane(x, out, div, is_max, p, v):
    """Plane p of a 3x3 stride-1 pool padded by one pixel on every side (output as large as
    the input), over the flat plane: the rows above and below combined in one long loop
    (the first and last rows apart), then the left and right neighbours in another, the
    first and last column of each row fixed after (the long loop reads across row ends
    there); averages divided by ``div`` (OH, OW). Every loop but the fixes spans a whole
    plane, so short rows cost no loop each: on one thread, 576 planes of 14x14 133 -> 69
    us, 256 of 27x27 214 -> 75 us, against _spool_block (max or average alike); 832 of 6x6
    were 56 -> 66 us, hence _POOL3_MIN_W."""
    hh, ww = x.shape[1], x.shape[2]
    n = hh * ww
    xf = x.reshape(-1)
    of = out.reshape(-1)
    df = div.reshape(-1)
    b = np.uint64(p * n)
    uw = np.uint64(ww)
    un = np.uint64(n)
    if hh == 1:
        for i in range(un):
            v[i] = xf[b + i]
    elif is_max:
        for i in range(uw):
            v[i] = _mx(xf[b + i], xf[b + uw + i])
        for i in range(uw, un - uw):
            v[i] = _mx(_mx(xf[b + i - uw], xf[b + i]), xf[b + i + uw])
        for i in range(un - uw, un):
            v[i] = _mx(xf[b + i - uw], xf[b + i])
    else:
        for i in range(uw):
            v[i] = xf[b + i] + xf[b + uw + i]
        for i in range(uw, un - uw):
            v[i] = xf[b + i - uw] + xf[b + i] + xf[b + i + uw]
        for i in range(un - uw, un):
            v[i] = xf[b + i - uw] + xf[b + i]
    one = np.uint64(1)
    if is_max:
        for i in range(one, un - one):
            of[b + i] = _mx(_mx(v[i - one], v[i]), v[i + one])
    else:
        for i in range(one, un - one):
            of[b + i] = v[i - one] + v[i] + v[i + one]
    for r in range(hh):
        i0 = np.uint64(r * ww)
        i1 = i0 + uw - one
        if ww == 1:
            of[b + i0] = v[i0]
        elif is_max:
            of[b + i0] = _mx(v[i0], v[i0 + one])
            of[b + i1] = _mx(v[i1 - one], v[i1])
        else:
            of[b + i0] = v[i0] + v[i0 + one]
            of[b + i1] = v[i1 - one] + v[i1]
    if not is_max:
        for i in range(un):
            of[b + i] = of[b + i] / df[i]


def _spool_block(x, out, div, is_max, kh_n, kw_n, dh, dw, ph, pw, lo, hi, buf, v, h):
    """Planes lo..hi-1 at once: the planes padded into one flat buffer, then one pass
    along the columns (kh taps, shifted by whole rows) and one along the rows (kw taps),
    each a single long vectorized loop over every plane of the block (outputs that
    straddle two planes are computed and dropped), then the picks (and the division by
    ``div``). Unsigned indices: numba then skips its negative-index wraparound."""
    hh, ww = x.shape[1], x.shape[2]
    oh_n, ow_n = out.shape[1], out.shape[2]
    hp = oh_n + (kh_n - 1) * dh
    wp = ow_n + (kw_n - 1) * dw
    n = hi - lo
    plane = hp * wp
    pad = x.dtype.type(-np.inf) if is_max else x.dtype.type(0)
    h1 = min(hh, hp - ph)
    w1 = min(ww, wp - pw)
    xf = x.reshape(-1)
    of = out.reshape(-1)
    df = div.reshape(-1)
    total = n * plane
    for i in range(total):
        buf[i] = pad
    for q in range(n):
        for r in range(h1):
            d0 = np.uint64(q * plane + (r + ph) * wp + pw)
            s0 = np.uint64(((lo + q) * hh + r) * ww)
            for j in range(np.uint64(w1)):
                buf[d0 + j] = xf[s0 + j]
    lv = total - (kh_n - 1) * dh * wp
    _shift_reduce(v, buf, lv, kh_n, dh * wp, is_max)
    lh = lv - (kw_n - 1) * dw
    _shift_reduce(h, v, lh, kw_n, dw, is_max)
    for q in range(n):
        for oh in range(oh_n):
            b0 = np.uint64(q * plane + oh * wp)
            o0 = np.uint64(((lo + q) * oh_n + oh) * ow_n)
            if is_max:
                for i in range(np.uint64(ow_n)):
                    of[o0 + i] = h[b0 + i]
            else:
                d0 = np.uint64(oh * ow_n)
                for i in range(np.uint64(ow_n)):
                    of[o0 + i] = h[b0 + i] / df[d0 + i]


def _epi_image(y, i, c0, c1, m0, m1, b, z, has_z, kind, alpha, beta):
    """Conv's epilogue on columns c0:c1, channels m0:m1 of image i of y (N, M, L), in place
    and in one pass:
    + b[m], + z (same shape as y) when has_z, then the activation ``kind`` (0 none, 1 Relu,
    2 LeakyRelu(alpha), 3 Clip(alpha, beta), 4 HardSigmoid(alpha, beta), 5 HardSwish: v *
    HardSigmoid(v) with alpha 1/6, beta 0.5, 6 SiLU: v * sigmoid(v)); NaN passes through
    like NumPy's.

    Preconditions (GemmConv.__call__, Conv's _Epilogue): 0 <= i < N, 0 <= c0 <= c1 <= L,
    0 <= m0 <= m1 <= M, b (M,), z like y when has_z."""
    n = c1 - c0
    ex = np.empty(n if kind == 6 else 0, np.float32)       # SiLU's scratch
    bits = np.empty(n if kind == 6 else 0, np.int32)
    fbits = bits.view(np.float32)
    for m in range(m0, m1):
        r = y[i, m, c0:c1]
        bm = b[m]
        if has_z:
            zr = z[i, m, c0:c1]
            for j in range(n):
                r[j] = r[j] + bm + zr[j]
            bm = b.dtype.type(0)    # added: the loop below only activates
            if kind == 0:
                continue
        if kind == 1:
            for j in range(n):
                v = r[j] + bm
                r[j] = 0.0 if v < 0 else v
        elif kind == 0:
            for j in range(n):
                r[j] = r[j] + bm
        elif kind == 2:
            for j in range(n):
                v = r[j] + bm
                r[j] = v * alpha if v < 0 else v
        elif kind == 3:
            for j in range(n):
                v = r[j] + bm
                v = alpha if v < alpha else v
                r[j] = beta if v > beta else v
        elif kind == 4:
            for j in range(n):
                v = (r[j] + bm) * alpha + beta
                v = 0.0 if v < 0 else v
                r[j] = 1.0 if v > 1 else v
        elif kind == 5:
            for j in range(n):
                v = r[j] + bm
                g = v * alpha + beta
                g = 0.0 if g < 0 else g
                r[j] = v * (1.0 if g > 1 else g)
        elif r.itemsize == 4:
            # SiLU, v * sigmoid(v), sigmoid from e = exp(-|v|) (never overflows): 1 / (1 + e)
            # for v >= 0, e / (1 + e) below; exp vectorized (vmath.exp_nonpos)
            for j in range(n):
                v = r[j] + bm
                r[j] = v
                ex[j] = -v if v >= 0 else v
            _exp_nonpos(ex[:n], bits[:n], fbits[:n])
            for j in range(n):
                v = r[j]
                e = ex[j]
                r[j] = v * ((1.0 if v >= 0 else e) / (1.0 + e))
        else:
            for j in range(n):
                v = r[j] + bm
                e = math.exp(-v if v >= 0 else v)
                r[j] = v * ((1.0 if v >= 0 else e) / (1.0 + e))

_RUN_MAX_W = 32


def _im2col_band(xf, cols, base, c_n, hh, ww, r0, r1, kh_n, kw_n, sh, sw, dh, dw, ph, pw,
                 ow_n):
    """cols (flat, C*KH*KW rows of (r1-r0)*OW) <- the windows of output rows r0..r1-1 of
    the image starting at ``base`` of the flat input xf (C, H, W); taps that fall in the
    padding read 0. Flat indices, no slices: the rows are short (7-56) and a slice per row
    costs more than its copy (measured: 0.30 ms for 64 channels at 56x56, 3x3, against 0.38
    for NumPy's nine strided copies).

    Preconditions: check_window's (GemmConv.__call__), cols holding C*KH*KW rows of
    (r1-r0)*OW, 0 <= r0 <= r1 <= OH, base + C*H*W <= xf.size."""
    nc = (r1 - r0) * ow_n
    zero = xf.dtype.type(0)
    # stride 1 along both axes and output rows as wide as input rows, narrower than
    # _RUN_MAX_W: a tap's valid rows read one contiguous run of the input plane, copied in
    # one loop, then the padded border columns zeroed (256 channels at 14x14, 3x3: 0.161
    # -> 0.094 ms; at 56 wide the row loops were as fast)
    runs = sw == 1 and sh == 1 and ow_n == ww and ow_n < _RUN_MAX_W
    for c in range(c_n):
        for kh in range(kh_n):
            for kw in range(kw_n):
                rowbase = ((c * kh_n + kh) * kw_n + kw) * nc
                off = kw * dw - pw
                # output columns whose input column j*sw + off lies in 0..W-1
                lo = 0 if off >= 0 else (sw - 1 - off) // sw
                lo = min(lo, ow_n)
                hi = (ww - 1 - off) // sw + 1 if ww - 1 - off >= 0 else 0
                hi = max(min(hi, ow_n), lo)
                if runs:
                    # output rows ra..rb-1 have input rows inside the image
                    ra = min(max(r0, ph - kh * dh), r1)
                    rb = max(min(r1, hh + ph - kh * dh), ra)
                    d0 = rowbase + (ra - r0) * ow_n
                    s0 = base + (c * hh + ra - ph + kh * dh) * ww + off
                    # the run, less what falls outside the plane (border columns anyway)
                    p0 = base + c * hh * ww
                    j0 = max(0, p0 - s0)
                    j1 = max(min((rb - ra) * ww, p0 + hh * ww - s0), j0)
                    ud, us = np.uint64(d0 + j0), np.uint64(s0 + j0)
                    for j in range(np.uint64(j1 - j0)):
                        cols[ud + j] = xf[us + j]
                    for r in range(r0, r1):
                        d1 = np.uint64(rowbase + (r - r0) * ow_n)
                        if r < ra or r >= rb:
                            for j in range(np.uint64(ow_n)):
                                cols[d1 + j] = zero
                            continue
                        for j in range(np.uint64(lo)):
                            cols[d1 + j] = zero
                        for j in range(np.uint64(hi), np.uint64(ow_n)):
                            cols[d1 + j] = zero
                    continue
                for r in range(r0, r1):
                    # unsigned indices: numba then skips its negative-index wraparound and
                    # LLVM vectorizes the copies (measured 3x faster than signed)
                    d0 = np.uint64(rowbase + (r - r0) * ow_n)
                    ih = r * sh - ph + kh * dh
                    if ih < 0 or ih >= hh:
                        for j in range(np.uint64(ow_n)):
                            cols[d0 + j] = zero
                        continue
                    for j in range(np.uint64(lo)):
                        cols[d0 + j] = zero
                    s0 = np.uint64(base + (c * hh + ih) * ww + off + lo * sw)
                    dl = d0 + np.uint64(lo)
                    if sw == 1:
                        for j in range(np.uint64(hi - lo)):
                            cols[dl + j] = xf[s0 + j]
                    else:
                        usw = np.uint64(sw)
                        for j in range(np.uint64(hi - lo)):
                            cols[dl + j] = xf[s0 + j * usw]
                    for j in range(np.uint64(hi), np.uint64(ow_n)):
                        cols[d0 + j] = zero


def _gemm_conv_items(gemm, x, w, y, b, has_b, z, has_z, kind, alpha, beta, one, zero, kh_n,
                     kw_n, sh, sw, dh, dw, ph, pw, ow_n, mg, items, direct, lo, hi):
    """Items lo..hi-1 of a conv, each (image, first row, end row, first channel, end
    channel) of the output y (N, M, OH*OW), the channels within one group of ``mg``: the
    band's im2col over the group's input channels (skipped for a 1x1 stride-1 conv without
    padding, whose input is its own column matrix), one BLAS product of the weight rows
    w (M, Cg*KH*KW) into y through ``gemm`` (cblas_sgemm/dgemm of providers/cpu/blas.py, called
    without the GIL), then the epilogue on the block while it is in cache.

    Preconditions: check_window's (GemmConv.__call__), x (N, C, H, W) with C = group * Cg,
    w (M, Cg*KH*KW), y (N, >= M, OH*OW), items from GemmConv._plan (rows inside 0..OH,
    channels inside one group), 0 <= lo <= hi <= len(items)."""
    m_all = y.shape[1]      # y's channels: this conv's, or a joined output's (_channels_of)
    kk = w.shape[1]
    cg = kk // (kh_n * kw_n)
    ldc = y.shape[2]
    plane = x.shape[2] * x.shape[3]
    # flat views: a block's pointer is a slice's (pointer arithmetic on ctypes.data would
    # mix unsigned and signed integers)
    xf = x.reshape(-1)
    wf = w.reshape(-1)
    yf = y.reshape(-1)
    most = 0
    for t in range(lo, hi):
        most = max(most, items[t, 2] - items[t, 1])
    cols = np.empty(0 if direct else kk * most * ow_n, dtype=x.dtype)
    for t in range(lo, hi):
        i, r0, r1, m0, m1 = items[t, 0], items[t, 1], items[t, 2], items[t, 3], items[t, 4]
        nc = (r1 - r0) * ow_n
        ch0 = i * x.shape[1] + (m0 // mg) * cg      # the group's first input channel
        if direct:
            bptr = xf[ch0 * ldc + r0 * ow_n:].ctypes.data
            ldb = ldc
        else:
            _im2col_band(xf, cols, ch0 * plane, cg, x.shape[2], x.shape[3], r0, r1, kh_n,
                         kw_n, sh, sw, dh, dw, ph, pw, ow_n)
            bptr = cols.ctypes.data
            ldb = nc
        c0 = r0 * ow_n
        gemm(101, 111, 111, m1 - m0, nc, kk, one, wf[m0 * kk:].ctypes.data, kk, bptr,
             ldb, zero, yf[(i * m_all + m0) * ldc + c0:].ctypes.data, ldc)
        if has_b or has_z or kind != 0:
            _epi_image(y, i, c0, c0 + nc, m0, m1, b, z, has_z, kind, alpha, beta)


def _taps_conv_items(gemm, x, wt, y, b, has_b, z, has_z, kind, alpha, beta, one, zero,
                     kh_n, kw_n, dh, dw, ph, pw, ow_n, items, lo, hi):
    """Items lo..hi-1 (image, first row, end row, first channel, end channel) of a
    stride-1 dense conv without im2col: the band's input rows padded once into a (C, rows,
    wp) buffer, then one BLAS product per kernel tap, wt[tap] (M, C) times the buffer
    shifted by the tap (a strided view: no copy), accumulated (beta 1) into a
    (M, rows * wp) block whose rows carry
    (KW-1)*dw columns of junk, dropped when the block is copied out with the epilogue.
    Saves im2col's copy: measured 1.3x on 128->32 3x3 convs, 1.15x on 64->64 (GemmConv
    takes it from _TAPS_MIN_C input channels and up to _TAPS_MAX_M output channels).

    Preconditions: _gemm_conv_items', stride 1, and the padded row holding the whole input
    row, W + pw <= OW + (KW-1)*dw (GemmConv.__call__ takes this form only then)."""
    c_n, hh, ww = x.shape[1], x.shape[2], x.shape[3]
    m_n = wt.shape[1]
    wp = ow_n + (kw_n - 1) * dw
    most = 0
    for t in range(lo, hi):
        most = max(most, items[t, 2] - items[t, 1])
    rows_most = most + (kh_n - 1) * dh
    xb = np.empty(c_n * rows_most * wp, dtype=x.dtype)
    tmp = np.empty(m_n * most * wp, dtype=x.dtype)
    wf = wt.reshape(-1)
    xf = x.reshape(-1)
    yf = y.reshape(-1)
    ldc_y = y.shape[2]
    zero_v = x.dtype.type(0)
    for t in range(lo, hi):
        i, r0, r1, m0, m1 = items[t, 0], items[t, 1], items[t, 2], items[t, 3], items[t, 4]
        nr = r1 - r0
        rows_in = nr + (kh_n - 1) * dh
        plane = rows_in * wp
        for c in range(c_n):
            for rr in range(rows_in):
                d0 = np.uint64(c * plane + rr * wp)
                ih = r0 - ph + rr
                if ih < 0 or ih >= hh:
                    for j in range(np.uint64(wp)):
                        xb[d0 + j] = zero_v
                    continue
                for j in range(np.uint64(pw)):
                    xb[d0 + j] = zero_v
                s0 = np.uint64(((i * c_n + c) * hh + ih) * ww)
                dd = d0 + np.uint64(pw)
                for j in range(np.uint64(ww)):
                    xb[dd + j] = xf[s0 + j]
                for j in range(np.uint64(pw + ww), np.uint64(wp)):
                    xb[d0 + j] = zero_v
        n_cols = (nr - 1) * wp + ow_n
        for tap in range(kh_n * kw_n):
            kh = tap // kw_n
            kw = tap - kh * kw_n
            gemm(101, 111, 111, m1 - m0, n_cols, c_n, one,
                 wf[(tap * m_n + m0) * c_n:].ctypes.data, c_n,
                 xb[kh * dh * wp + kw * dw:].ctypes.data, plane, zero if tap == 0 else one,
                 tmp.ctypes.data, nr * wp)
        for m in range(m0, m1):
            for r in range(nr):
                s0 = np.uint64((m - m0) * nr * wp + r * wp)
                d0 = np.uint64((i * y.shape[1] + m) * ldc_y + (r0 + r) * ow_n)
                for j in range(np.uint64(ow_n)):
                    yf[d0 + j] = tmp[s0 + j]
        if has_b or has_z or kind != 0:
            _epi_image(y, i, r0 * ow_n, r1 * ow_n, m0, m1, b, z, has_z, kind, alpha, beta)


def _mm_items(gemm, a, b, c, tb, one, zero, items, lo, hi):
    """Blocks lo..hi-1 (m0, m1, n0, n1) of c = a @ b, one BLAS product each; a and c
    row-major, b row-major (K, N) or, when ``tb``, given as its transpose (N, K) row-major
    (a transposed weight: no copy).

    Preconditions (split_matmul; BLAS reads through raw pointers): a (M, K) and c (M, N)
    C-contiguous, b (K, N) or (N, K) C-contiguous, blocks inside (M, N)."""
    k_n = a.shape[1]
    n_n = c.shape[1]
    af = a.reshape(-1)
    bf = b.reshape(-1)
    cf = c.reshape(-1)
    for t in range(lo, hi):
        m0, m1, n0, n1 = items[t, 0], items[t, 1], items[t, 2], items[t, 3]
        if tb:
            bp, ldb, trans = bf[n0 * k_n:].ctypes.data, k_n, 112
        else:
            bp, ldb, trans = bf[n0:].ctypes.data, n_n, 111
        gemm(101, 111, trans, m1 - m0, n1 - n0, k_n, one, af[m0 * k_n:].ctypes.data, k_n,
             bp, ldb, zero, cf[m0 * n_n + n0:].ctypes.data, n_n)


# -- the hot pool's native serving loop (framework/hotpool.py) --------------------------------
#
# A conv split posts its items to the pool's workers as a kind and a range, its arguments
# packed into the pool's slot arrays: addresses and shapes of the arrays, then the flags and
# geometry; the workers rebuild the arrays from the addresses (_ptr, carray) and call the
# kernel without ever leaving compiled code. Kinds: gemm_conv, taps_conv, blocks of a matrix
# product, depthwise planes, stride-1 and strided pooling planes; float32 only (each dtype
# compiles the kernels into the loop again: 4 s more of first-session compile for float64,
# which takes the Python items)
_NK_GEMM, _NK_TAPS, _NK_MM, _NK_DW, _NK_SPOOL, _NK_POOL = 1, 2, 3, 4, 5, 6
_ptr: Any = None        # the pointer intrinsic and numba.carray, set by _load
carray: Any = None
_cas: Any = None       # hotpool.cas_intrinsic, set by _load
_exp_nonpos: Any = None     # vmath.exp_nonpos compiled inline, set by _load


def _put(ji, at, a):
    ji[at] = a.ctypes.data
    for d in range(a.ndim):
        ji[at + 1 + d] = a.shape[d]


def _pack(ji, jf, x, w, y, b, has_b, z, has_z, kind, alpha, beta, items, geo):
    """A conv's arguments into the slots: x 0-4, w 5-8, y 9-12, b 13-14, z 15-18, items
    19-21, has_b, has_z, kind 22-24, the geometry (ints) from 25; alpha, beta in jf."""
    _put(ji, 0, x)
    _put(ji, 5, w)
    _put(ji, 9, y)
    _put(ji, 13, b)
    _put(ji, 15, z)
    _put(ji, 19, items)
    ji[22] = has_b
    ji[23] = has_z
    ji[24] = kind
    for j in range(len(geo)):
        ji[25 + j] = geo[j]
    jf[0] = alpha
    jf[1] = beta


def _pack_mm(ji, a, b, c, tb, items):
    """A product's arguments into the slots: a 0-2, b 3-5, c 6-8, items 9-11, tb 12."""
    _put(ji, 0, a)
    _put(ji, 3, b)
    _put(ji, 6, c)
    _put(ji, 9, items)
    ji[12] = tb


def _mm_slots(gemm, ji, like, lo, hi):
    a = carray(_ptr(ji[0], like), (ji[1], ji[2]))
    b = carray(_ptr(ji[3], like), (ji[4], ji[5]))
    c = carray(_ptr(ji[6], like), (ji[7], ji[8]))
    items = carray(_ptr(ji[9], ji), (ji[10], ji[11]))
    t = like.dtype.type
    _mm_items(gemm, a, b, c, ji[12] != 0, t(1), t(0), items, lo, hi)


def _pack_dw(ji, x, w, b, out, geo):
    """A depthwise conv's arguments into the slots: x 0-4, w 5-9, b 10-11, out 12-16, the
    geometry (ints) from 17."""
    _put(ji, 0, x)
    _put(ji, 5, w)
    _put(ji, 10, b)
    _put(ji, 12, out)
    for j in range(len(geo)):
        ji[17 + j] = geo[j]


def _dw_slots(ji, like, lo, hi):
    x = carray(_ptr(ji[0], like), (ji[1], ji[2], ji[3], ji[4]))
    w = carray(_ptr(ji[5], like), (ji[6], ji[7], ji[8], ji[9]))
    b = carray(_ptr(ji[10], like), (ji[11],))
    out = carray(_ptr(ji[12], like), (ji[13], ji[14], ji[15], ji[16]))
    g = ji[17:]
    _conv_planes(x, w, b, out, g[0], g[1], g[2], g[3], g[4], g[5], g[6], lo, hi)


def _pack_pool(ji, x, out, div, geo):
    """A pool's arguments into the slots: x 0-3, out 4-7, div 8-10, the rest (ints) from
    11."""
    _put(ji, 0, x)
    _put(ji, 4, out)
    _put(ji, 8, div)
    for j in range(len(geo)):
        ji[11 + j] = geo[j]


def _pool_slots(ji, like, strided, lo, hi):
    x = carray(_ptr(ji[0], like), (ji[1], ji[2], ji[3]))
    out = carray(_ptr(ji[4], like), (ji[5], ji[6], ji[7]))
    div = carray(_ptr(ji[8], like), (ji[9], ji[10]))
    g = ji[11:]
    if strided:
        _dpool_planes(x, out, div, g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], lo,
                      hi)
    else:
        _spool_planes(x, out, div, g[0], g[1], g[2], g[3], g[4], g[5], g[6], lo, hi)


def _conv_arrays(ji, like):
    """x, y, b, z and items of the packed conv, over the caller's memory, in like's dtype."""
    x = carray(_ptr(ji[0], like), (ji[1], ji[2], ji[3], ji[4]))
    y = carray(_ptr(ji[9], like), (ji[10], ji[11], ji[12]))
    b = carray(_ptr(ji[13], like), (ji[14],))
    z = carray(_ptr(ji[15], like), (ji[16], ji[17], ji[18]))
    items = carray(_ptr(ji[19], ji), (ji[20], ji[21]))
    return x, y, b, z, items


def _gemm_slots(gemm, ji, jf, like, lo, hi):
    x, y, b, z, items = _conv_arrays(ji, like)
    w = carray(_ptr(ji[5], like), (ji[6], ji[7]))
    t = like.dtype.type
    g = ji[25:]
    _gemm_conv_items(gemm, x, w, y, b, ji[22] != 0, z, ji[23] != 0, ji[24], t(jf[0]),
                     t(jf[1]), t(1), t(0), g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7],
                     g[8], g[9], items, g[10] != 0, lo, hi)


def _taps_slots(gemm, ji, jf, like, lo, hi):
    x, y, b, z, items = _conv_arrays(ji, like)
    wt = carray(_ptr(ji[5], like), (ji[6], ji[7], ji[8]))
    t = like.dtype.type
    g = ji[25:]
    _taps_conv_items(gemm, x, wt, y, b, ji[22] != 0, z, ji[23] != 0, ji[24], t(jf[0]),
                     t(jf[1]), t(1), t(0), g[0], g[1], g[2], g[3], g[4], g[5], g[6], items,
                     lo, hi)


def _serve(ctl, w, done, spins, yield_fn, ji, jf, gemm):
    """The hot pool's serving loop (hotpool._serve's contract) running the native float32
    conv items it is posted: kind in ctl[w, 4], range ctl[w, 5:7], each claimed first
    (ctl[w, 7], hotpool's claim word). The sched_yield calls around
    an item also keep the compiler from moving the slot reads before the post is seen, or
    the kernel's stores after the "done" mark."""
    ctl[w, 1] = done
    i = 0
    while i < spins:
        v = ctl[w, 0]
        if v != done:
            if _cas(ctl, w, 7, v, -v) != v:
                done = v            # the caller took it back (hotpool._steal)
                ctl[w, 1] = done
                i = 0
                continue
            k = ctl[w, 4]
            if k == 0:
                return v
            yield_fn()
            lo, hi = ctl[w, 5], ctl[w, 6]
            if k == 1:
                _gemm_slots(gemm, ji, jf, np.empty(0, np.float32), lo, hi)
            elif k == 2:
                _taps_slots(gemm, ji, jf, np.empty(0, np.float32), lo, hi)
            elif k == 3:
                _mm_slots(gemm, ji, np.empty(0, np.float32), lo, hi)
            elif k == 4:
                _dw_slots(ji, np.empty(0, np.float32), lo, hi)
            elif k == 5 or k == 6:
                _pool_slots(ji, np.empty(0, np.float32), k == 6, lo, hi)
            yield_fn()
            done = v
            ctl[w, 1] = done
            i = 0
            continue
        if ctl[w, 3] != 0:
            return -1
        yield_fn()
        i += 1
    return -1


def _pointer_intrinsic(numba: Any) -> Any:
    """_ptr(addr, like): the address as a pointer to like's element type (for carray)."""
    from numba.core import types
    from numba.extending import intrinsic

    @intrinsic
    def _ptr(typingctx, addr, like):
        sig = types.CPointer(like.dtype)(addr, like)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(signature.return_type))
        return sig, codegen
    return _ptr


# -- loading and running ---------------------------------------------------------------------

def _njit(numba: Any, fn: Callable, **kw: Any) -> Any:
    # error_model "numpy": a float division by zero gives inf/nan as in NumPy instead of
    # raising, so division loops vectorize (numba's own check kept them scalar: average
    # pooling's 576x14x14 3x3/1 took 185 us, its division alone ~100 of them)
    kw.setdefault("error_model", "numpy")
    try:
        return numba.njit(cache=True, nogil=True, **kw)(fn)
    except RuntimeError:
        # no writable cache location (numba tries beside this file, then the user's cache
        # dir): compile per process instead of failing
        return numba.njit(nogil=True, **kw)(fn)


def _load() -> dict[str, Any] | None:
    """The dispatchers (numba imported here, once); None if numba fails to import."""
    if _K:
        return _K
    with _LOAD_LOCK:
        if _K:
            return _K
        try:
            import numba
        except Exception:   # a broken install behaves like a missing one
            _ENABLED[0] = False
            return None
        # the plane functions, compiled into their callers (resolved as globals at compile)
        g = globals()
        for f in (_fill, _dwcl_image, _im2col_band, _spool_block, _pool3_plane, _dw3_plane):
            g[f.__name__] = numba.njit(error_model="numpy")(f)
        for f in (_dw3_tap, _dw3_pixel):     # per border pixel: a call each was the cost
            g[f.__name__] = numba.njit(inline="always", error_model="numpy")(f)
        g["_mx"] = numba.njit(inline="always")(_mx)     # else its loops do not vectorize
        g["_shift_reduce"] = numba.njit(inline="always", error_model="numpy")(_shift_reduce)
        g["_exp_nonpos"] = numba.njit(inline="always", error_model="numpy",
                                      fastmath={"contract"})(vmath.exp_nonpos)
        g["_epi_image"] = epi = _njit(numba, _epi_image)
        _K.update(epi=epi, gemm_conv=_njit(numba, _gemm_conv_items),
                  taps_conv=_njit(numba, _taps_conv_items), conv=_njit(numba, _conv_planes),
                  dwcl=_njit(numba, _dwcl_images), pool=_njit(numba, _dpool_planes),
                  spool=_njit(numba, _spool_planes), pack=_njit(numba, _pack),
                  mm=_njit(numba, _mm_items), pack_mm=_njit(numba, _pack_mm),
                  pack_dw=_njit(numba, _pack_dw), pack_pool=_njit(numba, _pack_pool))
        # the native serving loop's pieces (compiled into it, resolved as globals)
        g.update(_gemm_conv_items=_K["gemm_conv"], _taps_conv_items=_K["taps_conv"],
                 _mm_items=_K["mm"], _conv_planes=_K["conv"], _dpool_planes=_K["pool"],
                 _spool_planes=_K["spool"], _ptr=_pointer_intrinsic(numba),
                 carray=numba.carray, _cas=hotpool.cas_intrinsic(numba))
        for f in (_put, _conv_arrays, _gemm_slots, _taps_slots, _mm_slots, _dw_slots,
                  _pool_slots):
            g[f.__name__] = numba.njit(error_model="numpy")(f)
        _K["serve"] = _njit(numba, _serve)
    return _K


_ONCE_LOCK = threading.RLock()     # a build may compile a helper through compile_once too


def compile_once(slot: list[Any], build: Callable[[Any], Any]) -> Any:
    """A kernel another module compiles: ``build(numba)`` run once per process (it loads
    from numba's disk cache or compiles, and should warm its result so that no run
    compiles), kept in ``slot`` (that module's empty list); the kernel, or None where numba
    is missing or disabled (ONNXRT_JIT=0) or ``build`` failed (the NumPy path runs)."""
    if not enabled():
        return None
    if not slot:
        with _ONCE_LOCK:
            if not slot:
                fn = None
                if _load() is not None:
                    import numba
                    try:
                        fn = build(numba)
                    except Exception:
                        fn = None
                slot.append(fn)
    return slot[0]


def _call(pool: ThreadPool, key: str, total: int, spread: bool, args: tuple,
          native: tuple[int, Callable] | None = None) -> None:
    """Run kernel ``key`` over items 0..total-1 (its last two arguments): in one call, or
    when ``spread`` in one contiguous range per thread of the session's ``pool``:
    as native items (``native`` = (kind, pack), float32 kernels) where the hot pool's
    serving loop runs them, else as Python items. The kernels that call BLAS keep it
    single-threaded in a one-range call too (ThreadPool._one_call)."""
    blas = key in _BLAS_KERNELS
    if spread and native is not None and _install_native():
        pool.native_ranges(native[0], native[1], _K[key], args, total, blas)
    else:
        pool.for_ranges(_K[key], args, total, spread, blas)


_BLAS_KERNELS = frozenset(("gemm_conv", "taps_conv", "mm"))


def _ready(dtype: np.dtype) -> bool:
    return (_ENABLED[0] and np.dtype(dtype) in _FLOATS and warmup.ready()
            and _load() is not None)


def input_dtype(node: Any) -> np.dtype:
    """The node's first input element type where the graph declares it, else float32: a
    compiled kernel is prepared for that dtype, and inputs of another take the NumPy path."""
    t = node.input_types[0] if node.input_types else None
    if t is not None and t.HasField("tensor_type") and t.tensor_type.elem_type:
        try:
            return np.dtype(np_dtype(t.tensor_type.elem_type))
        except Exception:   # no NumPy dtype for it: never compiled
            return np.dtype(object)
    return np.dtype(np.float32)


# -- preconditions -----------------------------------------------------------------------------
#
# The loops above index flat arrays with unsigned offsets and no bounds checks: every
# geometry they receive is checked here first, in the Python wrappers, once per call
# (tests/fuzz/test_boundscheck.py runs them with NUMBA_BOUNDSCHECK=1 over generated
# arguments). Attributes were validated against the spec at session creation
# (onnxrt/validate); these checks hold whoever calls the wrappers.

def check_window(spatial: Any, kernel: Any, strides: Any, dil: Any, begin: Any, out: Any,
                 end: Any = None) -> None:
    """The preconditions of the windowed loops (_fill, _conv_planes, _dwcl_image,
    _im2col_band, _taps_conv_items, _dpool_planes, _spool_planes), per spatial axis:
    kernel, stride and dilation >= 1, begin pads >= 0, output size >= 0 (the loops read
    the input only at positions they test against its extent, and size their buffers from
    these values); with ``end`` (pads, ceil_mode's extra included), every window also
    starts inside the padded input, (out-1)*stride < size + begin + end. Raises ValueError
    naming the offending value."""
    nd = len(spatial)
    given = end is not None
    end = [0] * nd if end is None else end
    for name, v in (("kernel", kernel), ("strides", strides), ("dilations", dil),
                    ("begin pads", begin), ("end pads", end), ("output", out)):
        if len(v) != nd:
            raise ValueError(f"compiled window: {name} {list(v)} for {nd} spatial axes")
    for i in range(nd):
        k, s, d, b, e, o, n = (int(kernel[i]), int(strides[i]), int(dil[i]), int(begin[i]),
                               int(end[i]), int(out[i]), int(spatial[i]))
        if k < 1 or s < 1 or d < 1 or b < 0 or e < 0 or o < 0 or n < 0:
            raise ValueError(f"compiled window: axis {i} has kernel {k}, stride {s}, "
                             f"dilation {d}, pads ({b}, {e}), output {o}, input {n}: kernel, "
                             f"stride and dilation must be >= 1, pads and sizes >= 0")
        if given and o > 0 and (o - 1) * s >= n + b + e:
            raise ValueError(f"compiled window: axis {i}: output {o} at stride {s} runs past "
                             f"the padded input {n + b + e}")


def _empty(*sizes: int) -> bool:
    return any(int(v) == 0 for v in sizes)


# -- Conv --------------------------------------------------------------------------------------

class JitConv:
    """Grouped 1-D/2-D conv with its bias; weights (M, Cg, KH, KW) prepared once."""

    def __init__(self, w: np.ndarray, group: int, kernel: tuple[int, ...]) -> None:
        m, cg = w.shape[0], w.shape[1]
        self.w = np.ascontiguousarray(w.reshape((m, cg) + ((1,) if len(kernel) == 1 else ())
                                                + kernel))
        self.cg, self.mg = int(cg), m // group
        self.nd = len(kernel)
        self.zero = np.zeros(m, dtype=w.dtype)
        # channels-last weights (KH, KW, M) for narrow depthwise outputs
        self.wt = np.ascontiguousarray(self.w[:, 0].transpose(1, 2, 0)) if cg == 1 else None
        self._warm()

    def _warm(self) -> None:
        # compile (or load from the cache) every kernel a run may take, now
        m, dt = self.w.shape[0], self.w.dtype
        x = np.zeros((1, self.cg * (m // self.mg), 3, 3), dt)
        # the weights themselves (a read-only array is a type of its own), over a 3x3 image
        # padded to the kernel's size
        kh, kw = self.w.shape[2], self.w.shape[3]
        _K["conv"](x, self.w, self.zero, np.empty((1, m, 1, 1), dt), self.mg, 1, 1, 1, 1,
                   max(0, kh - 3), max(0, kw - 3), 0, 1)
        if self.wt is not None:
            _K["dwcl"](x, self.wt, self.zero, np.empty((1, m, 1, 1), dt), self.mg, 1, 1, 1, 1,
                       max(0, kh - 3), max(0, kw - 3), 0, 1)
        if dt == np.float32 and _install_native():
            # its serving loop runs the planes: that and the packing compiled now too
            _K["pack_dw"](_slots()[0], x, self.w, self.zero, np.empty((1, m, 1, 1), dt),
                          (self.mg, 1, 1, 1, 1, 0, 0))

    def __call__(self, x: np.ndarray, bias: np.ndarray | None, strides: list[int],
                 dil: list[int], begin: list[int], out_sp: list[int],
                 pool: ThreadPool = SERIAL) -> np.ndarray | None:
        # the loops do not check bounds: a wrong input must fail here, not read past memory
        if x.shape[1] != self.cg * (self.w.shape[0] // self.mg) or x.ndim != self.nd + 2:
            raise ValueError(f"input of shape {x.shape} does not match the weight "
                             f"{self.w.shape} with group {self.w.shape[0] // self.mg}")
        narrow = out_sp[-1] < _MIN_OUT_W
        if narrow and self.wt is None:
            return None
        shape = x.shape[:1] + (self.w.shape[0],) + tuple(out_sp)
        if x.ndim == 3:
            x, strides, dil, begin, out_sp = (x[:, :, None], [1] + strides, [1] + dil,
                                              [0] + begin, [1] + out_sp)
        check_window(x.shape[2:], self.w.shape[2:], strides, dil, begin, out_sp)
        if _empty(*shape):
            return np.zeros(shape, x.dtype)
        x = np.ascontiguousarray(x)
        n = x.shape[0]
        m = self.w.shape[0]
        out = np.empty((n, m, out_sp[0], out_sp[1]), dtype=x.dtype)
        b = self.zero if bias is None else np.ascontiguousarray(bias, dtype=x.dtype)
        if b.shape != (m,):     # the loops read b[m] for every output channel
            raise ValueError(f"input B of shape {list(b.shape)}: expected ({m},), one value "
                             f"per output channel")
        work = out.size * self.w[0].size
        geo = (strides[0], strides[1], dil[0], dil[1], begin[0], begin[1])
        spread = work >= _PAR_MIN_WORK
        if narrow:
            _call(pool, "dwcl", n, spread, (x, self.wt, b, out, self.mg) + geo)
        else:
            args = (x, self.w, b, out, self.mg) + geo
            _call(pool, "conv", n * m, spread, args,
                  (_NK_DW, lambda ji, jf: _K["pack_dw"](ji, *args[:4], args[4:]))
                  if x.dtype == np.float32 else None)
        return out.reshape(shape)


def conv_kernel(w: np.ndarray, group: int) -> JitConv | None:
    """A compiled kernel for a constant conv weight (M, Cg, *kernel) in the compute dtype,
    where it beats the NumPy path and the im2col one: one input channel per group
    (depthwise, or a single-channel input), 1-D or 2-D."""
    kernel = tuple(int(k) for k in w.shape[2:])
    if w.shape[1] > _MAX_CG or len(kernel) not in (1, 2) or not _ready(w.dtype):
        return None
    # one input channel (a grey image, a spectrogram) with group 1 is the depthwise loop
    # with every output from that channel: im2col with K = 9 left BLAS nothing to do
    # (1->32 3x3 at 28x28: 78 us against onnxruntime's 22, one thread)
    return JitConv(np.asarray(w), max(group, 1), kernel)


# -- dense Conv: im2col + BLAS + epilogue in one compiled call ---------------------------------

# a band's im2col buffer is kept near this size (in cache while BLAS reads it), as long as
# it keeps _MIN_COLS columns for BLAS to be efficient
_COLS_BYTES = 512 << 10
_MIN_COLS = 512
# stride-1 dense convs with at least this many input channels and at most this many output
# channels take the tap-by-tap products instead of im2col (_taps_conv_items)
_TAPS_MIN_C = 64
_TAPS_MAX_M = 128
# below this many flops a conv runs on the calling thread with BLAS single-threaded: a
# split costs ~35-40 us (handing a part to a spinning worker, GIL hand-offs included), more
# than it saves on a conv under ~0.15 ms, and so does waking BLAS's own threads
_GEMM_PAR_MIN = 4_000_000
# a conv of fewer images than threads is split in bands of rows while every thread's share
# keeps this many output columns, else in blocks of output channels
_MIN_SPLIT_COLS = 256


class GemmConv:
    """A dense or grouped 1-D/2-D float32/float64 Conv with its epilogue in one compiled call
    per thread (_gemm_conv_items, or _taps_conv_items without im2col): no NumPy call and no
    GIL between the im2col of a band, its product and its epilogue, so the session's threads
    split the images (or the bands of one image) and run them fully in parallel."""

    def __init__(self, w: np.ndarray, gemm: Any, group: int = 1) -> None:
        self.m = int(w.shape[0])
        self.group = group
        self.mg = self.m // group
        self.kernel = tuple(int(k) for k in w.shape[2:])
        if len(self.kernel) == 1:
            self.kernel = (1,) + self.kernel
        self.w = np.ascontiguousarray(w.reshape(self.m, -1))
        self.gemm = gemm
        # the library the kernel calls is loaded sequential (MKL): numpy's BLAS threads
        # never wake for it, so no single_blas block around a one-thread call
        self.sequential = blas.name(w.dtype) == "mkl"
        dt = self.w.dtype
        self.one, self.zero = dt.type(1), dt.type(0)
        self.nob = np.zeros(self.m, dt)
        self.noz = np.zeros((1, 1, 1), dt)
        self._plans: dict[tuple, tuple] = {}
        # compile (or load from the cache) now: a 1x1 conv of one pixel
        y = np.empty((1, self.m, 1), dt)
        x = np.zeros((1, self.w.shape[1], 1, 1), dt)
        items = np.array([[0, 0, 1, 0, self.m]], np.int64)
        for direct in (True, False):      # the weight itself: a read-only one is a type
            _K["gemm_conv"](gemm, x, self.w, y, self.nob, False, self.noz, False, 0,
                            self.zero, self.zero, self.one, self.zero, 1, 1, 1, 1, 1, 1, 0,
                            0, 1, self.m, items, direct, 0, 1)
        # the tap-by-tap form (_taps_conv_items): weights as (KH*KW, M, C)
        kh, kw = self.kernel
        c = self.w.shape[1] // (kh * kw)
        self.wt = None
        if group == 1 and kh * kw > 1 and c >= _TAPS_MIN_C and self.m <= _TAPS_MAX_M:
            self.wt = np.ascontiguousarray(
                self.w.reshape(self.m, c, kh, kw).transpose(2, 3, 0, 1).reshape(kh * kw,
                                                                              self.m, c))
            _K["taps_conv"](gemm, np.zeros((1, c, 1, 1), dt), self.wt, y, self.nob, False,
                            self.noz, False, 0, self.zero, self.zero, self.one, self.zero, kh,
                            kw, 1, 1, kh // 2, kw // 2, 1, items, 0, 1)
        if dt == np.float32 and _install_native():
            # splits run in the hot pool's serving loop: the packing of either form too
            ji, jf = _slots()
            for wk, n_geo in ((self.w, 11), (self.wt, 7)):
                if wk is not None:
                    _K["pack"](ji, jf, x, wk, y, self.nob, False, self.noz, False, 0,
                               self.zero, self.zero, items, (0,) * n_geo)

    def _plan(self, n: int, out: tuple[int, int], direct: bool, t: int) -> tuple:
        """Items (image, row0, row1, m0, m1) and how they are spread over threads."""
        key = (n, out, direct, t)
        hit = self._plans.get(key)
        if hit is not None:
            return hit
        oh, ow = out
        kk = self.w.shape[1]
        if direct:
            band = oh
        else:
            band = max(1, min(oh, _COLS_BYTES // max(kk * ow * self.w.itemsize, 1)))
            band = min(oh, max(band, -(-_MIN_COLS // max(ow, 1))))
        flops = 2 * self.m * kk * oh * ow * n
        # how the work is spread: "one" (the calling thread, BLAS single-threaded: small
        # convs), "split" (one contiguous range of items per thread, BLAS single-threaded
        # inside: images, else bands of rows, else blocks of output channels). Never BLAS's
        # own threads: slower on every shape that fell to them (512->24 1x1 at 14x14: 85
        # us, channel blocks 53), and with OPENBLAS_THREAD_TIMEOUT unset they spin ~0.1 s
        # after and take the cores from the rest of the run (inception_v1 b1 49 ms, 23)
        mode = "one"
        units = n * self.group      # (image, group) blocks: independent, equal work
        parts = 1                   # output channel blocks per group
        if t > 1 and flops >= _GEMM_PAR_MIN:
            mode = "split"
            if units < 2 * t and units % t:         # too few to share evenly
                more = t // math.gcd(units, t)      # parts per unit: a multiple of t in all
                if ow * (oh // more) >= _MIN_SPLIT_COLS:
                    # bands of rows, each thread's share >= _MIN_SPLIT_COLS columns
                    band = min(band, -(-oh // more))
                else:
                    parts = more    # blocks of channels (each thread its own im2col)
        if mode == "split" and parts == 1:
            # bands of equal work: as many per (image, group) block as make the blocks a
            # multiple of the threads, where the threads get few of them
            nb = -(-oh // band)
            if (units * nb) % t and units * nb < 4 * t:
                step = t // math.gcd(units, t)
                band = -(-oh // min(-(-nb // step) * step, oh))
        rows = [(r, min(oh, r + band)) for r in range(0, oh, band)]
        step = -(-self.mg // parts)
        step = -(-step // 8) * 8 if step > 8 else step
        chans = [(c, min(self.mg, c + step)) for c in range(0, self.mg, step)]
        items = np.array([(i, r0, r1, g * self.mg + c0, g * self.mg + c1) for i in range(n)
                          for r0, r1 in rows for g in range(self.group) for c0, c1 in chans],
                         np.int64)
        hit = (items, mode)
        self._plans[key] = hit
        return hit

    def __call__(self, x: np.ndarray, bias: np.ndarray | None, z: np.ndarray | None,
                 kind: int, alpha: float, beta: float, strides: list[int], dil: list[int],
                 begin: list[int], out_sp: list[int], out: np.ndarray | None = None,
                 pool: ThreadPool = SERIAL) -> np.ndarray:
        """The output (N, M, OH*OW), written into ``out`` when given: that shape, the
        weight's dtype, C-contiguous or a slice of channels of a C-contiguous array (the
        joined output of plan/inplace.py)."""
        if x.ndim == 3:
            x, strides, dil, begin, out_sp = (x[:, :, None], [1] + strides, [1] + dil,
                                              [0] + begin, [1] + out_sp)
        n = x.shape[0]
        kh, kw = self.kernel
        if x.ndim != 4:
            raise ValueError(f"GemmConv: input of rank {x.ndim}, expected 3 or 4")
        check_window(x.shape[2:], self.kernel, strides, dil, begin, out_sp)
        if x.shape[1] * kh * kw != self.w.shape[1] * self.group:
            raise ValueError(f"input has {x.shape[1]} channels, the weight expects "
                             f"{self.w.shape[1] // (kh * kw) * self.group}")
        x = np.ascontiguousarray(x, dtype=self.w.dtype)
        oh, ow = out_sp
        direct = (kh == 1 and kw == 1 and strides == [1, 1] and begin == [0, 0]
                  and (oh, ow) == x.shape[2:])
        y = np.empty((n, self.m, oh * ow), dtype=self.w.dtype) if out is None else \
            _channels_of(out)
        if y.shape[0] != n or y.shape[1] < self.m or y.shape[2] != oh * ow:
            raise ValueError(f"GemmConv: output {y.shape} for {n} images of {self.m} "
                             f"channels of {oh}x{ow}")
        if _empty(n, self.m, oh, ow):
            return y
        items, mode = self._plan(n, (oh, ow), direct, pool.threads)
        dt = self.w.dtype
        b = self.nob if bias is None else np.ascontiguousarray(bias, dtype=dt)
        if b.shape != (self.m,):     # _epi_image reads b[m] for every output channel
            raise ValueError(f"input B of shape {list(b.shape)}: expected ({self.m},), one "
                             f"value per output channel")
        zz = self.noz if z is None else np.ascontiguousarray(z, dtype=dt).reshape(y.shape)
        key, wk, native = "gemm_conv", self.w, _NK_GEMM
        geo: tuple = (kh, kw, strides[0], strides[1], dil[0], dil[1], begin[0], begin[1], ow,
                      self.mg)
        if (self.wt is not None and strides == [1, 1] and not direct
                and x.shape[3] + begin[1] <= ow + (kw - 1) * dil[1]):
            # stride 1, the padded row holds the whole input row: no im2col
            key, wk, native = "taps_conv", self.wt, _NK_TAPS
            geo = (kh, kw, dil[0], dil[1], begin[0], begin[1], ow)
        head = (x, wk, y, b, bias is not None, zz, z is not None, kind, dt.type(alpha),
                dt.type(beta))
        args = (self.gemm, *head, self.one, self.zero, *geo, items)
        if native == _NK_GEMM:
            args += (direct,)
            geo += (int(direct),)
        if mode == "one":
            if self.sequential or blas_threads_unused(self.m * self.w.shape[1] * oh * ow * n):
                _K[key](*args, 0, len(items))
            else:
                with pool.single_blas():
                    _K[key](*args, 0, len(items))
        else:
            _call(pool, key, len(items), True, args,
                  (native, lambda ji, jf: _K["pack"](ji, jf, *head, items, geo))
                  if dt == np.float32 else None)
        return y


def _channels_of(out: np.ndarray) -> np.ndarray:
    """``out`` (N, M, L), C-contiguous or channels c0..c0+M of a C-contiguous (N, T, L)
    array, as the kernels' y: itself, or that array seen from channel c0 on, (N, T, L)
    with out's strides. The kernels index y by its own shape and write channels below M
    only, so nothing past out's channels is touched (the view's last image runs past the
    array's end and is never read there)."""
    if out.flags.c_contiguous:
        return out
    n, m, ln = out.shape
    it = out.itemsize
    if out.strides[2] != it or out.strides[1] != ln * it or out.strides[0] % (ln * it):
        raise ValueError(f"GemmConv: out with strides {out.strides} is not a channel slice "
                         f"of a contiguous array")
    t = out.strides[0] // (ln * it)
    return np.lib.stride_tricks.as_strided(out, (n, t, ln), out.strides)


def gemm_conv_kernel(w: np.ndarray, group: int) -> GemmConv | None:
    """The compiled conv for a constant weight (M, Cg, *kernel) in the compute dtype: dense
    or grouped with several channels per group (depthwise has its own kernels), 1-D or
    2-D, float32/float64, when a BLAS exposes its cblas gemm (providers/cpu/blas.py)."""
    if (w.ndim not in (3, 4) or w.shape[1] == 1 or w.shape[0] % group
            or not _ready(w.dtype)):
        return None     # one input channel per group: conv_kernel's
    gemm = blas.gemm(w.dtype)
    if gemm is None:
        return None
    _install_native()
    return GemmConv(np.asarray(w), gemm, group)


# a float32 product of at least this many flops is split over the session's threads (BLAS
# single-threaded inside), in blocks of columns of b, so that each thread reads only its
# part of the weights: the same speed as OpenBLAS's own threads (BERT-base b1 146 vs 150
# ms), which after each product spin ~0.1 s by default (unless OPENBLAS_THREAD_TIMEOUT was
# set before numpy loaded) and took the cores from the next kernels: resnet50 b1 136 ms
# instead of 45 in a program that imports numpy before onnxrt
_MM_SPLIT_MIN = 4_000_000
_MM_GEMV_M = 4      # fewer rows of a: matrix-vector products


def split_matmul(a: np.ndarray, b: np.ndarray, pool: ThreadPool = SERIAL) -> np.ndarray | None:
    """a @ b for 2-D float32 operands, through the BLAS single-threaded and split over the
    session's threads (columns of b, aligned to 64, else rows of a), or None where that does
    not apply: another dtype, a small product, one thread, numba missing. A b stored
    transposed (a tied embedding's .T, Gemm's transB) is read as it is."""
    if (a.dtype != np.float32 or b.dtype != np.float32 or a.ndim != 2 or b.ndim != 2
            or not _ready(a.dtype)):
        return None
    m, k = a.shape
    n = b.shape[1]
    t = pool.threads
    if t < 2 or 2 * m * n * k < _MM_SPLIT_MIN or b.shape[0] != k:
        return None
    if m < _MM_GEMV_M:
        # matrix-vector products: numpy's (BLAS's gemm on one row is 3x slower than its
        # gemv: vgg19's 25088x4096 layer 75 ms against 27), one row in column blocks over
        # the threads (a block's dot products are the whole product's), two or three rows
        # on one thread (column blocks of those were not summed as the whole product is:
        # the light zoo models' tied logits split apart)
        if m > 1:
            with pool.single_blas():
                return np.matmul(a, b)
        c = np.empty((1, n), np.float32)
        cols = split(n, t, 64)

        def part(j: int) -> None:
            n0, n1 = cols[j]
            np.matmul(a, b[:, n0:n1], out=c[:, n0:n1])

        pool.parallel_for(len(cols), part)
        return c
    gemm = blas.gemm(np.float32)
    if gemm is None:
        return None
    a = np.ascontiguousarray(a)
    tb = not b.flags.c_contiguous and b.T.flags.c_contiguous
    b = b.T if tb else np.ascontiguousarray(b)
    c = np.empty((m, n), np.float32)
    if n >= 64 * t:
        parts = split(n, t, 64)
        items = np.array([(0, m, n0, n1) for n0, n1 in parts], np.int64)
    else:
        parts = split(m, t, 8)
        items = np.array([(m0, m1, 0, n) for m0, m1 in parts], np.int64)
    one, zero = np.float32(1), np.float32(0)
    _call(pool, "mm", len(items), True, (gemm, a, b, c, tb, one, zero, items),
          (_NK_MM, lambda ji, jf: _K["pack_mm"](ji, a, b, c, tb, items)))
    return c


_NATIVE: list[bool] = []


def _slots() -> tuple[np.ndarray, np.ndarray]:
    """Scratch slot arrays shaped like the hot pool's, to compile a pack function now."""
    return np.zeros(hotpool.INT_SLOTS, np.int64), np.zeros(hotpool.FLOAT_SLOTS, np.float64)


def _install_native() -> bool:
    """Give the hot pool the serving loop that runs conv items itself (_serve), once;
    False where it cannot (no BLAS gemm, no compiled spin loops)."""
    if _NATIVE:
        return _NATIVE[0]
    with _LOAD_LOCK:
        if not _NATIVE:
            gemm = blas.gemm(np.float32)
            ok = gemm is not None and hotpool.install_native(_K["serve"], (gemm,))
            if ok:      # split_matmul's calls, compiled now rather than in a run, for a
                # weight b (read-only) and for a computed one
                a = np.zeros((1, 1), np.float32)
                ro = a.copy()
                ro.flags.writeable = False
                items = np.zeros((0, 4), np.int64)
                for b in (ro, a):
                    _K["pack_mm"](_slots()[0], a, b, a, False, items)
                    _K["mm"](gemm, a, b, a, False, np.float32(1), np.float32(0), items, 0, 0)
            _NATIVE.append(ok)
    return _NATIVE[0]


# -- Conv's epilogue ---------------------------------------------------------------------------

EPI_KINDS = {None: 0, "Relu": 1, "LeakyRelu": 2, "Clip": 3, "HardSigmoid": 4, "HardSwish": 5,
             "Silu": 6}


def epilogue_kernel(dtype: Any) -> Callable | None:
    """The compiled epilogue (_epi_image) for float32/float64 outputs, loaded or compiled
    now; None without numba. Arguments: (y, i, c0, c1, m0, m1, bias, z, has_z, kind, alpha,
    beta)."""
    if not _ready(dtype):
        return None
    fn = _K["epi"]
    dt = np.dtype(dtype)
    y = np.zeros((1, 1, 1), dt)
    fn(y, 0, 0, 1, 0, 1, np.zeros(1, dt), y, False, 0, dt.type(0), dt.type(0))   # warm
    return fn


# a non-overlapping pool takes the compiled kernel from this much work (outputs x taps)
_NONOVERLAP_MIN_WORK = 2_000_000

# -- MaxPool / AveragePool ------------------------------------------------------------------

class JitPool:
    """Max or average pooling of float32/float64 (N, C, H, W) or (N, C, W) inputs."""

    def __init__(self, is_max: bool, dtype: np.dtype, strided: bool,
                 min_work: int = 0) -> None:
        self.is_max = int(is_max)
        self.dtype = dt = np.dtype(dtype)
        self.strided = strided
        self.min_work = min_work     # smaller calls: None, the NumPy path is faster
        # compile (or load from the cache) now
        x, out, div = np.zeros((1, 2, 2), dt), np.empty((1, 1, 1), dt), np.ones((1, 1), dt)
        if strided:
            geo: tuple = (self.is_max, 1, 1, 1, 1, 1, 1, 0, 0)
            _K["pool"](x, out, div, *geo, 0, 1)
        else:
            geo = (self.is_max, 1, 1, 1, 1, 0, 0)
            _K["spool"](x, out, div, *geo, 0, 1)
        if dt == np.float32 and _install_native():
            # its serving loop runs the planes: that and the packing compiled now too
            _K["pack_pool"](_slots()[0], x, out, div, geo)

    def __call__(self, x: np.ndarray, geo: Any, div: np.ndarray | None,
                 pool: ThreadPool = SERIAL) -> np.ndarray | None:
        n, c = x.shape[:2]
        k, s, d, b, o = geo.kernel, geo.strides, geo.dil, geo.begin, geo.out
        e = [a + b for a, b in zip(geo.end, geo.extra)]
        if x.ndim == 3:
            k, s, d, b, o, e = [1] + k, [1] + s, [1] + d, [0] + b, [1] + o, [0] + e
        if x.ndim not in (3, 4):
            raise ValueError(f"compiled pool: input of rank {x.ndim}, expected 3 or 4")
        check_window(x.shape[2:] if x.ndim == 4 else (1,) + x.shape[2:], k, s, d, b, o, e)
        if n * c * o[0] * o[1] * (k[0] + k[1]) < self.min_work or _empty(n, c, *o):
            return None
        x3 = np.ascontiguousarray(x).reshape(n * c, 1 if x.ndim == 3 else x.shape[2],
                                             x.shape[-1])
        out = np.empty((n * c, o[0], o[1]), dtype=x.dtype)
        if div is None:
            div = np.ones((1, 1), x.dtype)
        else:
            div = np.ascontiguousarray(div.reshape(o[0], o[1]), dtype=x.dtype)
        work = out.size * (k[0] + k[1])
        if s[0] == 1 and s[1] == 1:
            key, native = "spool", _NK_SPOOL
            geo_i = (self.is_max, k[0], k[1], d[0], d[1], b[0], b[1])
        else:
            key, native = "pool", _NK_POOL
            geo_i = (self.is_max, k[0], k[1], s[0], s[1], d[0], d[1], b[0], b[1])
        _call(pool, key, n * c, work >= _PAR_MIN_WORK, (x3, out, div) + geo_i,
              (native, lambda ji, jf: _K["pack_pool"](ji, x3, out, div, geo_i))
              if x3.dtype == np.float32 else None)
        return out.reshape((n, c) + tuple(geo.out))


def pool_kernel(is_max: bool, dtype: Any, kernel: Any, strides: Any) -> JitPool | None:
    """A compiled max/average pool for float32/float64 input (``dtype`` from the node's
    input type) where it wins by measurement: overlapping windows (at stride 1
    _spool_planes, else _dpool_planes); non-overlapping windows (2x2/2) only when big
    enough to split over threads (VGG's 64x224x224: 1.05 ms against NumPy's 1.43; at
    256x56x56 NumPy's 0.43 wins over 0.53)."""
    if not kernel or not _ready(dtype):
        return None
    strides = list(strides or [1] * len(kernel))
    if len(kernel) not in (1, 2):
        return None
    overlap = any(k > s for k, s in zip(kernel, strides))
    return JitPool(is_max, dtype, any(s != 1 for s in strides),
                   0 if overlap else _NONOVERLAP_MIN_WORK)
