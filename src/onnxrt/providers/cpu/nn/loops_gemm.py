"""Compiled loop nests around BLAS: Conv's epilogue (bias, residual, activation) over an
output block (``_epi_image``), im2col bands and their products in one call per range of
items (``_gemm_conv_items``), the tap-by-tap products of stride-1 convs
(``_taps_conv_items``) and blocks of a matrix product (``_mm_items``). The BLAS gemm is
passed in (providers/cpu/blas.py: a function pointer called without the GIL). Plain
Python, compiled ``nogil`` by jit.py's loader.
"""

from __future__ import annotations

import math

import numpy as np

_exp_nonpos = None     # vmath.exp_nonpos compiled inline, set by jit.py's loader


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
    costs more than its copy.

    Preconditions: check_window's (GemmConv.__call__), cols holding C*KH*KW rows of
    (r1-r0)*OW, 0 <= r0 <= r1 <= OH, base + C*H*W <= xf.size."""
    nc = (r1 - r0) * ow_n
    zero = xf.dtype.type(0)
    # stride 1 along both axes and output rows as wide as input rows, narrower than
    # _RUN_MAX_W: a tap's valid rows read one contiguous run of the input plane, copied in
    # one loop, then the padded border columns zeroed (wider rows gain nothing from it)
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
                    # LLVM vectorizes the copies
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
    Saves im2col's copy (GemmConv takes it from _TAPS_MIN_C input channels and up to
    _TAPS_MAX_M output channels, where it measured faster).

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
