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
from typing import Any, Iterator

from onnxrt.execute import hotpool

__all__ = ["limit_threads", "default_threads", "jit_threads", "blas_libraries",
           "single_blas", "spinning_allowed", "rescan_libraries"]

_CONTROLLER: list[Any] = []
_LOCK = threading.Lock()
_BLAS: list[list[Any]] = []
_JIT_LIMIT = [0]        # 0: no session limit in force (use every core)
_SPIN = [True]          # the running session lets idle intra-op workers spin


def default_threads() -> int:
    return os.cpu_count() or 1


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


def blas_libraries() -> list[Any]:
    """threadpoolctl's controllers of the BLAS libraries loaded (numpy's OpenBLAS), whose
    thread count a kernel may set for the span of a call (about 1 us a call)."""
    if not _BLAS:
        libs = [lib for lib in _controller().lib_controllers if lib.user_api == "blas"]
        with _LOCK:
            if not _BLAS:
                _BLAS.append(libs)
    return _BLAS[0]


@contextlib.contextmanager
def single_blas() -> Iterator[None]:
    """BLAS single-threaded inside the block (a kernel's own split or a product too small
    to wake BLAS's threads for), its thread count restored on leaving."""
    blas = blas_libraries()
    prev = [lib.get_num_threads() for lib in blas]
    for lib in blas:
        lib.set_num_threads(1)
    try:
        yield
    finally:
        for lib, k in zip(blas, prev):
            lib.set_num_threads(k)


@contextlib.contextmanager
def limit_threads(n: int, spin: bool = True) -> Iterator[None]:
    """BLAS (and OpenMP) threads limited to ``n`` inside the block (when n > 0), the kernels'
    own splits bounded by it (execute/intra.py), their idle workers spinning while it runs
    only if ``spin``; on leaving, the spinning workers park."""
    prev = _JIT_LIMIT[0], _SPIN[0]
    _JIT_LIMIT[0] = n
    _SPIN[0] = spin
    try:
        if n > 0:
            with _controller().limit(limits=n):
                yield
        else:
            yield
    finally:
        _JIT_LIMIT[0], _SPIN[0] = prev
        hotpool.park()
