"""Scan bodies that compute squared Euclidean distances, run as one call.

skl2onnx writes the pairwise distances of its k-nearest-neighbour models (and of
GaussianProcess, KMeans... when asked) as a Scan over one operand's rows: the state is the
other matrix ``A`` (N, F), handed on unchanged, and each step's output is
``ReduceSumSquare(A - b_t, axes=[1], keepdims=0)`` for the scanned row ``b_t``. Running
the body once per training row costs a subgraph call per row (2,000 for a model fit on
2,000 rows); here the whole (T, N) result is one compiled loop (numba, rows split over the
session's threads) or a few chunked NumPy broadcasts, summing each distance over the
features in order, as the body does.

``match(plan)`` recognizes the body in its planned form (Identity steps may have been
removed by the graph passes: values are traced through them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.framework.parallel import SERIAL, ThreadPool

__all__ = ["match", "squared_distances"]

_PAR_MIN_WORK = 1 << 18     # multiply-adds from which the rows split over threads
_CHUNK = 1 << 21            # elements of one NumPy broadcast chunk


def match(plan: Any) -> bool:
    """Whether the body ``plan`` (a GraphPlan with inputs (state, row) and outputs
    (state, distances)) is the squared-distance body described above."""
    if len(plan.input_slots) != 2 or len(plan.output_slots) != 2 or plan.outer_slots:
        return False
    state, row = plan.input_slots
    producer: dict[int, Any] = {}
    for st in plan.steps:
        for o in st.outs:
            producer[o] = st

    def through(slot: int) -> int:
        # follow Identity steps back to the value they copy
        seen = 0
        while slot in producer and producer[slot].node.op_type == "Identity" and seen < 8:
            slot = producer[slot].ins[0]
            seen += 1
        return slot

    if through(plan.output_slots[0]) != state:
        return False
    red = producer.get(through(plan.output_slots[1]))
    if red is None or red.node.op_type != "ReduceSumSquare" or red.node.domain not in ("",
                                                                                      "ai.onnx"):
        return False
    a = red.node.attrs
    if int(a.get("keepdims", 1)) != 0 or int(a.get("noop_with_empty_axes", 0)) != 0:
        return False
    axes = a.get("axes")
    if len(red.ins) > 1 and red.ins[1] != 0:     # opset 18: axes as a constant input
        axes = plan.initial[red.ins[1]]
    if axes is None or [int(v) for v in np.asarray(axes).reshape(-1)] not in ([1], [-1]):
        return False
    sub = producer.get(through(red.ins[0]))
    if sub is None or sub.node.op_type != "Sub" or len(sub.ins) != 2:
        return False
    return sorted(through(s) for s in sub.ins) == sorted((state, row))


def squared_distances(a: np.ndarray, b: np.ndarray, fn: Any,
                      pool: ThreadPool = SERIAL) -> np.ndarray:
    """out[t, i] = sum_j (a[i, j] - b[t, j])^2 for a (N, F) and b (T, F), in their dtype;
    ``fn`` the compiled loop or None."""
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"Scan distance body: state {a.shape} and scanned rows {b.shape} "
                         f"do not share a feature axis")
    dt = np.result_type(a.dtype, b.dtype)
    n, f = a.shape
    t = b.shape[0]
    out = np.empty((t, n), dt)
    if fn is not None and dt in (np.float32, np.float64) and n and t:
        a = np.ascontiguousarray(a, dtype=dt)
        b = np.ascontiguousarray(b, dtype=dt)
        pool.for_ranges(fn, (a, b, out), t, spread=t * n * f >= _PAR_MIN_WORK)
        return out
    step = max(1, _CHUNK // max(1, n * f))
    for s in range(0, t, step):
        d = a[None, :, :] - b[s:s + step, None, :]
        out[s:s + step] = np.einsum("tij,tij->ti", d, d)
    return out


def _rows(a, b, out, lo, hi):
    n, f = a.shape
    for t in range(lo, hi):
        bt = b[t]
        o = out[t]
        for i in range(n):
            ai = a[i]
            s = out.dtype.type(0)
            for j in range(f):
                d = ai[j] - bt[j]
                s += d * d
            o[i] = s


_KERNEL: list[Any] = []


def kernel() -> Any:
    """The compiled row loop (numba's disk cache, or compiled once per process), warmed for
    float32 and float64; None where numba is missing or disabled (ONNXRT_JIT=0)."""
    from onnxrt.providers.cpu.nn import jit

    def build(numba: Any) -> Any:
        fn = jit._njit(numba, _rows)
        for dt in (np.float32, np.float64):
            z = np.zeros((1, 1), dt)
            fn(z, z, np.empty((1, 1), dt), 0, 1)
        return fn

    return jit.compile_once(_KERNEL, build)
