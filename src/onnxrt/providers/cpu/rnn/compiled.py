"""The whole time loop of RNN, GRU and LSTM as one compiled (numba) call per node.

The input projections of every step and direction come in precomputed (one BLAS product,
biases folded, ``gx``); the loop does the recurrent product, the gates and the state update
of every step for a block of batch rows of one direction, without returning to Python.
Items are (direction, block of rows): the two directions of a bidirectional layer, or the
blocks of a large batch, run on the session's threads (its ThreadPool,
framework/parallel.py) when the work pays for the split. Rows whose ``sequence_lens`` entry
is shorter stop early (their Y rows stay zero, Y_h/Y_c keep the last state); reverse
directions walk each row from its own last step.

Activations are codes (``ACT_CODES``) applied to a whole gate vector at a time; sigmoid and
tanh run branch-free on providers/cpu/vmath.py's exponential for float32 (the loops
vectorize; libm's exp per element cost as much as the recurrent product at hidden 128) and
on libm for float64. Preconditions (checked by the caller, rnn/_common.py): arrays
contiguous, shapes consistent, every ``lens`` entry in [0, T].
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from onnxrt.framework.parallel import ThreadPool
from onnxrt.providers.cpu import vmath

__all__ = ["ACT_CODES", "kernel", "run_items", "KIND_RNN", "KIND_GRU", "KIND_LSTM"]

ACT_CODES = {"relu": 0, "tanh": 1, "sigmoid": 2, "affine": 3, "leakyrelu": 4,
             "thresholdedrelu": 5, "scaledtanh": 6, "hardsigmoid": 7, "elu": 8,
             "softsign": 9, "softplus": 10}
KIND_RNN, KIND_GRU, KIND_LSTM = 0, 1, 2
# below this many multiply-adds in the recurrent products a node runs on one thread
# (a split costs ~40 us; one step at hidden 128 is ~65k multiply-adds, ~2-3 us)
PAR_MIN_WORK = 1 << 21
# input projections of fewer multiply-adds run in _project, larger ones through BLAS
PROJECT_MAX_WORK = 1 << 18

_exp_nonpos = vmath.exp_nonpos      # compiled into the loops below by kernel()


def _exp_neg_abs(v, n, tmp, bits, scale, fast):
    """tmp[:n] <- exp(-|v[:n]|) (vmath's polynomial for float32, libm for float64)."""
    if fast:
        for j in range(n):
            tmp[j] = -abs(v[j])
        _exp_nonpos(tmp[:n], bits[:n], scale[:n])
    else:
        for j in range(n):
            tmp[j] = math.exp(-abs(v[j]))


def _act(v, n, code, alpha, beta, tmp, bits, scale, fast):
    """v[:n] <- f(v[:n]) for activation ``code`` (ACT_CODES) with its alpha and beta."""
    one = v.dtype.type(1)
    a = v.dtype.type(alpha)
    b = v.dtype.type(beta)
    if code == 2:       # sigmoid: 1/(1+e) or e/(1+e), e = exp(-|x|) never overflows
        _exp_neg_abs(v, n, tmp, bits, scale, fast)
        for j in range(n):
            e = tmp[j]
            r = one / (one + e)
            v[j] = r if v[j] >= 0 else e * r
    elif code == 1 or code == 6:    # tanh, scaledtanh a * tanh(b * x)
        if code == 6:
            for j in range(n):
                v[j] = v[j] * b
        for j in range(n):
            tmp[j] = v[j] + v[j]
        _exp_neg_abs(tmp, n, tmp, bits, scale, fast)
        for j in range(n):
            e = tmp[j]
            t = (one - e) / (one + e)
            v[j] = t if v[j] >= 0 else -t
        if code == 6:
            for j in range(n):
                v[j] = v[j] * a
    elif code == 0:
        for j in range(n):
            v[j] = v[j] if v[j] > 0 else v.dtype.type(0)
    elif code == 3:
        for j in range(n):
            v[j] = v[j] * a + b
    elif code == 4:
        for j in range(n):
            v[j] = v[j] if v[j] >= 0 else v[j] * a
    elif code == 5:
        for j in range(n):
            v[j] = v[j] if v[j] > a else v.dtype.type(0)
    elif code == 7:
        for j in range(n):
            w = v[j] * a + b
            w = w if w > 0 else v.dtype.type(0)
            v[j] = w if w < one else one
    elif code == 8:
        for j in range(n):
            x = v[j]
            v[j] = x if x >= 0 else a * (math.exp(x) - one)
    elif code == 9:
        for j in range(n):
            v[j] = v[j] / (one + abs(v[j]))
    else:               # softplus, stable: max(x, 0) + log1p(exp(-|x|))
        for j in range(n):
            x = v[j]
            v[j] = (x if x > 0 else v.dtype.type(0)) + math.log1p(math.exp(-abs(x)))


def _clip(v, n, clip):
    c = v.dtype.type(clip)
    for j in range(n):
        x = v[j]
        x = x if x < c else c
        v[j] = x if x > -c else -c


def _products(hs, rt, p, nb, ncols, active):
    """p[r, :ncols] = hs[r] @ rt[:, :ncols] for the active rows r < nb; rt (H, G*H).
    Four rows of rt per pass over p: fewer loads and stores of p per multiply-add."""
    h_n = rt.shape[0]
    zero = p.dtype.type(0)
    for r in range(nb):
        if active[r]:
            for j in range(ncols):
                p[r, j] = zero
    k4 = h_n - h_n % 4
    for k in range(0, k4, 4):
        r0, r1, r2, r3 = rt[k], rt[k + 1], rt[k + 2], rt[k + 3]
        r = 0
        while r < nb:
            if not active[r]:
                r += 1
                continue
            a0, a1, a2, a3 = hs[r, k], hs[r, k + 1], hs[r, k + 2], hs[r, k + 3]
            pr = p[r]
            q = r + 1
            if q < nb and active[q]:
                # two rows per pass: each load of the four weight rows feeds both (a
                # batch of 8 at hidden 256 was bound by those loads, not by the FMAs)
                b0, b1, b2, b3 = hs[q, k], hs[q, k + 1], hs[q, k + 2], hs[q, k + 3]
                pq = p[q]
                for j in range(ncols):
                    w0, w1, w2, w3 = r0[j], r1[j], r2[j], r3[j]
                    pr[j] += a0 * w0 + a1 * w1 + a2 * w2 + a3 * w3
                    pq[j] += b0 * w0 + b1 * w1 + b2 * w2 + b3 * w3
                r += 2
            else:
                for j in range(ncols):
                    pr[j] += a0 * r0[j] + a1 * r1[j] + a2 * r2[j] + a3 * r3[j]
                r += 1
    for k in range(k4, h_n):
        rk = rt[k]
        for r in range(nb):
            if not active[r]:
                continue
            a0 = hs[r, k]
            pr = p[r]
            for j in range(ncols):
                pr[j] += a0 * rk[j]


def _step_time(b, s, d, lens, rev):
    """The time index row ``b`` reads at step ``s`` of direction ``d`` (a reverse direction
    walks each row's own length backwards)."""
    return lens[b] - 1 - s if rev[d] else s


def _gx_offset(b, s, d, lens, rev, batch_major, t_n, b_n, d_n, gh):
    """Where row ``b``'s input projection for step ``s`` of direction ``d`` starts in the
    flat gx: (T, B, D, G*H), or (B, T, D, G*H) when batch_major."""
    t = _step_time(b, s, d, lens, rev)
    if batch_major:
        return ((b * t_n + t) * d_n + d) * gh
    return ((t * b_n + b) * d_n + d) * gh


def _recurrent_items(kind, gx, rt, rbh, peep, h0, c0, y, yh, yc, lens, rev, codes, alphas,
                     betas, clip, lbr, in_forget, has_peep, want_y, batch_major, fast, bs,
                     lo, hi):
    """Items lo..hi-1 (item = direction * blocks + block of ``bs`` rows).

    gx: flat input projections, (T, B, D, G*H) or (B, T, D, G*H) when batch_major;
    rt (D, H, G*H): recurrent weights transposed; rbh (D, H): GRU's recurrent bias of the
    h gate (not folded into gx); peep (D, 3H): LSTM's peepholes i, o, f; h0, c0, yh, yc
    (D, B, H); y: flat, (T, D, B, H) or (B, T, D, H) when batch_major, zero-filled;
    lens (B,) int64 (a row of length 0 gets zero final states, as in onnxruntime);
    rev (D,) int64; codes/alphas/betas (D, 3): the f, g, h activations."""
    d_n, h_n, gh = rt.shape
    b_n = h0.shape[1]
    t_n = gx.shape[0] // max(1, d_n * b_n * gh)
    nblk = (b_n + bs - 1) // bs
    dt = h0.dtype
    hs = np.empty((bs, h_n), dt)
    cs = np.empty((bs, h_n), dt)
    p = np.empty((bs, gh), dt)
    rh = np.empty((bs, h_n), dt)
    p2 = np.empty((bs, h_n), dt)
    g = np.empty(gh, dt)
    tmp = np.empty(gh, dt)
    bits = np.empty(gh, np.int32)
    scale = bits.view(np.float32)
    active = np.zeros(bs, np.bool_)
    one = dt.type(1)
    has_clip = clip > 0
    for it in range(lo, hi):
        d = it // nblk
        b0 = (it - d * nblk) * bs
        nb = min(b_n, b0 + bs) - b0
        maxl = 0
        for r in range(nb):
            for j in range(h_n):
                hs[r, j] = h0[d, b0 + r, j]
                cs[r, j] = c0[d, b0 + r, j]
            maxl = max(maxl, lens[b0 + r])
        fc, gc, hc = codes[d, 0], codes[d, 1], codes[d, 2]
        fa, ga, ha = alphas[d, 0], alphas[d, 1], alphas[d, 2]
        fb, gb, hb = betas[d, 0], betas[d, 1], betas[d, 2]
        rtd = rt[d]
        ncols = 2 * h_n if kind == 1 and not lbr else gh
        for s in range(maxl):
            for r in range(nb):
                active[r] = s < lens[b0 + r]
            _products(hs, rtd, p, nb, ncols, active)
            for r in range(nb):
                if not active[r]:
                    continue
                xo = _gx_offset(b0 + r, s, d, lens, rev, batch_major, t_n, b_n, d_n, gh)
                for j in range(ncols):
                    g[j] = p[r, j] + gx[xo + j]
                if kind == 2:       # LSTM: gates i, o, f, c
                    if has_peep:
                        for j in range(h_n):
                            g[j] += peep[d, j] * cs[r, j]
                            g[2 * h_n + j] += peep[d, 2 * h_n + j] * cs[r, j]
                    if has_clip:    # i, f and c now; o once its peephole is in
                        _clip(g[:h_n], h_n, clip)
                        _clip(g[2 * h_n:], 2 * h_n, clip)
                    _act(g[:h_n], h_n, fc, fa, fb, tmp, bits, scale, fast)
                    if in_forget:
                        for j in range(h_n):
                            g[2 * h_n + j] = one - g[j]
                    else:
                        _act(g[2 * h_n:3 * h_n], h_n, fc, fa, fb, tmp, bits, scale, fast)
                    _act(g[3 * h_n:], h_n, gc, ga, gb, tmp, bits, scale, fast)
                    for j in range(h_n):
                        cs[r, j] = g[2 * h_n + j] * cs[r, j] + g[j] * g[3 * h_n + j]
                    if has_peep:    # the output gate's peephole reads the new cell
                        for j in range(h_n):
                            g[h_n + j] += peep[d, h_n + j] * cs[r, j]
                    if has_clip:
                        _clip(g[h_n:2 * h_n], h_n, clip)
                    _act(g[h_n:2 * h_n], h_n, fc, fa, fb, tmp, bits, scale, fast)
                    for j in range(h_n):
                        p2[r, j] = cs[r, j]
                    _act(p2[r], h_n, hc, ha, hb, tmp, bits, scale, fast)
                    for j in range(h_n):
                        hs[r, j] = g[h_n + j] * p2[r, j]
                elif kind == 1:     # GRU: gates z, r, h
                    if has_clip:
                        _clip(g, 2 * h_n, clip)
                    _act(g[:2 * h_n], 2 * h_n, fc, fa, fb, tmp, bits, scale, fast)
                    for j in range(2 * h_n):
                        p[r, j] = g[j]      # keep z and r for the second phase
                    if lbr:
                        for j in range(h_n):
                            g[2 * h_n + j] = gx[xo + 2 * h_n + j] + g[h_n + j] * (
                                p[r, 2 * h_n + j] + rbh[d, j])
                        _gru_finish(g, hs, r, h_n, clip, has_clip, gc, ga, gb, tmp, bits,
                                    scale, fast)
                    else:
                        for j in range(h_n):
                            rh[r, j] = g[h_n + j] * hs[r, j]
                else:               # RNN
                    if has_clip:
                        _clip(g, h_n, clip)
                    _act(g, h_n, fc, fa, fb, tmp, bits, scale, fast)
                    for j in range(h_n):
                        hs[r, j] = g[j]
            if kind == 1 and not lbr:
                # the h gate reads (r * h) @ Rh: a second product over the rows
                _products(rh, rtd[:, 2 * h_n:], p2, nb, h_n, active)
                for r in range(nb):
                    if not active[r]:
                        continue
                    xo = _gx_offset(b0 + r, s, d, lens, rev, batch_major, t_n, b_n, d_n, gh)
                    for j in range(2 * h_n):
                        g[j] = p[r, j]
                    for j in range(h_n):
                        g[2 * h_n + j] = gx[xo + 2 * h_n + j] + p2[r, j] + rbh[d, j]
                    _gru_finish(g, hs, r, h_n, clip, has_clip, gc, ga, gb, tmp, bits, scale,
                                fast)
            if want_y:
                for r in range(nb):
                    if not active[r]:
                        continue
                    b = b0 + r
                    t = _step_time(b, s, d, lens, rev)
                    if batch_major:
                        yo = ((b * t_n + t) * d_n + d) * h_n
                    else:
                        yo = ((t * d_n + d) * b_n + b) * h_n
                    for j in range(h_n):
                        y[yo + j] = hs[r, j]
        for r in range(nb):
            # a row of length 0 has no last state: zeros, as onnxruntime writes
            keep = lens[b0 + r] > 0
            for j in range(h_n):
                yh[d, b0 + r, j] = hs[r, j] if keep else dt.type(0)
            if kind == 2:
                for j in range(h_n):
                    yc[d, b0 + r, j] = cs[r, j] if keep else dt.type(0)


def _gru_finish(g, hs, r, h_n, clip, has_clip, gc, ga, gb, tmp, bits, scale, fast):
    """h <- (1 - z) * g(h gate) + z * h, with z = g[:H] and the h gate's input at g[2H:]."""
    hg = g[2 * h_n:3 * h_n]
    if has_clip:
        _clip(hg, h_n, clip)
    _act(hg, h_n, gc, ga, gb, tmp, bits, scale, fast)
    for j in range(h_n):
        hh = hg[j]
        hs[r, j] = hh + g[j] * (hs[r, j] - hh)


def _project(x, w, b, out):
    """out (N, M) <- x (N, K) @ w (K, M) + b: the input projection of a few rows (a BLAS
    call through numpy costs more in setting its thread count than in multiplying)."""
    n_n, k_n = x.shape
    m_n = w.shape[1]
    for r in range(n_n):
        o = out[r]
        for j in range(m_n):
            o[j] = b[j]
        k4 = k_n - k_n % 4
        for k in range(0, k4, 4):
            a0, a1, a2, a3 = x[r, k], x[r, k + 1], x[r, k + 2], x[r, k + 3]
            w0, w1, w2, w3 = w[k], w[k + 1], w[k + 2], w[k + 3]
            for j in range(m_n):
                o[j] += a0 * w0[j] + a1 * w1[j] + a2 * w2[j] + a3 * w3[j]
        for k in range(k4, k_n):
            a0 = x[r, k]
            w0 = w[k]
            for j in range(m_n):
                o[j] += a0 * w0[j]


_KERNEL: list[Any] = []


def kernel() -> Any:
    """(the compiled loop, the compiled small projection) from numba's disk cache or
    compiled once per process, warmed for float32 and float64; None where numba is missing
    or disabled (ONNXRT_JIT=0)."""
    from onnxrt.providers.cpu.nn import jit

    def build(numba: Any) -> Any:
        g = globals()
        g["_exp_nonpos"] = vmath.compiled()
        for f in (_exp_neg_abs, _act, _clip, _products, _gru_finish, _step_time, _gx_offset):
            g[f.__name__] = numba.njit(inline="always" if f in (_clip, _step_time, _gx_offset)
                                       else "never",
                                       error_model="numpy", fastmath={"contract"})(f)
        fn = jit._njit(numba, _recurrent_items, fastmath={"contract"})
        proj = jit._njit(numba, _project, fastmath={"contract"})
        for dt in (np.float32, np.float64):
            _warm(fn, np.dtype(dt))
            proj(np.zeros((1, 1), dt), np.zeros((1, 1), dt), np.zeros(1, dt),
                 np.zeros((1, 1), dt))
        return fn, proj

    return jit.compile_once(_KERNEL, build)


def _warm(fn: Any, dt: np.dtype) -> None:
    """One call per dtype with the argument types runs use, so no run compiles."""
    d, b, h, gh = 1, 1, 1, 4
    z = np.zeros
    codes = np.full((1, 3), 2, np.int64)
    fn(2, z(d * b * gh, dt), z((d, h, gh), dt), z((d, h), dt), z((d, 3 * h), dt),
       z((d, b, h), dt), z((d, b, h), dt), z(d * b * h, dt), z((d, b, h), dt),
       z((d, b, h), dt), np.ones(b, np.int64), z(d, np.int64), codes, z((d, 3)),
       z((d, 3)), 0.0, False, False, False, True, False, dt == np.float32, 1, 0, 1)


def run_items(fn: Any, args: tuple, items: int, spread: bool, pool: ThreadPool) -> None:
    """``fn(*args, lo, hi)`` over the items, one range per thread of the session when
    ``spread`` (the caller's judgement: at least PAR_MIN_WORK multiply-adds)."""
    if items:
        pool.for_ranges(fn, args, items, spread=spread and items > 1)
