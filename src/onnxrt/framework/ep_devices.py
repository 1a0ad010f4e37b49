"""EP devices: each available provider paired with each discovered device it says it runs on
(onnxruntime's ``OrtEpDevice`` and ``get_ep_devices``).

The list is built from the providers' own declarations (``supported_devices``), so a
provider written in Python, registered by class, entry point or EP library, is listed the
same way as a built-in one. The objects are kept: ``get_ep_devices()`` returns the same
OrtEpDevice for the same (provider, device, options) on every call, as onnxruntime does.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import TYPE_CHECKING, Any

from onnxrt.errors import Fail, InvalidArgument
from onnxrt.framework.device import Device
from onnxrt.framework.devices import DeviceSupport, OrtHardwareDevice, discover_devices

if TYPE_CHECKING:
    from onnxrt.framework.allocators import OrtMemoryInfo
    from onnxrt.framework.provider import ExecutionProvider

__all__ = ["OrtEpDevice", "get_ep_devices", "ep_device_for", "forget_library"]

_LOG = logging.getLogger("onnxrt")


class OrtEpDevice:
    """An execution provider paired with a device it runs on (onnxruntime.OrtEpDevice):
    ``ep_name``, ``ep_vendor``, ``ep_metadata``, ``ep_options`` (the provider options that
    aim it at this device), ``device`` (an OrtHardwareDevice) and ``memory_info()``.

    Made by ``get_ep_devices()`` only; give them to
    ``SessionOptions.add_provider_for_devices`` or return them from a selection delegate.
    """

    __slots__ = ("_cls", "_support", "_library", "_stale", "__weakref__")

    def __init__(self, cls: type[ExecutionProvider], support: DeviceSupport,
                 library: str | None = None) -> None:
        self._cls = cls
        self._support = support
        self._library = library
        self._stale = ""

    @property
    def ep_name(self) -> str:
        return self._cls.name

    @property
    def ep_vendor(self) -> str:
        # unset: the library's registration name, else the provider's top-level package
        return self._cls.ep_vendor or self._library or self._cls.__module__.split(".")[0]

    @property
    def ep_metadata(self) -> dict[str, str]:
        mod = sys.modules.get(self._cls.__module__)
        version = getattr(self._cls, "ep_version", "") or _package_version(mod)
        md = {"version": version}
        if self._library is not None:
            md["library"] = self._library
        md.update(self._support.metadata)
        return md

    @property
    def ep_options(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self._support.options.items()}

    @property
    def device(self) -> OrtHardwareDevice:
        return self._support.device

    @property
    def provider_class(self) -> type[ExecutionProvider]:
        """The provider class behind it (onnxrt's addition)."""
        return self._cls

    @property
    def support(self) -> DeviceSupport:
        return self._support

    def memory_info(self, memory_type: Any = 0) -> OrtMemoryInfo | None:
        """Where the provider keeps values when it runs on this device, for ``DEFAULT``
        memory. ``HOST_ACCESSIBLE`` gives None: onnxrt's providers keep no separate
        host-accessible memory (host copies are NumPy arrays)."""
        from onnxrt.framework.allocators import (OrtDeviceMemoryType, OrtMemoryInfo,
                                                 OrtMemoryInfoDeviceType)

        try:
            kind = OrtDeviceMemoryType(int(memory_type))
        except (TypeError, ValueError):
            raise InvalidArgument(f"memory_info takes an OrtDeviceMemoryType (DEFAULT or "
                                  f"HOST_ACCESSIBLE), not {memory_type!r}") from None
        if kind != OrtDeviceMemoryType.DEFAULT:
            return None
        mem: Device = self._support.memory
        if mem.type == "torch":  # torch CPU tensors: host memory owned by torch
            info = OrtMemoryInfo("Torch", 0, 0, 0)
            info.device_type = OrtMemoryInfoDeviceType.CPU
            return info
        info = OrtMemoryInfo.for_device(mem)
        if not mem.is_host:
            info.device_vendor_id = self.device.vendor_id
            if self.device.type.name == "NPU":
                info.device_type = OrtMemoryInfoDeviceType.NPU
        return info

    def create_sync_stream(self) -> Any:
        """onnxruntime hands out a device stream here; onnxrt's providers order their own
        device work (torch's current stream), so there is no stream to give."""
        from onnxrt.errors import NotImplemented as NotImplemented_

        raise NotImplemented_(f"{self.ep_name}: onnxrt's providers order their device work "
                              f"themselves and expose no sync stream")

    def check_usable(self) -> None:
        """Raise Fail when the provider behind it is gone (its library was unregistered)."""
        if self._stale:
            raise Fail(f"this OrtEpDevice of {self.ep_name} is no longer usable: {self._stale}")

    def __repr__(self) -> str:
        return f"OrtEpDevice({self.ep_name!r} on {self.device.describe()})"


def _package_version(mod: Any) -> str:
    from onnxrt.framework.version import __version__

    if mod is None:
        return __version__
    top = sys.modules.get(mod.__name__.split(".")[0])
    return str(getattr(mod, "__version__", "") or getattr(top, "__version__", "")
               or __version__)


_LOCK = threading.Lock()
# (provider class, device key, options) -> the OrtEpDevice handed out for it
_MADE: dict[tuple[Any, ...], OrtEpDevice] = {}


def _supports(cls: type[ExecutionProvider], devices: tuple[OrtHardwareDevice, ...]
              ) -> list[DeviceSupport]:
    try:
        got = cls.supported_devices(devices)
    except Exception as e:  # a provider's bug hides its own devices, not everyone's
        _LOG.warning("%s.supported_devices failed: %s: %s", cls.__name__, type(e).__name__, e)
        return []
    out = []
    for s in got or ():
        if isinstance(s, OrtHardwareDevice):
            s = DeviceSupport(s)
        if not isinstance(s, DeviceSupport):
            _LOG.warning("%s.supported_devices returned %r; expected DeviceSupport or "
                         "OrtHardwareDevice objects", cls.__name__, s)
            continue
        out.append(s)
    return out


def get_ep_devices() -> list[OrtEpDevice]:
    """Every (available provider, device it runs on) pair, in the order of
    ``get_available_providers()`` (the CPU provider last), each provider's devices in
    discovery order."""
    from onnxrt.framework.registry import available_provider_classes, library_of

    devices = discover_devices()
    out: list[OrtEpDevice] = []
    with _LOCK:
        for cls in available_provider_classes():
            for s in _supports(cls, devices):
                key = (cls, s.device.key, tuple(sorted(s.options.items())),
                       s.memory, tuple(sorted(s.metadata.items())))
                ep = _MADE.get(key)
                if ep is None:
                    ep = _MADE[key] = OrtEpDevice(cls, s, library_of(cls))
                out.append(ep)
    return out


def forget_library(classes: list[type[Any]], name: str) -> None:
    """Retire the EP devices of an unregistered library's providers."""
    with _LOCK:
        for key in [k for k in _MADE if k[0] in classes]:
            _MADE.pop(key)._stale = f"its library {name!r} was unregistered"


def ep_device_for(ep: ExecutionProvider) -> OrtEpDevice | None:
    """The OrtEpDevice of a provider object: the one it was made from, else the listed one
    of its class whose options it has, else its class's first; None for a provider that
    declares no devices."""
    made = getattr(ep, "ep_devices", ())
    if made:
        return made[0]
    mine = [d for d in get_ep_devices() if d.provider_class is type(ep)]
    opts = ep.get_provider_options()
    for d in mine:
        if all(opts.get(k) == v for k, v in d.ep_options.items()):
            return d
    return mine[0] if mine else None
