"""Matrix products: Gemm, MatMul, Einsum, all through BLAS (np.matmul / einsum).

float16 and bfloat16 multiply in float32 and cast back (BLAS has no half precision and
numpy's float16 matmul is both slow and imprecise). Gemm transposes are views; alpha and
beta scale only when they are not 1.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import numpy as np

from onnxrt.execute import hotpool
from onnxrt.execute.threads import single_blas
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.nn import compute_dtype, jit

__all__ = []


def _blasable(x: np.ndarray) -> np.ndarray:
    # numpy's stacked (>2-D) matmul leaves BLAS for a slow loop on strided operands such as
    # the head-split transposes of attention: one copy is 2-3x cheaper than that loop
    if x.ndim > 2 and not x.flags.c_contiguous:
        return np.ascontiguousarray(x)
    return x


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.matmul, fast where numpy's own broadcasting is not: a stack times a matrix is one
    GEMM over the flattened stack (2-3x faster at batch 8 than numpy's per-item loop),
    float32 products split over the session's threads by nn/jit.py (BLAS single-threaded
    inside: its own idle threads spin for ~0.1 s after each product unless
    OPENBLAS_THREAD_TIMEOUT is set before numpy loads, and took the cores from the next
    kernels). The other products run on BLAS's threads (the spinning intra-op workers
    parked first), except small ones (_own_threads)."""
    if b.ndim == 2 and a.ndim >= 2:
        a2 = a.reshape(-1, a.shape[-1]) if a.ndim > 2 else a
        y = jit.split_matmul(a2, b)
        if y is not None:
            return y.reshape(a.shape[:-1] + (b.shape[-1],))
        with _own_threads(2 * a2.shape[0] * a2.shape[1] * b.shape[-1]):
            if a.ndim > 2:
                return np.matmul(a2, b).reshape(a.shape[:-1] + (b.shape[-1],))
            return np.matmul(a, b)
    a, b = _blasable(a), _blasable(b)
    # each operand's size times the other's free extent: lower bounds of the product's
    # multiply-adds (numpy reports shapes that do not broadcast)
    n = b.shape[-1] if b.ndim > 1 else 1
    m = a.shape[-2] if a.ndim > 1 else 1
    if a.ndim > 2 and b.ndim > 2 and 2 * m * n * a.shape[-1] < jit._MM_SPLIT_MIN:
        # a stack of small products (attention's Q K^T and P V exported without fusions):
        # numpy's loop over them on one BLAS thread; waking BLAS's threads (and parking the
        # intra-op workers) for each item made [1,4,128,64] x [1,4,64,128] take 0.18 ms per
        # run against onnxruntime's 0.09 (0.10 of it this product on one thread)
        with single_blas():
            return np.matmul(a, b)
    with _own_threads(2 * max(a.size * n, b.size * m)):
        return np.matmul(a, b)


@contextlib.contextmanager
def _own_threads(flops: int) -> Iterator[None]:
    """A product on BLAS's own threads (the spinning intra-op workers parked), or with BLAS
    single-threaded when it is small (under split_matmul's bound): waking BLAS's threads
    costs more than they save there, and with OPENBLAS_THREAD_TIMEOUT unset (numpy imported
    before onnxrt) they then spin for ~0.1 s and take the cores from the next run. The one
    1x1024 by 1024x1000 Gemm of inception_v2 did that on every run: 105 ms instead of 26."""
    if flops < jit._MM_SPLIT_MIN:
        with single_blas():
            yield
    else:
        hotpool.park()
        yield


def _mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    dt = a.dtype
    cdt = compute_dtype(dt)
    if cdt != dt:
        return matmul(a.astype(cdt), b.astype(cdt)).astype(dt)
    return matmul(a, b)


@CPU.kernel("MatMul", since=1, needs_node=True)
class MatMul:
    """MatMul-1/9/13 (numpy semantics); a constant half-precision B is widened once."""

    def __init__(self, node: Any) -> None:
        self.b = None
        b = node.constant_inputs.get(1)
        if b is not None:
            b = np.asarray(b)
            if compute_dtype(b.dtype) != b.dtype:
                self.b = b.astype(compute_dtype(b.dtype))

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError("MatMul inputs must have at least one dimension")
        if self.b is None:
            return _mm(a, b)
        dt = a.dtype
        return matmul(a.astype(self.b.dtype), self.b).astype(dt)


@CPU.kernel("Gemm", since=1, needs_node=True)
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

    def __call__(self, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> np.ndarray:
        dt = a.dtype
        cdt = compute_dtype(dt)
        if self.trans_a:
            a = a.T
        a = a.astype(cdt, copy=False)
        if self.b_packed is not None:
            bb = self.b_packed
        else:
            bb = (b.T if self.trans_b else b).astype(cdt, copy=False)
        y = matmul(a, bb)
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
            if cc.shape == y.shape or np.broadcast_shapes(cc.shape, y.shape) == y.shape:
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
