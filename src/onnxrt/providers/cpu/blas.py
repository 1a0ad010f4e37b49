"""The BLAS the compiled CPU kernels call directly (cblas_sgemm/dgemm through ctypes, from
numba code without the GIL): Intel oneMKL when the optional ``mkl`` package is installed
(``pip install onnxrt[mkl]``), else the OpenBLAS numpy carries.

Why MKL when it is there: on this project's benchmark machine (2 cores, AVX-512) numpy's
OpenBLAS reaches 100-150 GFLOP/s per core on convolution-shaped products, MKL 110-170
(e.g. 16x128x3025: 87 -> 135; 64x576x3136: 106 -> 147), and whole CNNs run 5-19% faster
(squeezenet batch 1 7.8 -> 6.4 ms, resnet50 49.6 -> 43.6 ms). It is loaded sequential (the
kernels split their own work over the session's threads, execute/intra.py) and with 64-bit
sizes, so both libraries take the same call.

``ONNXRT_BLAS=openblas`` (or ``mkl``) picks one; anything unusable (not installed, a
threading layer already fixed to another by someone else in the process, a wrong product
on the self-test) falls back to the next.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

import numpy as np

from onnxrt.execute.threads import blas_libraries

__all__ = ["gemm", "name"]

_LOCK = threading.Lock()
_FOUND: dict[str, tuple[Any, str]] = {}     # dtype char -> (ctypes function, library)
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


def _candidates(dt: np.dtype) -> list[tuple[Any, str]]:
    ch = "s" if dt == np.float32 else "d"
    want = os.environ.get("ONNXRT_BLAS", "").lower()
    out = []
    if want != "openblas":
        rt = _mkl()
        if rt is not None:
            out.append((getattr(rt, f"cblas_{ch}gemm", None), "mkl"))
    if want != "mkl" or not out:
        for lib in blas_libraries():
            try:
                so = ctypes.CDLL(lib.filepath)
            except OSError:
                continue
            for sym in (f"scipy_cblas_{ch}gemm64_", f"cblas_{ch}gemm64_", f"cblas_{ch}gemm"):
                out.append((getattr(so, sym, None), lib.internal_api))
    return out


def _find(dt: Any) -> tuple[Any, str]:
    dt = np.dtype(dt)
    key = dt.char
    if key not in _FOUND:
        with _LOCK:
            if key not in _FOUND:
                hit: tuple[Any, str] = (None, "")
                if dt in (np.float32, np.float64):
                    for fn, lib in _candidates(dt):
                        if fn is not None and _checked(fn, dt):
                            hit = (fn, lib)
                            break
                _FOUND[key] = hit
    return _FOUND[key]


def gemm(dt: Any) -> Any:
    """cblas_sgemm (float32) or cblas_dgemm (float64) as a ctypes function taking 64-bit
    sizes, or None where no usable BLAS exposes it."""
    return _find(dt)[0]


def name(dt: Any = np.float32) -> str:
    """Which library ``gemm(dt)`` calls: "mkl", "openblas", ... ("" for none)."""
    return _find(dt)[1]

