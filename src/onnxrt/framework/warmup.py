"""The first session on a new machine: compiled kernels are built in a child process while
the process that needs them runs the NumPy paths.

numba compiles the CPU provider's kernels (providers/cpu/nn/jit.py and the modules that
call ``jit.compile_once``, the hot pool's spin loops, framework/hotpool.py) and caches them on disk; a process
that finds them cached loads them in a fraction of a second, but the first one on a
machine used to spend ~15 s (47 s on a loaded machine) inside its first session, printing
nothing, against ~0.2 s for onnxruntime. Now, when no marker says the cache is filled for
this version of onnxrt and numba, this machine and this cache location, ``ready()``
answers False, a child process (``python -m onnxrt.providers.cpu.nn.warm``) compiles the
standard kernel set and writes the marker, and until then every kernel takes its NumPy
path (as with ``ONNXRT_JIT=0``). Sessions made after the marker appears get the compiled
kernels; so do the matrix products of running sessions (they ask at each call).

``ONNXRT_JIT=sync`` compiles in the process that needs a kernel, at session creation (the
behaviour before; the tests use it), ``ONNXRT_JIT=0`` never compiles. Only one child
compiles at a time per marker (a lock file): other processes starting meanwhile wait for
the same marker. A child that fails writes that down (``<marker>.failed``) and the NumPy
paths stay, with one warning.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import threading
import time
from typing import Any

__all__ = ["ready", "mode", "wait", "marker_path", "cache_dir", "machine_key", "status"]

_LOG = logging.getLogger("onnxrt")
_STATE: dict[str, Any] = {"ready": False, "checked": 0.0, "child": None, "started": 0.0,
                          "failed": False, "key": None, "said": False, "tries": 0}
_LOCK = threading.Lock()
_RECHECK_S = 0.25       # while compiling, how often ready() looks for the marker


def mode() -> str:
    """"sync", "background" or "off" (ONNXRT_JIT)."""
    v = os.environ.get("ONNXRT_JIT", "1").strip().lower()
    if v in ("0", "off", "false", "no"):
        return "off"
    return "sync" if v == "sync" else "background"


def cache_dir() -> str:
    """onnxrt's own cache folder: ``$ONNXRT_CACHE_DIR``, else ``$XDG_CACHE_HOME/onnxrt`` or
    ``~/.cache/onnxrt``."""
    return os.environ.get("ONNXRT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "onnxrt")


def machine_key(extra: str = "") -> str:
    """The CPU's vendor, model and flags (a VM moved to another host gets another key),
    hashed with ``extra``."""
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "flags", "vendor_id")):
                    cpu += line
                if line.strip() == "":
                    break
    except OSError:
        import platform
        cpu = platform.processor() + platform.machine()
    return hashlib.sha256((cpu + extra).encode()).hexdigest()[:24]


def _sources_stamp() -> str:
    """Every module of the package, by size and modification time: numba's cache entries
    are keyed by their source file's, so an edited module compiles again."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parts = []
    for d, _dirs, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                try:
                    st = os.stat(os.path.join(d, f))
                except OSError:
                    continue
                parts.append(f"{os.path.relpath(os.path.join(d, f), root)}:{st.st_size}:"
                             f"{st.st_mtime_ns}")
    return "|".join(sorted(parts))


def marker_path() -> str:
    """The marker that says the kernels are compiled into numba's cache for this machine,
    these sources, this numba and Python, and this cache location."""
    if _STATE["key"] is None:
        try:
            from importlib.metadata import version
            nb = version("numba")
        except Exception:       # numba missing: the marker never appears
            nb = "none"
        extra = "|".join((nb, sys.version, sys.executable,
                          os.environ.get("NUMBA_CACHE_DIR", ""), _sources_stamp()))
        _STATE["key"] = machine_key(extra)
    return os.path.join(cache_dir(), f"jit-{_STATE['key']}.ok")


def _spawn() -> None:
    """Start the child that compiles (it returns at once where another one holds the
    lock), once per process."""
    if _STATE["child"] is not None:
        return
    env = dict(os.environ, ONNXRT_JIT="sync")
    try:
        os.makedirs(cache_dir(), exist_ok=True)
        _STATE["child"] = subprocess.Popen(
            [sys.executable, "-m", "onnxrt.providers.cpu.nn.warm", marker_path()],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError as e:        # cannot start a process: compile here after all
        _LOG.warning("onnxrt: cannot start the kernel compiler process (%s); compiling in "
                     "this process", e)
        _STATE["ready"] = True
        return
    _STATE["started"] = time.monotonic()
    if not _STATE["said"]:
        _STATE["said"] = True
        _LOG.warning("onnxrt: compiling the CPU kernels in the background (first use on this "
                     "machine, about 30-120 s, once); sessions run the NumPy kernels until "
                     "then")


def ready() -> bool:
    """The compiled kernels may be used now (loaded from numba's cache, or compiled here in
    ``sync`` mode); False starts the background compile if nothing runs it yet."""
    if _STATE["ready"]:
        return True
    m = mode()
    if m == "off":
        return False
    if m == "sync":
        _STATE["ready"] = True
        return True
    now = time.monotonic()
    if now - _STATE["checked"] < _RECHECK_S or _STATE["failed"]:
        return False
    with _LOCK:
        _STATE["checked"] = now
        path = marker_path()
        if os.path.exists(path):
            _STATE["ready"] = True
            if _STATE["child"] is not None:
                _LOG.info("onnxrt: the CPU kernels are compiled (%.1f s in the background)",
                          now - _STATE["started"])
            return True
        if os.path.exists(path + ".failed"):
            _STATE["failed"] = True
            try:
                with open(path + ".failed") as f:
                    why = f.read().strip()[-300:]
            except OSError:
                why = "?"
            _LOG.warning("onnxrt: compiling the CPU kernels failed; the NumPy kernels run "
                         "(%s)", why)
            return False
        child = _STATE["child"]
        if child is not None and child.poll() is not None and child.returncode != 0:
            # died without a word (killed, or broken before it could write why): once
            # more, then the NumPy paths for good
            _STATE["tries"] += 1
            if _STATE["tries"] >= 2:
                _STATE["failed"] = True
                _LOG.warning("onnxrt: the kernel compiler process exited with status %s; "
                             "the NumPy kernels run", child.returncode)
                return False
            _STATE["child"] = None
        _spawn()
    return _STATE["ready"]


def status() -> str:
    """"ready", "compiling" (a child is at it), "failed", "off" or "cold" (nothing yet)."""
    if ready():
        return "ready"
    if mode() == "off":
        return "off"
    if _STATE["failed"]:
        return "failed"
    return "compiling" if _STATE["child"] is not None else "cold"


def wait(timeout: float | None = None) -> bool:
    """Block until the compiled kernels are ready (True) or ``timeout`` seconds pass, the
    compile failed or compiling is off (False). Benchmarks call it before timing."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not ready():
        if mode() == "off" or _STATE["failed"]:
            return False
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True
