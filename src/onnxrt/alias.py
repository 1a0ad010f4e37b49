"""Make ``import onnxruntime`` (and its submodules) give onnxrt, for programs that cannot be
edited: ``onnxrt.install_as_onnxruntime()`` or ``python -m onnxrt.run_as_onnxruntime``.

The mapping is import aliasing only: ``onnxruntime`` is onnxrt itself and
``onnxruntime.X.Y`` is ``onnxrt.X.Y`` (the same module objects, so exception classes and
values are shared, never duplicated). A submodule onnxrt has no counterpart of raises
ImportError naming it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any

__all__ = ["install_as_onnxruntime", "uninstall_as_onnxruntime"]

ALIAS = "onnxruntime"
TARGET = "onnxrt"


class _ExistingModuleLoader(importlib.abc.Loader):
    """Hands the import system a module that is already loaded under its own name."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return self._module

    def exec_module(self, module: ModuleType) -> None:
        pass


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Resolves ``onnxruntime[.sub]`` to the already-imported ``onnxrt[.sub]``."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if fullname != ALIAS and not fullname.startswith(ALIAS + "."):
            return None
        real = TARGET + fullname[len(ALIAS):]
        try:
            module = importlib.import_module(real)
        except ModuleNotFoundError as e:
            if e.name != real:
                raise
            raise ModuleNotFoundError(
                f"No module named '{fullname}': onnxrt, installed as onnxruntime, has no "
                f"counterpart of it ({real})", name=fullname) from None
        return importlib.machinery.ModuleSpec(fullname, _ExistingModuleLoader(module),
                                              is_package=hasattr(module, "__path__"))


_FINDER = _AliasFinder()
# the real onnxruntime's modules, set aside while the alias is installed
_SAVED: dict[str, ModuleType] = {}


def install_as_onnxruntime() -> None:
    """From now on, in this process, ``import onnxruntime`` imports onnxrt.

    Call it before the program (or a library it uses) imports onnxruntime; an onnxruntime
    imported earlier is replaced in ``sys.modules`` (objects already created from it keep
    working with the real package).
    """
    for name in [n for n in sys.modules if n == ALIAS or n.startswith(ALIAS + ".")]:
        mod = sys.modules.pop(name)
        if not getattr(mod, "__name__", "").startswith(TARGET):
            _SAVED[name] = mod
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    importlib.import_module(ALIAS)


def uninstall_as_onnxruntime() -> None:
    """Undo install_as_onnxruntime: ``import onnxruntime`` gives the real package again (the
    modules it had loaded before are put back)."""
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for name in [n for n in sys.modules if n == ALIAS or n.startswith(ALIAS + ".")]:
        mod = sys.modules[name]
        if getattr(mod, "__name__", "").startswith(TARGET):
            del sys.modules[name]
    sys.modules.update(_SAVED)
    _SAVED.clear()
