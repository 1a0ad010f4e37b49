"""Device and memory descriptors with onnxruntime's names: OrtDevice, OrtMemoryInfo,
OrtArenaCfg, and the shared allocators of ``create_and_register_allocator``. (Hardware and
EP devices: ``framework/devices.py`` and ``framework/ep_devices.py``.)

onnxrt keeps host values in NumPy arrays and device values in their engine's tensors, so these
describe where a value lives rather than own memory. The one allocator onnxrt tunes is the
host arena (``onnxrt/execute/memory.py``): a registered CPU allocator is that arena, used by
the sessions whose config sets ``session.use_env_allocators`` to ``1``.
"""

from __future__ import annotations

import enum
from typing import Any

from onnxrt.errors import InvalidArgument, NotImplemented as NotImplementedError_
from onnxrt.framework.device import CPU_DEVICE, Device

__all__ = ["OrtAllocatorType", "OrtMemType", "OrtDevice", "OrtMemoryInfo", "OrtArenaCfg",
           "OrtDeviceMemoryType", "OrtMemoryInfoDeviceType", "OrtDeviceVendorId",
           "create_and_register_allocator",
           "create_and_register_allocator_v2", "registered_allocator"]


class OrtAllocatorType(enum.IntEnum):
    INVALID = -1
    ORT_DEVICE_ALLOCATOR = 0
    ORT_ARENA_ALLOCATOR = 1


class OrtMemType(enum.IntEnum):
    CPU_INPUT = -2
    CPU_OUTPUT = -1
    CPU = -1
    DEFAULT = 0



class OrtDeviceMemoryType(enum.IntEnum):
    DEFAULT = 0
    HOST_ACCESSIBLE = 5


class OrtMemoryInfoDeviceType(enum.IntEnum):
    CPU = 0
    GPU = 1
    FPGA = 2
    NPU = 3


class OrtDeviceVendorId(enum.IntEnum):
    NONE = 0x0000
    AMD = 0x1002
    NVIDIA = 0x10DE
    ARM = 0x13B5
    MICROSOFT = 0x1414
    HUAWEI = 0x19E5
    QUALCOMM = 0x5143
    INTEL = 0x8086


# onnxruntime's device type numbers, and onnxrt's device names for them
_CPU, _GPU, _FPGA, _NPU, _DML = 0, 1, 2, 3, 4
# (make("dml") is a GPU with Microsoft's vendor id, as in onnxruntime; OrtDevice.dml() is 4)
_TYPE_OF_NAME = {"cpu": _CPU, "cuda": _GPU, "gpu": _GPU, "webgpu": _GPU, "rocm": _GPU,
                 "fpga": _FPGA, "npu": _NPU, "cann": _NPU, "dml": _GPU}
_VENDOR_OF_NAME = {"cuda": OrtDeviceVendorId.NVIDIA, "dml": OrtDeviceVendorId.MICROSOFT,
                   "cann": OrtDeviceVendorId.HUAWEI, "webgpu": OrtDeviceVendorId.NONE,
                   "rocm": OrtDeviceVendorId.AMD}


class OrtDevice:
    """A device as onnxruntime numbers it: type, memory type, vendor and id.

    Serves as both of onnxruntime's classes: ``OrtDevice(type, mem_type, device_id)`` or
    ``OrtDevice(type, mem_type, vendor_id, device_id)`` as its C layer builds it, and
    ``OrtDevice.make("cuda", 0)`` as its Python layer does.
    """

    __slots__ = ("_type", "_mem", "_vendor", "_id", "_name")

    def __init__(self, device_type: int, mem_type: int = 0, *ids: int) -> None:
        if len(ids) == 1:
            vendor, dev_id = 0, int(ids[0])
        elif len(ids) == 2:
            vendor, dev_id = int(ids[0]), int(ids[1])
        else:
            raise InvalidArgument("OrtDevice(device_type, mem_type, device_id) or "
                                  "OrtDevice(device_type, mem_type, vendor_id, device_id)")
        self._type = int(device_type)
        self._mem = int(mem_type)
        self._vendor = vendor
        self._id = dev_id
        self._name = _name_of(self._type, vendor)

    # onnxruntime's C-level constants
    @staticmethod
    def cpu() -> int:
        return _CPU

    @staticmethod
    def gpu() -> int:
        return _GPU

    @staticmethod
    def cuda() -> int:
        return _GPU

    @staticmethod
    def webgpu() -> int:
        return _GPU

    @staticmethod
    def fpga() -> int:
        return _FPGA

    @staticmethod
    def npu() -> int:
        return _NPU

    @staticmethod
    def cann() -> int:
        return _NPU

    @staticmethod
    def dml() -> int:
        return _DML

    @staticmethod
    def default_memory() -> int:
        return 0

    @staticmethod
    def make(ort_device_name: str, device_id: int, vendor_id: int = -1) -> "OrtDevice":
        name = str(ort_device_name).lower()
        if name not in _TYPE_OF_NAME:
            raise InvalidArgument(f"Unsupported device type: {ort_device_name}; known: "
                                  f"{', '.join(sorted(_TYPE_OF_NAME))}")
        if vendor_id < 0:
            vendor_id = int(_VENDOR_OF_NAME.get(name, 0))
        dev = OrtDevice(_TYPE_OF_NAME[name], 0, int(vendor_id), int(device_id))
        dev._name = name if name != "gpu" else dev._name
        return dev

    @staticmethod
    def from_device(device: Device) -> "OrtDevice":
        return OrtDevice.make(device.type if device.type in _TYPE_OF_NAME else "gpu",
                              device.id)

    def to_device(self) -> Device:
        """onnxrt's Device for this descriptor (``cpu``, ``cuda:N``...)."""
        return CPU_DEVICE if self._type == _CPU else Device(self._name, self._id)

    def device_id(self) -> int:
        return self._id

    def device_type(self) -> int:
        return self._type

    def device_vendor_id(self) -> int:
        return self._vendor

    vendor_id = device_vendor_id

    def device_mem_type(self) -> int:
        return self._mem

    mem_type = device_mem_type

    def _get_c_device(self) -> "OrtDevice":
        return self

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OrtDevice) and (self._type, self._mem, self._vendor,
                                                 self._id) == (other._type, other._mem,
                                                               other._vendor, other._id)

    def __hash__(self) -> int:
        return hash((self._type, self._mem, self._vendor, self._id))

    def __repr__(self) -> str:
        return (f"OrtDevice({self._name}, type={self._type}, mem_type={self._mem}, "
                f"vendor_id={self._vendor:#x}, device_id={self._id})")


def _name_of(device_type: int, vendor: int) -> str:
    if device_type == _CPU:
        return "cpu"
    if device_type == _DML:
        return "dml"
    if device_type == _GPU:
        return {OrtDeviceVendorId.AMD: "rocm", OrtDeviceVendorId.MICROSOFT: "dml"}.get(
            vendor, "cuda")
    return "npu" if device_type == _NPU else "fpga"


class OrtMemoryInfo:
    """Where a value's memory lives (onnxruntime.OrtMemoryInfo)."""

    def __init__(self, name: str, allocator_type: int, device_id: int, mem_type: int) -> None:
        self.name = str(name)
        self.allocator_type = OrtAllocatorType(int(allocator_type))
        self.device_id = int(device_id)
        self.mem_type = OrtMemType(int(mem_type))
        self.device_mem_type = OrtDeviceMemoryType.DEFAULT
        self.device_vendor_id = 0
        self.device_type = OrtMemoryInfoDeviceType.CPU if self.name.lower().startswith(
            "cpu") else OrtMemoryInfoDeviceType.GPU

    @staticmethod
    def create_v2(name: str, device_type: int, vendor_id: int, device_id: int,
                  device_mem_type: int, alignment: int, allocator_type: int
                  ) -> "OrtMemoryInfo":
        info = OrtMemoryInfo(name, allocator_type, device_id, OrtMemType.DEFAULT)
        info.device_type = OrtMemoryInfoDeviceType(int(device_type))
        info.device_vendor_id = int(vendor_id)
        info.device_mem_type = OrtDeviceMemoryType(int(device_mem_type))
        info.alignment = int(alignment)
        return info

    @staticmethod
    def for_device(device: Device) -> "OrtMemoryInfo":
        """The memory info of values on ``device`` as onnxruntime names it."""
        if device.is_host:
            return OrtMemoryInfo("Cpu", OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0,
                                 OrtMemType.DEFAULT)
        info = OrtMemoryInfo(device.type.capitalize(), OrtAllocatorType.ORT_ARENA_ALLOCATOR,
                             device.id, OrtMemType.DEFAULT)
        info.device_vendor_id = int(_VENDOR_OF_NAME.get(device.type, 0))
        return info

    def __repr__(self) -> str:
        return (f"OrtMemoryInfo(name={self.name!r}, device_id={self.device_id}, "
                f"mem_type={self.mem_type.name}, allocator_type={self.allocator_type.name})")


_ARENA_FIELDS = ("max_mem", "arena_extend_strategy", "initial_chunk_size_bytes",
                 "max_dead_bytes_per_chunk", "initial_growth_chunk_size_bytes",
                 "max_power_of_two_extend_bytes")


class OrtArenaCfg:
    """Arena settings: ``OrtArenaCfg(max_mem, arena_extend_strategy,
    initial_chunk_size_bytes, max_dead_bytes_per_chunk)`` or ``OrtArenaCfg({key: value})``.
    -1 (or 0 for max_mem) means the default."""

    def __init__(self, *args: Any) -> None:
        values: dict[str, int] = {f: -1 for f in _ARENA_FIELDS}
        values["max_mem"] = 0
        if len(args) == 1 and isinstance(args[0], dict):
            for k, v in args[0].items():
                if k not in _ARENA_FIELDS:
                    raise InvalidArgument(f"Invalid OrtArenaCfg option: {k}; valid: "
                                          f"{', '.join(_ARENA_FIELDS)}")
                values[k] = int(v)
        elif len(args) == 4:
            for k, v in zip(_ARENA_FIELDS, args):
                values[k] = int(v)
        elif args:
            raise InvalidArgument("OrtArenaCfg takes (max_mem, arena_extend_strategy, "
                                  "initial_chunk_size_bytes, max_dead_bytes_per_chunk) or a dict")
        for k, v in values.items():
            setattr(self, k, v)

    def __repr__(self) -> str:
        return "OrtArenaCfg(" + ", ".join(f"{k}={getattr(self, k)}" for k in _ARENA_FIELDS) + ")"


_REGISTERED: dict[str, OrtArenaCfg | None] = {}


def create_and_register_allocator(mem_info: OrtMemoryInfo, arena_cfg: OrtArenaCfg | None
                                  ) -> None:
    """Register the shared CPU arena that sessions with ``session.use_env_allocators`` = 1
    use. onnxrt's arena is the process heap kept from shrinking (``execute/memory.py``): of
    an OrtArenaCfg it acts on ``arena_extend_strategy``; a limit it cannot keep (max_mem,
    chunk sizes) is refused rather than ignored."""
    if mem_info.device_type != OrtMemoryInfoDeviceType.CPU and not mem_info.name.lower(
            ).startswith("cpu"):
        raise InvalidArgument(f"create_and_register_allocator: onnxrt shares only the CPU "
                              f"arena, not {mem_info.name!r} (device memory belongs to the "
                              f"device's engine)")
    if arena_cfg is not None:
        fixed = [k for k in _ARENA_FIELDS if k not in ("arena_extend_strategy",)
                 and getattr(arena_cfg, k) not in (-1, 0)]
        if fixed:
            raise NotImplementedError_(
                f"OrtArenaCfg {', '.join(fixed)}: onnxrt's CPU arena is the process heap and "
                f"cannot keep such limits; only arena_extend_strategy is acted on")
        if arena_cfg.arena_extend_strategy not in (-1, 0, 1):
            raise InvalidArgument(f"arena_extend_strategy must be 0 (kNextPowerOfTwo) or 1 "
                                  f"(kSameAsRequested), not {arena_cfg.arena_extend_strategy}")
    _REGISTERED["cpu"] = arena_cfg


def create_and_register_allocator_v2(provider_type: str, mem_info: OrtMemoryInfo,
                                     provider_options: dict[str, Any],
                                     arena_cfg: OrtArenaCfg | None) -> None:
    if provider_type != "CPUExecutionProvider":
        raise InvalidArgument(f"create_and_register_allocator_v2: onnxrt shares only the CPU "
                              f"provider's arena, not {provider_type}'s")
    create_and_register_allocator(mem_info, arena_cfg)


def registered_allocator() -> tuple[bool, OrtArenaCfg | None]:
    """(whether a shared CPU arena was registered, its configuration)."""
    return "cpu" in _REGISTERED, _REGISTERED.get("cpu")
