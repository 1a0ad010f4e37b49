"""Compiled loop nests of MaxPool/AveragePool: any window (``_dpool_planes``) and stride-1
windows by running reductions (``_spool_planes``), over a range of planes. Plain Python,
compiled ``nogil`` by jit.py's loader with their helpers inlined.
"""

from __future__ import annotations

import numpy as np


def _mx(a, v):
    """max(a, v) with NaN winning like np.maximum; this form vectorizes."""
    return a if (a >= v or a != a) else v


def _dpool_planes(x, out, div, is_max, kh_n, kw_n, sh, sw, dh, dw, ph, pw, lo, hi):
    """Planes lo..hi-1 of a max (is_max=1) or average pool, directly: x (P, H, W), out
    (P, OH, OW); averages divide by ``div`` (OH, OW), the NumPy path's count-aware divisor.

    Per output row, the kh input rows it reads are combined (max or sum, contiguous and
    vectorized) into a row buffer padded with the pad value, then the kw taps along that
    row at stride 1 (vectorized), and every sw-th value is picked (faster than taps
    gathered at the stride). 3x3 windows take fused loops (faster than a pass per tap).
    The buffers are made once per call, not per plane, and every access is a flat unsigned
    index: views per row cost more than the small rows (7-56 wide) they hold.

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
    the buffers in cache (_spool_block), faster than per-row loops and than one pass over
    all the planes of a batch. The 3x3
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
    plane, so short rows cost no loop each; on planes narrower than _POOL3_MIN_W
    _spool_block is faster."""
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
