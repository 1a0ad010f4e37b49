"""The torch-backed execution providers: one kernel registry, run on the torch device each
provider names. ``TorchExecutionProvider`` runs on torch's CPU device (so the kernels are
exercised without a GPU) or any device torch knows; ``CUDAExecutionProvider`` and
``ROCMExecutionProvider`` take onnxruntime's option names."""

from __future__ import annotations

import importlib.util
from typing import Any, ClassVar, Sequence

from onnxrt.errors import InvalidArgument
from onnxrt.framework.device import Device
from onnxrt.framework.devices import (VENDOR_IDS, DeviceSupport, OrtHardwareDevice,
                                      OrtHardwareDeviceType, torch_gpu_index)
from onnxrt.framework.provider import ExecutionProvider
from onnxrt.providers.torch.registry import load_kernels

__all__ = ["TorchProviderBase", "TorchExecutionProvider", "CUDAExecutionProvider",
           "ROCMExecutionProvider", "torch_import_error"]

_SIZE_MAX = 2**64 - 1   # onnxruntime's "no limit" for gpu_mem_limit


def torch_import_error() -> str:
    """Why torch cannot be imported ("" when it can)."""
    if importlib.util.find_spec("torch") is None:
        return "PyTorch is not installed (pip install onnxrt[torch])"
    try:
        import torch  # noqa: F401
    except Exception as e:  # a broken install: say what broke
        return f"PyTorch failed to import ({type(e).__name__}: {e})"
    return ""


class TorchProviderBase(ExecutionProvider):
    """Kernels written once against torch tensors, on ``self.torch_device``. Subclasses set
    the device from their options and may override ``_apply_settings`` (per-run flags)."""

    name: ClassVar[str] = ""
    ep_vendor: ClassVar[str] = "onnxrt"
    device: Device = Device("torch", 0)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        err = torch_import_error()
        if err:
            raise RuntimeError(err)
        import torch

        self._torch = torch
        self.kernels = load_kernels()  # type: ignore[misc]
        self.channels_last = False
        self.pin_memory = False

    @property
    def torch_device(self) -> Any:
        from onnxrt.providers.torch.convert import torch_device

        return torch_device(self.device)

    def data_transfer(self) -> Any:
        from onnxrt.providers.torch.convert import TorchTransfer

        return TorchTransfer(channels_last=self.channels_last, pin_memory=self.pin_memory)

    def get_capability(self, graph: Any) -> list[Any]:
        from onnxrt.framework.capability import Capability
        from onnxrt.providers.torch.checks import decline_reason

        caps = super().get_capability(graph)
        if not caps:
            return caps
        keep = []
        for nid in caps[0].nodes:
            node = graph.node(nid)
            why = decline_reason(node, graph)
            if why:
                graph.decline(node, why)
            else:
                keep.append(nid)
        return [Capability(keep)] if keep else []


class TorchExecutionProvider(TorchProviderBase):
    """The torch kernels on any torch device: ``device`` is ``cpu`` (default: torch's CPU
    device, values are torch CPU tensors), ``cuda``, ``cuda:N``. ``prefer_nhwc``: rank-4/5
    values live channels-last; ``pin_memory``: host-to-GPU copies of 1 MiB and more go
    through pinned memory (GPU devices only)."""

    name: ClassVar[str] = "TorchExecutionProvider"
    options: ClassVar[dict[str, Any]] = {"device": "cpu", "prefer_nhwc": "0",
                                         "pin_memory": "0"}

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        dev = str(self.provider_options["device"]).strip().lower()
        torch = self._torch
        try:
            td = torch.device(dev)
        except Exception as e:
            raise InvalidArgument(f"{self.name}: option device={dev!r} is not a torch device "
                                  f"({e})") from None
        if td.type == "cpu":
            self.device = Device("torch", 0)
        elif td.type == "cuda":
            if not torch.cuda.is_available():
                raise RuntimeError(f"option device={dev!r}: torch finds no CUDA device here")
            self.device = Device("cuda", td.index or 0)
        else:
            raise InvalidArgument(f"{self.name}: option device={dev!r}: only cpu and cuda[:N] "
                                  f"are supported")
        self.channels_last = _bool_opt(self.name, self.provider_options, "prefer_nhwc")
        self.pin_memory = _bool_opt(self.name, self.provider_options, "pin_memory")
        if self.pin_memory and self.device.type == "torch":
            raise InvalidArgument(f"{self.name}: option pin_memory=1 is for copies to a GPU; "
                                  f"this provider's device is torch's CPU")

    @classmethod
    def unavailable_reason(cls) -> str:
        return torch_import_error()

    @classmethod
    def supported_devices(cls, devices: Sequence[OrtHardwareDevice]) -> list[DeviceSupport]:
        """The CPU (torch's CPU tensors) and every GPU torch drives."""
        out = []
        for d in devices:
            i = torch_gpu_index(d)
            if d.type == OrtHardwareDeviceType.CPU:
                out.append(DeviceSupport(d, {"device": "cpu"}, Device("torch", 0)))
            elif i is not None:
                out.append(DeviceSupport(d, {"device": f"cuda:{i}"}, Device("cuda", i)))
        return out


# onnxruntime's CUDA option names and defaults (strings, as get_provider_options reports them)
_CUDA_OPTIONS: dict[str, Any] = {
    "device_id": "0",
    "gpu_mem_limit": str(_SIZE_MAX),
    "arena_extend_strategy": "kNextPowerOfTwo",
    "cudnn_conv_algo_search": "EXHAUSTIVE",
    "do_copy_in_default_stream": "1",
    "cudnn_conv_use_max_workspace": "1",
    "use_tf32": "1",
    "enable_cuda_graph": "0",
    "prefer_nhwc": "0",
}


class CUDAExecutionProvider(TorchProviderBase):
    """NVIDIA GPUs through PyTorch (cuDNN behind convolutions, cuBLAS behind matrix
    products), with onnxruntime's option names. Each option either acts or is refused:

    - ``device_id``: the GPU (``cuda:<device_id>``).
    - ``gpu_mem_limit``: bytes; caps torch's caching allocator for this process
      (``torch.cuda.set_per_process_memory_fraction``).
    - ``arena_extend_strategy``: only ``kNextPowerOfTwo``; torch's caching allocator decides
      how it grows (set ``PYTORCH_CUDA_ALLOC_CONF`` instead), so ``kSameAsRequested`` is refused.
    - ``cudnn_conv_algo_search``: ``EXHAUSTIVE`` -> ``torch.backends.cudnn.benchmark``;
      ``HEURISTIC`` -> cuDNN's heuristics; ``DEFAULT`` -> deterministic algorithms.
    - ``do_copy_in_default_stream``: only ``1``: copies run on torch's current stream.
    - ``cudnn_conv_use_max_workspace``: only ``1``: torch lets cuDNN take the workspace it asks.
    - ``use_tf32``: TF32 for matmul and convolutions (``allow_tf32`` flags), set at each run.
    - ``enable_cuda_graph``: only ``0``: CUDA graph capture is not implemented.
    - ``prefer_nhwc``: values of rank 4/5 live channels-last on the device.
    """

    name: ClassVar[str] = "CUDAExecutionProvider"
    device: Device = Device("cuda", 0)   # per instance: cuda:<device_id>
    options: ClassVar[dict[str, Any]] = dict(_CUDA_OPTIONS)
    hip: ClassVar[bool] = False
    ep_vendor_id: ClassVar[int] = VENDOR_IDS["NVIDIA"]

    @classmethod
    def supported_devices(cls, devices: Sequence[OrtHardwareDevice]) -> list[DeviceSupport]:
        """The GPUs torch drives as ``cuda:N``: NVIDIA's (CUDA builds) or AMD's (ROCm)."""
        out = []
        for d in devices:
            i = torch_gpu_index(d, "AMD" if cls.hip else "NVIDIA")
            if i is not None:
                out.append(DeviceSupport(d, {"device_id": str(i)}, Device("cuda", i)))
        return out

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        o = self.provider_options
        self.device = Device("cuda", _int_opt(self.name, o, "device_id"))
        self.channels_last = _bool_opt(self.name, o, "prefer_nhwc")
        self.tf32 = _bool_opt(self.name, o, "use_tf32") if "use_tf32" in o else False
        _refuse(self.name, o, "arena_extend_strategy", ("kNextPowerOfTwo", "0"),
                "torch's caching allocator decides how its pool grows; set "
                "PYTORCH_CUDA_ALLOC_CONF (e.g. expandable_segments:True) instead")
        _refuse(self.name, o, "do_copy_in_default_stream", ("1", "true", "True"),
                "copies always run on torch's current CUDA stream")
        _refuse(self.name, o, "cudnn_conv_use_max_workspace", ("1", "true", "True"),
                "torch always lets cuDNN take the workspace it asks for")
        _refuse(self.name, o, "enable_cuda_graph", ("0", "false", "False"),
                "CUDA graph capture is not implemented by the torch-backed provider")
        _refuse(self.name, o, "enable_hip_graph", ("0", "false", "False"),
                "HIP graph capture is not implemented by the torch-backed provider")
        algo = str(o.get("cudnn_conv_algo_search", o.get("miopen_conv_exhaustive_search",
                                                          "EXHAUSTIVE")))
        algo = {"0": "HEURISTIC", "1": "EXHAUSTIVE"}.get(algo, algo).upper()
        if algo not in ("EXHAUSTIVE", "HEURISTIC", "DEFAULT"):
            raise InvalidArgument(f"{self.name}: cudnn_conv_algo_search must be EXHAUSTIVE, "
                                  f"HEURISTIC or DEFAULT, not {algo!r}")
        self.algo = algo
        _check_device(self)  # after the options, so a bad option is named first
        limit = _int_opt(self.name, o, "gpu_mem_limit")
        if limit < _SIZE_MAX:
            torch = self._torch
            total = torch.cuda.get_device_properties(self.device.id).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total), self.device.id)

    @classmethod
    def unavailable_reason(cls) -> str:
        err = torch_import_error()
        if err:
            return err
        import torch

        if cls.hip and not torch.version.hip:
            return f"this PyTorch build ({torch.__version__}) is not a ROCm build"
        if not cls.hip and torch.version.hip:
            return f"this PyTorch build ({torch.__version__}) is a ROCm build, not CUDA"
        if not cls.hip and not torch.version.cuda:
            return f"this PyTorch build ({torch.__version__}) has no CUDA support"
        if not torch.cuda.is_available():
            return "torch.cuda.is_available() is False: no GPU or driver found"
        return ""

    def on_run_start(self, run_options: Any) -> None:
        # the flags are process-wide in torch: set them for this session's runs
        torch = self._torch
        torch.backends.cudnn.benchmark = self.algo == "EXHAUSTIVE"
        torch.backends.cudnn.deterministic = self.algo == "DEFAULT"
        conv = getattr(torch.backends.cudnn, "conv", None)
        if conv is not None and hasattr(conv, "fp32_precision"):  # torch >= 2.9's switches
            prec = "tf32" if self.tf32 else "ieee"
            torch.backends.cuda.matmul.fp32_precision = prec
            conv.fp32_precision = prec
        else:
            torch.backends.cuda.matmul.allow_tf32 = self.tf32
            torch.backends.cudnn.allow_tf32 = self.tf32

    def on_run_end(self, run_options: Any) -> None:
        # results leave through host copies, which synchronize; an IOBinding user reading a
        # device output right after the run expects finished work too
        self._torch.cuda.synchronize(self.device.id)


class ROCMExecutionProvider(CUDAExecutionProvider):
    """AMD GPUs through a ROCm build of PyTorch (which exposes them as ``cuda`` devices;
    MIOpen behind convolutions). onnxruntime's ROCm option names; see the CUDA provider for
    what each does. ``miopen_conv_exhaustive_search`` = cuDNN's ``EXHAUSTIVE`` search
    (``torch.backends.cudnn.benchmark``, which drives MIOpen's find mode)."""

    name: ClassVar[str] = "ROCMExecutionProvider"
    options: ClassVar[dict[str, Any]] = {
        "device_id": "0", "gpu_mem_limit": str(_SIZE_MAX),
        "arena_extend_strategy": "kNextPowerOfTwo", "miopen_conv_exhaustive_search": "0",
        "do_copy_in_default_stream": "1", "enable_hip_graph": "0", "prefer_nhwc": "0"}
    hip: ClassVar[bool] = True
    ep_vendor_id: ClassVar[int] = 0x1002   # AMD's graphics vendor id


def _check_device(ep: CUDAExecutionProvider) -> None:
    n = ep._torch.cuda.device_count()
    if ep.device.id >= n or ep.device.id < 0:
        raise InvalidArgument(f"{ep.name}: device_id {ep.device.id} is out of range: torch "
                              f"sees {n} GPU(s)")


def _int_opt(name: str, o: dict[str, Any], key: str) -> int:
    try:
        return int(str(o[key]).strip())
    except ValueError:
        raise InvalidArgument(f"{name}: option {key}={o[key]!r} is not an integer") from None


def _bool_opt(name: str, o: dict[str, Any], key: str) -> bool:
    v = str(o[key]).strip().lower()
    if v not in ("0", "1", "true", "false"):
        raise InvalidArgument(f"{name}: option {key}={o[key]!r} must be 0 or 1")
    return v in ("1", "true")


def _refuse(name: str, o: dict[str, Any], key: str, ok: tuple[str, ...], why: str) -> None:
    if key in o and str(o[key]).strip() not in ok:
        raise InvalidArgument(f"{name}: option {key}={o[key]!r} is not supported: {why}")
