"""ai.onnx.ml SVMRegressor and SVMClassifier (libsvm conventions: one-vs-one decision values,
votes, Platt probabilities coupled pairwise), vectorized over the batch."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from onnxrt.framework.parallel import SERIAL, ThreadPool, pool_of
from onnxrt.framework.kernel import NodeInfo
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.ml._common import (ML, as_2d_float, labels_array, post_transform,
                                             transform_name)

_F32 = np.float32


class _Kernel:
    def __init__(self, attrs: dict[str, Any]) -> None:
        kt = attrs.get("kernel_type", "LINEAR")
        if kt not in ("LINEAR", "POLY", "RBF", "SIGMOID"):
            raise ValueError(f"unknown kernel_type {kt!r}")
        self.type = kt
        p = list(attrs.get("kernel_params") or []) + [0.0, 0.0, 0.0]
        self.gamma, self.coef0, self.degree = float(p[0]), float(p[1]), float(p[2])

    def __call__(self, x: np.ndarray, sv: np.ndarray, sv_sq: np.ndarray | None) -> np.ndarray:
        """(N, n_vectors) kernel values between samples and support vectors."""
        if self.type == "RBF":
            # in place on the product: a row of a few hundred vectors is all call overhead
            d = x @ sv.T
            d *= -2.0
            d += np.add.reduce(x * x, axis=1, keepdims=True)
            d += sv_sq
            np.maximum(d, 0.0, out=d)
            d *= -self.gamma
            return np.exp(d, out=d)
        dot = x @ sv.T
        if self.type == "LINEAR":
            return dot
        if self.type == "POLY":
            return np.power(self.gamma * dot + self.coef0, self.degree)
        return np.tanh(self.gamma * dot + self.coef0)


def _features(attrs: dict[str, Any], rows: int, what: str) -> np.ndarray:
    v = np.asarray(attrs.get("support_vectors") or [], dtype=_F32).astype(np.float64)
    if rows <= 0 or v.size % rows:
        raise ValueError(f"{what}: {v.size} support vector values for {rows} vectors")
    return v.reshape(rows, -1)


@CPU.kernel("SVMRegressor", since=1, domain=ML)
class SVMRegressor:
    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        self.kernel = _Kernel(a)
        self.n_sv = int(a.get("n_supports", 0))
        coef = np.asarray(a.get("coefficients") or [], dtype=_F32).astype(np.float64)
        rho = list(a.get("rho") or [0.0])
        self.rho = float(np.float32(rho[0]))
        if self.n_sv > 0:
            self.sv = _features(a, self.n_sv, "SVMRegressor")
            self.sv_sq = (self.sv * self.sv).sum(axis=1)
            if coef.size != self.n_sv:
                raise ValueError(f"SVMRegressor: {coef.size} coefficients for {self.n_sv} "
                                 f"support vectors")
        self.coef = coef
        self.one_class = int(a.get("one_class", 0))
        t = transform_name(a.get("post_transform", "NONE"))
        self.transform = t if t == "PROBIT" else "NONE"  # one score: only PROBIT applies

    def __call__(self, x: np.ndarray) -> np.ndarray:
        xf = as_2d_float(x)
        if self.n_sv > 0:
            s = self.kernel(xf, self.sv, self.sv_sq) @ self.coef + self.rho
        else:
            s = xf @ self.coef + self.rho
        s = s.reshape(-1, 1)
        if self.one_class:
            s = np.where(s > 0, 1.0, -1.0)
        return post_transform(s, self.transform).astype(_F32)


def _couple_rows(r, p, lo, hi):
    """_couple for rows lo..hi-1, one row at a time (compiled by _couple_kernel): the same
    iteration, stopping per row as soon as its own error is small enough."""
    k = r.shape[1]
    q = np.empty((k, k))
    qp = np.empty(k)
    eps = 0.005 / k
    for n in range(lo, hi):
        rn = r[n]
        for t in range(k):
            p[n, t] = 1.0 / k
            d = 0.0
            for j in range(k):
                if j != t:
                    d += rn[j, t] * rn[j, t]
                    q[t, j] = -rn[j, t] * rn[t, j]
            q[t, t] = d
        pn = p[n]
        for _ in range(max(100, k)):
            pqp = 0.0
            for t in range(k):
                v = 0.0
                for j in range(k):
                    v += q[t, j] * pn[j]
                qp[t] = v
                pqp += pn[t] * v
            err = 0.0
            for t in range(k):
                e = abs(qp[t] - pqp)
                err = e if e > err else err
            if err < eps:
                break
            for t in range(k):
                diff = (-qp[t] + pqp) / q[t, t]
                pn[t] += diff
                pqp = (pqp + diff * (diff * q[t, t] + 2.0 * qp[t])) / (1.0 + diff) / (1.0 + diff)
                for j in range(k):
                    qp[j] = (qp[j] + diff * q[t, j]) / (1.0 + diff)
                    pn[j] /= (1.0 + diff)


def _svc_rows(x, sv, sv_sq, kcode, gamma, coef0, degree, pair_w, rho, pairs, proba,
              prob_a, prob_b, dec, win, r, p):
    """The whole one-vs-one classifier for a few rows (compiled by _svc_kernel): kernel
    values, pair decisions ``dec`` (N, P), the voted class index ``win`` (N,) and, when
    ``proba``, libsvm's Platt estimates coupled into ``p`` (N, k) through ``r`` (N, k, k).
    Same formulas, order and float64 as the NumPy path; kcode 0 LINEAR, 1 POLY, 2 RBF,
    3 SIGMOID. Preconditions (SVMClassifier checks them): x (N, F) and sv (S, F) float64
    contiguous, sv_sq (S,), pair_w (S, P), rho, prob_a, prob_b (P,), pairs (P, 2) class
    indices below k, dec (N, P), win (N,), r (N, k, k), p (N, k)."""
    n_n, f_n = x.shape
    s_n = sv.shape[0]
    p_n = pair_w.shape[1]
    k = p.shape[1]
    kv = np.empty(s_n)
    votes = np.empty(k, np.int64)
    for n in range(n_n):
        xn = x[n]
        xsq = 0.0
        for f in range(f_n):
            xsq += xn[f] * xn[f]
        for s in range(s_n):
            d = 0.0
            for f in range(f_n):
                d += xn[f] * sv[s, f]
            if kcode == 2:
                d = d * -2.0 + xsq + sv_sq[s]
                d = d if d > 0.0 else 0.0
                d = math.exp(d * -gamma)
            elif kcode == 1:
                d = (gamma * d + coef0) ** degree
            elif kcode == 3:
                d = math.tanh(gamma * d + coef0)
            kv[s] = d
        for q in range(p_n):
            dec[n, q] = 0.0
        for s in range(s_n):
            v = kv[s]
            for q in range(p_n):
                dec[n, q] += v * pair_w[s, q]
        for c in range(k):
            votes[c] = 0
        for q in range(p_n):
            dec[n, q] += rho[q]
            votes[pairs[q, 0] if dec[n, q] > 0 else pairs[q, 1]] += 1
        best = 0
        for c in range(1, k):
            if votes[c] > votes[best]:
                best = c
        win[n] = best
        if proba:
            for i in range(k):
                for j in range(k):
                    r[n, i, j] = 0.0
            for q in range(p_n):
                f = dec[n, q] * prob_a[q] + prob_b[q]
                e = math.exp(-abs(f))
                pr = e / (1.0 + e) if f >= 0 else 1.0 / (1.0 + e)
                pr = min(max(pr, 1e-7), 1 - 1e-7)
                r[n, pairs[q, 0], pairs[q, 1]] = pr
                r[n, pairs[q, 1], pairs[q, 0]] = 1.0 - pr
    if proba:
        _couple_rows(r, p, 0, n_n)


_COUPLE: list[Any] = []
_SVC: list[Any] = []
_KERNEL_CODES = {"LINEAR": 0, "POLY": 1, "RBF": 2, "SIGMOID": 3}
# batches up to this many rows take _svc_rows: at batch 1 the NumPy path's ~20 calls cost
# ~70 us against ~10 of work; from a few dozen rows BLAS's kernel-value product wins
_SVC_ROWS_MAX = 16


def _couple_kernel() -> Any:
    """_couple_rows compiled (numba's disk cache or once per process), or None."""
    from onnxrt.providers.cpu.nn import jit

    def build(numba: Any) -> Any:
        fn = jit._njit(numba, _couple_rows)
        fn(np.full((1, 2, 2), 0.5), np.empty((1, 2)), 0, 1)
        return fn

    return jit.compile_once(_COUPLE, build)


def _svc_kernel() -> Any:
    """_svc_rows compiled (calling the compiled _couple_rows), or None."""
    from onnxrt.providers.cpu.nn import jit

    couple = _couple_kernel()
    if couple is None:
        return None

    def build(numba: Any) -> Any:
        globals()["_couple_rows"] = couple
        fn = jit._njit(numba, _svc_rows)
        z = np.zeros
        fn(z((1, 1)), z((2, 1)), z(2), 2, 0.5, 0.0, 1.0, z((2, 1)), z(1),
           np.array([[0, 1]], np.intp), True, z(1), z(1), z((1, 1)), z(1, np.int64),
           z((1, 2, 2)), z((1, 2)))
        return fn

    return jit.compile_once(_SVC, build)


def _couple(r: np.ndarray, pool: ThreadPool = SERIAL) -> np.ndarray:
    """Pairwise-coupled class probabilities (Wu, Lin & Weng's second method), batched.

    r: (N, k, k) with r[:, i, j] the estimated P(class i | i or j)."""
    fn = _couple_kernel()
    if fn is not None:
        r = np.ascontiguousarray(r, dtype=np.float64)
        p = np.empty(r.shape[:2])
        pool.for_ranges(fn, (r, p), r.shape[0], spread=r.shape[0] >= 256)
        return p
    n, k, _ = r.shape
    q = -r.transpose(0, 2, 1) * r
    eye = np.eye(k, dtype=bool)
    diag = (r * r * ~eye).sum(axis=1)  # sum over j of r[j, t]^2
    q[:, eye] = diag
    p = np.full((n, k), 1.0 / k)
    eps = 0.005 / k
    active = np.ones(n, bool)
    for _ in range(max(100, k)):
        qp = np.einsum("nij,nj->ni", q, p)
        pqp = (p * qp).sum(axis=1)
        err = np.abs(qp - pqp[:, None]).max(axis=1)
        active &= err >= eps
        if not active.any():
            break
        idx = np.nonzero(active)[0]
        qa, pa, qpa, pqpa = q[idx], p[idx], qp[idx], pqp[idx]
        for t in range(k):
            qtt = qa[:, t, t]
            diff = (-qpa[:, t] + pqpa) / qtt
            pa[:, t] += diff
            pqpa = (pqpa + diff * (diff * qtt + 2.0 * qpa[:, t])) / (1.0 + diff) ** 2
            qpa = (qpa + diff[:, None] * qa[:, t, :]) / (1.0 + diff)[:, None]
            pa /= (1.0 + diff)[:, None]
        p[idx] = pa
    return p


@CPU.kernel("SVMClassifier", since=1, domain=ML, threads=True)
class SVMClassifier:
    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        self.labels = labels_array(a, "classlabels_ints", "classlabels_strings")
        if self.labels is None:
            raise ValueError("SVMClassifier needs classlabels_ints or classlabels_strings")
        k = self.labels.size
        self.k = k
        self.kernel = _Kernel(a)
        vpc = np.asarray(a.get("vectors_per_class") or [], dtype=np.int64)
        self.n_sv = int(vpc.sum())
        coef = np.asarray(a.get("coefficients") or [], dtype=_F32).astype(np.float64)
        self.rho = np.asarray(a.get("rho") or [], dtype=_F32).astype(np.float64)
        self.prob_a = np.asarray(a.get("prob_a") or [], dtype=_F32).astype(np.float64)
        self.prob_b = np.asarray(a.get("prob_b") or [], dtype=_F32).astype(np.float64)
        self.transform = transform_name(a.get("post_transform", "NONE"))
        if self.n_sv > 0:
            if vpc.size != k:
                raise ValueError(f"SVMClassifier: vectors_per_class has {vpc.size} entries "
                                 f"for {k} classes")
            self.sv = _features(a, self.n_sv, "SVMClassifier")
            self.sv_sq = (self.sv * self.sv).sum(axis=1)
            if coef.size != (k - 1) * self.n_sv:
                raise ValueError(f"SVMClassifier: {coef.size} coefficients, expected "
                                 f"{(k - 1) * self.n_sv}")
            coef = coef.reshape(k - 1, self.n_sv)
            starts = np.concatenate([[0], np.cumsum(vpc)[:-1]])
            # one weight row per class pair over all vectors: the decision value of pair
            # (i, j) is then one matrix product with the kernel values
            pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
            w = np.zeros((len(pairs), self.n_sv))
            for p, (i, j) in enumerate(pairs):
                si, ci, sj, cj = starts[i], vpc[i], starts[j], vpc[j]
                w[p, si:si + ci] = coef[j - 1, si:si + ci]
                w[p, sj:sj + cj] = coef[i, sj:sj + cj]
            self.pair_w = np.ascontiguousarray(w.T)
            self.pairs = np.asarray(pairs, dtype=np.intp).reshape(-1, 2)
            self._classes = np.arange(k)
            self._ij = self.pairs[:, 0] * k + self.pairs[:, 1]      # flat (i, j) and (j, i)
            self._ji = self.pairs[:, 1] * k + self.pairs[:, 0]
            if self.rho.size != len(pairs):
                raise ValueError(f"SVMClassifier: {self.rho.size} rho values for "
                                 f"{len(pairs)} class pairs")
        else:
            # linear mode: one coefficient row per class
            if coef.size % k:
                raise ValueError(f"SVMClassifier: {coef.size} coefficients do not split into "
                                 f"{k} class rows")
            rows = k
            self.lin_w = np.ascontiguousarray(coef.reshape(rows, -1).T)
        self.proba = self.prob_a.size > 0 and self.n_sv > 0
        # _svc_rows indexes prob_a/prob_b by pair without bounds checks: other sizes take
        # the NumPy path (which refuses them as it broadcasts)
        self._rows_ok = self.n_sv > 0 and (not self.proba or (
            self.prob_a.size == self.prob_b.size == self.pairs.shape[0]))

    def __call__(self, x: np.ndarray, ctx: Any = None) -> tuple[np.ndarray, np.ndarray]:
        xf = as_2d_float(x)
        if self.n_sv == 0:
            return self._linear(xf)
        if (xf.shape[0] <= _SVC_ROWS_MAX and self._rows_ok
                and xf.shape[1] == self.sv.shape[1]):
            fn = _svc_kernel()
            if fn is not None:
                return self._few_rows(fn, xf)
        kv = self.kernel(xf, self.sv, self.sv_sq)
        dec = kv @ self.pair_w + self.rho  # (N, n_pairs)
        n = xf.shape[0]
        k = self.k
        # the label comes from one-vs-one votes even when probabilities are output, as in
        # onnxruntime (libsvm's predict_probability would take the most probable class)
        win = np.where(dec > 0, self.pairs[:, 0], self.pairs[:, 1])
        # votes per class: one comparison of every pair's winner with every class
        votes = np.add.reduce(win[:, :, None] == self._classes, axis=1)
        label = self.labels[votes.argmax(axis=1)]
        if self.proba:
            r = np.zeros((n, k * k))
            pr = np.minimum(np.maximum(_platt(dec, self.prob_a, self.prob_b), 1e-7), 1 - 1e-7)
            r[:, self._ij] = pr
            r[:, self._ji] = 1.0 - pr
            r = r.reshape(n, k, k)
            probs = _couple(r, pool_of(ctx))
            return label, post_transform(probs, self.transform).astype(_F32)
        if k == 2:
            return label, _two_columns(dec[:, 0], self.transform)
        return label, post_transform(dec, self.transform).astype(_F32)

    def _few_rows(self, fn: Any, xf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A small batch through the compiled _svc_rows: one call instead of ~20 NumPy
        steps; the outputs are those of the batched path below."""
        n, k = xf.shape[0], self.k
        dec = np.empty((n, self.pairs.shape[0]))
        win = np.empty(n, np.int64)
        r = np.empty((n, k, k) if self.proba else (0, k, k))
        p = np.empty((n, k))
        kt = self.kernel
        fn(np.ascontiguousarray(xf, dtype=np.float64), self.sv, self.sv_sq,
           _KERNEL_CODES[kt.type], kt.gamma, kt.coef0, kt.degree, self.pair_w, self.rho,
           self.pairs, self.proba, self.prob_a, self.prob_b, dec, win, r, p)
        label = self.labels[win]
        if self.proba:
            return label, post_transform(p, self.transform).astype(_F32)
        if k == 2:
            return label, _two_columns(dec[:, 0], self.transform)
        return label, post_transform(dec, self.transform).astype(_F32)

    def _linear(self, xf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # onnxruntime adds rho[0] to every class score
        s = xf @ self.lin_w + (self.rho[0] if self.rho.size else 0.0)
        label = self.labels[np.argmax(s, axis=1)]
        return label, post_transform(s, self.transform).astype(_F32)


def _two_columns(s: np.ndarray, transform: str) -> np.ndarray:
    """onnxruntime's two-column output for a single binary decision value."""
    if transform == "LOGISTIC":
        p = post_transform(s.reshape(-1, 1), "LOGISTIC")[:, 0]
        z = np.stack([1.0 - p, p], axis=1)
    elif transform == "PROBIT":
        z = np.stack([post_transform(s.reshape(-1, 1), "PROBIT")[:, 0], np.zeros_like(s)], 1)
    elif transform == "NONE":
        z = np.stack([-s, s], axis=1)
    else:
        z = np.stack([1.0 - s, s], axis=1)
    return z.astype(_F32)


def _platt(dec: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    f = dec * a + b
    e = np.exp(-np.abs(f))
    return np.where(f >= 0, e / (1.0 + e), 1.0 / (1.0 + e))
