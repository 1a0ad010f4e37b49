"""Provider names: built-ins (lazily), third-party providers from entry points, and the
names onnxruntime knows. Resolves what a user passes as ``providers=`` into provider objects.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any, Sequence

from onnxrt.errors import EPFail, InvalidArgument
from onnxrt.framework.device import Device
from onnxrt.framework.provider import ExecutionProvider

__all__ = ["get_all_providers", "get_available_providers", "resolve_providers",
           "register_execution_provider", "provider_class", "transfer_to_device",
           "session_providers", "available_provider_classes", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "onnxrt.execution_providers"

# built-in providers: name -> "module:Class", imported only when asked for
_BUILTIN: dict[str, str] = {
    "CPUExecutionProvider": "onnxrt.providers.cpu:CPUExecutionProvider",
    "TensorrtExecutionProvider": "onnxrt.providers.tensorrt:TensorrtExecutionProvider",
    "CUDAExecutionProvider": "onnxrt.providers.torch:CUDAExecutionProvider",
    "ROCMExecutionProvider": "onnxrt.providers.torch:ROCMExecutionProvider",
    "TorchExecutionProvider": "onnxrt.providers.torch:TorchExecutionProvider",
    "OpenVINOExecutionProvider": "onnxrt.providers.openvino:OpenVINOExecutionProvider",
    "DnnlExecutionProvider": "onnxrt.providers.dnnl:DnnlExecutionProvider",
    "AzureExecutionProvider": "onnxrt.providers.azure:AzureExecutionProvider",
    "TVMExecutionProvider": "onnxrt.providers.tvm:TVMExecutionProvider",
}

# every provider name onnxruntime 1.31 knows, in its order
ONNXRUNTIME_PROVIDERS = (
    "NvTensorRTRTXExecutionProvider", "TensorrtExecutionProvider", "CUDAExecutionProvider",
    "MIGraphXExecutionProvider", "ROCMExecutionProvider", "OpenVINOExecutionProvider",
    "DnnlExecutionProvider", "VitisAIExecutionProvider", "QNNExecutionProvider",
    "NnapiExecutionProvider", "VSINPUExecutionProvider", "JsExecutionProvider",
    "CoreMLExecutionProvider", "ACLExecutionProvider", "ArmNNExecutionProvider",
    "DmlExecutionProvider", "RknpuExecutionProvider", "WebNNExecutionProvider",
    "WebGpuExecutionProvider", "XnnpackExecutionProvider", "CANNExecutionProvider",
    "AzureExecutionProvider", "CPUExecutionProvider",
)

_REGISTERED: dict[str, type[ExecutionProvider]] = {}
_ENTRY_POINTS_LOADED = False
# provider class -> the registration name of the EP library it came from
_FROM_LIBRARY: dict[type[ExecutionProvider], str] = {}


def register_execution_provider(cls: type[ExecutionProvider]) -> type[ExecutionProvider]:
    """Make a provider class known by its ``name`` (usable as a decorator)."""
    if not getattr(cls, "name", ""):
        raise InvalidArgument(f"{cls!r} has no provider name")
    _REGISTERED[cls.name] = cls
    return cls


def _load_entry_points() -> None:
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        _BUILTIN.setdefault(ep.name, ep.value)


def provider_class(name: str) -> type[ExecutionProvider] | None:
    """The class of a known provider, importing it if needed; None if unknown or broken."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    _load_entry_points()
    target = _BUILTIN.get(name)
    if target is None:
        return None
    mod_name, _, attr = target.partition(":")
    mod = importlib.import_module(mod_name)
    cls = getattr(mod, attr)
    _REGISTERED[name] = cls
    return cls


def has_implementation(name: str) -> bool:
    """Whether a provider of that name is registered, built in or named by an entry point."""
    _load_entry_points()
    return name in _REGISTERED or name in _BUILTIN


def add_library(library: str, classes: list[type[ExecutionProvider]]) -> None:
    """Make an EP library's provider classes known (framework/libraries.py)."""
    for cls in classes:
        _REGISTERED[cls.name] = cls
        _FROM_LIBRARY[cls] = library


def remove_library(library: str, classes: list[type[ExecutionProvider]]) -> None:
    for cls in classes:
        if _REGISTERED.get(cls.name) is cls:
            del _REGISTERED[cls.name]
        _FROM_LIBRARY.pop(cls, None)


def library_of(cls: type[ExecutionProvider]) -> str | None:
    return _FROM_LIBRARY.get(cls)


def available_provider_classes() -> list[type[ExecutionProvider]]:
    """The classes of ``get_available_providers()``, in its order (CPU last)."""
    out = []
    for n in get_available_providers():
        try:
            cls = provider_class(n)
        except Exception:
            continue
        if cls is not None:
            out.append(cls)
    return out


def get_all_providers() -> list[str]:
    """Every provider name onnxrt knows: onnxruntime's list, ours and registered ones."""
    _load_entry_points()
    names = list(ONNXRUNTIME_PROVIDERS)
    for n in list(_BUILTIN) + list(_REGISTERED):
        if n not in names:
            names.insert(len(names) - 1, n)
    return names


def get_available_providers() -> list[str]:
    """Providers whose package imports and whose device is present here, CPU last."""
    _load_entry_points()
    out = []
    for n in list(_REGISTERED) + list(_BUILTIN):
        if n in out or n == "CPUExecutionProvider":
            continue
        try:
            cls = provider_class(n)
        except Exception:
            continue
        if cls is not None and cls.is_available():
            out.append(n)
    out.append("CPUExecutionProvider")
    return out


_DEFAULTS: list[Any] = []


def init(providers: Sequence[Any] | None = None) -> None:
    """Process-wide default providers: every session adds them after its own (before the CPU
    fallback), unless its options set ``session.use_default_providers`` to ``0``."""
    _DEFAULTS[:] = list(providers or [])


def default_providers() -> list[Any]:
    return list(_DEFAULTS)


def session_providers(options: Any, model: Any) -> list[Any]:
    """What a session given no ``providers=`` runs on: its SessionOptions' providers in the
    order added (``add_provider`` names, ``add_provider_for_devices`` entries), else what its
    selection delegate or policy picks for ``model``, else nothing (the CPU provider)."""
    if options._providers:
        return list(options._providers)
    if options._selection_delegate is None and options._selection_policy is None:
        return []
    from onnxrt.framework.selection import select

    return list(select(options._selection_policy, options._selection_delegate, model))


def _entry_name(p: Any) -> str:
    from onnxrt.framework.selection import DevicesEntry

    if isinstance(p, DevicesEntry):
        # a policy's pick of the CPU provider is not a request for it: onnxruntime drops it
        # when session.disable_cpu_ep_fallback is set
        return p.ep_name if p.explicit else ""
    if isinstance(p, ExecutionProvider):
        return p.name
    if isinstance(p, type) and issubclass(p, ExecutionProvider):
        return p.name
    if isinstance(p, (tuple, list)) and p:
        return str(p[0])
    return str(p)


def resolve_providers(providers: Sequence[Any] | None,
                      provider_options: Sequence[dict[str, Any]] | None,
                      policy: str = "warn", defaults: Sequence[Any] = (),
                      ) -> list[ExecutionProvider]:
    """Provider objects for ``providers=`` as onnxruntime accepts it (names, (name, options)
    tuples, a parallel options list) or as provider objects, then ``defaults``; the CPU
    provider is appended when missing.

    A known provider that cannot run here is skipped with one UserWarning naming the reason
    (``policy="warn"``, onnxruntime's behaviour), skipped quietly (``"silent"``), or raises
    EPFail (``"error"``, or the provider's own ``error_on_failure`` option).
    """
    if policy not in ("warn", "error", "silent"):
        raise InvalidArgument(f"session.provider_fallback must be warn, error or silent, "
                              f"not {policy!r}")
    if providers is None:
        providers = []
    if isinstance(providers, (str, ExecutionProvider)) or isinstance(providers, tuple):
        providers = [providers]
    if provider_options is not None and len(provider_options) != len(providers):
        raise InvalidArgument("'providers' and 'provider_options' should be the same length "
                              "if both are given")
    entries = [(p, dict(provider_options[i]) if provider_options is not None else {})
               for i, p in enumerate(providers)]
    own = {_entry_name(p) for p, _ in entries}
    entries += [(p, {}) for p in defaults if _entry_name(p) not in own]
    out: list[ExecutionProvider] = []
    for p, opts in entries:
        ep = _make(p, opts, policy)
        if ep is None or any(x.name == ep.name for x in out):
            continue
        out.append(ep)
    if not any(ep.name == "CPUExecutionProvider" for ep in out):
        cpu = provider_class("CPUExecutionProvider")
        assert cpu is not None
        out.append(cpu())
    return out


def _make(p: Any, opts: dict[str, Any], policy: str) -> ExecutionProvider | None:
    from onnxrt.framework.selection import DevicesEntry

    if isinstance(p, DevicesEntry):  # chosen by device: the devices' options, then the user's
        ep = _make(p.provider_class, {**p.provider_options(), **opts}, policy)
        if ep is not None:
            ep.selected_by = p.reason
            ep.ep_devices = p.devices
        return ep
    if isinstance(p, ExecutionProvider):
        # an object goes through the same availability check as a name
        why = p.instance_unavailable_reason()
        if why:
            return _unavailable(p.name, why, "error" if p.error_on_failure else policy, opts)
        return p
    if isinstance(p, type) and issubclass(p, ExecutionProvider):
        cls: type[ExecutionProvider] | None = p
        name = p.name
    else:
        if isinstance(p, (tuple, list)):
            if len(p) != 2 or not isinstance(p[0], str) or not isinstance(p[1], dict):
                raise InvalidArgument(f"provider entry {p!r}: expected a name or a "
                                      f"(name, options dict) tuple")
            name = p[0]
            opts = {**opts, **p[1]}
        elif isinstance(p, str):
            name = p
        else:
            raise InvalidArgument(f"provider entry {p!r} is not a name, a (name, options) "
                                  f"tuple, an ExecutionProvider or OrtEpDevices")
        if name not in get_all_providers():
            raise InvalidArgument(f"Unknown Provider Type: {name}. Known providers: "
                                  f"{', '.join(get_all_providers())}")
        try:
            cls = provider_class(name)
        except Exception as e:  # its package is broken or missing
            return _unavailable(name, f"its package failed to import ({type(e).__name__}: "
                                      f"{e})", policy, opts)
    if cls is None:
        return _unavailable(name, "onnxrt has no implementation of it installed", policy, opts)
    why = cls.unavailable_reason() if hasattr(cls, "unavailable_reason") else ""
    if not why and not cls.is_available():
        why = "its device or libraries are not present"
    if why:
        return _unavailable(name, why, policy, opts)
    try:
        return cls(**opts)
    except InvalidArgument:
        raise
    except Exception as e:
        if policy == "error" or _wants_error(opts):
            raise EPFail(f"{name} could not be created: {type(e).__name__}: {e}") from e
        if policy == "warn":
            warnings.warn(f"{name} could not be created ({type(e).__name__}: {e}); falling "
                          f"back to the remaining providers", UserWarning, stacklevel=5)
        return None


def _wants_error(opts: dict[str, Any]) -> bool:
    v = opts.get("error_on_failure", False)
    return v.strip().lower() in ("1", "true", "yes", "on") if isinstance(v, str) else bool(v)


def _unavailable(name: str, why: str, policy: str, opts: dict[str, Any]) -> None:
    if policy == "error" or _wants_error(opts):
        raise EPFail(f"{name} is not available here: {why}")
    if policy == "warn":
        warnings.warn(f"Specified provider '{name}' is not in available provider names: {why}. "
                      f"Available providers: '{', '.join(get_available_providers())}'. "
                      f"Falling back to the remaining providers.", UserWarning, stacklevel=5)
    return None


def _transfers(device_type: str | None = None) -> Any:
    """The data transfers of the available providers (of ``device_type`` when given), in
    the registration order: third-party providers, then the built-in ones."""
    for name in list(_REGISTERED) + list(_BUILTIN):
        try:
            cls = provider_class(name)
        except Exception:
            continue
        if cls is None or (device_type is not None and cls.device.type != device_type):
            continue
        try:
            if not cls.is_available():
                continue
            dt = cls().data_transfer()
        except Exception:   # a provider that cannot be made here transfers nothing
            continue
        if dt is not None:
            yield dt


def value_from_dlpack(data: Any) -> Any:
    """An OrtValue sharing a DLPack producer's memory through the first available provider
    whose data transfer takes it (DataTransfer.from_dlpack), or None."""
    for dt in _transfers():
        v = dt.from_dlpack(data)
        if v is not None:
            return v
    return None


def transfer_to_device(arr: Any, device: Device) -> Any:
    """An OrtValue holding ``arr`` copied to ``device`` through a provider on that device."""
    from onnxrt.framework.ortvalue import OrtValue

    for dt in _transfers(device.type):
        return OrtValue(dt.to_device(arr, device), device, dt.to_host)
    raise InvalidArgument(f"no available provider has device type {device.type!r}; "
                          f"cannot place a value there")
