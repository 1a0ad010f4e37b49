"""Whether compiled (numba) kernels may be used, and compiling them once per process.

numba is a dependency, yet the code runs without it: nothing imports it until a session
asks for a compiled kernel (importing numba costs about as much as importing onnxrt).
Kernels are compiled with ``cache=True`` into numba's on-disk cache beside their module (or
the user's cache dir when the package dir is read-only, numba's own fallback;
``NUMBA_CACHE_DIR`` overrides both); with neither writable they compile once per process.
``ONNXRT_JIT=0`` turns them off. On a new machine framework/warmup.py compiles them in a
child process while sessions take the NumPy paths.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from typing import Any, Callable

from onnxrt.framework import warmup

_LOG = logging.getLogger("onnxrt")

__all__ = ["available", "enabled", "set_enabled", "wait_compiled", "njit", "compile_once",
           "numba_module"]

_HAVE = importlib.util.find_spec("numba") is not None
_ENABLED = [_HAVE and os.environ.get("ONNXRT_JIT", "1") != "0"]


def available() -> bool:
    """numba is installed (it is imported only when a session needs a compiled kernel)."""
    return _HAVE


def enabled() -> bool:
    """Compiled kernels may be chosen now: numba there, not turned off, and its cache
    filled or compiling allowed here (framework/warmup.py: on a new machine the kernels
    compile in a child process while sessions take the NumPy paths)."""
    return _ENABLED[0] and warmup.ready()


def wait_compiled(timeout: float | None = None) -> bool:
    """Block until the compiled kernels are ready (benchmarks before timing); False where
    they will not be (numba missing, turned off, the compile failed) or on timeout."""
    return _ENABLED[0] and warmup.wait(timeout)


def set_enabled(on: bool) -> None:
    """Choose the compiled paths for sessions created from now on (tests, benchmarks)."""
    _ENABLED[0] = bool(on) and _HAVE


def numba_module() -> Any:
    """numba, imported now; None where it fails to import (a broken install behaves like a
    missing one, and turns the compiled kernels off)."""
    try:
        import numba
    except Exception:
        _ENABLED[0] = False
        return None
    return numba


def njit(numba: Any, fn: Callable, **kw: Any) -> Any:
    """``fn`` compiled ``nogil`` into numba's disk cache (per process where no cache
    location is writable), NumPy's error model unless ``kw`` says otherwise."""
    # error_model "numpy": a float division by zero gives inf/nan as in NumPy instead of
    # raising, so division loops vectorize (numba's own check keeps them scalar)
    kw.setdefault("error_model", "numpy")
    try:
        return numba.njit(cache=True, nogil=True, **kw)(fn)
    except RuntimeError:
        # no writable cache location (numba tries beside this file, then the user's cache
        # dir): compile per process instead of failing
        return numba.njit(nogil=True, **kw)(fn)


_ONCE_LOCK = threading.RLock()     # a build may compile a helper through compile_once too


def compile_once(slot: list[Any], build: Callable[[Any], Any]) -> Any:
    """A kernel another module compiles: ``build(numba)`` run once per process (it loads
    from numba's disk cache or compiles, and should warm its result so that no run
    compiles), kept in ``slot`` (that module's empty list); the kernel, or None where numba
    is missing or disabled (ONNXRT_JIT=0) or ``build`` failed (the NumPy path runs)."""
    if not enabled():
        return None
    if not slot:
        with _ONCE_LOCK:
            if not slot:
                fn = None
                # the CPU provider's own loops first: builds may compile calls to them
                from onnxrt.providers.cpu.nn import jit

                numba = numba_module() if jit._load() is not None else None
                if numba is not None:
                    try:
                        fn = build(numba)
                    except Exception as e:
                        # said, not swallowed: a NumPy path may differ from the compiled
                        # one in the last bits (an int4 decoder's logits by ~1e-2), and a
                        # kernel that fails to load must not pass for one that is off
                        _LOG.warning("onnxrt: compiling %s.%s failed (%s: %s); its NumPy "
                                     "path runs", getattr(build, "__module__", "?"),
                                     getattr(build, "__qualname__", "build"),
                                     type(e).__name__, e)
                        fn = None
                slot.append(fn)
    return slot[0]

