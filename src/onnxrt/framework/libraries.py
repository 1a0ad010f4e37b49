"""Execution provider libraries registered at run time
(``register_execution_provider_library`` / ``unregister_execution_provider_library``).

onnxruntime loads a native plugin library here; onnxrt's "library" is Python: a module file
(``my_eps.py``), a package folder, or an importable module name (``my_package.eps``) that
defines ExecutionProvider subclasses -- the same classes the ``onnxrt.execution_providers``
entry points name. Registering makes its providers known by name and lists their devices in
``get_ep_devices()``; unregistering forgets them, while sessions made with them keep their
provider objects and go on working.

Loading a module runs its code: it is code the caller chose to load, named by the caller.
Nothing a model contains ever reaches this function.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import re
import sys
import threading
from dataclasses import dataclass
from types import ModuleType

from onnxrt.errors import Fail, InvalidArgument
from onnxrt.framework.provider import ExecutionProvider

__all__ = ["register_execution_provider_library", "unregister_execution_provider_library",
           "registered_libraries"]


@dataclass(frozen=True)
class Library:
    name: str
    source: str
    module: ModuleType
    classes: tuple[type[ExecutionProvider], ...]
    loaded_from_file: bool


_LOCK = threading.Lock()
_LIBRARIES: dict[str, Library] = {}
_LOADS = [0]


def registered_classes() -> frozenset[type[ExecutionProvider]]:
    """The provider classes of every registered library."""
    return frozenset(c for lib in list(_LIBRARIES.values()) for c in lib.classes)


def registered_libraries() -> dict[str, tuple[str, ...]]:
    """Registration name -> the provider names it brought."""
    return {n: tuple(c.name for c in lib.classes) for n, lib in _LIBRARIES.items()}


def _module_name(name: str) -> str:
    _LOADS[0] += 1
    return f"_onnxrt_ep_library_{re.sub(r'[^0-9A-Za-z_]', '_', name)}_{_LOADS[0]}"


_NOT_PYTHON = ("not a Python module. onnxrt's execution provider libraries are Python: a .py "
               "file, a package folder or an importable module name defining "
               "ExecutionProvider subclasses (onnxruntime's native plugin libraries do not "
               "load here)")


def _load_file(name: str, path: str) -> ModuleType:
    if os.path.isdir(path):
        init = os.path.join(path, "__init__.py")
        if not os.path.isfile(init):
            raise Fail(f"register_execution_provider_library({name!r}): the folder {path!r} "
                       f"is not a Python package (no __init__.py)")
        spec = importlib.util.spec_from_file_location(_module_name(name), init,
                                                      submodule_search_locations=[path])
    else:
        suffixes = (".py", *importlib.machinery.EXTENSION_SUFFIXES)
        if not path.endswith(suffixes):
            raise Fail(f"register_execution_provider_library({name!r}): {path!r} is "
                       + _NOT_PYTHON)
        spec = importlib.util.spec_from_file_location(_module_name(name), path)
    if spec is None or spec.loader is None:
        raise Fail(f"register_execution_provider_library({name!r}): cannot load {path!r}")
    try:
        module = importlib.util.module_from_spec(spec)
    except ImportError as e:  # a shared library that is no Python extension module
        raise Fail(f"register_execution_provider_library({name!r}): {path!r} is "
                   + _NOT_PYTHON + f" ({e})") from None
    sys.modules[spec.name] = module  # dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException as e:
        sys.modules.pop(spec.name, None)
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        raise Fail(f"Failed to load execution provider library {path!r} ({name!r}): "
                   f"{type(e).__name__}: {e}") from e
    return module


def _load(name: str, path: str) -> tuple[ModuleType, bool]:
    if os.path.exists(path):
        return _load_file(name, path), True
    looks_like_module = re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*", path) is not None
    if looks_like_module and not path.endswith((".py", ".so", ".dll", ".dylib", ".pyd")):
        try:
            return importlib.import_module(path), False
        except ModuleNotFoundError as e:
            if e.name is not None and not (path == e.name or path.startswith(e.name + ".")):
                raise Fail(f"Failed to load execution provider library {path!r} ({name!r}): "
                           f"{type(e).__name__}: {e}") from e
        except Exception as e:
            raise Fail(f"Failed to load execution provider library {path!r} ({name!r}): "
                       f"{type(e).__name__}: {e}") from e
    raise Fail(f"Failed to load execution provider library {path!r} ({name!r}): no such file"
               + (", and no importable module of that name" if looks_like_module else ""))


def _provider_classes(module: ModuleType) -> list[type[ExecutionProvider]]:
    names = getattr(module, "__all__", None)
    if names is not None:
        candidates = [getattr(module, n, None) for n in names]
    else:
        own = module.__name__
        candidates = [v for v in vars(module).values() if isinstance(v, type)
                      and (v.__module__ == own or v.__module__.startswith(own + "."))]
    out = []
    for c in candidates:
        if isinstance(c, type) and issubclass(c, ExecutionProvider) and \
                c is not ExecutionProvider and getattr(c, "name", "") and c not in out:
            out.append(c)
    return out


def register_execution_provider_library(registration_name: str, path: str | os.PathLike[str]
                                        ) -> None:
    """Load the providers of a Python module file, package folder or importable module, and
    make them known under their names (``onnxruntime.register_execution_provider_library``)."""
    from onnxrt.framework import registry

    name = str(registration_name)
    if not name:
        raise InvalidArgument("register_execution_provider_library: the registration name "
                              "is empty")
    source = os.fspath(path)
    with _LOCK:
        if name in _LIBRARIES:
            raise Fail(f"Execution provider library: {name} already registered "
                       f"(from {_LIBRARIES[name].source!r})")
        module, from_file = _load(name, source)
        classes = _provider_classes(module)
        if not classes:
            if from_file:
                sys.modules.pop(module.__name__, None)
            raise Fail(f"execution provider library {source!r} ({name!r}) defines no "
                       f"provider: no ExecutionProvider subclass with a name"
                       + (" among its __all__" if hasattr(module, "__all__") else ""))
        clash = [c.name for c in classes if registry.has_implementation(c.name)]
        if clash:
            if from_file:
                sys.modules.pop(module.__name__, None)
            raise Fail(f"execution provider library {source!r} ({name!r}) defines "
                       f"{', '.join(clash)}, which onnxrt already has; unregister the other "
                       f"one first or rename the provider")
        _LIBRARIES[name] = Library(name, source, module, tuple(classes), from_file)
        registry.add_library(name, classes)


def unregister_execution_provider_library(registration_name: str) -> None:
    """Forget a registered library's providers. Sessions that use them keep working; their
    EP devices can no longer start new sessions."""
    from onnxrt.framework import registry
    from onnxrt.framework.ep_devices import forget_library

    name = str(registration_name)
    with _LOCK:
        lib = _LIBRARIES.pop(name, None)
        if lib is None:
            raise Fail(f"Execution provider library: {name} was not registered.")
        registry.remove_library(name, list(lib.classes))
        forget_library(list(lib.classes), name)
        if lib.loaded_from_file:
            sys.modules.pop(lib.module.__name__, None)
