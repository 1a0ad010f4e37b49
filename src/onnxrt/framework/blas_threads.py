"""BLAS's thread count: process-wide by nature, shared by every session of the process.

numpy's BLAS (OpenBLAS, or MKL) has one thread count for the whole process, set through
threadpoolctl. Sessions do not own it; they ask for a bound while they run, and the count
in force is the smallest bound asked for by anyone at that moment:

- a run of a session with ``intra_op_num_threads = n`` asks for ``n`` from its start to its
  end (``request``/``release``; a session without the option asks for nothing);
- a kernel that splits its own work, or makes a product too small to wake BLAS's threads
  for, asks for 1 around the call (``single_blas``): each part of a split then runs on one
  core and BLAS's idle threads never spin against the kernel's own workers.

So no run ever makes BLAS use more threads than its own budget, whatever runs beside it;
while two sessions with different budgets run at once, BLAS calls of the larger one run
with the smaller count (under-using cores rather than over-subscribing them). When the last
request ends, the counts found before the first one are put back. Each change is a few
microseconds; a run changes nothing where BLAS already has its count.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any

__all__ = ["request", "release", "single_blas", "blas_libraries", "blas_threads_unused",
           "plan_needs_bound",
           "rescan_libraries", "default_threads", "current_bound"]

_LOCK = threading.Lock()
_CONTROLLER: list[Any] = []
_BLAS: list[list[Any]] = []         # the BLAS libraries' controllers
_ALL: list[list[Any]] = []          # every pool's controller (BLAS and OpenMP)
_ALL_OPENBLAS: list[bool] = []      # numpy's own BLAS is OpenBLAS
_CPUS: list[int] = []
_REQUESTS: dict[int, int] = {}      # thread bound -> how many requests hold it now
_APPLIED = [0]                      # the bound in force (0: none, the counts found)
_SAVED: list[tuple[Any, int]] = []  # (library, count found) before the first request
_GETTERS: list[tuple[Any, Any]] = []    # (library, its count getter), per scan


def default_threads() -> int:
    """The machine's cores (read once: os.cpu_count reads /sys on every call)."""
    if not _CPUS:
        _CPUS.append(os.cpu_count() or 1)
    return _CPUS[0]


# OpenBLAS runs a product of m*n*k below 65536 * GEMM_MULTITHREAD_THRESHOLD (4 by default)
# on the calling thread whatever its thread count; a quarter of that leaves a margin for
# builds with a lower threshold
_OPENBLAS_ONE_THREAD_MNK = 65536


def blas_threads_unused(mnk: int) -> bool:
    """True where a product of m*n*k through numpy's BLAS runs on the calling thread
    anyway (OpenBLAS below its threshold): no single_blas block is needed."""
    if mnk >= _OPENBLAS_ONE_THREAD_MNK:
        return False
    if not _ALL_OPENBLAS:
        libs = blas_libraries()
        # np.matmul calls numpy's own BLAS (the wheel's, under numpy.libs); another library
        # loaded beside it (torch's MKL) does not run numpy's products
        own = [lib for lib in libs if "numpy" in str(getattr(lib, "filepath", ""))]
        _ALL_OPENBLAS.append(all(lib.internal_api == "openblas" for lib in own or libs))
    return _ALL_OPENBLAS[0]


def _controller() -> Any:
    with _LOCK:
        if not _CONTROLLER:
            from threadpoolctl import ThreadpoolController

            _CONTROLLER.append(ThreadpoolController())
        return _CONTROLLER[0]


def rescan_libraries() -> None:
    """Find the thread pools of the libraries loaded since the last scan (a BLAS another
    package loaded, MKL loaded by providers/cpu/blas.py): bounds reach them from the next
    request on. Sessions call it once when made."""
    from threadpoolctl import ThreadpoolController

    c = ThreadpoolController()
    with _LOCK:
        _CONTROLLER[:] = [c]
        _BLAS.clear()
        _ALL.clear()
        _ALL_OPENBLAS.clear()
        _GETTERS.clear()


def blas_libraries() -> list[Any]:
    """threadpoolctl's controllers of the BLAS libraries loaded (numpy's OpenBLAS)."""
    if not _BLAS:
        libs = [lib for lib in _controller().lib_controllers if lib.user_api == "blas"]
        with _LOCK:
            if not _BLAS:
                _BLAS.append(libs)
    return _BLAS[0]


def _limited_libraries() -> list[Any]:
    """Every thread pool a bound applies to (BLAS, OpenMP), found once per scan."""
    if not _ALL:
        libs = list(_controller().lib_controllers)
        with _LOCK:
            if not _ALL:
                _ALL.append(libs)
    return _ALL[0]


def _apply(bound: int) -> None:
    """Called with _LOCK held: make ``bound`` the count in force (0: the counts found).
    The counts are read once, at the first request; after that each library holds what
    was last set, and is set only where the new count differs."""
    prev = _APPLIED[0]
    if bound == prev:
        return
    if prev == 0:               # the first request: remember what was there
        _SAVED[:] = [(lib, k) for lib, get in _libs_locked() if (k := get()) is not None]
    for lib, k in _SAVED:
        was = prev or k
        want = bound or k
        if was != want:
            _setter(lib)(want)
    _APPLIED[0] = bound
    if bound == 0:
        _SAVED.clear()


def _libs_locked() -> list[tuple[Any, Any]]:
    """(controller, its count getter) of every pool a bound applies to, found once per scan
    (called with _LOCK held). The getter is the library's own function where threadpoolctl
    exposes it: read on every first request of a run, its ~0.5 us through threadpoolctl
    was a third of a one-node model's run overhead."""
    if not _GETTERS:
        libs = _ALL[0] if _ALL else _scan_locked()
        _GETTERS[:] = [(lib, _getter(lib)) for lib in libs]
    return _GETTERS


def _getter(lib: Any) -> Any:
    api = getattr(lib, "internal_api", "")
    fn = None
    try:
        if api == "openblas" and getattr(lib, "threading_layer", "") != "openmp":
            fn = lib._get_symbol("openblas_get_num_threads")
        elif api == "openmp":
            # (an OpenMP runtime is loaded by scikit-learn or torch: threadpoolctl's getter
            # looks the symbol up on every call, 2 us of every run)
            fn = getattr(lib.dynlib, "omp_get_max_threads", None)
    except Exception:           # another threadpoolctl: its public getter
        fn = None
    return fn if fn is not None else lib.get_num_threads


def _setter(lib: Any) -> Any:
    """The library's own thread-count setter. threadpoolctl (>= 3.6) lets one Python thread
    only, the first to set an OpenBLAS count while it lives, change it and ignores the
    others; sessions run on any thread, and the changes here are already serialised under
    _LOCK, so the library's setter is called directly where threadpoolctl has one."""
    real = getattr(lib, "_real_set_num_threads", None)
    if real is not None:
        return real
    if getattr(lib, "internal_api", "") == "openmp":
        fn = getattr(getattr(lib, "dynlib", None), "omp_set_num_threads", None)
        if fn is not None:
            return fn
    return lib.set_num_threads


def _scan_locked() -> list[Any]:
    """_limited_libraries with _LOCK already held."""
    if not _CONTROLLER:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER.append(ThreadpoolController())
    _ALL[:] = [list(_CONTROLLER[0].lib_controllers)]
    return _ALL[0]


def request(n: int) -> None:
    """A bound of ``n`` (>= 1) threads on BLAS (and OpenMP) until the matching
    ``release(n)``: the count in force is the smallest bound requested. (Every run of a
    session with intra_op_num_threads calls it: the common case, no other request open,
    is written out.)"""
    with _LOCK:
        req = _REQUESTS
        req[n] = req.get(n, 0) + 1
        cur = _APPLIED[0]
        try:
            if cur == 0:            # the first: remember the counts, set where they differ
                saved = _SAVED
                saved.clear()
                for lib, get in _GETTERS or _libs_locked():
                    k = get()
                    if k is not None:
                        saved.append((lib, k))
                        if k != n:
                            _setter(lib)(n)
                _APPLIED[0] = n
            elif n < cur:
                _apply(n)
        except BaseException:
            _drop(n)
            raise


def _drop(n: int) -> None:
    c = _REQUESTS[n] - 1
    if c:
        _REQUESTS[n] = c
    else:
        del _REQUESTS[n]


def release(n: int) -> None:
    """End one ``request(n)``: the next smallest bound, or the counts found, come back."""
    with _LOCK:
        req = _REQUESTS
        c = req[n] - 1
        if c:
            req[n] = c
            return
        del req[n]
        cur = _APPLIED[0]
        if not req:                 # the last: the counts found come back
            for lib, k in _SAVED:
                if k != cur:
                    _setter(lib)(k)
            _SAVED.clear()
            _APPLIED[0] = 0
        elif n == cur:
            _apply(min(req))


def current_bound() -> int:
    """The bound in force now (0: none requested)."""
    return _APPLIED[0]


class _SingleBlas:
    """single_blas's block (one stateless instance serves every block)."""

    __slots__ = ()

    def __enter__(self) -> None:
        request(1)

    def __exit__(self, *exc: Any) -> None:
        release(1)


_SINGLE = _SingleBlas()
_NOTHING = contextlib.nullcontext()


def single_blas(already_one: bool = False) -> Any:
    """BLAS single-threaded inside the block, on every thread (the count is process-wide;
    parts of a split open blocks of their own on the workers). ``already_one``: the caller
    knows a request of 1 is in force for as long as the block (a run of a one-thread
    session): the block then does nothing."""
    return _NOTHING if already_one else _SINGLE


def _forget() -> None:
    """In a forked child: no request of the parent's threads is alive there."""
    _REQUESTS.clear()
    _APPLIED[0] = 0
    _SAVED.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)


# ops of the default domain whose CPU kernels never reach a BLAS or OpenMP pool: element-wise
# math, comparisons, shape and data movement, reductions. A run whose steps are all of them
# on the CPU provider skips request/release (~2 us of a one-node model's run).
_NO_BLAS_OPS = frozenset("""
Abs Acos Acosh Add And Asin Asinh Atan Atanh BitShift BitwiseAnd BitwiseNot BitwiseOr
BitwiseXor Cast CastLike Ceil Celu Clip Concat Constant ConstantOfShape Cos Cosh DepthToSpace
Div Elu Equal Erf Exp Expand Flatten Floor Gather GatherElements GatherND Gelu Greater
GreaterOrEqual HardSigmoid HardSwish Identity IsInf IsNaN LeakyRelu Less LessOrEqual Log
Max Mean Min Mish Mod Mul Neg Not OneHot Or Pad Pow PRelu Range Reciprocal ReduceL1 ReduceL2
ReduceLogSum ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum
ReduceSumSquare Relu Reshape Round Selu Shape Shrink Sigmoid Sign Sin Sinh Size Slice
Softplus Softsign SpaceToDepth Split Sqrt Squeeze Sub Sum Tan Tanh ThresholdedRelu Tile
Transpose Trilu Unsqueeze Where Xor
""".split())


def plan_needs_bound(steps: Any) -> bool:
    """False where every step is an op of _NO_BLAS_OPS run by the CPU provider (a
    subgraph, a fused node or another provider's step may reach BLAS: True)."""
    for st in steps:
        node = st.node
        if (st.provider != "CPUExecutionProvider" or node.domain not in ("", "ai.onnx")
                or node.op_type not in _NO_BLAS_OPS):
            return True
    return False
