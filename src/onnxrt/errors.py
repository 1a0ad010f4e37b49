"""Exception classes with onnxruntime's names that also subclass the natural Python type.

onnxruntime raises ``onnxruntime.capi.onnxruntime_pybind11_state.<Name>``; code that catches
those names, or the built-in types, works unchanged with these.
"""

from __future__ import annotations

__all__ = [
    "OnnxRuntimeError",
    "Fail",
    "InvalidArgument",
    "NoSuchFile",
    "NoModel",
    "EngineError",
    "RuntimeException",
    "InvalidProtobuf",
    "ModelLoaded",
    "NotImplemented",
    "InvalidGraph",
    "EPFail",
    "CannotCompile",
    "ModelLoadCanceled",
    "ModelRequiresCompilation",
    "NotFound",
    "RunCanceled",
    "InvalidProviderError",
    "DeviceReset",
    "ConfigKeyError",
]


class OnnxRuntimeError(Exception):
    """Base class of every error onnxrt raises on purpose."""


class Fail(OnnxRuntimeError, RuntimeError):
    """A generic failure (onnxruntime's FAIL status)."""


class InvalidArgument(OnnxRuntimeError, ValueError):
    """A bad argument: unknown input name, wrong type, rank or shape, bad option."""


class NoSuchFile(OnnxRuntimeError, FileNotFoundError):
    """The model path (or an external data file) does not exist."""


class NoModel(OnnxRuntimeError, ValueError):
    """No model was given, or the model has no graph."""


class EngineError(OnnxRuntimeError, RuntimeError):
    """An internal engine error."""


class RuntimeException(OnnxRuntimeError, RuntimeError):
    """A failure while running: a kernel raised, or a value was invalid at run time."""


class InvalidProtobuf(OnnxRuntimeError, ValueError):
    """The model bytes are not a valid ONNX protobuf (garbage, truncated)."""


class ModelLoaded(OnnxRuntimeError, RuntimeError):
    """The model was already loaded."""


class NotImplemented(OnnxRuntimeError, NotImplementedError):  # noqa: A001 - onnxruntime's name
    """An op, opset, domain or type that onnxrt does not implement."""


class InvalidGraph(OnnxRuntimeError, ValueError):
    """The graph is malformed: unknown value names, cycles, bad attributes, IR or opset errors."""


class EPFail(OnnxRuntimeError, RuntimeError):
    """An execution provider could not be created or failed, and the policy says to raise."""


class CannotCompile(OnnxRuntimeError, RuntimeError):
    """Raised by a compile-based provider's ``compile``: it cannot compile this fused group
    (at the input shapes it was given, for a ``compile_per_shape`` provider; else at all).
    The session then runs the group's nodes on its host kernels there (remembered, shown
    by the placement report and the provider's stats); with the provider's
    ``error_on_failure`` option, or ``session.disable_cpu_ep_fallback``, the run fails with
    ``EPFail`` instead. The message is the reason the report gives."""


class ModelLoadCanceled(OnnxRuntimeError, RuntimeError):
    """Loading was cancelled."""


class ModelRequiresCompilation(OnnxRuntimeError, RuntimeError):
    """The model needs a compile step first."""


class NotFound(OnnxRuntimeError, LookupError):
    """Something looked up by name was not found."""


class RunCanceled(Fail):
    """The run was cancelled through ``RunOptions.terminate`` (onnxruntime raises FAIL)."""


class InvalidProviderError(InvalidArgument, RuntimeError):
    """An unknown provider name given to ``set_providers`` (onnxruntime raises a plain
    RuntimeError there, so both ``except`` styles work)."""


class ConfigKeyError(InvalidArgument, RuntimeError):
    """A config entry that was never set (onnxruntime raises a plain RuntimeError)."""


class DeviceReset(OnnxRuntimeError, RuntimeError):
    """A device was reset under a running session (onnxruntime's DEVICE_RESET status)."""
