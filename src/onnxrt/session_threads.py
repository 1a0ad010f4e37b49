"""The intra-op thread pool a session runs its kernels on, from its options.

``use_per_session_threads`` (onnxruntime's default, True) gives every session a pool of its
own: ``intra_op_num_threads`` threads (every core when 0), spinning between items unless
``session.intra_op.allow_spinning`` is "0". False takes the process-wide pool made by
``set_global_thread_pool_sizes``; as in onnxruntime, a session asking for it before that
call fails, and so does a session asking for its own pool once the global pool exists.
"""

from __future__ import annotations

import threading
from typing import Any

from onnxrt.errors import Fail
from onnxrt.framework.blas_threads import default_threads
from onnxrt.framework.parallel import ThreadPool

__all__ = ["set_global_thread_pool_sizes", "session_pool", "global_inter_op_threads"]

_GLOBAL: list[tuple[ThreadPool, int, int]] = []     # (pool, intra threads asked, inter)
_LOCK = threading.Lock()


def set_global_thread_pool_sizes(intra_op_num_threads: int = 0,
                                 inter_op_num_threads: int = 0) -> None:
    """Make the process-wide thread pools (onnxruntime's function of that name) that sessions
    with ``use_per_session_threads = False`` share: ``intra_op_num_threads`` threads for
    their kernels (every core when 0), ``inter_op_num_threads`` for ORT_PARALLEL branches."""
    intra, inter = int(intra_op_num_threads), int(inter_op_num_threads)
    if intra < 0 or inter < 0:
        raise Fail(f"set_global_thread_pool_sizes: thread counts must be >= 0, got "
                   f"{intra}, {inter}")
    with _LOCK:
        if _GLOBAL:
            _GLOBAL[0][0].close()
        _GLOBAL[:] = [(ThreadPool(intra or default_threads(), blas_bound=intra > 0), intra,
                       inter)]


def global_inter_op_threads() -> int:
    """The global pools' inter-op thread count (0: none set or every core)."""
    return _GLOBAL[0][2] if _GLOBAL else 0


def session_pool(so: Any, spin: bool, current: ThreadPool | None
                 ) -> tuple[ThreadPool, int, bool]:
    """(the pool, the BLAS bound its runs hold (0: none), whether the session owns it) for
    a session with options ``so``; ``current``, the pool of the session being rebuilt, is
    kept when it still fits."""
    if not so.use_per_session_threads:
        if not _GLOBAL:
            raise Fail("session_env.EnvCreatedWithGlobalThreadPools() was false. When the "
                       "session is not configured to use per session threadpools, the env "
                       "must be created with the the CreateEnvWithGlobalThreadPools API "
                       "(onnxrt.set_global_thread_pool_sizes).")
        pool, intra, _ = _GLOBAL[0]
        return pool, intra, False
    if _GLOBAL:
        raise Fail("use_per_session_threads must be false when using a global thread pool "
                   "(onnxrt.set_global_thread_pool_sizes was called)")
    n = max(0, int(so.intra_op_num_threads or 0))
    budget = n or default_threads()
    if (current is not None and not current.closed and current.budget == budget
            and current.spin == spin and current.blas_bound == (n > 0)):
        return current, n, True
    return ThreadPool(budget, spin, blas_bound=n > 0), n, True
