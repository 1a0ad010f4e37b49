"""Importing numba for the compiled kernels, once per process, at the least cost.

A fresh process that loads cached kernels paid, besides numba's import (~60 MB, 0.35-0.6
s, 39 MB of it LLVM's library), for numba's lowering registry: its cache loader installs
every implementation numba has (~45 MB, 0.4-1 s) before it reads an entry, and
``numba.np.arraymath`` then imports ``scipy.linalg`` (0.3-0.65 s and ~16 MB of that) only
to learn whether ``np.convolve``/``np.correlate`` may call a BLAS. ``load_numba`` reads
cached kernels without that registry; the first kernel that must compile loads it, as
numba always does. Where numba's cache class is not shaped as expected, the registry loads
at once, with ``scipy.linalg`` refused to this thread (numba then takes its own loop for
those two functions; its ``np.dot`` and ``np.linalg`` import scipy when they compile).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import sys
import threading
from typing import Any, Iterator

__all__ = ["load_numba"]

_NUMBA: list[Any] = []
_LOCK = threading.Lock()


def load_numba() -> Any:
    """numba, ready to load cached kernels, or None where it fails to import."""
    if _NUMBA:
        return _NUMBA[0]
    with _LOCK:
        if not _NUMBA:
            try:
                with _no_scipy_linalg():
                    import numba

                    _load_lazily()
            except Exception:
                numba = None
            _NUMBA.append(numba)
    return _NUMBA[0]


def _load_lazily() -> None:
    """Kernels found in numba's disk cache load without numba's lowering registries; the
    first one that must compile (a cache miss) loads them, as numba always does.

    numba's ``Cache.load_overload`` refreshes its CPU target before it reads an entry, yet
    rebuilding an entry needs only the code generator and numba's runtime (NRT, initialized
    here); compiling refreshes the target itself (``compile_extra``), so a miss and every
    compile after it take numba's own path."""
    from numba.core import caching
    from numba.core.registry import cpu_target
    from numba.core.runtime import nrt

    cache = caching.Cache
    original = cache.load_overload
    if getattr(original, "_onnxrt_lazy", False):
        return
    if not (hasattr(cache, "_load_overload")
            and hasattr(cache, "_guard_against_spurious_io_errors")):
        cpu_target.target_context.refresh()
        return
    nrt.rtsys.initialize(cpu_target.target_context)
    loaded = [False]        # numba's registries loaded: its own path from then on

    def load_overload(self: Any, sig: Any, target_context: Any) -> Any:
        if not loaded[0]:
            with self._guard_against_spurious_io_errors():
                data = self._load_overload(sig, target_context)
            if data is not None:
                return data
            loaded[0] = True        # a miss: this call compiles next, with the registries
        return original(self, sig, target_context)

    load_overload._onnxrt_lazy = True        # type: ignore[attr-defined]
    cache.load_overload = load_overload


class _NoScipyLinalg(importlib.abc.MetaPathFinder):
    """Refuses ``scipy.linalg`` to the thread that made it (other threads import freely)."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if ((name == "scipy.linalg" or name.startswith("scipy.linalg."))
                and threading.get_ident() == self.thread):
            raise ImportError(f"{name} is not imported while numba's registries load")
        return None


@contextlib.contextmanager
def _no_scipy_linalg() -> Iterator[None]:
    if "scipy.linalg" in sys.modules:
        yield
        return
    finder = _NoScipyLinalg()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
