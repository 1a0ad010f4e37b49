"""The BLAS the compiled CPU kernels call directly (cblas_sgemm/dgemm through ctypes, from
numba code without the GIL): numpy's OpenBLAS, or Intel oneMKL when the optional ``mkl``
package is installed (``pip install onnxrt[mkl]``) and measured faster on this machine.

Why measured, not assumed: on an Intel AVX-512 machine MKL ran convolution-shaped products
10-40% faster than OpenBLAS (16x128x3025: 87 -> 135 GFLOP/s; whole CNNs 5-19% faster), while
on an AMD Zen 3 EPYC it was slower (resnet50 1.52 -> 1.74x onnxruntime, squeezenet 1.75 ->
2.01x). So where both are usable the first process on a machine times a few product
shapes of the kernels (single-threaded, as the kernels call it; ~0.1 s) and keeps the
winner in a small file per machine (``$ONNXRT_CACHE_DIR`` or ``~/.cache/onnxrt``, keyed by
the CPU's model and flags and the libraries' files); later processes read it. Both are
loaded sequential (the kernels split their own work over the session's threads,
framework/parallel.py) and with 64-bit sizes, so both libraries take the same call.

``ONNXRT_BLAS=openblas`` (or ``mkl``) picks one without measuring; anything unusable (not
installed, a threading layer already fixed to another by someone else in the process, a
wrong product on the self-test) falls back to the next.
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
import time
from typing import Any

import numpy as np

from onnxrt.framework.blas_threads import blas_libraries

__all__ = ["gemm", "name", "reason"]

_LOCK = threading.RLock()     # the float64 choice reads the float32 one
_FOUND: dict[str, tuple[Any, str]] = {}     # dtype char -> (ctypes function, library)
_WHY: list[str] = []                        # how the float32 choice was made
_MKL_SEQUENTIAL, _MKL_ILP64 = 1, 1          # MKL_Set_Threading_Layer / _Interface_Layer


def _mkl() -> Any:
    """libmkl_rt of the installed ``mkl`` distribution set sequential and ILP64, or None."""
    try:
        from importlib.metadata import PackageNotFoundError, distribution
        files = distribution("mkl").files or []
    except (ImportError, PackageNotFoundError):
        return None
    for f in files:
        if f.name.startswith("libmkl_rt.so"):
            try:
                rt = ctypes.CDLL(str(f.locate()))
            except OSError:
                continue
            rt.MKL_Set_Interface_Layer.restype = ctypes.c_int
            rt.MKL_Set_Threading_Layer.restype = ctypes.c_int
            rt.MKL_Set_Interface_Layer(_MKL_ILP64)
            # returns the layer in force: another one means MKL was already set up by
            # someone else in this process, and would start its own threads in our splits
            if rt.MKL_Set_Threading_Layer(_MKL_SEQUENTIAL) != _MKL_SEQUENTIAL:
                return None
            return rt
    return None


def _checked(fn: Any, dt: np.dtype) -> bool:
    """Give ``fn`` cblas gemm's ctypes signature (64-bit sizes: an LP64 library reads the
    low halves of the same slots) and check it on a small product against numpy's."""
    ct = ctypes.c_float if dt == np.float32 else ctypes.c_double
    i, l, p = ctypes.c_int, ctypes.c_int64, ctypes.c_void_p
    fn.argtypes = [i, i, i, l, l, l, ct, p, l, p, l, ct, p, l]
    fn.restype = None
    a = np.arange(12, dtype=dt).reshape(3, 4) / 7
    b = np.arange(20, dtype=dt).reshape(4, 5) / 3
    c = np.zeros((3, 5), dt)
    fn(101, 111, 111, 3, 5, 4, 1.0, a.ctypes.data, 4, b.ctypes.data, 5, 0.0, c.ctypes.data, 5)
    return bool(np.allclose(c, a @ b))


def _candidates(dt: np.dtype, want: str) -> list[tuple[Any, str]]:
    """Usable gemm functions, MKL's first (unless ``want`` is "openblas"), then numpy's
    BLAS (unless ``want`` is "mkl" and MKL is there)."""
    ch = "s" if dt == np.float32 else "d"
    out = []
    if want != "openblas":
        rt = _mkl()
        if rt is not None:
            out.append((getattr(rt, f"cblas_{ch}gemm", None), "mkl"))
    if want != "mkl" or not out:
        for lib in blas_libraries():
            if lib.internal_api == "mkl":   # MKL loaded above, seen by threadpoolctl too
                continue
            try:
                so = ctypes.CDLL(lib.filepath)
            except OSError:
                continue
            for sym in (f"scipy_cblas_{ch}gemm64_", f"cblas_{ch}gemm64_", f"cblas_{ch}gemm"):
                out.append((getattr(so, sym, None), lib.internal_api))
    return [(fn, lib) for fn, lib in out if fn is not None and _checked(fn, dt)]


# (M, K, N) of the products timed: a 3x3 conv's band, a 1x1 conv, a transformer projection
_SHAPES = ((64, 576, 784), (256, 256, 196), (128, 768, 768))


def _time_gemm(fn: Any, reps: int = 5) -> float:
    """The best time of each shape over ``reps`` calls after one untimed, summed (the best:
    the least disturbed by whatever else the machine runs); single-threaded, as the
    kernels call it."""
    from onnxrt.framework.blas_threads import single_blas

    with single_blas():
        return _time_shapes(fn, reps)


def _time_shapes(fn: Any, reps: int) -> float:
    total = 0.0
    for m, k, n in _SHAPES:
        a = np.full((m, k), 0.5, np.float32)
        b = np.full((k, n), 0.25, np.float32)
        c = np.empty((m, n), np.float32)
        best = float("inf")
        fn(101, 111, 111, m, n, k, 1.0, a.ctypes.data, k, b.ctypes.data, n, 0.0,
           c.ctypes.data, n)
        for _ in range(reps):
            t = time.perf_counter()
            fn(101, 111, 111, m, n, k, 1.0, a.ctypes.data, k, b.ctypes.data, n, 0.0,
               c.ctypes.data, n)
            best = min(best, time.perf_counter() - t)
        total += best
    return total


def _machine_key(libs: list[str]) -> str:
    """The CPU (framework/warmup.machine_key) and the files of the libraries compared (an
    upgrade measures again)."""
    from onnxrt.framework.warmup import machine_key

    extra = ""
    for lib in libs:
        try:
            st = os.stat(lib)
            extra += f"{lib}:{st.st_size}:{int(st.st_mtime)}"
        except OSError:
            extra += lib
    return machine_key(extra)


def _cache_file() -> str:
    base = os.environ.get("ONNXRT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "onnxrt")
    return os.path.join(base, "blas.json")


def _lib_paths() -> list[str]:
    paths = [lib.filepath for lib in blas_libraries() if lib.internal_api != "mkl"]
    try:
        from importlib.metadata import version
        paths.append("mkl-" + version("mkl"))
    except Exception:   # not installed: nothing to add to the key
        pass
    return paths


def _known() -> tuple[str, str, dict[str, Any]]:
    """(this machine's key, the cache file, what the file holds)."""
    key = _machine_key(_lib_paths())
    path = _cache_file()
    try:
        with open(path) as f:
            known = json.load(f)
    except (OSError, ValueError):
        known = {}
    return key, path, known if isinstance(known, dict) else {}


def _measured(found: list[tuple[Any, str]]) -> tuple[Any, str]:
    """The faster of MKL and the other library here, timed now and stored for the next
    processes on this machine."""
    mkl = next(x for x in found if x[1] == "mkl")
    other = next(x for x in found if x[1] != "mkl")
    key, path, known = _known()
    # alternate the two, twice each: a burst of load on the machine hits both
    t_mkl = t_other = float("inf")
    for _ in range(2):
        t_mkl = min(t_mkl, _time_gemm(mkl[0]))
        t_other = min(t_other, _time_gemm(other[0]))
    winner = mkl if t_mkl < t_other else other
    _WHY[:] = [f"measured faster on this machine: mkl {t_mkl * 1e3:.2f} ms, {other[1]} "
               f"{t_other * 1e3:.2f} ms"]
    known[key] = {"winner": winner[1], "mkl_ms": round(t_mkl * 1e3, 3),
                  f"{other[1]}_ms": round(t_other * 1e3, 3)}
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(known, f, indent=1)
        os.replace(tmp, path)       # atomic: a concurrent reader sees one file or the other
    except OSError:     # a read-only home: measured again by the next process
        pass
    return winner


def _mkl_installed() -> bool:
    try:
        from importlib.metadata import PackageNotFoundError, distribution
        distribution("mkl")
    except (ImportError, PackageNotFoundError):
        return False
    return True


def _choose(dt: np.dtype) -> tuple[Any, str]:
    if dt == np.float64:
        # the float64 products follow the float32 choice (measured once, on float32)
        pick = _find(np.float32)[1]
        found = _candidates(dt, pick)
        return next((x for x in found if x[1] == pick), found[0] if found else (None, ""))
    want = os.environ.get("ONNXRT_BLAS", "").lower()
    if want in ("mkl", "openblas"):
        _WHY[:] = [f"ONNXRT_BLAS={want}"]
    elif _mkl_installed():
        key, path, known = _known()
        hit = known.get(key)
        if isinstance(hit, dict) and hit.get("winner") in ("mkl", "openblas"):
            # MKL is not even loaded when it lost
            want = hit["winner"]
            _WHY[:] = [f"measured faster on this machine before ({path})"]
    found = _candidates(dt, want)
    if not found:
        return None, ""
    libs = {lib for _, lib in found}
    if not _WHY and "mkl" in libs and len(libs) > 1:
        return _measured(found)
    if not _WHY:
        _WHY[:] = ["the only one usable here"]
    elif want and want not in libs:
        _WHY[:] = [f"{want} asked for but not usable here"]
    return found[0]


def _find(dt: Any) -> tuple[Any, str]:
    dt = np.dtype(dt)
    key = dt.char
    if key not in _FOUND:
        with _LOCK:
            if key not in _FOUND:
                hit: tuple[Any, str] = (None, "")
                if dt in (np.float32, np.float64):
                    hit = _choose(dt)
                _FOUND[key] = hit
    return _FOUND[key]


def gemm(dt: Any) -> Any:
    """cblas_sgemm (float32) or cblas_dgemm (float64) as a ctypes function taking 64-bit
    sizes, or None where no usable BLAS exposes it."""
    return _find(dt)[0]


def name(dt: Any = np.float32) -> str:
    """Which library ``gemm(dt)`` calls: "mkl", "openblas", ... ("" for none)."""
    return _find(dt)[1]



def reason() -> str:
    """Why ``name()`` is the library it is (the env variable, a measurement, the only one)."""
    _find(np.float32)
    return _WHY[0] if _WHY else "none usable"
