"""tvm, imported once and only when needed, and what this machine's LLVM calls its CPU."""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["import_error", "load_error", "tvm", "version", "host_cpu"]


@functools.lru_cache(maxsize=None)
def _load() -> tuple[Any, str]:
    try:
        import tvm
        from tvm import relax  # noqa: F401
        from tvm.relax.frontend.onnx import from_onnx  # noqa: F401
    except Exception as e:     # ImportError, or a broken native library
        return None, f"{type(e).__name__}: {e}"
    return tvm, ""


def import_error() -> str:
    """Why tvm cannot be used ("" when it can). Asked without importing tvm unless it was
    imported already: importing it takes seconds (apache-tvm-ffi imports torch when it is
    installed), which ``get_available_providers()`` must not pay; a broken install shows
    when a provider object is made."""
    if not _load.cache_info().currsize:
        import importlib.util

        for name in ("tvm", "tvm_ffi"):
            if importlib.util.find_spec(name) is None:
                return f"ModuleNotFoundError: No module named {name!r}"
        return _compiler_missing()
    return _load()[1] or _compiler_missing()


def _compiler_missing() -> str:
    """TVM links each compiled module into a shared library with the C compiler it finds
    (CXX or CC, else the first of these on PATH)."""
    import os
    import shutil

    if os.environ.get("CXX") or os.environ.get("CC"):
        return ""
    if any(shutil.which(c) for c in ("g++", "gcc", "clang++", "clang", "c++", "cc")):
        return ""
    return "no C compiler (g++, gcc, clang or cc) on PATH: TVM links its modules with one"


def load_error() -> str:
    """Why importing tvm fails ("" when it imports): imports it."""
    return _load()[1]


def tvm() -> Any:
    mod, err = _load()
    if mod is None:
        raise RuntimeError(f"apache-tvm cannot be imported ({err})")
    return mod


def version() -> str:
    return str(tvm().__version__)


@functools.lru_cache(maxsize=None)
def host_cpu() -> str:
    """LLVM's name for this CPU (``znver3``, ``skylake-avx512``...): ``-mcpu=native`` is
    refused by the LLVM inside apache-tvm's wheels."""
    return str(tvm().target.codegen.llvm_get_system_cpu())
