"""Workers that wait for the next item by spinning without the GIL, while a session runs.

Each session's thread pool (framework/parallel.py) owns one ``HotPool`` of its budget minus
one workers, made on its first split and ended with the session (``close``).

Handing an item to a thread blocked in a queue costs a wake-up (40-50 us on this 2-core
VM), and waiting for it to finish another; with the GIL passed back and forth a split cost
~100 us (framework/parallel.py), more than small convolutions take. Here each worker waits in a
compiled (numba, ``nogil``) loop that watches its slot of a shared array; the caller posts
an item by writing a sequence number there, runs its own item, and waits for the worker's
"done" number in another compiled loop, so neither side sleeps and the GIL is free whenever
the other side needs it. Measured: a split of two 150 us items 250 us -> 160 us.

Spinning burns a core, so it is bounded: a worker parks (blocks on a condition) after
``_SPINS`` idle polls (about 3 ms: long enough to outlast the unsplit nodes between two
splits, where waking a parked worker again costs ~50-100 us) and when the session run
that woke it ends (``park``), so an idle process and the other engine of a side-by-side
benchmark are left alone. ``session.intra_op.allow_spinning = 0`` (onnxruntime's key)
turns it off for a session: its splits take the blocking pool.

Each poll calls sched_yield through libc (a ctypes function pointer passed in, as numba
caches functions that take one): the call keeps the compiler from hoisting the load out of
the loop and lets the other thread of a shared core run.

Native items. A Python item still costs ~45 us (measured: a split of two empty items):
the worker leaves its compiled loop and must take the GIL, which the caller holds until it
enters its own compiled code, so the worker sleeps on the GIL and is woken by the kernel.
A compiled kernel can instead register a serving loop (``install_native``: the loop above
that also runs the kernel's items itself, reading their arguments from the pool's slot
arrays ``ints``/``floats``), and post items as a kind number and a range (``run_native``):
the worker then never leaves compiled code between items and never takes the GIL.

Items are claimed, not assigned. A worker whose core another process keeps busy may not
run for a whole time slice (measured: an MLP of 0.36 ms took ~7.7 ms a run when a busy loop
held the second core, waiting for the worker's half), so each posted item carries a claim
word (``_CLAIM``): the worker takes the item with a compare-and-swap before running it, and
the caller, once its own item is done, takes back every item still unclaimed and runs it
itself (``_steal``) instead of waiting. A worker that is spinning claims within a
microsecond of the post, so only a worker that is not running loses its item.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any, Callable

import numpy as np

from onnxrt.framework import warmup

__all__ = ["HotPool", "make", "install_native", "INT_SLOTS", "FLOAT_SLOTS", "POSTED", "DONE",
           "PARKED", "PARK", "KIND", "LO", "HI", "CLAIM"]

_SPINS = 10000               # idle polls (~0.3 us each) before a worker parks
# slot layout of the control array, one row per worker: the last posted and the last
# finished item's sequence numbers, parked, park request, the posted item's native kind
# (0: a Python item) and range, the claim word (the posted sequence number while nobody
# took the item, its negation once the worker did, 0 once the caller took it back)
POSTED, DONE, PARKED, PARK, KIND, LO, HI, CLAIM = range(8)
_POSTED, _DONE, _PARKED, _PARK, _KIND, _LO, _HI, _CLAIM = range(8)
_COLS = 8
# argument slots of a native item (shared by the workers: one caller at a time): a
# provider's packing function writes an item's arrays (address, then shape) and scalars
# here, its serving loop reads them back (providers/cpu/nn/native.py)
INT_SLOTS, FLOAT_SLOTS = 64, 8
_INT_SLOTS, _FLOAT_SLOTS = INT_SLOTS, FLOAT_SLOTS


def _serve(ctl, w, done, spins, yield_fn):
    """Mark item ``done`` finished (without the GIL, so the waiting caller never waits for
    it), then return the next posted sequence number once it differs from ``done`` and the
    item is claimed (an item the caller took back is marked done and skipped), or -1 after
    ``spins`` polls or on a park request. (A native serving loop, ``install_native``, has
    this contract too, and runs the native items it sees before returning.)"""
    ctl[w, 1] = done
    i = 0
    while i < spins:
        v = ctl[w, 0]
        if v != done:
            if _cas(ctl, w, 7, v, -v) == v:
                return v
            done = v            # taken back by the caller
            ctl[w, 1] = done
            i = 0
            continue
        if ctl[w, 3] != 0:
            return -1
        yield_fn()
        i += 1
    return -1


def _wait_done(ctl, w, seq, yield_fn):
    while ctl[w, 1] != seq:
        yield_fn()


def _steal(ctl, w, seq):
    """1 when the caller took item ``seq`` of worker ``w`` back (the worker had not
    claimed it), else 0."""
    return 1 if _cas(ctl, w, 7, seq, 0) == seq else 0


def _claim(ctl, w, seq):
    """1 when worker ``w`` took item ``seq`` (the caller had not taken it back), else 0."""
    return 1 if _cas(ctl, w, 7, seq, -seq) == seq else 0


def cas_intrinsic(numba: Any) -> Any:
    """``_cas(a, i, j, expected, new)``: a sequentially consistent compare-and-swap on the
    int64 a[i, j]; returns the value found (``expected`` when it swapped)."""
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    @intrinsic
    def _cas(typingctx, a, i, j, expected, new):
        sig = types.int64(a, i, j, expected, new)

        def codegen(context, builder, signature, args):
            aty = signature.args[0]
            ary = context.make_array(aty)(context, builder, args[0])
            ii = context.cast(builder, args[1], signature.args[1], types.intp)
            jj = context.cast(builder, args[2], signature.args[2], types.intp)
            ptr = cgutils.get_item_pointer(context, builder, aty, ary, [ii, jj])
            ex = context.cast(builder, args[3], signature.args[3], types.int64)
            nw = context.cast(builder, args[4], signature.args[4], types.int64)
            res = builder.cmpxchg(ptr, ex, nw, "seq_cst", "seq_cst")
            return builder.extract_value(res, 0)
        return sig, codegen
    return _cas


_cas: Any = None        # the intrinsic, set by _compiled before the loops compile
_FNS: list[Any] = []
_LOCK = threading.Lock()


def _compiled() -> Any:
    """(publish_and_spin, wait_done, sched_yield, steal, claim) compiled, or None without
    numba or libc's sched_yield."""
    global _cas
    with _LOCK:
        if not _FNS:
            out = None
            try:
                import numba

                libc = ctypes.CDLL(None)
                y = libc.sched_yield
                y.argtypes = []
                y.restype = ctypes.c_int
                _cas = cas_intrinsic(numba)
                fns = []
                for f in (_serve, _wait_done, _steal, _claim):
                    try:
                        fns.append(numba.njit(cache=True, nogil=True)(f))
                    except Exception:   # no writable cache location
                        fns.append(numba.njit(nogil=True)(f))
                ctl = np.zeros((1, _COLS), np.int64)
                fns[0](ctl, 0, 0, 1, y)
                fns[1](ctl, 0, 0, y)
                fns[2](ctl, 0, 1)
                fns[3](ctl, 0, 1)
                out = (fns[0], fns[1], y, fns[2], fns[3])
            except Exception:   # numba missing or broken, no sched_yield: the blocking pool
                out = None
            _FNS.append(out)
    return _FNS[0]


class HotPool:
    """``workers`` threads, each running posted items (``run``, ``run_native``) and spinning
    for the next."""

    def __init__(self, workers: int, fns: Any) -> None:
        serve, self.wait_done, self.yield_fn, self.steal, self.claim = fns
        # the serving loop and its arguments after (ctl, w, done, spins, yield_fn): read
        # and replaced as one
        self.server: tuple[Callable, tuple] = (serve, ())
        self.native = False
        self.n = workers
        self.ctl = np.zeros((workers, _COLS), np.int64)
        self.ints = np.zeros(_INT_SLOTS, np.int64)
        self.floats = np.zeros(_FLOAT_SLOTS, np.float64)
        self.seq = [0] * workers
        self.jobs: list[Callable[[], None] | None] = [None] * workers
        self.errors: list[BaseException | None] = [None] * workers
        self.cv = threading.Condition()
        self.posted = False                   # an item posted since the last park()
        self.busy = threading.Lock()          # one caller at a time
        self.closed = False
        if _NATIVE:
            self.install_native(*_NATIVE[0])
        _LIVE.add(self)
        for w in range(workers):
            threading.Thread(target=self._work, args=(w,), daemon=True,
                             name=f"onnxrt-hot-{w}").start()

    def install_native(self, serve: Callable, extra: tuple) -> None:
        """Serve with ``serve(ctl, w, done, spins, yield_fn, ints, floats, *extra)`` from
        the next item on (``_serve``'s contract, native items run inside: each claimed
        first, as ``_claim`` does, and skipped, marked done, when the claim fails)."""
        self.server = (serve, (self.ints, self.floats) + tuple(extra))
        self.native = True

    def _work(self, w: int) -> None:
        from onnxrt.framework import parallel

        parallel.mark_worker()
        ctl = self.ctl
        done = 0
        while not self.closed:
            try:
                serve, extra = self.server
                v = int(serve(ctl, w, done, _SPINS, self.yield_fn, *extra))
                done = int(ctl[w, _DONE])
            except BaseException as e:      # a native item failed: handed to the caller
                self.errors[w] = e
                v, done = -1, int(ctl[w, _POSTED])
                ctl[w, _DONE] = done
            if v >= 0:
                if ctl[w, _KIND] == 0:
                    job = self.jobs[w]
                    try:
                        if job is not None:
                            job()
                    except BaseException as e:      # handed to the caller
                        self.errors[w] = e
                    done = v
                continue                # a native item: the serving loop runs it
            with self.cv:               # park until something is posted
                ctl[w, _PARKED] = 1
                while ctl[w, _POSTED] == done and not self.closed:
                    self.cv.wait()
                ctl[w, _PARKED] = 0

    def _post(self, w: int, kind: int, lo: int = 0, hi: int = 0) -> None:
        ctl = self.ctl
        self.errors[w] = None
        self.seq[w] += 1
        ctl[w, _KIND] = kind
        ctl[w, _LO] = lo
        ctl[w, _HI] = hi
        ctl[w, _PARK] = 0
        self.posted = True
        ctl[w, _CLAIM] = self.seq[w]
        ctl[w, _POSTED] = self.seq[w]
        # the worker sets _PARKED, then re-reads _POSTED, holding the condition's lock and
        # the GIL, as this holds the GIL: either it sees this post or this sees it parked
        # (no lost wake-up), and then it waits inside the condition when this notifies
        if ctl[w, _PARKED]:
            with self.cv:
                self.cv.notify_all()

    def _take_back(self, posted: int) -> list[int]:
        """The workers among 0..posted-1 whose items were still unclaimed, now the
        caller's to run."""
        return [w for w in range(posted) if self.steal(self.ctl, w, self.seq[w])]

    def _finish(self, posted: int, err: BaseException | None,
                taken: list[int] | tuple = ()) -> None:
        """Wait for workers 0..posted-1 (but those whose items the caller took back),
        then raise the first error."""
        for w in range(posted):
            if w not in taken:
                self.wait_done(self.ctl, w, self.seq[w], self.yield_fn)
            self.jobs[w] = None
            if err is None and self.errors[w] is not None:
                err = self.errors[w]
            self.errors[w] = None
        if err is not None:
            raise err

    def run(self, n: int, fn: Callable[[int], None]) -> None:
        """fn(0) here, fn(1..n-1) on workers 0..n-2 (n - 1 <= workers), or here too where a
        worker has not claimed its item by the time fn(0) is done; returns when all are
        done, raising the first error."""
        for w in range(n - 1):
            self.jobs[w] = (lambda k=w + 1: fn(k))
            self._post(w, 0)
        err = None
        taken: list[int] = []
        try:
            fn(0)
            taken = self._take_back(n - 1)
            for w in taken:
                fn(w + 1)
        except BaseException as e:      # wait for the workers before raising
            err = e
        self._finish(n - 1, err, taken)

    def run_native(self, kind: int, parts: list[tuple[int, int]],
                   own: Callable[[int, int], None]) -> None:
        """Native item ``kind`` (its arguments already in ``ints``/``floats``) over
        parts[1:] on workers 0.., ``own(*parts[0])`` here, and ``own`` over the parts no
        worker claimed by then; returns when all are done."""
        for w in range(len(parts) - 1):
            self._post(w, kind, *parts[w + 1])
        err = None
        taken: list[int] = []
        try:
            own(*parts[0])
            taken = self._take_back(len(parts) - 1)
            for w in taken:
                own(*parts[w + 1])
        except BaseException as e:      # wait for the workers before raising
            err = e
        self._finish(len(parts) - 1, err, taken)

    def park(self) -> None:
        """Ask spinning workers to park now (the end of a session run); nothing to ask when
        nothing was posted since the last request (a run that split no work)."""
        if self.posted:
            self.posted = False
            self.ctl[:, _PARK] = 1

    def close(self) -> None:
        """End the workers (the session that owns the pool is gone): they return from their
        loop at the next poll or wake-up."""
        self.closed = True
        self.ctl[:, _PARK] = 1
        with self.cv:
            self.cv.notify_all()


_NATIVE: list[tuple[Callable, tuple]] = []
_LIVE: "weakref.WeakSet[HotPool]" = weakref.WeakSet()


def install_native(serve: Callable, extra: tuple) -> bool:
    """The native serving loop for the pool, now and once made (see HotPool.install_native),
    compiled (or loaded from numba's cache) here; False where the spin loops are not
    available."""
    fns = _compiled()
    if fns is None:
        return False
    # a park request is waiting: the call returns at once
    ctl = np.zeros((1, _COLS), np.int64)
    ctl[0, _PARK] = 1
    serve(ctl, 0, 0, 1, fns[2], np.zeros(_INT_SLOTS, np.int64),
          np.zeros(_FLOAT_SLOTS, np.float64), *extra)
    with _LOCK:
        _NATIVE[:] = [(serve, extra)]
        for pool in list(_LIVE):
            pool.install_native(serve, extra)
    return True


def make(workers: int) -> HotPool | None:
    """A new hot pool of ``workers`` threads, or None where the compiled spin loops are not
    available (numba missing, no sched_yield) or not compiled yet (framework/warmup.py)."""
    if workers < 1 or not warmup.ready():
        return None
    fns = _compiled()
    return HotPool(workers, fns) if fns is not None else None


def pending() -> bool:
    """The spin loops are not usable yet but may be soon (the background compile runs)."""
    return warmup.status() in ("compiling", "cold")
