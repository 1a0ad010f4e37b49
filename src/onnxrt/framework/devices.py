"""Hardware devices: what this machine has, found once per process.

``discover_devices()`` lists the CPU (always: /proc/cpuinfo on Linux, the platform module
elsewhere), the GPUs the installed torch build sees (CUDA, or ROCm builds, which torch also
calls ``cuda``), and the GPUs and NPUs OpenVINO's runtime lists. Each source asks the library
that would drive the device, so a device is listed when something here can use it, never
from a name. Providers then say which of these devices they run on
(``ExecutionProvider.supported_devices``); ``framework/ep_devices.py`` pairs them.

Metadata keys other code relies on: ``torch_device`` (``cuda:N``, set on torch's GPUs),
``openvino_device`` (``GPU.0``, ``NPU``: OpenVINO's name for it), ``Discrete`` (``1`` for a
discrete GPU, as onnxruntime's policies read it), ``pci_bus_id`` (``0000:3b:00.0``).
"""

from __future__ import annotations

import enum
import importlib.util
import logging
import os
import platform
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from onnxrt.framework.device import CPU_DEVICE, Device

__all__ = ["OrtHardwareDeviceType", "OrtHardwareDevice", "DeviceSupport", "discover_devices",
           "cpu_device", "torch_gpu_index", "SOURCES", "VENDOR_IDS"]

_LOG = logging.getLogger("onnxrt")


class OrtHardwareDeviceType(enum.IntEnum):
    CPU = 0
    GPU = 1
    NPU = 2


# PCI-SIG vendor ids (what onnxruntime reports as vendor_id: 0x1022 for an AMD CPU)
VENDOR_IDS: dict[str, int] = {"Intel": 0x8086, "AMD": 0x1022, "NVIDIA": 0x10DE,
                              "Qualcomm": 0x5143, "ARM": 0x13B5, "Apple": 0x106B}
# GPUs: AMD's graphics vendor id differs from its CPUs'
_AMD_GPU = 0x1002
# /proc/cpuinfo "vendor_id" (x86) and "CPU implementer" (ARM) -> vendor name
_X86_VENDORS = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD", "HygonGenuine": "Hygon",
                "CentaurHauls": "Centaur"}
_ARM_IMPLEMENTERS = {"0x41": "ARM", "0x51": "Qualcomm", "0x61": "Apple", "0x48": "HiSilicon",
                     "0x4e": "NVIDIA", "0x46": "Fujitsu", "0xc0": "Ampere"}
# CPU features providers and users ask about, in metadata "features"
_FEATURES = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni",
             "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16", "neon", "asimd", "asimddp",
             "sve", "sve2", "i8mm", "bf16")


class OrtHardwareDevice:
    """A hardware device (onnxruntime.OrtHardwareDevice): ``type``, ``vendor``,
    ``vendor_id``, ``device_id`` and ``metadata``, as onnxruntime names them.

    Two objects describe the same device when their keys agree (a PCI address, torch's or
    OpenVINO's device name): a provider that finds a device itself may build one.
    """

    __slots__ = ("_type", "_vendor", "_vendor_id", "_device_id", "_metadata", "_key")

    def __init__(self, type: OrtHardwareDeviceType, vendor: str,  # noqa: A002 - onnxruntime's
                 vendor_id: int = 0, device_id: int = 0,
                 metadata: Mapping[str, str] | None = None, key: str = "") -> None:
        self._type = OrtHardwareDeviceType(int(type))
        self._vendor = str(vendor)
        self._vendor_id = int(vendor_id)
        self._device_id = int(device_id)
        self._metadata = {str(k): str(v) for k, v in (metadata or {}).items()}
        self._key = key or (f"{self._type.name.lower()}:{self._vendor_id:#x}:"
                            f"{self._device_id:#x}:{self._metadata.get('name', '')}")

    @property
    def type(self) -> OrtHardwareDeviceType:
        return self._type

    @property
    def vendor(self) -> str:
        return self._vendor

    @property
    def vendor_id(self) -> int:
        return self._vendor_id

    @property
    def device_id(self) -> int:
        return self._device_id

    @property
    def metadata(self) -> dict[str, str]:
        """A copy (onnxruntime's is a copy too): a device is shared by every EP device."""
        return dict(self._metadata)

    @property
    def key(self) -> str:
        return self._key

    def describe(self) -> str:
        """One line for reports: ``GPU 'NVIDIA H100' (NVIDIA 0x10de:0x2330, cuda:0)``."""
        md = self._metadata
        where = md.get("torch_device") or md.get("openvino_device") or ""
        ids = f"{self._vendor or 'vendor ?'} {self._vendor_id:#06x}:{self._device_id:#06x}"
        name = md.get("name", "")
        return (f"{self._type.name}" + (f" {name!r}" if name else "")
                + f" ({ids}" + (f", {where})" if where else ")"))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OrtHardwareDevice) and other._key == self._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"OrtHardwareDevice({self.describe()})"


@dataclass(frozen=True)
class DeviceSupport:
    """A provider's declaration for one device it runs on: the provider options that aim it
    at that device (merged under the user's options when the device is chosen), and where
    its values live when it runs there (for ``OrtEpDevice.memory_info``)."""

    device: OrtHardwareDevice
    options: Mapping[str, str] = field(default_factory=dict)
    memory: Device = CPU_DEVICE
    metadata: Mapping[str, str] = field(default_factory=dict)


# -- the CPU --------------------------------------------------------------------------------
def _read_cpuinfo(path: str = "/proc/cpuinfo") -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    if out:
                        break
                    continue
                k, sep, v = line.partition(":")
                if sep:
                    out.setdefault(k.strip(), v.strip())
    except OSError:
        return {}
    return out


def cpu_from_cpuinfo(info: Mapping[str, str], machine: str = "") -> OrtHardwareDevice:
    """The CPU device described by /proc/cpuinfo's fields (x86 or ARM)."""
    vendor = _X86_VENDORS.get(info.get("vendor_id", ""), "")
    name = info.get("model name", "")
    if not vendor and "CPU implementer" in info:
        vendor = _ARM_IMPLEMENTERS.get(info["CPU implementer"].lower(), "")
        name = name or info.get("Hardware", "") or info.get("Processor", "")
    if not vendor:
        vendor = _vendor_from_text(name or platform.processor())
    flags = set((info.get("flags") or info.get("Features") or "").split())
    md = {"name": name or platform.processor() or machine or platform.machine(),
          "architecture": machine or platform.machine(),
          "logical_processors": str(os.cpu_count() or 1),
          "source": "/proc/cpuinfo"}
    feats = [f for f in _FEATURES if f in flags]
    if feats:
        md["features"] = ",".join(feats)
    if "cpu family" in info and "model" in info:
        md["family_model"] = f"{info['cpu family']}:{info['model']}"
    return OrtHardwareDevice(OrtHardwareDeviceType.CPU, vendor, VENDOR_IDS.get(vendor, 0), 0,
                             md, key="cpu")


def _vendor_from_text(text: str) -> str:
    low = text.lower()
    for needle, vendor in (("intel", "Intel"), ("amd", "AMD"), ("apple", "Apple"),
                           ("qualcomm", "Qualcomm"), ("snapdragon", "Qualcomm"),
                           ("arm", "ARM")):
        if needle in low:
            return vendor
    return ""


def _platform_cpu() -> OrtHardwareDevice:
    """Where there is no /proc/cpuinfo (macOS, Windows): the platform module's answer."""
    name = platform.processor() or platform.machine()
    vendor = _vendor_from_text(name) or ("Apple" if platform.system() == "Darwin"
                                         and platform.machine() == "arm64" else "")
    md = {"name": name, "architecture": platform.machine(),
          "logical_processors": str(os.cpu_count() or 1), "source": "platform"}
    return OrtHardwareDevice(OrtHardwareDeviceType.CPU, vendor, VENDOR_IDS.get(vendor, 0), 0,
                             md, key="cpu")


def cpu_device() -> OrtHardwareDevice:
    """The host CPU (one device for all its cores and sockets, as onnxruntime lists it)."""
    info = _read_cpuinfo()
    return cpu_from_cpuinfo(info) if info else _platform_cpu()


# -- GPUs through torch ---------------------------------------------------------------------
def _pci_ids(bus_id: str, root: str = "/sys/bus/pci/devices") -> tuple[int, int]:
    """(vendor id, device id) of a PCI function from sysfs, (0, 0) where unreadable."""
    base = f"{root}/{bus_id.lower()}"
    try:
        with open(f"{base}/vendor") as f:
            vendor = int(f.read().strip(), 16)
        with open(f"{base}/device") as f:
            device = int(f.read().strip(), 16)
    except (OSError, ValueError):
        return 0, 0
    return vendor, device


def torch_gpus() -> list[OrtHardwareDevice]:
    """The GPUs the installed torch build can use (none when torch is absent or CPU-only)."""
    if importlib.util.find_spec("torch") is None:
        return []
    import torch

    if not torch.cuda.is_available():
        return []
    hip = bool(getattr(torch.version, "hip", None))
    out = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        md = {"name": str(p.name), "torch_device": f"cuda:{i}",
              "total_memory": str(int(p.total_memory)),
              "Discrete": "0" if getattr(p, "is_integrated", 0) else "1",
              "runtime": f"ROCm {torch.version.hip}" if hip else f"CUDA {torch.version.cuda}"}
        if hip:
            md["arch"] = str(getattr(p, "gcnArchName", ""))
        else:
            md["compute_capability"] = f"{p.major}.{p.minor}"
        uuid = getattr(p, "uuid", None)
        if uuid is not None:
            md["uuid"] = str(uuid)
        bus = ""
        if hasattr(p, "pci_bus_id"):
            bus = (f"{int(getattr(p, 'pci_domain_id', 0)):04x}:{int(p.pci_bus_id):02x}:"
                   f"{int(getattr(p, 'pci_device_id', 0)):02x}.0")
            md["pci_bus_id"] = bus
        vendor_id, device_id = _pci_ids(bus) if bus else (0, 0)
        vendor = "AMD" if hip else "NVIDIA"
        out.append(OrtHardwareDevice(OrtHardwareDeviceType.GPU, vendor,
                                     vendor_id or (_AMD_GPU if hip else VENDOR_IDS["NVIDIA"]),
                                     device_id, md, key=f"pci:{bus}" if bus else f"cuda:{i}"))
    return out


def torch_gpu_index(device: OrtHardwareDevice, vendor: str = "") -> int | None:
    """N of a GPU torch drives as ``cuda:N`` (of ``vendor``, if given), else None."""
    where = device._metadata.get("torch_device", "")
    if device.type != OrtHardwareDeviceType.GPU or not where.startswith("cuda:"):
        return None
    if vendor and device.vendor != vendor:
        return None
    return int(where[5:])


# -- OpenVINO's GPUs and NPUs ---------------------------------------------------------------
def openvino_devices() -> list[OrtHardwareDevice]:
    """OpenVINO's GPU and NPU devices (its ``CPU`` is the host CPU, listed already)."""
    if importlib.util.find_spec("openvino") is None:
        return []
    import openvino as ov

    core = ov.Core()
    out = []
    for name in core.available_devices:
        kind = name.split(".")[0]
        if kind not in ("GPU", "NPU"):
            continue
        md = {"openvino_device": name, "name": _ov_prop(core, name, "FULL_DEVICE_NAME"),
              "architecture": _ov_prop(core, name, "DEVICE_ARCHITECTURE")}
        dtype = _ov_prop(core, name, "DEVICE_TYPE")
        if kind == "GPU":
            md["Discrete"] = "1" if "DISCRETE" in dtype.upper() else "0"
        pci = _ov_prop(core, name, "DEVICE_PCI_INFO")
        if pci:
            md["pci_info"] = pci
        out.append(OrtHardwareDevice(
            OrtHardwareDeviceType.GPU if kind == "GPU" else OrtHardwareDeviceType.NPU,
            "Intel", VENDOR_IDS["Intel"], 0, {k: v for k, v in md.items() if v},
            key=f"openvino:{name}"))
    return out


def _ov_prop(core: Any, device: str, prop: str) -> str:
    try:
        return str(core.get_property(device, prop))
    except Exception:  # an older runtime or plugin without that property
        return ""


# sources in order; each returns devices, a failing one is logged and skipped
def host_cpu() -> list[OrtHardwareDevice]:
    return [cpu_device()]


SOURCES: list[Callable[[], list[OrtHardwareDevice]]] = [host_cpu, torch_gpus, openvino_devices]

_LOCK = threading.Lock()
_CACHE: list[tuple[OrtHardwareDevice, ...]] = []


def discover_devices(refresh: bool = False) -> tuple[OrtHardwareDevice, ...]:
    """Every device found here, the CPU first; found once per process (devices are assumed
    not to change while it runs, as onnxruntime assumes), again with ``refresh=True``."""
    with _LOCK:
        if _CACHE and not refresh:
            return _CACHE[0]
        found: dict[str, OrtHardwareDevice] = {}
        for source in SOURCES:
            try:
                devices = source()
            except Exception as e:  # a broken driver or library hides its devices only
                _LOG.warning("device discovery through %s failed: %s: %s",
                             getattr(source, "__name__", source), type(e).__name__, e)
                continue
            for d in devices:
                found.setdefault(d.key, d)
        if not any(d.type == OrtHardwareDeviceType.CPU for d in found.values()):
            found["cpu"] = _platform_cpu()
        _CACHE[:] = [tuple(found.values())]
        return _CACHE[0]
