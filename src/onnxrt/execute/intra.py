"""Intra-op parallelism: one kernel's work split across the session's threads.

NumPy's element-wise loops, copies and our compiled (numba, ``nogil``) loops run on the
calling thread and release the GIL; BLAS runs on its own pool. A kernel that splits its work
into independent items (images, bands of output rows, blocks of output channels, planes)
hands them to ``parallel_for`` (or ranges of them to ``for_ranges``): the calling thread and
up to ``threads() - 1`` workers take items until none are left. BLAS runs single-threaded
while a split is on (``threads.single_blas``), so im2col, the product and the epilogue of a
band all run on one core and the cores never wait on each other's spinning threads.

Measured (2 cores, OpenBLAS): two threads each running a single-threaded 64x576x1568
product take 1.0-1.1 ms together, one 2-thread BLAS call on 64x576x3136 1.07 ms: the split
costs the product nothing and parallelizes what surrounds it.

A split into exactly as many items as threads goes to the hot pool (execute/hotpool.py:
workers that wait spinning, without the GIL, while a session runs), which cuts the cost of
a split from ~100 us to ~35-40 us; other splits, and a split while another thread holds the
hot pool, take the blocking pool below. A call from inside an item (a kernel that itself
splits, a Loop body) runs serially, as does a call while the limit is 1: no item ever
waits on the pool it runs in.
"""

from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from onnxrt.execute import hotpool
from onnxrt.execute.threads import default_threads, jit_threads, single_blas, spinning_allowed

__all__ = ["threads", "parallel_for", "for_ranges", "native_ranges", "split", "mark_worker"]

_POOL: list[ThreadPoolExecutor] = []
_POOL_LOCK = threading.Lock()
_LOCAL = threading.local()


def threads() -> int:
    """How many threads a kernel may split over now: the running session's
    ``intra_op_num_threads`` (every core when it is 0), 1 inside an item."""
    if getattr(_LOCAL, "inside", False):
        return 1
    return jit_threads() or default_threads()


def mark_worker() -> None:
    """This thread runs items (a hot-pool worker): its own splits run serially."""
    _LOCAL.inside = True


def _pool() -> ThreadPoolExecutor:
    if not _POOL:
        with _POOL_LOCK:
            if not _POOL:
                _POOL.append(ThreadPoolExecutor(max(1, default_threads() - 1),
                                                thread_name_prefix="onnxrt-intra"))
    return _POOL[0]


def _forget() -> None:
    """In a forked child: the parent's pool threads do not exist there."""
    _POOL.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)


def parallel_for(n: int, fn: Callable[[int], None]) -> None:
    """``fn(i)`` for i in 0..n-1, spread over the session's threads; returns when all are
    done, raising the first error an item raised (the others still finish)."""
    t = min(n, threads())
    if t <= 1:
        for i in range(n):
            fn(i)
        return
    counter = itertools.count()     # next() on a count is atomic under the GIL

    def work() -> None:
        _LOCAL.inside = True
        try:
            while True:
                i = next(counter)
                if i >= n:
                    return
                fn(i)
        finally:
            _LOCAL.inside = False

    with single_blas():
        hot = hotpool.get(default_threads() - 1) if n == t and spinning_allowed() else None
        if hot is not None and n - 1 <= hot.n and hot.busy.acquire(blocking=False):
            try:
                hot.run(n, fn)
            finally:
                hot.busy.release()
            return
        futures = [_pool().submit(work) for _ in range(t - 1)]
        err = None
        try:
            work()
        except BaseException as e:      # wait for the others before raising
            err = e
        for f in futures:
            e2 = f.exception()
            if err is None and e2 is not None:
                err = e2
    if err is not None:
        raise err


def for_ranges(fn: Callable[..., None], args: tuple, total: int, spread: bool = True,
               blas: bool = False) -> None:
    """``fn(*args, lo, hi)`` over items 0..total-1: one contiguous range per thread of the
    session when ``spread`` (the caller's judgement that the work pays for the split), else
    one call (with BLAS single-threaded when ``blas``: the kernel calls it, _one_call)."""
    t = threads() if spread else 1
    if t <= 1 or total < 2:
        _one_call(fn, args, total, blas)
        return
    parts = split(total, t)
    parallel_for(len(parts), lambda k: fn(*args, *parts[k]))


def _one_call(fn: Callable[..., None], args: tuple, total: int, blas: bool) -> None:
    """``fn(*args, 0, total)`` on this thread; a kernel that calls BLAS (``blas``) with BLAS
    single-threaded: a kernel splitting its own work never hands a part to BLAS's threads,
    which (with OPENBLAS_THREAD_TIMEOUT unset: numpy imported before onnxrt) spin ~0.1 s
    after and take the cores from the rest of the run. Only then: setting and restoring
    the thread count costs ~2.6 us a call."""
    if blas:
        with single_blas():
            fn(*args, 0, total)
    else:
        fn(*args, 0, total)


def native_ranges(kind: int, pack: Callable[[Any, Any], None], fn: Callable[..., None],
                  args: tuple, total: int, blas: bool = False) -> None:
    """``for_ranges(fn, args, total)`` for a kernel the hot pool's native serving loop runs
    as ``kind`` (execute/hotpool.py): ``pack(ints, floats)`` writes its arguments into the
    pool's slots, the workers run their ranges without the GIL and this thread runs
    ``fn(*args, lo, hi)`` on the first (a split then costs a few us instead of ~45); where
    the pool is busy, has no native loop or must not spin, the same as ``for_ranges``."""
    t = threads()
    if t <= 1 or total < 2:
        _one_call(fn, args, total, blas)
        return
    hot = hotpool.get(default_threads() - 1) if spinning_allowed() else None
    if hot is not None and hot.native and hot.busy.acquire(blocking=False):
        try:
            pack(hot.ints, hot.floats)
            with single_blas():
                hot.run_native(kind, split(total, min(t, hot.n + 1)),
                               lambda lo, hi: fn(*args, lo, hi))
        finally:
            hot.busy.release()
        return
    for_ranges(fn, args, total, blas=blas)


def split(total: int, parts: int, align: int = 1) -> list[tuple[int, int]]:
    """``total`` in ``parts`` near-equal contiguous ranges (bounds multiples of ``align``
    except the last), empty ones dropped."""
    parts = max(1, min(parts, -(-total // max(align, 1))))
    step = -(-total // parts)
    step = -(-step // align) * align
    return [(a, min(total, a + step)) for a in range(0, total, step)]
