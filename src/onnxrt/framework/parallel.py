"""A session's intra-op thread pool, as kernels see it: one kernel's work split across the
session's threads.

Every session owns one ``ThreadPool`` (its ``intra_op_num_threads`` budget, its spin policy
and its workers), and hands it to the kernels that split their work through the run
context, as onnxruntime's ``OpKernelContext::GetOperatorThreadPool()``::

    @CPU.kernel("Op", since=1, threads=True)
    def op(x, *, ctx=None):
        pool = pool_of(ctx)                 # SERIAL without a run (constant folding)
        pool.for_ranges(loop, (x, y), rows, spread=x.size >= 1 << 16)

Nothing here is process-wide but BLAS's own thread count (framework/blas_threads.py), so two
sessions with different budgets running at once each split over their own threads.

NumPy's element-wise loops, copies and compiled (numba, ``nogil``) loops run on the calling
thread and release the GIL; BLAS runs on its own pool. A kernel that splits its work into
independent items (images, bands of output rows, blocks of output channels, planes) hands
them to ``parallel_for`` (or ranges of them to ``for_ranges``): the calling thread and up
to ``threads - 1`` workers take items until none are left. BLAS runs single-threaded while
a split is on (``single_blas``), so im2col, the product and the epilogue of a band all run
on one core and the cores never wait on each other's spinning threads.

A split into exactly as many items as threads goes to the pool's hot workers
(framework/hotpool.py: workers that wait spinning, without the GIL, while a run is on);
other splits, and a split while another thread holds the hot workers, take the blocking
workers. A call from inside an item (a kernel that itself splits, a Loop body) runs
serially, as does a call when the budget is 1: no item ever waits on the pool it runs in.
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from onnxrt.framework import blas_threads, hotpool

__all__ = ["ThreadPool", "SERIAL", "pool_of", "split", "mark_worker", "inside_item"]

_LOCAL = threading.local()


def mark_worker() -> None:
    """This thread runs items (a hot worker): its own splits run serially."""
    _LOCAL.inside = True


def inside_item() -> bool:
    """This thread is running an item of some split now."""
    return getattr(_LOCAL, "inside", False)


def split(total: int, parts: int, align: int = 1) -> list[tuple[int, int]]:
    """``total`` in ``parts`` near-equal contiguous ranges (bounds multiples of ``align``
    except the last), empty ones dropped."""
    parts = max(1, min(parts, -(-total // max(align, 1))))
    step = -(-total // parts)
    step = -(-step // align) * align
    return [(a, min(total, a + step)) for a in range(0, total, step)]


class ThreadPool:
    """One session's intra-op threads: ``budget`` threads in all (the caller's included),
    hot workers spinning between items while a run is on only if ``spin``.

    Workers are made on the first split that needs them and ended by ``close`` (the session
    going away); a forked child makes its own."""

    def __init__(self, budget: int, spin: bool = True, blas_bound: bool = False) -> None:
        self.budget = max(1, int(budget))
        self.spin = bool(spin)
        # a run of the session holds a BLAS bound of ``budget`` (blas_threads.request):
        # with a budget of 1, BLAS is single-threaded already and single_blas does nothing
        self.blas_bound = bool(blas_bound)
        self._one = self.budget == 1 and self.blas_bound
        self._hot: hotpool.HotPool | None = None
        self._hot_tried = False
        self._blocking: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self.closed = False
        if self.budget > 1:
            _LIVE.add(self)

    # -- what kernels ask -----------------------------------------------------------------
    @property
    def threads(self) -> int:
        """How many threads a kernel may split over now: the budget, 1 inside an item."""
        if getattr(_LOCAL, "inside", False):
            return 1
        return self.budget

    split = staticmethod(split)

    def single_blas(self) -> Any:
        """BLAS single-threaded inside the block (blas_threads.single_blas); nothing to do in
        a run of a one-thread session."""
        return blas_threads.single_blas(self._one)

    def parallel_for(self, n: int, fn: Callable[[int], None]) -> None:
        """``fn(i)`` for i in 0..n-1, spread over the threads; returns when all are done,
        raising the first error an item raised (the others still finish)."""
        t = min(n, self.threads)
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

        with self.single_blas():
            hot = self._hot_pool() if n == t and self.spin else None
            if hot is not None and n - 1 <= hot.n and hot.busy.acquire(blocking=False):
                try:
                    hot.run(n, fn)
                finally:
                    hot.busy.release()
                return
            pool = self._blocking_pool()
            futures = [pool.submit(work) for _ in range(t - 1)]
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

    def for_ranges(self, fn: Callable[..., None], args: tuple, total: int,
                   spread: bool = True, blas: bool = False) -> None:
        """``fn(*args, lo, hi)`` over items 0..total-1: one contiguous range per thread when
        ``spread`` (the caller's judgement that the work pays for the split), else one call
        (with BLAS single-threaded when ``blas``: the kernel calls it)."""
        t = self.threads if spread else 1
        if t <= 1 or total < 2:
            self._one_call(fn, args, total, blas)
            return
        parts = split(total, t)
        self.parallel_for(len(parts), lambda k: fn(*args, *parts[k]))

    def _one_call(self, fn: Callable[..., None], args: tuple, total: int, blas: bool) -> None:
        """``fn(*args, 0, total)`` on this thread; a kernel that calls BLAS (``blas``) with
        BLAS single-threaded: a kernel splitting its own work never hands a part to BLAS's
        threads, which (with OPENBLAS_THREAD_TIMEOUT unset) spin after and take the cores
        from the rest of the run."""
        if blas:
            with self.single_blas():
                fn(*args, 0, total)
        else:
            fn(*args, 0, total)

    def native_ranges(self, kind: int, pack: Callable[[Any, Any], None],
                      fn: Callable[..., None], args: tuple, total: int,
                      blas: bool = False) -> None:
        """``for_ranges(fn, args, total)`` for a kernel the hot workers' native serving loop
        runs as ``kind`` (framework/hotpool.py): ``pack(ints, floats)`` writes its arguments
        into the pool's slots, the workers run their ranges without the GIL and this thread
        runs ``fn(*args, lo, hi)`` on the first; where the hot workers are busy, have no
        native loop or must not spin, the same as ``for_ranges``."""
        t = self.threads
        if t <= 1 or total < 2:
            self._one_call(fn, args, total, blas)
            return
        hot = self._hot_pool() if self.spin else None
        if hot is not None and hot.native and hot.busy.acquire(blocking=False):
            try:
                pack(hot.ints, hot.floats)
                with self.single_blas():
                    hot.run_native(kind, split(total, min(t, hot.n + 1)),
                                   lambda lo, hi: fn(*args, lo, hi))
            finally:
                hot.busy.release()
            return
        self.for_ranges(fn, args, total, blas=blas)

    def park(self) -> None:
        """Ask spinning hot workers to park now (the end of a run, or a product handed to
        BLAS's own threads)."""
        hot = self._hot
        if hot is not None:
            hot.park()

    # -- workers ----------------------------------------------------------------------------
    def hot_pool(self) -> hotpool.HotPool | None:
        """The spinning workers (made now if needed), None where they cannot be."""
        return self._hot_pool()

    def _hot_pool(self) -> hotpool.HotPool | None:
        hot = self._hot
        if hot is None and not self._hot_tried and not self.closed:
            with self._lock:
                if self._hot is None and not self._hot_tried and not self.closed:
                    hot = hotpool.make(self.budget - 1)
                    # not compiled yet (the background compile): ask again next time
                    self._hot_tried = hot is not None or not hotpool.pending()
                    self._hot = hot
            hot = self._hot
        return hot

    def _blocking_pool(self) -> ThreadPoolExecutor:
        if self._blocking is None:
            with self._lock:
                if self._blocking is None:
                    self._blocking = ThreadPoolExecutor(self.budget - 1,
                                                        thread_name_prefix="onnxrt-intra")
        return self._blocking

    def close(self) -> None:
        """End the workers; later splits run serially."""
        self.closed = True
        self.budget = 1
        hot, self._hot = self._hot, None
        if hot is not None:
            hot.close()
        pool, self._blocking = self._blocking, None
        if pool is not None:
            pool.shutdown(wait=False)

    def _forget(self) -> None:
        """In a forked child: the parent's worker threads do not exist there."""
        self._hot = None
        self._hot_tried = False
        self._blocking = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ThreadPool(budget={self.budget}, spin={self.spin})"


# for a kernel called outside any run (constant folding at session creation, a direct call):
# one thread, no workers
SERIAL = ThreadPool(1, spin=False)


def pool_of(ctx: Any) -> ThreadPool:
    """The thread pool of a kernel's run context, SERIAL without one."""
    return SERIAL if ctx is None else ctx.thread_pool


_LIVE: "weakref.WeakSet[ThreadPool]" = weakref.WeakSet()


def _after_fork() -> None:
    for pool in list(_LIVE):
        pool._forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
