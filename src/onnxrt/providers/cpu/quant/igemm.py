"""Exact 8-bit integer products, compiled (numba): the engine under MatMulInteger,
QLinearMatMul, QGemm, MatMulIntegerToFloat, DynamicQuantizeMatMul, QAttention, ConvInteger
and QLinearConv (and the integer ops a QDQ fusion pass produces).

Both operands are shifted by their zero points into int16 (|v - zp| <= 255 fits), so
per-row and per-column zero points cost nothing in the product and need no correction
terms. The product's heart is a 4x16 (or 1x16) register tile written in LLVM IR (_tile):
pairs of int16 multiplied and summed into int32 lanes, the form LLVM turns into vpmaddwd on
x86 (AVX2 / AVX-512) and into the widening multiply-adds of other targets. Two int16
products summed into int32 never saturate (2 * 255 * 255 < 2**31), so results are the
exact int32 sums on every CPU, unlike the vpmaddubsw kernels onnxruntime uses on CPUs
without VNNI (saturating int16 pair sums). Measured on the project's 2-core AMD machine,
one thread, 128x768 by 768x768: 75 GMAC/s against 43 for OpenBLAS's float32 sgemm.

Layout: the constant operand is packed once per session (``pack_panels``): int16 panels of
16 columns, each K-pair of a panel 32 int16 (column c's two values at 2c and 2c+1). The
other operand is shifted into int16 rows padded to a multiple of 4 (``pack_rows``, per
run). The requantization (or scaling to float, or the raw int32) is fused into the tile's
write-out (_emit): float32(acc + bias) * multiplier, rounded half to even, plus the zero
point, saturated: onnxruntime's requantization.

Compiled once per process through providers/cpu/nn/jit.py's ``compile_once`` (numba's
on-disk cache, so only the first session on a machine compiles); the kernels are ``nogil``
and split their panel bands over the session's intra-op threads (the ``ThreadPool`` a
kernel's run context carries, framework/parallel.py).
Without numba (or with ONNXRT_JIT=0) ``kernels()`` is None and the callers keep their
NumPy path (exact float BLAS products of the shifted operands). One module of ~670 lines:
the packing, the compiled loops and their entry points share one panel layout (MR, NR,
the K-pair interleave), which a split would spread over several files.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.framework.parallel import SERIAL, ThreadPool
from onnxrt.ir.dtypes import np_dtype
from onnxrt.providers.cpu.nn import jit

__all__ = ["kernels", "pack_panels", "pack_rows", "Epilogue", "gemm", "MODE_INT",
           "MODE_FLOAT", "MODE_QUANT", "MR", "NR"]

MR, NR = 4, 16
MODE_INT, MODE_FLOAT, MODE_QUANT = 0, 1, 2
# a band of panels (columns) is sized to stay in L2 while every row block passes over it
_BAND_BYTES = 256 << 10
# below this many multiply-adds a product runs on one thread
_PAR_MIN = 1 << 21


# -- compiled pieces (plain Python, compiled by _build) -------------------------------------

def _emit(tile, r_n, c_n, out, orow, ocol, mode, per_col, scale, s_r, ibias, b_r, fbias,
          f_r, zp, qlo, qhi):
    """Write the int32 tile's first r_n rows and c_n columns to out[orow + i, ocol + j]:
    MODE_INT the sums (+ ibias), MODE_FLOAT float32(acc + ibias) * scale + fbias, MODE_QUANT
    rint(float32(acc + ibias) * scale) + zp saturated to [qlo, qhi]. Parameters are per
    column (``per_col``: arrays of the output's width) or per row (index row * stride:
    stride 0 for one value); the loops are split so that each vectorizes. numba types
    int32 + int32 as int64, whose conversion to float has no AVX2 vector form: the sums
    are narrowed back to int32 (as onnxruntime adds them) before the float conversion, or
    the loops stay scalar (4x slower)."""
    for i in range(r_n):
        ri = orow + i
        o = out[ri, ocol:ocol + c_n]
        t = tile[i]
        if per_col:
            sv = scale[ocol:ocol + c_n]
            iv = ibias[ocol:ocol + c_n]
            fv = fbias[ocol:ocol + c_n]
            if mode == 0:
                for j in range(c_n):
                    o[j] = t[j] + iv[j]
            elif mode == 1:
                for j in range(c_n):
                    o[j] = np.float32(np.int32(t[j] + iv[j])) * sv[j] + fv[j]
            else:
                for j in range(c_n):
                    v = np.rint(np.float32(np.int32(t[j] + iv[j])) * sv[j]) + zp
                    o[j] = np.int32(min(max(v, qlo), qhi))
        else:
            _emit_row(t, c_n, o, mode, scale[ri * s_r], ibias[ri * b_r], fbias[ri * f_r], zp,
                      qlo, qhi)


def _emit_row(t, c_n, o, mode, sc, ib, fb, zp, qlo, qhi):
    """One row of _emit with its parameters as scalars."""
    if mode == 0:
        for j in range(c_n):
            o[j] = t[j] + ib
    elif mode == 1:
        for j in range(c_n):
            o[j] = np.float32(np.int32(t[j] + ib)) * sc + fb
    else:
        for j in range(c_n):
            v = np.rint(np.float32(np.int32(t[j] + ib)) * sc) + zp
            o[j] = np.int32(min(max(v, qlo), qhi))


def _gemm_bands(a16, bp, m, n, band, out, mode, per_col, scale, s_r, ibias, b_r, fbias, f_r,
                zp, qlo, qhi, lo, hi):
    """out[:m, :n] <- epilogue(a16 @ panels) over the panel bands lo..hi-1 (columns
    band*16*lo ...): a16 (Mp, Kp) int16 rows, bp (NP, Kp/2, 32) int16 panels."""
    kp2 = bp.shape[1]
    lda = a16.shape[1]
    n_p = bp.shape[0]
    w = band * 16
    tile = np.empty((4, w), np.int32)      # a row block's sums over the band, then emitted
    ab = a16.ctypes.data
    bb = bp.ctypes.data
    tb = tile.ctypes.data
    for bd in range(lo, hi):
        p0 = bd * band
        p1 = min(p0 + band, n_p)
        for i in range(0, m, 4):
            rows = min(4, m - i)
            for p in range(p0, p1):
                if rows == 1:
                    _tile1(ab + i * lda * 2, bb + p * kp2 * 64, kp2, tb + (p - p0) * 64)
                else:
                    _tile4(ab + i * lda * 2, lda, bb + p * kp2 * 64, kp2,
                           tb + (p - p0) * 64, w)
            _emit(tile, rows, min(w, n - p0 * 16), out, i, p0 * 16, mode, per_col, scale,
                  s_r, ibias, b_r, fbias, f_r, zp, qlo, qhi)


def _pack_rows(a, za, z_r, out):
    """out[i, j] = a[i, j] - za[i * z_r] (int16) for the (M, K) block of out; the padding
    of out beyond it is left as it was (zeros)."""
    m, k = a.shape
    for i in range(m):
        z = np.int16(za[i * z_r])
        for j in range(k):
            out[i, j] = np.int16(a[i, j]) - z


def _im2col_band(x, xpad, img, c0, xz, cg, hh, ww, kh_n, kw_n, sh, sw, dh, dw, ph, pw, ow_n, p_n,
                 q0, q1, kp, buf):
    """Panels of the conv's shifted input for output pixels q0..q1-1 (a whole number of
    16-pixel panels from q0), channels c0..c0+cg-1 of image img of x (N, C, H, W): buf
    (panels, kp/2, 32) int16, K ordered (channel, kernel row, kernel column) like the
    weight; padding and pixels past p_n are 0 (the shifted zero point)."""
    taps = kh_n * kw_n
    k_n = cg * taps
    n_q = q1 - q0
    if taps == 1 and sh == 1 and sw == 1 and ph == 0 and pw == 0:
        # a 1x1 conv's columns are the input's pixels
        n_in = min(n_q, p_n - q0)
        xf = x[img].reshape(-1)
        for kk in range(kp):
            half = kk & 1
            kq = kk >> 1
            if kk >= k_n:
                for t in range(n_q):
                    buf[t >> 4, kq, ((t & 15) << 1) + half] = 0
                continue
            base = (c0 + kk) * hh * ww + q0
            for t in range(n_in):
                buf[t >> 4, kq, ((t & 15) << 1) + half] = np.int16(xf[base + t]) - xz
            for t in range(n_in, n_q):
                buf[t >> 4, kq, ((t & 15) << 1) + half] = 0
        return
    # the padded, shifted copy xpad (N, C, H + pads, W + pads) int16: no bounds checks;
    # K taken in pairs, each pair one 32-value run of the panel. K past k_n and pixels
    # past p_n read any value: the weight's padding is 0 and those outputs are not written
    hp, wp = xpad.shape[2], xpad.shape[3]
    xf = xpad[img].reshape(-1)
    n_in = min(n_q, p_n - q0)
    po = np.empty(n_q, np.int64)
    for t in range(n_q):
        q = q0 + min(t, n_in - 1)
        oh = q // ow_n
        po[t] = (oh * sh) * wp + (q - oh * ow_n) * sw
    ko = np.zeros(kp, np.int64)
    for kk in range(k_n):
        c = kk // taps
        r = kk - c * taps
        ki = r // kw_n
        ko[kk] = (c0 + c) * hp * wp + ki * dh * wp + (r - ki * kw_n) * dw
    for p in range(n_q >> 4):
        b = po[p * 16]
        # the panel's 16 pixels one stride apart in xpad (one output row, mostly): two
        # strided runs interleaved, which vectorizes; else one gather per value
        even = po[p * 16 + 15] - b == 15 * sw
        for kq in range(kp // 2):
            dst = buf[p, kq]
            if even:
                s0 = xf[b + ko[2 * kq]:b + ko[2 * kq] + 15 * sw + 1:sw]
                s1 = xf[b + ko[2 * kq + 1]:b + ko[2 * kq + 1] + 15 * sw + 1:sw]
                for u in range(16):
                    dst[2 * u] = s0[u]
                    dst[2 * u + 1] = s1[u]
            else:
                k0 = ko[2 * kq]
                k1 = ko[2 * kq + 1]
                for u in range(16):
                    o = po[p * 16 + u]
                    dst[2 * u] = xf[o + k0]
                    dst[2 * u + 1] = xf[o + k1]


def _conv_items(x, xpad, w16, xz, geo, m_g, groups, p_n, ow_n, band, out, mode, scale, s_r, ibias,
                b_r, fbias, f_r, zp, qlo, qhi, lo, hi):
    """Items lo..hi-1 = (image, group, band of 16*band output pixels) of a 2-D conv:
    im2col of the band into panels (in cache), then every 4-row block of the group's
    weights w16 (G, Mgp, Kp) against them, the epilogue writing out (N, M, P)."""
    cg, hh, ww, kh_n, kw_n, sh, sw, dh, dw, ph, pw = geo
    kp = w16.shape[2]
    kp2 = kp // 2
    n_band = -(-p_n // (16 * band))
    buf = np.empty((band, kp2, 32), np.int16)
    tile = np.empty((4, band * 16), np.int32)
    bb = buf.ctypes.data
    tb = tile.ctypes.data
    for it in range(lo, hi):
        img = it // (groups * n_band)
        rest = it - img * groups * n_band
        g = rest // n_band
        bd = rest - g * n_band
        q0 = bd * band * 16
        q1 = min(q0 + band * 16, -(-p_n // 16) * 16)
        _im2col_band(x, xpad, img, g * cg, xz, cg, hh, ww, kh_n, kw_n, sh, sw, dh, dw, ph, pw, ow_n,
                     p_n, q0, q1, kp, buf)
        n_pan = (q1 - q0) // 16
        wb = w16[g].ctypes.data
        o2 = out[img]
        for i in range(0, m_g, 4):
            for p in range(n_pan):
                _tile4(wb + i * kp * 2, kp, bb + p * kp2 * 64, kp2, tb + p * 64, band * 16)
            _emit(tile, min(4, m_g - i), min(n_pan * 16, p_n - q0), o2, g * m_g + i, q0, mode,
                  False, scale, s_r, ibias, b_r, fbias, f_r, zp, qlo, qhi)


_DW_BLOCK = 2048


def _dw_items(x, w16, xz, geo, mult, out, mode, scale, s_r, ibias, b_r, fbias, f_r, zp, qlo,
              qhi, lo, hi):
    """Planes lo..hi-1 (n * M + m) of a depthwise conv (one input channel per group, mult
    outputs each). The input plane, shifted by its zero point and zero padded, is split
    into its stride phases and flattened (once per input channel) so that every tap is one
    long contiguous int16 multiply-add over all output rows at once (the few columns past
    each row's end are computed and dropped): short rows made per-row loops cost their
    overhead (MobileNet's 24x24 planes, 3x slower)."""
    kh_n, kw_n, sh, sw, dh, dw, ph, pw = geo
    hh, ww = x.shape[2], x.shape[3]
    m_all, oh_n, ow_n = out.shape[1], out.shape[2], out.shape[3]
    qh_n = oh_n + ((kh_n - 1) * dh) // sh
    qw_n = ow_n + ((kw_n - 1) * dw) // sw
    pl = qh_n * qw_n
    taps = kh_n * kw_n
    toff = np.empty(taps, np.int64)
    for ki in range(kh_n):
        for kj in range(kw_n):
            rh = ki * dh
            rw = kj * dw
            toff[ki * kw_n + kj] = ((rh % sh) * sw + rw % sw) * pl + (rh // sh) * qw_n + \
                rw // sw
    buf = np.zeros(sh * sw * pl, np.int16)
    length = (oh_n - 1) * qw_n + ow_n
    acc = np.empty(length, np.int32)
    last = -1
    for it in range(lo, hi):
        img = it // m_all
        m = it - img * m_all
        src = img * (m_all // mult) + m // mult
        if src != last:
            last = src
            xp = x[img, m // mult]
            for rh in range(sh):
                for rw in range(sw):
                    d0 = (rh * sw + rw) * pl
                    for qh in range(qh_n):
                        ih = qh * sh + rh - ph
                        row = buf[d0 + qh * qw_n:d0 + (qh + 1) * qw_n]
                        if ih < 0 or ih >= hh:
                            for j in range(qw_n):
                                row[j] = 0
                            continue
                        xr = xp[ih]
                        # columns j whose input column j * sw + rw - pw is inside the row
                        off = rw - pw
                        j0 = min(qw_n, 0 if off >= 0 else (sw - 1 - off) // sw)
                        j1 = max(j0, min(qw_n, (ww - 1 - off) // sw + 1)) \
                            if ww - 1 - off >= 0 else j0
                        for j in range(j0):
                            row[j] = 0
                        if sw == 1:
                            seg = xr[j0 + off:j1 + off]
                            for j in range(j1 - j0):
                                row[j0 + j] = np.int16(seg[j]) - xz
                        elif sw == 2:
                            # a constant stride: the loads vectorize as an interleaved group
                            for j in range(j0, j1):
                                row[j] = np.int16(xr[2 * j + off]) - xz
                        else:
                            for j in range(j0, j1):
                                row[j] = np.int16(xr[j * sw + off]) - xz
                        for j in range(j1, qw_n):
                            row[j] = 0
        # blocks of the plane small enough for L1, three taps a pass: the sums stay in
        # cache across the taps instead of a pass over the whole plane per tap
        for i0 in range(0, length, _DW_BLOCK):
            n_i = min(_DW_BLOCK, length - i0)
            a = acc[i0:i0 + n_i]
            for i in range(n_i):
                a[i] = 0
            t = 0
            while t + 3 <= taps:
                w0 = np.int32(w16[m, t])
                w1 = np.int32(w16[m, t + 1])
                w2 = np.int32(w16[m, t + 2])
                s0 = buf[toff[t] + i0:toff[t] + i0 + n_i]
                s1 = buf[toff[t + 1] + i0:toff[t + 1] + i0 + n_i]
                s2 = buf[toff[t + 2] + i0:toff[t + 2] + i0 + n_i]
                for i in range(n_i):
                    a[i] += np.int32(np.int32(s0[i]) * w0 + np.int32(s1[i]) * w1 +
                                     np.int32(s2[i]) * w2)
                t += 3
            while t < taps:
                w0 = np.int32(w16[m, t])
                s0 = buf[toff[t] + i0:toff[t] + i0 + n_i]
                for i in range(n_i):
                    a[i] += np.int32(np.int32(s0[i]) * w0)
                t += 1
        orows = out[img, m]
        sc = scale[m * s_r]
        ib = ibias[m * b_r]
        fb = fbias[m * f_r]
        for oh in range(oh_n):
            _emit_row(acc[oh * qw_n:oh * qw_n + ow_n], ow_n, orows[oh], mode, sc, ib, fb, zp,
                      qlo, qhi)


# a depthwise conv's sums are exact in float32 while every partial sum stays below 2**24:
# |x - xz| <= 255 and |w - zw| <= 255, so up to this many taps
DW_F32_MAX_TAPS = (1 << 24) // (255 * 255)


def _dw_f32_items(x, w32, xz, geo, out, mode, scale, s_r, ibias, b_r, fbias, f_r, zp, qlo,
                  qhi, lo, hi):
    """Planes lo..hi-1 (n * M + m, one input channel per output) of a depthwise conv in
    float32, exact (DW_F32_MAX_TAPS): each input plane shifted by its zero point into a
    zero-padded float32 plane, then the taps as fused multiply-adds, three kernel columns a
    pass so that the sums are loaded and stored once per kernel row; stride 1 over the
    whole flattened plane at once (the columns past each row's end are computed and
    dropped), other strides row by row. Twice the int32 per-plane loop's rate (_dw_items:
    int32 multiplies and its stride-phase copies)."""
    kh_n, kw_n, sh, sw, dh, dw, ph, pw = geo
    hh, ww = x.shape[2], x.shape[3]
    m_all, oh_n, ow_n = out.shape[1], out.shape[2], out.shape[3]
    hp = max(hh + ph, (oh_n - 1) * sh + (kh_n - 1) * dh + 1)
    wp = max(ww + pw, (ow_n - 1) * sw + (kw_n - 1) * dw + 1)
    pl = np.zeros(hp * wp, np.float32)
    flat = sh == 1 and sw == 1
    length = (oh_n - 1) * wp + ow_n if flat else ow_n
    acc = np.empty(length, np.float32)
    ai = np.empty(ow_n, np.int32)
    fz = np.float32(xz)
    mult = m_all // x.shape[1]
    last = -1
    for it in range(lo, hi):
        img = it // m_all
        m = it - img * m_all
        src = img * x.shape[1] + m // mult
        if src != last:
            last = src
            xp = x[img, m // mult]
            for h in range(hh):
                row = pl[(h + ph) * wp + pw:(h + ph) * wp + pw + ww]
                xr = xp[h]
                for j in range(ww):
                    row[j] = np.float32(xr[j]) - fz
        orows = out[img, m]
        if flat:
            for i in range(length):
                acc[i] = 0
            for ki in range(kh_n):
                kj = 0
                while kj + 3 <= kw_n:
                    w0 = w32[m, ki * kw_n + kj]
                    w1 = w32[m, ki * kw_n + kj + 1]
                    w2 = w32[m, ki * kw_n + kj + 2]
                    o = ki * dh * wp + kj * dw
                    s0 = pl[o:o + length]
                    s1 = pl[o + dw:o + dw + length]
                    s2 = pl[o + 2 * dw:o + 2 * dw + length]
                    for i in range(length):
                        acc[i] += w0 * s0[i] + w1 * s1[i] + w2 * s2[i]
                    kj += 3
                while kj < kw_n:
                    w0 = w32[m, ki * kw_n + kj]
                    o = ki * dh * wp + kj * dw
                    s0 = pl[o:o + length]
                    for i in range(length):
                        acc[i] += w0 * s0[i]
                    kj += 1
            for oh in range(oh_n):
                a = acc[oh * wp:oh * wp + ow_n]
                for j in range(ow_n):
                    ai[j] = np.int32(a[j])
                _emit_row(ai, ow_n, orows[oh], mode, scale[m * s_r], ibias[m * b_r],
                          fbias[m * f_r], zp, qlo, qhi)
            continue
        for oh in range(oh_n):
            for j in range(ow_n):
                acc[j] = 0
            for ki in range(kh_n):
                base = (oh * sh + ki * dh) * wp
                kj = 0
                while kj + 3 <= kw_n:
                    w0 = w32[m, ki * kw_n + kj]
                    w1 = w32[m, ki * kw_n + kj + 1]
                    w2 = w32[m, ki * kw_n + kj + 2]
                    b = base + kj * dw
                    s0 = pl[b:b + (ow_n - 1) * sw + 1]
                    s1 = pl[b + dw:b + dw + (ow_n - 1) * sw + 1]
                    s2 = pl[b + 2 * dw:b + 2 * dw + (ow_n - 1) * sw + 1]
                    if sw == 2:
                        # a constant stride: the loads vectorize as an interleaved group
                        for j in range(ow_n):
                            acc[j] += w0 * s0[2 * j] + w1 * s1[2 * j] + w2 * s2[2 * j]
                    else:
                        for j in range(ow_n):
                            acc[j] += w0 * s0[j * sw] + w1 * s1[j * sw] + w2 * s2[j * sw]
                    kj += 3
                while kj < kw_n:
                    w0 = w32[m, ki * kw_n + kj]
                    s0 = pl[base + kj * dw:base + kj * dw + (ow_n - 1) * sw + 1]
                    for j in range(ow_n):
                        acc[j] += w0 * s0[j * sw]
                    kj += 1
            for j in range(ow_n):
                ai[j] = np.int32(acc[j])
            _emit_row(ai, ow_n, orows[oh], mode, scale[m * s_r], ibias[m * b_r],
                      fbias[m * f_r], zp, qlo, qhi)


def _dw_to_nhwc(x, xz, ph, pw, xt):
    """xt[n, h + ph, w + pw, c] = x[n, c, h, w] - xz (int16), channels in blocks of 16 so
    that each pass reads 16 planes' rows and writes runs of 16; the border of xt stays as
    the caller zeroed it."""
    n_n, c_n, hh, ww = x.shape
    hp, wp = xt.shape[1], xt.shape[2]
    xf = x.reshape(-1)
    tf = xt.reshape(-1)
    for img in range(n_n):
        for c0 in range(0, c_n, 16):
            c1 = min(c0 + 16, c_n)
            for h in range(hh):
                for w in range(ww):
                    d = ((img * hp + h + ph) * wp + w + pw) * c_n
                    s0 = ((img * c_n) * hh + h) * ww + w
                    for c in range(c0, c1):
                        tf[d + c] = np.int16(xf[s0 + c * hh * ww]) - xz


def _dw_nhwc_rows(xt, wt, geo, out, mode, scale, ibias, fbias, zp, qlo, qhi, lo, hi):
    """Output rows lo..hi-1 (n * OH + oh) of a depthwise conv (one output per channel) from
    the channels-last shifted, padded input xt (N, Hp, Wp, C) and the weight taps wt
    (taps, C): every tap one multiply-add over all channels of a pixel (no per-plane
    setup, any stride), the epilogue writing out (N, C, OH, OW); its parameters one per
    channel."""
    kh_n, kw_n, sh, sw, dh, dw = geo
    hp, wp, c_n = xt.shape[1], xt.shape[2], xt.shape[3]
    oh_n, ow_n = out.shape[2], out.shape[3]
    plane = oh_n * ow_n
    xf = xt.reshape(-1)
    wf = wt.reshape(-1)
    of = out.reshape(-1)
    acc = np.empty(c_n, np.int32)
    res = np.empty(c_n, out.dtype)
    for it in range(lo, hi):
        img = it // oh_n
        oh = it - img * oh_n
        for ow in range(ow_n):
            for c in range(c_n):
                acc[c] = 0
            for ki in range(kh_n):
                for kj in range(kw_n):
                    xb = ((img * hp + oh * sh + ki * dh) * wp + ow * sw + kj * dw) * c_n
                    wb = (ki * kw_n + kj) * c_n
                    # slices indexed by the loop counter (no negative-index fix-up) and int32
                    # products (numba's int64 ones): else the loop stays scalar
                    xs = xf[xb:xb + c_n]
                    ws = wf[wb:wb + c_n]
                    for c in range(c_n):
                        acc[c] += np.int32(np.int32(xs[c]) * np.int32(ws[c]))
            # the epilogue over the channels (contiguous parameters: it vectorizes), then
            # scattered to the channels' planes
            if mode == 0:
                for c in range(c_n):
                    res[c] = acc[c] + ibias[c]
            elif mode == 1:
                for c in range(c_n):
                    res[c] = np.float32(np.int32(acc[c] + ibias[c])) * scale[c] + fbias[c]
            else:
                for c in range(c_n):
                    v = np.rint(np.float32(np.int32(acc[c] + ibias[c])) * scale[c]) + zp
                    res[c] = np.int32(min(max(v, qlo), qhi))
            ob = img * c_n * plane + oh * ow_n + ow
            for c in range(c_n):
                of[ob + c * plane] = res[c]


def _tile_intrinsic(numba: Any, mr: int) -> Any:
    """The register tile: an mr x 16 block of int32 sums over kp2 K-pairs, stored to c
    (row stride ldc ints). Arguments are addresses (int64) and element counts: a (mr rows
    of int16, row stride lda elements; mr == 1 takes no lda), b (a packed panel), c."""
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    i16, i32, i64 = ir.IntType(16), ir.IntType(32), ir.IntType(64)
    v16i16, v8i32, v16i32 = ir.VectorType(i16, 16), ir.VectorType(i32, 8), ir.VectorType(i32, 16)
    even = ir.Constant(v8i32, [ir.Constant(i32, 2 * j) for j in range(8)])
    odd = ir.Constant(v8i32, [ir.Constant(i32, 2 * j + 1) for j in range(8)])
    bcast = ir.Constant(v8i32, [ir.Constant(i32, 0)] * 8)

    def k64(v: int) -> Any:
        return ir.Constant(i64, v)

    def codegen(context, builder, signature, args):
        if mr == 1:
            a, b, kp2, c = args
            lda, ldc = k64(0), k64(16)
        else:
            a, lda, b, kp2, c, ldc = args
        accs = [cgutils.alloca_once_value(builder, ir.Constant(v8i32, None))
                for _ in range(2 * mr)]
        with cgutils.for_range(builder, kp2) as loop:
            idx = loop.index
            boff = builder.add(b, builder.mul(idx, k64(64)))
            bv = []
            for h in range(2):
                p = builder.inttoptr(builder.add(boff, k64(32 * h)), v16i16.as_pointer())
                bv.append(builder.sext(builder.load(p, align=2), v16i32))
            for r in range(mr):
                el = builder.add(builder.mul(lda, k64(r)), builder.mul(idx, k64(2)))
                ptr = builder.inttoptr(builder.add(a, builder.mul(el, k64(2))), i32.as_pointer())
                pair = builder.load(ptr, align=2)
                vec = builder.insert_element(ir.Constant(v8i32, ir.Undefined), pair,
                                             ir.Constant(i32, 0))
                vec = builder.shuffle_vector(vec, vec, bcast)
                vec = builder.sext(builder.bitcast(vec, v16i16), v16i32)
                for h in range(2):
                    prod = builder.mul(bv[h], vec)
                    s = builder.add(builder.shuffle_vector(prod, prod, even),
                                    builder.shuffle_vector(prod, prod, odd))
                    acc = accs[2 * r + h]
                    builder.store(builder.add(builder.load(acc), s), acc)
        for r in range(mr):
            for h in range(2):
                el = builder.add(builder.mul(ldc, k64(r)), k64(8 * h))
                ptr = builder.inttoptr(builder.add(c, builder.mul(el, k64(4))),
                                       v8i32.as_pointer())
                builder.store(builder.load(accs[2 * r + h]), ptr, align=4)
        return context.get_dummy_value()

    if mr == 1:
        @intrinsic
        def tile1(typingctx, a, b, kp2, c):
            return types.void(types.int64, types.int64, types.int64, types.int64), codegen
        return tile1

    @intrinsic
    def tile(typingctx, a, lda, b, kp2, c, ldc):
        return types.void(*([types.int64] * 6)), codegen
    return tile


_SLOT: list[Any] = []


def _build(numba: Any) -> dict[str, Any]:
    g = globals()
    g["_tile4"] = _tile_intrinsic(numba, 4)
    g["_tile1"] = _tile_intrinsic(numba, 1)
    g["_emit"] = numba.njit(inline="always", error_model="numpy")(_emit)
    g["_emit_row"] = numba.njit(inline="always", error_model="numpy")(_emit_row)
    g["_im2col_band"] = numba.njit(error_model="numpy")(_im2col_band)
    k = {"gemm": jit._njit(numba, _gemm_bands), "rows": jit._njit(numba, _pack_rows),
         "conv": jit._njit(numba, _conv_items), "dw": jit._njit(numba, _dw_items),
         "dw_f32": jit._njit(numba, _dw_f32_items),
         "dw_nhwc": jit._njit(numba, _dw_nhwc_rows), "to_nhwc": jit._njit(numba, _dw_to_nhwc)}
    _self_test(k)
    return k


def kernels() -> dict[str, Any] | None:
    """The compiled kernels (compiled or loaded from the disk cache on first use), or None
    where numba is missing or disabled: the callers then take their NumPy path."""
    return jit.compile_once(_SLOT, _build)


def _self_test(k: dict[str, Any]) -> None:
    """A small product against NumPy's exact one: a target where the IR tile miscompiles
    raises here and the NumPy path is used (compile_once keeps None)."""
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, (5, 37)).astype(np.uint8)
    b = rng.integers(-128, 128, (37, 19)).astype(np.int8)
    bp = pack_panels(b.astype(np.int16))
    y = gemm(k, a, np.array([3], np.int32), bp, 19, Epilogue.raw())
    ref = (a.astype(np.int64) - 3) @ b.astype(np.int64)
    if not np.array_equal(y, ref):
        raise RuntimeError("the compiled integer product disagrees with NumPy's")


# -- packing and calling ------------------------------------------------------------------

def pack_panels(b16: np.ndarray) -> np.ndarray:
    """(K, N) int16 (already shifted by its zero points) -> (ceil(N/16), ceil(K/2), 32)
    panels, zero padded."""
    k, n = b16.shape
    kp, np_ = k + (k & 1), -(-n // NR) * NR
    full = np.zeros((kp, np_), np.int16)
    full[:k, :n] = b16
    return np.ascontiguousarray(
        full.reshape(kp // 2, 2, np_ // NR, NR).transpose(2, 0, 3, 1).reshape(
            np_ // NR, kp // 2, 2 * NR))


def pack_rows(k: dict[str, Any], a: np.ndarray, za: np.ndarray, kp: int) -> np.ndarray:
    """(M, K) 8-bit rows shifted by ``za`` (one value, or one per row) as int16 (Mp, kp),
    Mp a multiple of MR, zero padded."""
    m = a.shape[0]
    out = np.zeros((-(-max(m, 1) // MR) * MR, kp), np.int16)
    k["rows"](np.ascontiguousarray(a), za, 1 if za.size > 1 else 0, out)
    return out


class Epilogue:
    """What the tile write-out does: ``mode`` and its parameters, each one value or one per
    output row (a conv's channels), or, with ``per_col``, one value or one per column (a
    product's columns of B)."""

    __slots__ = ("mode", "out_dtype", "per_col", "scale", "ibias", "fbias", "zp", "qlo", "qhi")

    def __init__(self, mode: int, out_dtype: Any, scale: np.ndarray | None = None,
                 ibias: np.ndarray | None = None, fbias: np.ndarray | None = None,
                 per_col: bool = False, zp: float = 0.0,
                 qrange: tuple[int, int] = (0, 0)) -> None:
        self.mode = mode
        self.out_dtype = np.dtype(out_dtype)
        self.per_col = per_col
        self.scale = _flat(scale, np.float32)
        self.ibias = _flat(ibias, np.int32)
        self.fbias = _flat(fbias, np.float32)
        self.zp = np.float32(zp)
        self.qlo, self.qhi = np.float32(qrange[0]), np.float32(qrange[1])

    @classmethod
    def raw(cls) -> Epilogue:
        return cls(MODE_INT, np.int32)

    def args(self, n: int) -> tuple:
        """The kernels' epilogue arguments (per_col, scale, s_r, ibias, b_r, fbias, f_r, zp,
        qlo, qhi) for an output n wide: per-column parameters spread to n values."""
        ps = []
        for p in (self.scale, self.ibias, self.fbias):
            if self.per_col:
                if p.size not in (1, n):
                    raise ValueError(f"an output parameter of {p.size} values for {n} columns")
                ps += [p if p.size == n else np.full(n, p[0], p.dtype), 0]
            else:
                ps += [p, 1 if p.size > 1 else 0]
        return (self.per_col, *ps, self.zp, self.qlo, self.qhi)


def _flat(p: np.ndarray | None, dt: Any) -> np.ndarray:
    # always a new writable array: a read-only one (a constant's view) is another type to
    # the compiled kernels, compiled again at the first run
    return np.array(np.zeros(1, dt) if p is None else p, dt).reshape(-1)


def gemm(k: dict[str, Any], a: np.ndarray, za: np.ndarray, bp: np.ndarray, n: int,
         epi: Epilogue, pool: ThreadPool = SERIAL) -> np.ndarray:
    """epilogue((a - za) @ B) for 2-D 8-bit ``a`` (M, K) and B packed by pack_panels (its
    zero points already taken out): (M, n) of ``epi.out_dtype``, split over ``pool``. The
    caller has checked that a's K matches the panels' (the compiled loops have no bounds
    checks)."""
    m = a.shape[0]
    kp = 2 * bp.shape[1]
    if a.shape[1] > kp or a.shape[1] < kp - 1:
        raise ValueError(f"inner dimensions differ: {a.shape[1]} against {kp}")
    a16 = pack_rows(k, a, np.ascontiguousarray(za, np.int32).reshape(-1), kp)
    out = np.empty((m, n), epi.out_dtype)
    if m == 0 or n == 0:
        return out
    band = max(1, min(bp.shape[0], _BAND_BYTES // max(1, kp * 32)))
    n_band = -(-bp.shape[0] // band)
    args = (a16, bp, m, n, band, out, epi.mode) + epi.args(n)
    spread = m * n * kp >= _PAR_MIN
    if spread and n_band < pool.threads and bp.shape[0] > 1:
        # fewer bands than threads: narrower bands
        band = -(-bp.shape[0] // pool.threads)
        n_band = -(-bp.shape[0] // band)
        args = args[:4] + (band,) + args[5:]
    pool.for_ranges(k["gemm"], args, n_band, spread)
    return out


# -- the ops' entry points ------------------------------------------------------------------

_Q8 = (np.dtype(np.uint8), np.dtype(np.int8))


def shifted16(v: np.ndarray, zp: np.ndarray | None, axis: int) -> np.ndarray:
    """v - zp as int16: ``zp`` None, one value, or one per index of ``axis`` of v."""
    out = v.astype(np.int16)
    if zp is None or np.size(zp) == 0:
        return out
    z = np.asarray(zp).astype(np.int16)
    if z.size == 1:
        return out - z.reshape(())
    shape = [1] * v.ndim
    shape[axis] = z.size
    return out - z.reshape(shape)


class PackedB:
    """A constant 8-bit B (K, N) minus its zero point (one, or one per column), in panels."""

    __slots__ = ("k", "n", "panels")

    def __init__(self, b: np.ndarray, zb: np.ndarray | None) -> None:
        if b.ndim != 2 or b.dtype not in _Q8:
            raise ValueError(f"a packed B must be 2-D 8-bit, got {b.dtype} {b.shape}")
        if zb is not None and np.size(zb) not in (1, b.shape[1]):
            raise ValueError(f"B's zero point of shape {np.shape(zb)} is neither one value "
                             f"nor one per column ({b.shape[1]})")
        self.k, self.n = b.shape
        self.panels = pack_panels(shifted16(b, zb, 1))


def usable(a: np.ndarray, za: np.ndarray | None) -> bool:
    """The compiled product applies: 8-bit A with a per-tensor zero point, numba there."""
    return (a.dtype in _Q8 and (za is None or np.size(za) == 1) and a.ndim >= 1
            and kernels() is not None)


def product(a: np.ndarray, za: np.ndarray | None, pb: PackedB, epi: Epilogue,
            pool: ThreadPool = SERIAL) -> np.ndarray:
    """epilogue((a - za) @ B) for a (..., K) over the packed B, split over ``pool``; the
    caller checked ``usable``."""
    if a.shape[-1] != pb.k:
        raise ValueError(f"A's last dimension {a.shape[-1]} differs from B's {pb.k} rows")
    k = kernels()
    z = np.zeros(1, np.int32) if za is None else np.asarray(za).astype(np.int32).reshape(1)
    a2 = a.reshape(-1, pb.k) if a.ndim != 2 else a
    y = gemm(k, a2, z, pb.panels, pb.n, epi, pool)
    return y.reshape(a.shape[:-1] + (pb.n,))


class PackedConvW:
    """A constant conv weight (M, Cg, kh, kw) minus its zero point(s) as int16: rows of
    (G, Mg padded to 4, Kp) for the im2col product, or (M, taps) for depthwise."""

    __slots__ = ("m", "group", "cg", "ks", "k", "rows", "depthwise", "taps", "rows32")

    def __init__(self, w: np.ndarray, zw: np.ndarray | None, group: int) -> None:
        m = w.shape[0]
        self.m, self.group, self.cg = m, group, w.shape[1]
        self.ks = tuple(int(d) for d in w.shape[2:])
        self.k = int(np.prod(w.shape[1:]))
        w16 = shifted16(w, zw, 0).reshape(m, self.k)
        self.depthwise = self.cg == 1 and group > 1
        self.taps = None
        self.rows32 = None
        if self.depthwise:
            self.rows = np.ascontiguousarray(w16)
            if self.k <= DW_F32_MAX_TAPS:   # the exact float32 loop (_dw_f32_items)
                self.rows32 = w16.astype(np.float32)
            if m == group:      # one output per channel: the channels-last taps too
                self.taps = np.ascontiguousarray(w16.T)
            return
        mg = m // group
        kp = self.k + (self.k & 1)
        rows = np.zeros((group, -(-mg // MR) * MR, kp), np.int16)
        rows[:, :mg, :self.k] = w16.reshape(group, mg, self.k)
        self.rows = rows


_CONV_BAND_BYTES = 128 << 10
# depthwise convs of output planes up to this many pixels (strided: the second) run
# channels-last (_dw_nhwc_rows): the per-plane setup of _dw_items (its stride phases) costs
# more than the transposition there. One thread, under the CPU lock: 576x14x14 stride 2
# 0.84 -> 0.34 ms, 960x7x7 0.39 -> 0.25, 192x28x28 stride 2 0.39 -> 0.33; larger planes
# lose (32x112x112 0.73 -> 1.88, 384x14x14 0.34 -> 0.46)
DW_NHWC_MAX_OUT = 64
DW_NHWC_MAX_OUT_S2 = 196
# a conv splits over the threads from this many multiply-adds: its per-plane and per-band
# overheads make even small ones worth ~0.3 ms (MobileNetV2's 576x14x14 depthwise: 0.55 ms)
_CONV_PAR_MIN = 1 << 19


def conv2d(x: np.ndarray, xz: int, pw: PackedConvW, dil: list[int], st: list[int],
           pads: list[int], epi: Epilogue, pool: ThreadPool = SERIAL,
           dw_nhwc: bool | None = None) -> np.ndarray | None:
    """The integer conv of 8-bit x (N, C, H, W) or (N, C, W) with the packed weight, the
    epilogue's parameters per output channel (row); None where the compiled path does not
    apply (the caller's NumPy path runs). Shapes are checked here: the loops are not.
    ``dw_nhwc``: a depthwise conv's loop (channels-last or per plane), by default chosen
    by the plane's size."""
    k = kernels()
    if k is None or x.dtype not in _Q8 or x.ndim not in (3, 4) or len(pw.ks) != x.ndim - 2:
        return None
    spatial_out = x.ndim - 2
    if x.ndim == 3:
        x = x[:, :, None]
        ks, dil, st = (1,) + pw.ks, [1] + list(dil), [1] + list(st)
        pads = [0, pads[0], 0, pads[1]]
    else:
        ks = pw.ks
    n, c, hh, ww = x.shape
    if c != pw.cg * pw.group:
        raise ValueError(f"input has {c} channels, the weight expects {pw.cg * pw.group}")
    kh, kw = ks
    oh = (hh + pads[0] + pads[2] - (kh - 1) * dil[0] - 1) // st[0] + 1
    ow = (ww + pads[1] + pads[3] - (kw - 1) * dil[1] - 1) // st[1] + 1
    if oh <= 0 or ow <= 0:
        raise ValueError(f"the kernel {ks} (dilations {dil}) exceeds the padded input "
                         f"{(hh, ww)}")
    x = np.ascontiguousarray(x)
    if epi.per_col or any(p.size not in (1, pw.m) for p in (epi.scale, epi.ibias, epi.fbias)):
        raise ValueError("conv epilogue parameters must be per tensor or per channel")
    ep = epi.args(pw.m)[1:]
    work = n * pw.m * oh * ow * pw.k
    spread = work >= _CONV_PAR_MIN
    if pw.depthwise:
        out = np.empty((n, pw.m, oh, ow), epi.out_dtype)
        if dw_nhwc is None:
            dw_nhwc = oh * ow <= (DW_NHWC_MAX_OUT_S2 if max(st) > 1 else DW_NHWC_MAX_OUT)
        if pw.taps is not None and dw_nhwc:
            # small planes: channels-last, every tap a vector over the channels
            xt = np.zeros((n, hh + pads[0] + pads[2], ww + pads[1] + pads[3], c), np.int16)
            k["to_nhwc"](x, np.int16(xz), pads[0], pads[1], xt)
            geo = (kh, kw, st[0], st[1], dil[0], dil[1])
            per_c = tuple(p if p.size == c else np.full(c, p[0], p.dtype)
                          for p in (epi.scale, epi.ibias, epi.fbias))
            pool.for_ranges(k["dw_nhwc"], (xt, pw.taps, geo, out, epi.mode) + per_c +
                            (epi.zp, epi.qlo, epi.qhi), n * oh, spread)
            return out if spatial_out == 2 else out.reshape(n, pw.m, ow)
        geo = (kh, kw, st[0], st[1], dil[0], dil[1], pads[0], pads[1])
        if pw.rows32 is not None:
            pool.for_ranges(k["dw_f32"], (x, pw.rows32, np.int16(xz), geo, out, epi.mode) + ep,
                            n * pw.m, spread)
            return out if spatial_out == 2 else out.reshape(n, pw.m, ow)
        pool.for_ranges(k["dw"], (x, pw.rows, np.int16(xz), geo, pw.m // pw.group, out,
                                  epi.mode) + ep, n * pw.m, spread)
        return out if spatial_out == 2 else out.reshape(n, pw.m, ow)
    p_n = oh * ow
    kp = pw.rows.shape[2]
    band = max(1, min(-(-p_n // NR), _CONV_BAND_BYTES // (kp * 32)))
    n_band = -(-p_n // (NR * band))
    items = n * pw.group * n_band
    if spread and items < pool.threads and p_n > NR:
        band = max(1, -(-p_n // (NR * pool.threads)))
        n_band = -(-p_n // (NR * band))
        items = n * pw.group * n_band
    out = np.empty((n, pw.m, p_n), epi.out_dtype)
    geo = (pw.cg, hh, ww, kh, kw, st[0], st[1], dil[0], dil[1], pads[0], pads[1])
    if kh * kw == 1 and st == [1, 1] and not any(pads):
        xpad = np.zeros((1, 1, 1, 1), np.int16)     # the 1x1 path reads x itself
    else:
        xpad = np.zeros((n, c, hh + pads[0] + pads[2], ww + pads[1] + pads[3]), np.int16)
        np.subtract(x, np.int16(xz), out=xpad[:, :, pads[0]:pads[0] + hh,
                                                pads[1]:pads[1] + ww], dtype=np.int16)
    pool.for_ranges(k["conv"], (x, xpad, pw.rows, np.int16(xz), geo, pw.m // pw.group, pw.group,
                                p_n, ow, band, out, epi.mode) + ep, items, spread)
    return out.reshape((n, pw.m, oh, ow) if spatial_out == 2 else (n, pw.m, ow))


def _a_dtype(node: Any, idx: int = 0) -> np.dtype:
    dt = jit.input_dtype(node) if idx == 0 else None
    return dt if dt in _Q8 else np.dtype(np.uint8)


def warm_product(pb: PackedB, a_dtype: Any, epi: Epilogue) -> None:
    """Compile (or load) now the kernels a run with these types takes: a run never
    compiles."""
    product(np.zeros((1, pb.k), a_dtype), None, pb, epi)


def warm_conv(pw: PackedConvW, x_dtype: Any, epi: Epilogue) -> None:
    x = np.zeros((1, pw.cg * pw.group) + (3,) * len(pw.ks), x_dtype)
    k = len(pw.ks)
    for layout in ((True, False) if pw.depthwise else (None,)):
        conv2d(x, 0, pw, [1] * k, [1] * k, [d - 1 for d in pw.ks] * 2, epi, dw_nhwc=layout)


def out_dtype(node: Any, default: Any) -> np.dtype:
    """The node's first output element type where the graph declares it, else default."""
    t = node.output_types[0] if node.output_types else None
    if t is not None and t.HasField("tensor_type") and t.tensor_type.elem_type:
        try:
            return np.dtype(np_dtype(t.tensor_type.elem_type))
        except Exception:
            pass
    return np.dtype(default)


def prepack(node: Any, b_idx: int, zb_idx: int, trans: bool = False,
            warm: Epilogue | None = None) -> PackedB | None:
    """The node's constant 8-bit 2-D B (input ``b_idx``, transposed with ``trans``) and its
    constant zero point (input ``zb_idx``, absent, one value or one per column) packed for
    the compiled product, once per session; None where that does not apply."""
    ci = node.constant_inputs
    if b_idx not in ci or (node.input_present(zb_idx) and zb_idx not in ci):
        return None
    b = np.asarray(ci[b_idx])
    if b.ndim != 2 or b.dtype not in _Q8 or kernels() is None:
        return None
    b = b.T if trans else b
    zb = ci.get(zb_idx)
    if zb is not None and np.size(zb) not in (1, b.shape[1]):
        return None
    pb = PackedB(b, zb)
    try:
        warm_product(pb, _a_dtype(node), warm or Epilogue.raw())
    except Exception:       # a kernel failed to compile here: the NumPy path runs
        return None
    return pb
