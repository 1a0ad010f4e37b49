"""Compatibility questions about EP devices (onnxruntime's capi-level functions): is a
compiled model's blob usable on these devices, what compatibility string a model carries
for a provider, and whether a provider can run on a hardware device at all.

A compile-based provider answers the first through its ``compiled_model_compatibility``
hook; providers that write no compiled blobs into models answer ``EP_NOT_APPLICABLE``.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Sequence
from typing import Any

from onnxrt.errors import Fail, InvalidArgument
from onnxrt.framework.devices import OrtHardwareDevice, discover_devices
from onnxrt.framework.ep_devices import OrtEpDevice

__all__ = ["OrtCompiledModelCompatibility", "OrtDeviceEpIncompatibilityReason",
           "get_model_compatibility_for_ep_devices", "get_compatibility_info_from_model",
           "get_compatibility_info_from_model_bytes",
           "get_hardware_device_ep_incompatibility_details", "COMPATIBILITY_KEY_PREFIX"]

# the model metadata key onnxruntime writes a provider's compatibility string under
COMPATIBILITY_KEY_PREFIX = "ep_compatibility_info."


class OrtCompiledModelCompatibility(enum.IntEnum):
    EP_NOT_APPLICABLE = 0
    EP_SUPPORTED_OPTIMAL = 1
    EP_SUPPORTED_PREFER_RECOMPILATION = 2
    EP_UNSUPPORTED = 3


class OrtDeviceEpIncompatibilityReason(enum.IntEnum):
    NONE = 0
    DRIVER_INCOMPATIBLE = 1
    DEVICE_INCOMPATIBLE = 2
    MISSING_DEPENDENCY = 4
    UNKNOWN = -2**31


def get_model_compatibility_for_ep_devices(ep_devices: Sequence[OrtEpDevice],
                                           compatibility_info: str
                                           ) -> OrtCompiledModelCompatibility:
    """Whether a compiled model whose compatibility string is ``compatibility_info`` can run
    on these EP devices (all of one provider), as that provider judges it."""
    if not isinstance(compatibility_info, str):
        raise TypeError(f"get_model_compatibility_for_ep_devices: compatibility_info must be "
                        f"a str, not {type(compatibility_info).__name__}")
    devs = list(ep_devices)
    bad = [d for d in devs if not isinstance(d, OrtEpDevice)]
    if bad:
        raise TypeError(f"get_model_compatibility_for_ep_devices: expected OrtEpDevice "
                        f"objects, got {type(bad[0]).__name__}")
    if not devs:
        raise Fail("Invalid argument provided to get_model_compatibility_for_ep_devices: "
                   "no EP devices given")
    names = sorted({d.ep_name for d in devs})
    if len(names) > 1:
        raise Fail(f"Invalid argument provided to get_model_compatibility_for_ep_devices: "
                   f"the devices must belong to one execution provider, got "
                   f"{', '.join(names)}")
    for d in devs:
        d.check_usable()
    cls = devs[0].provider_class
    return OrtCompiledModelCompatibility(int(cls.compiled_model_compatibility(
        compatibility_info, [d.device for d in devs])))


def _info(model_bytes: bytes, ep_type: str) -> str | None:
    import onnx
    from google.protobuf.message import DecodeError

    m = onnx.ModelProto()
    try:
        m.ParseFromString(model_bytes)
    except (DecodeError, ValueError) as e:
        raise Fail(f"Protobuf parsing failed: {e}") from None
    key = COMPATIBILITY_KEY_PREFIX + str(ep_type)
    return next((p.value for p in m.metadata_props if p.key == key), None)


def get_compatibility_info_from_model(model_path: str | os.PathLike[str], ep_type: str
                                      ) -> str | None:
    """The compatibility string a model file carries for ``ep_type``, or None."""
    path = os.fspath(model_path)
    if not os.path.isfile(path):
        raise Fail(f"Load model {path} failed. File doesn't exist")
    with open(path, "rb") as f:
        return _info(f.read(), ep_type)


def get_compatibility_info_from_model_bytes(model_data: Any, ep_type: str) -> str | None:
    """The same, for a model given as bytes or any buffer."""
    return _info(bytes(memoryview(model_data).cast("B")), ep_type)


def get_hardware_device_ep_incompatibility_details(ep_name: str, device: OrtHardwareDevice
                                                   ) -> dict[str, Any]:
    """Why ``ep_name`` cannot run on ``device``: ``reasons_bitmask`` (of
    OrtDeviceEpIncompatibilityReason), ``notes`` and ``error_code`` (0: none). A provider
    onnxrt knows but cannot use here answers MISSING_DEPENDENCY with the reason; a name it
    has no implementation of is an InvalidArgument, as in onnxruntime."""
    from onnxrt.framework.ep_devices import _supports
    from onnxrt.framework.registry import provider_class

    if not isinstance(device, OrtHardwareDevice):
        raise TypeError(f"expected an OrtHardwareDevice, not {type(device).__name__}")
    try:
        cls = provider_class(str(ep_name))
    except Exception as e:
        return {"reasons_bitmask": int(OrtDeviceEpIncompatibilityReason.MISSING_DEPENDENCY),
                "notes": f"{ep_name}'s package failed to import ({type(e).__name__}: {e})",
                "error_code": 0}
    if cls is None:
        raise InvalidArgument(f"No valid factory found for execution provider '{ep_name}'.")
    why = cls.unavailable_reason()
    if why:
        return {"reasons_bitmask": int(OrtDeviceEpIncompatibilityReason.MISSING_DEPENDENCY),
                "notes": why, "error_code": 0}
    devices = tuple(dict.fromkeys((*discover_devices(), device)))
    if any(s.device == device for s in _supports(cls, devices)):
        return {"reasons_bitmask": 0, "notes": None, "error_code": 0}
    return {"reasons_bitmask": int(OrtDeviceEpIncompatibilityReason.DEVICE_INCOMPATIBLE),
            "notes": f"{ep_name} does not run on {device.describe()}", "error_code": 0}
