"""Compiled (numba) loop nests for the kernels NumPy cannot make fast: depthwise Conv,
MaxPool/AveragePool over 1-D and 2-D images, and Conv's epilogue.

numba is optional: nothing here imports it until a session asks for a compiled kernel
(importing numba costs 0.3-0.6 s, as much as importing onnxrt). Kernels are chosen in the
class kernels' ``__init__`` (``conv_kernel`` and ``pool_kernel`` return None when numba is
missing, disabled with ``ONNXRT_JIT=0``, or the node is not one where a compiled kernel won
by measurement), and they are compiled or loaded from numba's on-disk cache there, so a run
never compiles. The cache lives beside this file, or in the user's cache dir when the
package dir is read-only (numba's own fallback; ``NUMBA_CACHE_DIR`` overrides both); with
neither writable the kernels compile once per process.

Results match the NumPy path: the same products summed in the same order (conv and max
pooling are bit-identical; average pooling sums in another order, within float32 rounding).

Threads: every kernel is compiled ``nogil`` and takes a range of planes (or images) as its
last two arguments; a big enough call is split into one contiguous range per thread of the
session (execute/intra.py, ``intra_op_num_threads``). numba's own ``prange`` lost here: its
OpenMP layer's spinning threads fight the other work on a 2-core machine (median 7-17x
slower than serial), its workqueue layer was at parity and must not be entered from two
threads at once.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from typing import Any, Callable

import numpy as np

from onnxrt.execute import intra
from onnxrt.ir.dtypes import np_dtype

__all__ = ["available", "enabled", "set_enabled", "input_dtype", "conv_kernel", "pool_kernel",
           "epilogue_kernel", "EPI_KINDS"]

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
# are a few pixels long there (measured 0.4x the planar loops at 7 and 14 wide, parity at
# 28, slower from 56)
_MIN_OUT_W = 20


def available() -> bool:
    """numba is installed (it is imported only when a session needs a compiled kernel)."""
    return _HAVE


def enabled() -> bool:
    return _ENABLED[0]


def set_enabled(on: bool) -> None:
    """Choose the compiled paths for sessions created from now on (tests, benchmarks)."""
    _ENABLED[0] = bool(on) and _HAVE


# -- the loop nests (plain Python, compiled by _load) --------------------------------------
#
# One plane at a time, the NumPy depthwise path's algorithm without its temporaries: the
# padded plane is split into its stride phases, flattened, so that every kernel tap is one
# long contiguous multiply-add (or max) loop over all output rows at once; the few columns
# computed past each row's end are dropped when the plane is written out. Loops index slices
# from 0 with range variables: numba then drops its negative-index check and LLVM
# vectorizes them.

def _fill(xc, buf, sh, sw, ph, pw, val):
    """buf (sh*sw, QH, QW) <- the stride phases of plane xc (H, W) padded with ``val``:
    buf[rh*sw + rw, qh, qw] = xc[qh*sh + rh - ph, qw*sw + rw - pw] (``val`` outside)."""
    hh, ww = xc.shape
    qh_n, qw_n = buf.shape[1], buf.shape[2]
    for rh in range(sh):
        for qh in range(qh_n):
            ih = qh * sh + rh - ph
            for rw in range(sw):
                dst = buf[rh * sw + rw, qh]
                if ih < 0 or ih >= hh:
                    for q in range(qw_n):
                        dst[q] = val
                    continue
                off = rw - pw
                lo = 0 if off >= 0 else (sw - 1 - off) // sw
                span = ww - 1 - off
                hi = span // sw + 1 if span >= 0 else 0
                hi = min(hi, qw_n)
                lo = min(lo, qw_n)
                hi = max(hi, lo)
                for q in range(lo):
                    dst[q] = val
                src = xc[ih]
                if sw == 1:
                    d1 = dst[lo:hi]
                    s1 = src[lo + off:hi + off]
                    for i in range(hi - lo):
                        d1[i] = s1[i]
                else:
                    for q in range(lo, hi):
                        dst[q] = src[q * sw + off]
                for q in range(hi, qw_n):
                    dst[q] = val


def _conv_plane(x, w, b, out, p, cg, mg, sh, sw, dh, dw, ph, pw):
    """Output plane p = n * M + m of a grouped conv: x (N, C, H, W), w (M, Cg, KH, KW),
    taps summed in the NumPy path's order (bias last), so results are bit-identical."""
    m_all = out.shape[1]
    n = p // m_all
    m = p - n * m_all
    c0 = (m // mg) * cg
    oh_n, ow_n = out.shape[2], out.shape[3]
    kh_n, kw_n = w.shape[2], w.shape[3]
    qh_n = oh_n + ((kh_n - 1) * dh) // sh
    qw_n = ow_n + ((kw_n - 1) * dw) // sw
    buf = np.empty((sh * sw, qh_n, qw_n), dtype=x.dtype)
    flat = buf.reshape(sh * sw, qh_n * qw_n)
    length = (oh_n - 1) * qw_n + ow_n
    acc = np.empty(length, dtype=x.dtype)
    first = True
    for ci in range(cg):
        _fill(x[n, c0 + ci], buf, sh, sw, ph, pw, 0.0)
        for kh in range(kh_n):
            rh = kh * dh
            for kw in range(kw_n):
                rw = kw * dw
                shift = (rh // sh) * qw_n + rw // sw
                src = flat[(rh % sh) * sw + rw % sw, shift:shift + length]
                wv = w[m, ci, kh, kw]
                if first:
                    for i in range(length):
                        acc[i] = src[i] * wv
                    first = False
                else:
                    for i in range(length):
                        acc[i] += src[i] * wv
    bias = b[m]
    o = out[n, m]
    for oh in range(oh_n):
        row = o[oh]
        a1 = acc[oh * qw_n:oh * qw_n + ow_n]
        for i in range(ow_n):
            row[i] = a1[i] + bias


def _conv_planes(x, w, b, out, cg, mg, sh, sw, dh, dw, ph, pw, lo, hi):
    """Output planes lo..hi-1 (p = n * M + m)."""
    for p in range(lo, hi):
        _conv_plane(x, w, b, out, p, cg, mg, sh, sw, dh, dw, ph, pw)


def _dwcl_image(x, wt, b, out, n, mult, sh, sw, dh, dw, ph, pw):
    """Image n of a depthwise conv channels-last, for small planes with many channels
    (per-plane loops would be a few pixels long): x (N, C, H, W), wt (KH, KW, M), out
    (N, M, OH, OW); every tap is one loop over the M channels. Same products in the same
    order as the NumPy path (its padded taps add zeros, skipped here)."""
    c_n, hh, ww = x.shape[1], x.shape[2], x.shape[3]
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
    than a pass per tap). The buffers are made once per call, not per plane: small planes
    (7x7, 14x14) are dominated by per-plane costs otherwise."""
    hh, ww = x.shape[1], x.shape[2]
    oh_n, ow_n = out.shape[1], out.shape[2]
    span = (ow_n - 1) * sw + 1                   # stride-1 results the picks read
    width = max(span + (kw_n - 1) * dw, pw + ww)
    tmp = np.empty(width, dtype=x.dtype)
    hrow = np.empty(span, dtype=x.dtype)
    pad = x.dtype.type(-np.inf) if is_max else x.dtype.type(0)
    for i in range(width):
        tmp[i] = pad
    mid = tmp[pw:pw + ww]
    for p in range(lo, hi):
        xc = x[p]
        o = out[p]
        for oh in range(oh_n):
            h0 = oh * sh - ph
            if kh_n == 3 and h0 >= 0 and h0 + 2 * dh < hh:
                r0, r1, r2 = xc[h0], xc[h0 + dh], xc[h0 + 2 * dh]
                if is_max:
                    for i in range(ww):
                        mid[i] = _mx(_mx(r0[i], r1[i]), r2[i])
                else:
                    for i in range(ww):
                        mid[i] = r0[i] + r1[i] + r2[i]
            else:
                first = True
                for k in range(kh_n):
                    ih = h0 + k * dh
                    if ih < 0 or ih >= hh:
                        continue
                    r = xc[ih]
                    if first:
                        for i in range(ww):
                            mid[i] = r[i]
                        first = False
                    elif is_max:
                        for i in range(ww):
                            mid[i] = _mx(mid[i], r[i])
                    else:
                        for i in range(ww):
                            mid[i] += r[i]
                if first:    # a window of padding only: -inf (max) or 0, like NumPy's
                    for i in range(ww):
                        mid[i] = pad
            if kw_n == 3:
                t0, t1, t2 = tmp[0:span], tmp[dw:dw + span], tmp[2 * dw:2 * dw + span]
                if is_max:
                    for i in range(span):
                        hrow[i] = _mx(_mx(t0[i], t1[i]), t2[i])
                else:
                    for i in range(span):
                        hrow[i] = t0[i] + t1[i] + t2[i]
            else:
                for i in range(span):
                    hrow[i] = tmp[i]
                for k in range(1, kw_n):
                    t1 = tmp[k * dw:k * dw + span]
                    if is_max:
                        for i in range(span):
                            hrow[i] = _mx(hrow[i], t1[i])
                    else:
                        for i in range(span):
                            hrow[i] += t1[i]
            row = o[oh]
            if is_max:
                for i in range(ow_n):
                    row[i] = hrow[i * sw]
            else:
                d1 = div[oh]
                for i in range(ow_n):
                    row[i] = hrow[i * sw] / d1[i]


def _spool_planes(x, out, div, is_max, kh_n, kw_n, dh, dw, ph, pw, lo, hi):
    """Planes lo..hi-1 of a stride-1 max or average pool over all the planes at once: the
    planes padded into one flat buffer, then one pass along the columns (kh taps, shifted
    by whole rows) and one along the rows (kw taps), each a single long vectorized loop
    over every plane (outputs that straddle two planes are computed and dropped), then
    the picks (and the division by ``div``). Measured 3x faster than per-row loops on
    inception's 3x3/1 averages over 28x28 and 14x14 planes."""
    hh, ww = x.shape[1], x.shape[2]
    oh_n, ow_n = out.shape[1], out.shape[2]
    hp = oh_n + (kh_n - 1) * dh
    wp = ow_n + (kw_n - 1) * dw
    n = hi - lo
    pad = x.dtype.type(-np.inf) if is_max else x.dtype.type(0)
    buf = np.empty(n * hp * wp, dtype=x.dtype)
    h1 = min(hh, hp - ph)
    w1 = min(ww, wp - pw)
    for q in range(n):
        base = q * hp * wp
        xc = x[lo + q]
        for r in range(hp):
            row = buf[base + r * wp:base + r * wp + wp]
            ih = r - ph
            if ih < 0 or ih >= h1:
                for i in range(wp):
                    row[i] = pad
                continue
            for i in range(pw):
                row[i] = pad
            src = xc[ih]
            for i in range(w1):
                row[pw + i] = src[i]
            for i in range(pw + w1, wp):
                row[i] = pad
    total = n * hp * wp
    lv = total - (kh_n - 1) * dh * wp
    v = np.empty(lv, dtype=x.dtype)
    for k in range(kh_n):
        src = buf[k * dh * wp:k * dh * wp + lv]
        if k == 0:
            for i in range(lv):
                v[i] = src[i]
        elif is_max:
            for i in range(lv):
                v[i] = _mx(v[i], src[i])
        else:
            for i in range(lv):
                v[i] += src[i]
    lh = lv - (kw_n - 1) * dw
    h = np.empty(lh, dtype=x.dtype)
    for k in range(kw_n):
        src = v[k * dw:k * dw + lh]
        if k == 0:
            for i in range(lh):
                h[i] = src[i]
        elif is_max:
            for i in range(lh):
                h[i] = _mx(h[i], src[i])
        else:
            for i in range(lh):
                h[i] += src[i]
    for q in range(n):
        o = out[lo + q]
        for oh in range(oh_n):
            b0 = q * hp * wp + oh * wp
            row = o[oh]
            a1 = h[b0:b0 + ow_n]
            if is_max:
                for i in range(ow_n):
                    row[i] = a1[i]
            else:
                d1 = div[oh]
                for i in range(ow_n):
                    row[i] = a1[i] / d1[i]


def _epi_image(y, i, c0, c1, b, z, has_z, kind, alpha, beta):
    """Conv's epilogue on columns c0:c1 of image i of y (N, M, L), in place and in one pass:
    + b[m], + z (same shape as y) when has_z, then the activation ``kind`` (0 none, 1 Relu,
    2 LeakyRelu(alpha), 3 Clip(alpha, beta)); NaN passes through like NumPy's."""
    n = c1 - c0
    for m in range(y.shape[1]):
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
        else:
            for j in range(n):
                v = r[j] + bm
                v = alpha if v < alpha else v
                r[j] = beta if v > beta else v

# -- loading and running ---------------------------------------------------------------------

def _njit(numba: Any, fn: Callable, **kw: Any) -> Any:
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
        for f in (_fill, _conv_plane, _dwcl_image):
            g[f.__name__] = numba.njit(f)
        g["_mx"] = numba.njit(inline="always")(_mx)     # else its loops do not vectorize
        _K.update(epi=_njit(numba, _epi_image), conv=_njit(numba, _conv_planes),
                  dwcl=_njit(numba, _dwcl_images), pool=_njit(numba, _dpool_planes),
                  spool=_njit(numba, _spool_planes))
    return _K


def _call(key: str, total: int, work: int, args: tuple) -> None:
    """Run kernel ``key`` over items 0..total-1 (its last two arguments): in one call, or
    in one contiguous range per thread of the session (execute/intra.py) when the work is
    big enough to pay for waking them."""
    fn = _K[key]
    t = intra.threads() if work >= _PAR_MIN_WORK else 1
    if t <= 1 or total < 2:
        fn(*args, 0, total)
        return
    parts = intra.split(total, t)
    intra.parallel_for(len(parts), lambda k: fn(*args, *parts[k]))


def _ready(dtype: np.dtype) -> bool:
    return _ENABLED[0] and np.dtype(dtype) in _FLOATS and _load() is not None


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
        _K["conv"](x, np.zeros((m, self.cg, 1, 1), dt), self.zero, np.empty((1, m, 1, 1), dt),
                   self.cg, self.mg, 1, 1, 1, 1, 0, 0, 0, 1)
        if self.wt is not None:
            _K["dwcl"](x, np.zeros((1, 1, m), dt), self.zero, np.empty((1, m, 1, 1), dt),
                       self.mg, 1, 1, 1, 1, 0, 0, 0, 1)

    def __call__(self, x: np.ndarray, bias: np.ndarray | None, strides: list[int],
                 dil: list[int], begin: list[int], out_sp: list[int]) -> np.ndarray | None:
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
        x = np.ascontiguousarray(x)
        n = x.shape[0]
        m = self.w.shape[0]
        out = np.empty((n, m, out_sp[0], out_sp[1]), dtype=x.dtype)
        b = self.zero if bias is None else np.ascontiguousarray(bias, dtype=x.dtype)
        work = out.size * self.w[0].size
        geo = (strides[0], strides[1], dil[0], dil[1], begin[0], begin[1])
        if narrow:
            _call("dwcl", n, work, (x, self.wt, b, out, self.mg) + geo)
        else:
            _call("conv", n * m, work, (x, self.w, b, out, self.cg, self.mg) + geo)
        return out.reshape(shape)


def conv_kernel(w: np.ndarray, group: int) -> JitConv | None:
    """A compiled kernel for a constant conv weight (M, Cg, *kernel) in the compute dtype,
    where it beats the NumPy path: grouped (group > 1) with few input channels per group,
    1-D or 2-D."""
    kernel = tuple(int(k) for k in w.shape[2:])
    if group <= 1 or w.shape[1] > _MAX_CG or len(kernel) not in (1, 2) or not _ready(w.dtype):
        return None
    return JitConv(np.asarray(w), group, kernel)


# -- Conv's epilogue ---------------------------------------------------------------------------

EPI_KINDS = {None: 0, "Relu": 1, "LeakyRelu": 2, "Clip": 3}


def epilogue_kernel(dtype: Any) -> Callable | None:
    """The compiled epilogue (_epi_image) for float32/float64 outputs, loaded or compiled
    now; None without numba. Arguments: (y, i, c0, c1, bias, z, has_z, kind, alpha, beta)."""
    if not _ready(dtype):
        return None
    fn = _K["epi"]
    dt = np.dtype(dtype)
    y = np.zeros((1, 1, 1), dt)
    fn(y, 0, 0, 1, np.zeros(1, dt), y, False, 0, dt.type(0), dt.type(0))   # warm
    return fn


# -- MaxPool / AveragePool ------------------------------------------------------------------

class JitPool:
    """Max or average pooling of float32/float64 (N, C, H, W) or (N, C, W) inputs."""

    def __init__(self, is_max: bool, dtype: np.dtype, strided: bool) -> None:
        self.is_max = int(is_max)
        self.dtype = dt = np.dtype(dtype)
        self.strided = strided
        # compile (or load from the cache) now
        if strided:
            _K["pool"](np.zeros((1, 2, 2), dt), np.empty((1, 1, 1), dt), np.ones((1, 1), dt),
                       self.is_max, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1)
        else:
            _K["spool"](np.zeros((1, 2, 2), dt), np.empty((1, 1, 1), dt), np.ones((1, 1), dt),
                        self.is_max, 1, 1, 1, 1, 0, 0, 0, 1)

    def __call__(self, x: np.ndarray, geo: Any, div: np.ndarray | None) -> np.ndarray:
        n, c = x.shape[:2]
        k, s, d, b, o = geo.kernel, geo.strides, geo.dil, geo.begin, geo.out
        if x.ndim == 3:
            k, s, d, b, o = [1] + k, [1] + s, [1] + d, [0] + b, [1] + o
        x3 = np.ascontiguousarray(x).reshape(n * c, 1 if x.ndim == 3 else x.shape[2],
                                             x.shape[-1])
        out = np.empty((n * c, o[0], o[1]), dtype=x.dtype)
        if div is None:
            div = np.ones((1, 1), x.dtype)
        else:
            div = np.ascontiguousarray(div.reshape(o[0], o[1]), dtype=x.dtype)
        if s[0] == 1 and s[1] == 1:
            _call("spool", n * c, out.size * (k[0] + k[1]),
                  (x3, out, div, self.is_max, k[0], k[1], d[0], d[1], b[0], b[1]))
        else:
            _call("pool", n * c, out.size * (k[0] + k[1]),
                  (x3, out, div, self.is_max, k[0], k[1], s[0], s[1], d[0], d[1], b[0], b[1]))
        return out.reshape((n, c) + tuple(geo.out))


def pool_kernel(is_max: bool, dtype: Any, kernel: Any, strides: Any) -> JitPool | None:
    """A compiled max/average pool for float32/float64 input (``dtype`` from the node's
    input type) where it wins by measurement: overlapping windows (at stride 1
    _spool_planes, else _dpool_planes).
    Non-overlapping windows (2x2/2) are faster on the NumPy path (1.3x) and stay there."""
    if not kernel or not _ready(dtype):
        return None
    strides = list(strides or [1] * len(kernel))
    if len(kernel) not in (1, 2) or all(k <= s for k, s in zip(kernel, strides)):
        return None
    return JitPool(is_max, dtype, any(s != 1 for s in strides))
