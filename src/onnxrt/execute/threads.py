"""Thread limits for one session's runs (``intra_op_num_threads``).

The BLAS thread pool is process-wide: the limit applies while this session runs and is
restored after, so other sessions keep their own setting (two sessions running at the same
moment with different limits share the pool, the later limit winning while both run).
The same limit bounds the compiled (numba) kernels' threads: ``jit_threads`` is read by
providers/cpu/nn/jit.py at each parallel call (numba's own setting is per thread).
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any

from onnxrt.execute import hotpool

__all__ = ["limit_threads", "default_threads", "jit_threads", "blas_libraries",
           "single_blas", "blas_threads_unused", "spinning_allowed", "rescan_libraries"]

_CONTROLLER: list[Any] = []
_LOCK = threading.Lock()
_BLAS: list[list[Any]] = []
_ALL: list[list[Any]] = []      # every pool's controller (BLAS and OpenMP)
_CPUS: list[int] = []
_ALL_OPENBLAS: list[bool] = []  # every BLAS numpy loaded is OpenBLAS
_BLAS_ONE = [0]         # single_blas blocks open now, on all threads (the first sets BLAS)
_BLAS_PREV: list[int] = []      # the counts the last block to close restores
_BLAS_LOCK = threading.Lock()
_RUN_THREADS = [0]      # the BLAS thread count limit_threads set for the running session
_JIT_LIMIT = [0]        # 0: no session limit in force (use every core)
_SPIN = [True]          # the running session lets idle intra-op workers spin


def default_threads() -> int:
    """The machine's cores (read once: os.cpu_count reads /sys on every call, ~10 us, and
    every split of a session without intra_op_num_threads asked)."""
    if not _CPUS:
        _CPUS.append(os.cpu_count() or 1)
    return _CPUS[0]


# OpenBLAS runs a product of m*n*k below 65536 * GEMM_MULTITHREAD_THRESHOLD (4 by default)
# on the calling thread whatever its thread count; a quarter of that leaves a margin for
# builds with a lower threshold
_OPENBLAS_ONE_THREAD_MNK = 65536


def blas_threads_unused(mnk: int) -> bool:
    """True where a product of m*n*k through numpy's BLAS runs on the calling thread
    anyway (OpenBLAS below its threshold): no single_blas block needed (~3 us saved on
    every small conv, an SE block's 1x1 convs on one pixel)."""
    if mnk >= _OPENBLAS_ONE_THREAD_MNK:
        return False
    if not _ALL_OPENBLAS:
        _ALL_OPENBLAS.append(all(lib.internal_api == "openblas" for lib in blas_libraries()))
    return _ALL_OPENBLAS[0]


def jit_threads() -> int:
    """The thread limit of the session now running (0 when none is set)."""
    return _JIT_LIMIT[0]


def spinning_allowed() -> bool:
    """The running session's ``session.intra_op.allow_spinning`` (default on)."""
    return _SPIN[0]


def _controller() -> Any:
    with _LOCK:
        if not _CONTROLLER:
            from threadpoolctl import ThreadpoolController

            _CONTROLLER.append(ThreadpoolController())
        return _CONTROLLER[0]


def rescan_libraries() -> None:
    """Find the thread pools of the libraries loaded since the last scan (a BLAS loaded by
    another package after the first session, MKL loaded by providers/cpu/blas.py): the
    limits reach them from the next run. ~0.15 ms; sessions call it once when made."""
    from threadpoolctl import ThreadpoolController

    c = ThreadpoolController()
    with _LOCK:
        _CONTROLLER[:] = [c]
        _BLAS.clear()
        _ALL.clear()
        _ALL_OPENBLAS.clear()


def blas_libraries() -> list[Any]:
    """threadpoolctl's controllers of the BLAS libraries loaded (numpy's OpenBLAS), whose
    thread count a kernel may set for the span of a call (about 1 us a call)."""
    if not _BLAS:
        libs = [lib for lib in _controller().lib_controllers if lib.user_api == "blas"]
        with _LOCK:
            if not _BLAS:
                _BLAS.append(libs)
    return _BLAS[0]


class _SingleBlas:
    """single_blas's block where it has something to do."""

    __slots__ = ()

    def __enter__(self) -> None:
        with _BLAS_LOCK:
            if _BLAS_ONE[0] == 0:
                blas = blas_libraries()
                if _RUN_THREADS[0] > 0:
                    _BLAS_PREV[:] = [_RUN_THREADS[0]] * len(blas)
                else:
                    _BLAS_PREV[:] = [lib.get_num_threads() for lib in blas]
                for lib in blas:
                    lib.set_num_threads(1)
            _BLAS_ONE[0] += 1

    def __exit__(self, *exc: Any) -> None:
        with _BLAS_LOCK:
            _BLAS_ONE[0] -= 1
            if _BLAS_ONE[0] == 0:
                for lib, k in zip(blas_libraries(), _BLAS_PREV):
                    lib.set_num_threads(k)


_SINGLE = _SingleBlas()     # stateless: one instance serves every block
_NOTHING = contextlib.nullcontext()


def single_blas() -> Any:
    """BLAS single-threaded inside the block (a kernel's own split or a product too small
    to wake BLAS's threads for); the count is restored when the last open block, on any
    thread, closes (the count is process-wide: a split's items open blocks of their own on
    the workers). Inside a session run the count to restore is known (``limit_threads``
    set it) and is not read again; in a one-thread run BLAS is single-threaded already and
    the block does nothing."""
    return _NOTHING if _RUN_THREADS[0] == 1 else _SINGLE


def _limited_libraries() -> list[Any]:
    """threadpoolctl's controllers of every thread pool a session limits (BLAS, OpenMP),
    found once (rescan_libraries finds later ones)."""
    if not _ALL:
        libs = list(_controller().lib_controllers)
        with _LOCK:
            if not _ALL:
                _ALL.append(libs)
    return _ALL[0]


class limit_threads:        # noqa: N801 (used as a context manager, like the function it was)
    """BLAS (and OpenMP) threads limited to ``n`` inside the block (when n > 0), the kernels'
    own splits bounded by it (execute/intra.py), their idle workers spinning while it runs
    only if ``spin``; on leaving, the counts it changed are restored and the spinning
    workers park.

    Per run, so kept cheap: each pool's count is read (~0.3 us) and set only where it
    differs (threadpoolctl's own ``limit`` context took ~12 us a run, a third of a one-node
    model's whole run)."""

    __slots__ = ("n", "spin", "prev", "changed")

    def __init__(self, n: int, spin: bool = True) -> None:
        self.n = n
        self.spin = spin

    def __enter__(self) -> None:
        self.prev = _JIT_LIMIT[0], _SPIN[0], _RUN_THREADS[0]
        _JIT_LIMIT[0] = self.n
        _SPIN[0] = self.spin
        changed = []
        if self.n > 0:
            try:
                for lib in _limited_libraries():
                    k = lib.get_num_threads()
                    if k is not None and k != self.n:
                        lib.set_num_threads(self.n)
                        changed.append((lib, k))
            except BaseException:
                self._restore(changed)
                raise
        # single_blas restores this count without reading it (0: read it)
        _RUN_THREADS[0] = self.n if self.n > 0 and not _BLAS_ONE[0] else 0
        self.changed = changed

    def _restore(self, changed: list[tuple[Any, int]]) -> None:
        for lib, k in changed:
            lib.set_num_threads(k)
        _JIT_LIMIT[0], _SPIN[0], _RUN_THREADS[0] = self.prev

    def __exit__(self, *exc: Any) -> None:
        try:
            self._restore(self.changed)
        finally:
            hotpool.park()
