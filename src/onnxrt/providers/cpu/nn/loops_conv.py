"""Compiled loop nests of the direct convolutions: dense and grouped 1-D/2-D planes over
stride phases (``_conv_planes``), depthwise 3x3 planes, and narrow depthwise outputs
channels-last (``_dwcl_images``). Plain Python, compiled ``nogil`` by jit.py's loader,
which also compiles the helpers they call into them (resolved as this module's globals).
Every entry point takes a range of items (planes or images) as its last two arguments.
"""

from __future__ import annotations

import numpy as np

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
    computed once per call: views and integer divisions per row cost more than the short
    rows they serve. Taps are
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
    padded copy and no loop per row (short rows cost a loop each). The
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
