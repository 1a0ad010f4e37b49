"""onnxrt: an ONNX inference runtime in Python with onnxruntime's API and pluggable
execution providers. ``import onnxrt as ort`` and use it as onnxruntime."""

from __future__ import annotations

import os as _os
import sys as _sys

# OpenBLAS's idle threads spin for ~0.1 s after each product by default and then fight the
# session's own intra-op threads for the cores (measured: resnet50 at batch 1, 68 ms with
# the default, 56 ms with a short spin). Only settable before numpy loads OpenBLAS, and
# only when the user has not chosen a value: a process that imported numpy first keeps its
# own (see the README).
if "numpy" not in _sys.modules:
    _os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

from onnxrt.errors import (DeviceReset, EPFail, Fail, InvalidArgument, InvalidGraph, InvalidProtobuf,
                           ModelLoadCanceled, ModelLoaded, ModelRequiresCompilation, NoModel,
                           NoSuchFile, NotFound, NotImplemented, OnnxRuntimeError, RunCanceled,
                           RuntimeException, EngineError)
from onnxrt.framework.device import Device
from onnxrt.framework.kernel import KernelDef, KernelRegistry, NodeInfo
from onnxrt.framework.provider import ExecutionProvider
from onnxrt.framework.registry import (get_all_providers, get_available_providers, init,
                                       register_execution_provider)
from onnxrt.framework.transfer import DataTransfer
from onnxrt.framework.capability import Capability
from onnxrt.partition.report import AssignedNode as OrtEpAssignedNode
from onnxrt.partition.report import AssignedSubgraph as OrtEpAssignedSubgraph
from onnxrt.framework.grouping import group_nodes
from onnxrt.framework.graph_view import GraphView, NodeView
from onnxrt.options import (ExecutionMode, ExecutionOrder, GraphOptimizationLevel,
                            OrtAllocatorType, OrtMemType, RunOptions, SessionOptions)
from onnxrt.session import InferenceSession
from onnxrt.session_threads import set_global_thread_pool_sizes
from onnxrt.alias import install_as_onnxruntime, uninstall_as_onnxruntime
from onnxrt.allocators import (OrtArenaCfg, OrtDevice, OrtDeviceMemoryType, OrtDeviceVendorId,
                               OrtMemoryInfo, OrtMemoryInfoDeviceType,
                               create_and_register_allocator, create_and_register_allocator_v2)
from onnxrt.framework.devices import DeviceSupport, OrtHardwareDevice, OrtHardwareDeviceType
from onnxrt.framework.ep_devices import OrtEpDevice, get_ep_devices
from onnxrt.framework.libraries import (register_execution_provider_library,
                                        unregister_execution_provider_library)
from onnxrt.framework.selection import OrtExecutionProviderDevicePolicy
from onnxrt.compile import ModelCompiler, OrtCompileApiFlags, OrtExternalInitializerInfo
from onnxrt.lora import AdapterFormat, LoraAdapter
from onnxrt.framework.sparse import OrtSparseFormat, SparseTensor
from onnxrt.values import (IOBinding, ModelMetadata, NodeArg, OrtValue, OrtValueVector,
                           SessionIOBinding)

from onnxrt.framework.version import __version__

version = __version__

__all__ = [
    "InferenceSession", "SessionOptions", "RunOptions", "GraphOptimizationLevel",
    "ExecutionMode", "ExecutionOrder", "OrtAllocatorType", "OrtMemType", "OrtValue",
    "IOBinding", "NodeArg", "ModelMetadata", "OrtDevice", "Device", "ExecutionProvider",
    "KernelRegistry", "KernelDef", "NodeInfo", "register_execution_provider", "init",
    "DataTransfer", "Capability", "group_nodes", "GraphView", "NodeView",
    "get_all_providers", "get_available_providers", "get_device", "get_version_string",
    "get_build_info", "set_seed", "set_default_logger_severity",
    "Fail", "InvalidArgument", "NoSuchFile", "NoModel", "InvalidProtobuf", "InvalidGraph",
    "NotImplemented", "RuntimeException", "EPFail", "ModelLoaded", "NotFound",
    "OnnxRuntimeError", "RunCanceled", "EngineError", "ModelLoadCanceled",
    "ModelRequiresCompilation", "__version__",
    "OrtValueVector", "SessionIOBinding", "OrtMemoryInfo", "OrtArenaCfg", "OrtDeviceMemoryType",
    "OrtMemoryInfoDeviceType", "OrtDeviceVendorId", "OrtEpDevice", "OrtHardwareDevice",
    "OrtHardwareDeviceType", "create_and_register_allocator",
    "create_and_register_allocator_v2", "get_ep_devices", "SparseTensor", "OrtSparseFormat",
    "AdapterFormat", "LoraAdapter", "install_as_onnxruntime", "uninstall_as_onnxruntime",
    "enable_telemetry_events", "disable_telemetry_events", "set_default_logger_verbosity",
    "DeviceReset", "OrtEpAssignedNode", "OrtEpAssignedSubgraph", "preload_dlls",
    "has_collective_ops", "set_global_thread_pool_sizes", "OrtExecutionProviderDevicePolicy",
    "DeviceSupport", "register_execution_provider_library",
    "unregister_execution_provider_library",
    "ModelCompiler", "OrtCompileApiFlags", "OrtExternalInitializerInfo",
]


def get_device() -> str:
    """The default device of this build, as onnxruntime reports it ("CPU")."""
    return "CPU"


def get_version_string() -> str:
    return __version__


def get_build_info() -> str:
    """A one-line build description, in the shape of onnxruntime's ("ORT Build Info: ...")."""
    import platform

    import numpy
    import onnx

    return (f"onnxrt Build Info: version={__version__}, python={platform.python_version()}, "
            f"numpy={numpy.__version__}, onnx={onnx.__version__}, "
            f"platform={platform.system().lower()}-{platform.machine()}")


def preload_dlls(cuda: bool = True, cudnn: bool = True, msvc: bool = True,
                 directory: str | None = None) -> None:
    """A no-op: onnxrt loads no native CUDA, cuDNN or MSVC libraries of its own (the Torch
    and TensorRT providers load theirs through torch). onnxruntime's call, kept so code that
    makes it runs unchanged."""


def has_collective_ops() -> bool:
    """onnxrt has no collective (multi-device communication) ops."""
    return False


def enable_telemetry_events() -> None:
    """A no-op: onnxrt collects and sends no telemetry (onnxruntime's switch, kept so code
    that calls it runs unchanged)."""


def disable_telemetry_events() -> None:
    """A no-op: onnxrt collects and sends no telemetry (onnxruntime's switch, kept so code
    that calls it runs unchanged)."""


def set_seed(seed: int) -> None:
    """Seed the random ops that have no ``seed`` attribute."""
    from onnxrt.providers.cpu import random_state

    random_state.set_seed(seed)


_LOG_SEVERITY = [2]


def set_default_logger_severity(level: int) -> None:
    """The default severity of onnxrt's log: 0 verbose, 1 info, 2 warning, 3 error, 4 fatal
    (onnxruntime's numbers), applied to the ``onnxrt`` logger."""
    import logging

    level = int(level)
    if not 0 <= level <= 4:
        raise InvalidArgument(f"log severity must be 0-4, not {level}")
    _LOG_SEVERITY[0] = level
    logging.getLogger("onnxrt").setLevel(
        (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL)[level])


def set_default_logger_verbosity(level: int) -> None:
    """onnxruntime's verbose-log level; onnxrt's verbose log has one level, so any value
    turns on nothing more than ``set_default_logger_severity(0)`` does."""
    _LOG_VERBOSITY[0] = int(level)


_LOG_VERBOSITY = [0]
