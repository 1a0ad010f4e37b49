"""The names of onnxruntime's binding module (``onnxruntime.capi.onnxruntime_pybind11_state``):
the exception classes, OrtValue, OrtValueVector, OrtDevice, SessionIOBinding and the rest,
which are onnxrt's own classes."""

from __future__ import annotations

from typing import Any

from onnxrt import (AdapterFormat, ExecutionMode, ExecutionOrder, GraphOptimizationLevel,
                    InferenceSession, LoraAdapter, ModelMetadata, NodeArg, OrtAllocatorType,
                    OrtArenaCfg, OrtDevice, OrtDeviceMemoryType, OrtEpDevice,
                    OrtHardwareDevice, OrtHardwareDeviceType, OrtMemoryInfo,
                    OrtMemoryInfoDeviceType, OrtMemType, OrtSparseFormat, OrtValue,
                    OrtValueVector, RunOptions, SessionIOBinding, SessionOptions, SparseTensor,
                    create_and_register_allocator, create_and_register_allocator_v2,
                    disable_telemetry_events, enable_telemetry_events, get_all_providers,
                    get_available_providers, get_build_info, get_device, get_ep_devices,
                    get_version_string, set_default_logger_severity,
                    set_default_logger_verbosity, set_seed)
from onnxrt.errors import (DeviceReset, EngineError, EPFail, Fail, InvalidArgument, InvalidGraph,
                           InvalidProtobuf, ModelLoadCanceled, ModelLoaded,
                           ModelRequiresCompilation, NoModel, NoSuchFile, NotFound,
                           NotImplemented, RuntimeException)
from onnxrt import (OrtEpAssignedNode, OrtEpAssignedSubgraph, OrtExecutionProviderDevicePolicy,
                    register_execution_provider_library, unregister_execution_provider_library)
from onnxrt.framework.compatibility import (OrtCompiledModelCompatibility,
                                            OrtDeviceEpIncompatibilityReason,
                                            get_compatibility_info_from_model,
                                            get_compatibility_info_from_model_bytes,
                                            get_hardware_device_ep_incompatibility_details,
                                            get_model_compatibility_for_ep_devices)
from onnxrt.compile import OrtCompileApiFlags, OrtExternalInitializerInfo
from onnxrt.framework.sparse import SparseBlockSparseView, SparseCooView, SparseCsrView

__all__ = [
    "AdapterFormat", "ExecutionMode", "ExecutionOrder", "GraphOptimizationLevel",
    "InferenceSession", "LoraAdapter", "ModelMetadata", "NodeArg", "OrtAllocatorType",
    "OrtArenaCfg", "OrtDevice", "OrtDeviceMemoryType", "OrtEpDevice", "OrtHardwareDevice",
    "OrtHardwareDeviceType", "OrtMemoryInfo", "OrtMemoryInfoDeviceType", "OrtMemType",
    "OrtSparseFormat", "OrtValue", "OrtValueVector", "RunOptions", "SessionIOBinding",
    "SessionOptions", "SparseTensor", "SparseCooView", "SparseCsrView",
    "SparseBlockSparseView", "create_and_register_allocator",
    "create_and_register_allocator_v2", "disable_telemetry_events", "enable_telemetry_events",
    "get_all_providers", "get_available_providers", "get_build_info", "get_device",
    "get_ep_devices", "get_version_string", "set_default_logger_severity",
    "set_default_logger_verbosity", "set_seed", "get_default_session_options",
    "is_dlpack_uint8_tensor", "ArenaExtendStrategy", "kNextPowerOfTwo", "kSameAsRequested",
    "EngineError", "EPFail", "Fail", "InvalidArgument", "InvalidGraph", "InvalidProtobuf",
    "ModelLoadCanceled", "ModelLoaded", "ModelRequiresCompilation", "NoModel", "NoSuchFile",
    "NotFound", "NotImplemented", "RuntimeException", "DeviceReset", "OrtEpAssignedNode",
    "OrtEpAssignedSubgraph", "OrtExecutionProviderDevicePolicy",
    "register_execution_provider_library", "unregister_execution_provider_library",
    "OrtCompiledModelCompatibility", "OrtDeviceEpIncompatibilityReason",
    "get_compatibility_info_from_model", "get_compatibility_info_from_model_bytes",
    "get_hardware_device_ep_incompatibility_details", "get_model_compatibility_for_ep_devices",
    "OrtCompileApiFlags", "OrtExternalInitializerInfo",
]


def get_default_session_options() -> SessionOptions:
    """A new SessionOptions with onnxruntime's defaults."""
    return SessionOptions()


def is_dlpack_uint8_tensor(capsule: Any) -> bool:
    """Whether a DLPack capsule or producer holds uint8 data (onnxruntime exports bool
    tensors as uint8 through DLPack, and callers ask this to restore the type)."""
    import numpy as np

    try:
        arr = np.from_dlpack(capsule) if hasattr(capsule, "__dlpack__") else \
            np.from_dlpack(_CapsuleHolder(capsule))
    except (TypeError, RuntimeError, BufferError):
        return False
    return arr.dtype == np.uint8


class _CapsuleHolder:
    """Lets np.from_dlpack read a bare DLPack capsule (it wants an object with
    ``__dlpack__``); host capsules only."""

    def __init__(self, capsule: Any) -> None:
        self._capsule = capsule

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


class ArenaExtendStrategy:
    """onnxruntime's arena growth strategies (values of OrtArenaCfg.arena_extend_strategy)."""

    kNextPowerOfTwo = 0
    kSameAsRequested = 1


kNextPowerOfTwo = ArenaExtendStrategy.kNextPowerOfTwo
kSameAsRequested = ArenaExtendStrategy.kSameAsRequested
