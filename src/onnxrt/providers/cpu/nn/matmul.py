"""Matrix products: Gemm, MatMul, Einsum, all through BLAS (np.matmul / einsum).

float16 and bfloat16 multiply in float32 and cast back (BLAS has no half precision and
numpy's float16 matmul is both slow and imprecise). Gemm transposes are views; alpha and
beta scale only when they are not 1.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from onnxrt.framework.blas_threads import blas_threads_unused
from onnxrt.framework.parallel import SERIAL, ThreadPool, pool_of, split
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.nn import compute_dtype, jit

__all__ = []


def _blasable(x: np.ndarray) -> np.ndarray:
    # numpy's stacked (>2-D) matmul leaves BLAS for a slow loop on strided operands such as
    # the head-split transposes of attention: one copy is 2-3x cheaper than that loop
    if x.ndim > 2 and not x.flags.c_contiguous:
        return np.ascontiguousarray(x)
    return x


# stacks of products split over the session's threads from this many flops: below it one
# BLAS thread over the whole stack was faster ([1,4,128,64]x[1,4,64,128]: 190 us against
# 394 split, onnxruntime 193; [1,12,128,64]x[1,12,64,128]: 540 against 632; alternating,
# under the lock)
_STACK_SPLIT_MIN = 32_000_000


def matmul(a: np.ndarray, b: np.ndarray, pool: ThreadPool = SERIAL) -> np.ndarray:
    """np.matmul, fast where numpy's own broadcasting is not: a stack times a matrix is one
    GEMM over the flattened stack (2-3x faster at batch 8 than numpy's per-item loop),
    float32 products split over the session's threads by nn/jit.py (BLAS single-threaded
    inside: its own idle threads spin for ~0.1 s after each product unless
    OPENBLAS_THREAD_TIMEOUT is set before numpy loads, and took the cores from the next
    kernels). The other products run on BLAS's threads (the spinning intra-op workers
    parked first), except small ones (_own_threads)."""
    if b.ndim == 2 and a.ndim >= 2:
        # an empty stack has no -1 to infer (reshape refuses size 0 into (-1, 0))
        a2 = a.reshape(int(np.prod(a.shape[:-1])), a.shape[-1]) if a.ndim > 2 else a
        y = jit.split_matmul(a2, b, pool)
        if y is not None:
            return y.reshape(a.shape[:-1] + (b.shape[-1],))
        with _own_threads(2 * a2.shape[0] * a2.shape[1] * b.shape[-1], pool):
            if a.ndim > 2:
                return np.matmul(a2, b).reshape(a.shape[:-1] + (b.shape[-1],))
            return np.matmul(a, b)
    a, b = _blasable(a), _blasable(b)
    # each operand's size times the other's free extent: lower bounds of the product's
    # multiply-adds (numpy reports shapes that do not broadcast)
    n = b.shape[-1] if b.ndim > 1 else 1
    m = a.shape[-2] if a.ndim > 1 else 1
    flops = 2 * max(a.size * n, b.size * m)
    if flops >= _STACK_SPLIT_MIN and a.ndim >= 3 and b.ndim >= 2:
        y = _split_stack(a, b, pool)
        if y is not None:
            return y
    if a.ndim > 2 and b.ndim > 2 and flops < _STACK_SPLIT_MIN:
        # a stack of small products (attention's Q K^T and P V exported without fusions):
        # numpy's loop over them on one BLAS thread, never waking BLAS's threads (and
        # parking the intra-op workers) for each item
        with pool.single_blas():
            return np.matmul(a, b)
    with _own_threads(flops, pool):
        return np.matmul(a, b)


def _split_stack(a: np.ndarray, b: np.ndarray, pool: ThreadPool) -> np.ndarray | None:
    """A stack of products (attention's per-head scores and weighted sums) split over the
    session's threads by its items, each on BLAS single-threaded; None where the stack is
    shorter than the threads or the shapes do not broadcast. On BLAS's own threads these
    took ~100 ms instead of ~0.3 (a ViT-S head stack, 6x197x64x197) whenever a busy core
    held its second thread: an item here that no worker takes runs on the caller
    (framework/hotpool.py)."""
    t = pool.threads
    if t < 2 or a.dtype != b.dtype or a.dtype.kind != "f":
        return None
    try:
        lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        return None         # np.matmul raises its own error
    if a.shape[-1] != b.shape[-2]:
        return None
    stack = int(np.prod(lead))
    if stack < t:
        return None
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    a3 = np.broadcast_to(a, lead + (m, k)).reshape(stack, m, k)
    b3 = np.broadcast_to(b, lead + (k, n)).reshape(stack, k, n)
    y = np.empty((stack, m, n), a.dtype)
    parts = split(stack, t)

    def part(i: int) -> None:
        lo, hi = parts[i]
        np.matmul(a3[lo:hi], b3[lo:hi], out=y[lo:hi])

    pool.parallel_for(len(parts), part)
    return y.reshape(lead + (m, n))


class _Parked:
    """A block run on BLAS's own threads, the session's spinning workers parked first."""

    __slots__ = ("pool",)

    def __init__(self, pool: ThreadPool) -> None:
        self.pool = pool

    def __enter__(self) -> None:
        self.pool.park()

    def __exit__(self, *exc: Any) -> None:
        pass


_NOTHING = contextlib.nullcontext()


def _own_threads(flops: int, pool: ThreadPool) -> Any:
    """A product on BLAS's own threads (the spinning intra-op workers parked), or with BLAS
    single-threaded when it is small (under split_matmul's bound): waking BLAS's threads
    costs more than they save there, and with OPENBLAS_THREAD_TIMEOUT unset (numpy imported
    before onnxrt) they then spin for ~0.1 s and take the cores from the next run. The one
    1x1024 by 1024x1000 Gemm of inception_v2 did that on every run: 105 ms instead of 26.
    (A context object, not a generator: this is on every product's path.)"""
    if flops >= jit._MM_SPLIT_MIN:
        return _Parked(pool)
    # below OpenBLAS's own threshold the product runs on the calling thread anyway: setting
    # BLAS's count to 1 and back (~15 us) was most of a batch-1 classifier head's Gemm
    return _NOTHING if blas_threads_unused(flops // 2) else pool.single_blas()


def _mm(a: np.ndarray, b: np.ndarray, pool: ThreadPool) -> np.ndarray:
    dt = a.dtype
    cdt = compute_dtype(dt)
    if cdt != dt:
        return matmul(a.astype(cdt), b.astype(cdt), pool).astype(dt)
    return matmul(a, b, pool)


@CPU.kernel("MatMul", since=1, needs_node=True, threads=True)
class MatMul:
    """MatMul-1/9/13 (numpy semantics); a constant half-precision B is widened once."""

    def __init__(self, node: Any) -> None:
        self.b = None
        b = node.constant_inputs.get(1)
        if b is not None:
            b = np.asarray(b)
            if compute_dtype(b.dtype) != b.dtype:
                self.b = b.astype(compute_dtype(b.dtype))

    def __call__(self, a: np.ndarray, b: np.ndarray, ctx: Any = None) -> np.ndarray:
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError("MatMul inputs must have at least one dimension")
        pool = pool_of(ctx)
        if self.b is None:
            return _mm(a, b, pool)
        dt = a.dtype
        return matmul(a.astype(self.b.dtype), self.b, pool).astype(dt)


_GEMM_FEW_ROWS = 4     # split_matmul's gemv threshold: fewer rows never split


@CPU.kernel("Gemm", since=1, needs_node=True, threads=True)
class Gemm:
    """Gemm-1..13: Y = alpha * A' @ B' + beta * C (legacy ``broadcast`` accepted)."""

    def __init__(self, node: Any) -> None:
        a = node.attrs
        self.alpha = float(a.get("alpha", 1.0))
        self.beta = float(a.get("beta", 1.0))
        self.trans_a = bool(a.get("transA", 0))
        self.trans_b = bool(a.get("transB", 0))
        self.b_packed = None
        b = node.constant_inputs.get(1)
        if b is not None:
            b = np.asarray(b)
            cdt = compute_dtype(b.dtype)
            b = b.T if self.trans_b else b
            # B in the compute dtype, ready for BLAS on every run; a transposed view is as
            # good as a copy for BLAS (it takes either order) and costs no memory
            b = b.astype(cdt, copy=False)
            self.b_packed = b if (b.flags.c_contiguous or b.flags.f_contiguous) else \
                np.ascontiguousarray(b)
        self.c_scaled = None
        c = node.constant_inputs.get(2)
        if c is not None and self.beta != 1.0:
            c = np.asarray(c)
            self.c_scaled = (c.astype(compute_dtype(c.dtype)) * self.beta).astype(
                compute_dtype(c.dtype), copy=False)

    def __call__(self, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None,
                 ctx: Any = None) -> np.ndarray:
        dt = a.dtype
        cdt = compute_dtype(dt)
        if self.trans_a:
            a = a.T
        a = a.astype(cdt, copy=False)
        if self.b_packed is not None:
            bb = self.b_packed
        else:
            bb = (b.T if self.trans_b else b).astype(cdt, copy=False)
        if a.ndim == 2 and a.shape[0] < _GEMM_FEW_ROWS and blas_threads_unused(
                a.shape[0] * a.shape[1] * bb.shape[-1]):
            # a few rows on a small weight (a detector's output layer, a classifier head at
            # batch 1): BLAS runs on this thread whatever matmul() would decide, and its
            # dispatch cost more than the product (~4 us of ~5)
            y = np.matmul(a, bb)
        else:
            y = matmul(a, bb, pool_of(ctx))
        if self.alpha != 1.0:
            if dt.kind in "iu":
                y = (y * self.alpha).astype(cdt)
            else:
                y *= cdt.type(self.alpha)
        if c is not None and self.beta != 0.0:
            if self.c_scaled is not None:
                cc = self.c_scaled
            elif self.beta != 1.0:
                cc = c.astype(cdt, copy=False) * cdt.type(self.beta) if dt.kind == "f" \
                    else (c * self.beta).astype(cdt)
            else:
                cc = c.astype(cdt, copy=False)
            # (a bias row, the common case, is checked without numpy's broadcast helper)
            if cc.shape == y.shape or cc.shape == y.shape[y.ndim - cc.ndim:] or \
                    np.broadcast_shapes(cc.shape, y.shape) == y.shape:
                y += cc
            else:
                y = y + cc
        return y if y.dtype == dt else y.astype(dt)


@CPU.kernel("Einsum", since=12, needs_node=True)
class Einsum:
    """Einsum-12/28 through np.einsum with a contraction path planned per input shapes."""

    def __init__(self, node: Any) -> None:
        eq = node.attrs.get("equation", "")
        if isinstance(eq, bytes):
            eq = eq.decode()
        self.equation = eq.replace(" ", "")
        self._paths: dict[tuple[tuple[int, ...], ...], Any] = {}

    def __call__(self, *xs: np.ndarray) -> np.ndarray:
        dt = xs[0].dtype
        cdt = compute_dtype(dt)
        if cdt != dt:
            xs = tuple(x.astype(cdt) for x in xs)
        if len(xs) <= 1:
            y = np.einsum(self.equation, *xs)
        else:
            key = tuple(x.shape for x in xs)
            path = self._paths.get(key)
            if path is None:
                path = np.einsum_path(self.equation, *xs, optimize="greedy")[0]
                self._paths[key] = path
            y = np.einsum(self.equation, *xs, optimize=path)
        y = np.asarray(y)
        return y if y.dtype == dt else y.astype(dt)
