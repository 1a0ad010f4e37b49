"""TensorrtExecutionProvider: a compile-based provider that hands the subgraphs TensorRT's
ONNX parser accepts to TensorRT, with onnxruntime's provider name and options."""

from __future__ import annotations

import threading
from typing import Any, Callable, ClassVar, Sequence

from onnxrt.errors import InvalidArgument
from onnxrt.framework.device import Device
from onnxrt.framework.devices import (VENDOR_IDS, DeviceSupport, OrtHardwareDevice,
                                      torch_gpu_index)
from onnxrt.framework.provider import ExecutionProvider
from onnxrt.framework.transfer import DataTransfer
from onnxrt.providers.tensorrt.backend import Backend
from onnxrt.providers.tensorrt.options import DEFAULTS, parse_options

__all__ = ["TensorrtExecutionProvider"]


class TensorrtExecutionProvider(ExecutionProvider):
    """Claims what TensorRT's ONNX parser supports, in cycle-free groups re-checked by the
    parser; each group becomes one TensorRT engine on ``cuda:<device_id>``.

    Options (onnxruntime's names): ``device_id``, ``trt_max_workspace_size`` (bytes, 0 =
    TensorRT's default), ``trt_fp16_enable``, ``trt_int8_enable`` with
    ``trt_int8_calibration_table_name`` / ``trt_int8_use_native_calibration_table``,
    ``trt_engine_cache_enable`` / ``trt_engine_cache_path``, ``trt_timing_cache_enable`` /
    ``trt_timing_cache_path``, ``trt_builder_optimization_level`` (0-5),
    ``trt_max_partition_iterations``, ``trt_min_subgraph_size``, ``trt_dla_enable`` /
    ``trt_dla_core``, ``trt_profile_min_shapes`` / ``trt_profile_opt_shapes`` /
    ``trt_profile_max_shapes`` (``name:1x3x224x224,...``), ``trt_dump_subgraphs``,
    ``trt_force_sequential_engine_build``, ``trt_detailed_build_log``.

    ``backend`` (not an option: a keyword for tests and tools) replaces TensorRT itself.
    """

    name: ClassVar[str] = "TensorrtExecutionProvider"
    device: Device = Device("cuda", 0)
    options: ClassVar[dict[str, Any]] = dict(DEFAULTS)
    # TensorRT does its own fusions and its parser knows only standard ONNX ops: graph
    # passes beyond basic (Conv+activation -> com.microsoft FusedConv...) would hide nodes
    # from it. onnxruntime likewise fuses only the nodes its own kernels run. Not read by
    # the session yet (see the issue note); sessions that use TensorRT should set
    # graph_optimization_level to ORT_ENABLE_BASIC until it is.
    max_graph_optimization_level: ClassVar[int] = 1
    ep_vendor: ClassVar[str] = "onnxrt"
    ep_vendor_id: ClassVar[int] = VENDOR_IDS["NVIDIA"]

    @classmethod
    def supported_devices(cls, devices: Sequence[OrtHardwareDevice]) -> list[DeviceSupport]:
        """The NVIDIA GPUs torch drives (TensorRT's engines run on torch's CUDA devices)."""
        out = []
        for d in devices:
            i = torch_gpu_index(d, "NVIDIA")
            if i is not None:
                out.append(DeviceSupport(d, {"device_id": str(i)}, Device("cuda", i)))
        return out

    def __init__(self, backend: Backend | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.settings = parse_options(self.provider_options)
        s = self.settings
        self.device = Device("cuda", s.device_id)
        self._injected_backend = backend is not None
        if backend is None:
            why = self.unavailable_reason()
            if why:
                raise RuntimeError(why)
            from onnxrt.providers.tensorrt.runtime import TensorRTBackend

            backend = TensorRTBackend()
        self.backend = backend
        n = backend.device_count()
        if s.device_id >= n:
            raise InvalidArgument(f"TensorrtExecutionProvider: device_id {s.device_id} does not "
                                  f"exist; this machine has {n} CUDA device(s)")
        self.gpu = backend.gpu(s.device_id)
        self.trt_version = backend.version()
        if s.dla:
            if self.gpu.dla_cores == 0:
                raise InvalidArgument(f"TensorrtExecutionProvider: trt_dla_enable=1 but "
                                      f"{self.gpu.name} has no DLA cores")
            if s.dla_core >= self.gpu.dla_cores:
                raise InvalidArgument(f"TensorrtExecutionProvider: trt_dla_core {s.dla_core} "
                                      f"does not exist; {self.gpu.name} has "
                                      f"{self.gpu.dla_cores} DLA core(s)")
        # loaded_contexts: EPContext nodes whose engine was deserialized instead of built
        self._counts = {"engines_built": 0, "engine_cache_hits": 0, "loaded_contexts": 0}
        self._count_lock = threading.Lock()
        self.value_types: dict[str, Any] = {}

    @classmethod
    def unavailable_reason(cls) -> str:
        from onnxrt.providers.tensorrt.runtime import import_error

        return import_error()

    def instance_unavailable_reason(self) -> str:
        # an object built on an injected backend (tests, tools) runs without TensorRT
        return "" if self._injected_backend else super().instance_unavailable_reason()

    # -- partitioning --------------------------------------------------------------------
    def get_capability(self, graph: Any) -> list[Any]:
        from onnxrt.providers.tensorrt.partition import claim

        if graph.name == "main" and self.settings.profiles:
            unknown = sorted(self.settings.profile_inputs() - set(graph.inputs))
            if unknown:
                raise InvalidArgument(
                    f"trt_profile_*_shapes name {', '.join(map(repr, unknown))}, which "
                    f"{'is' if len(unknown) == 1 else 'are'} not an input of the model "
                    f"(inputs: {', '.join(graph.inputs)})")
        # the planner hands compile() only declared types; keep the inferred ones the view
        # has, so engine inputs between groups are typed and shaped
        with self._count_lock:
            for name, vi in graph.value_info.items():
                if vi.elem_type:
                    self.value_types.setdefault(name, vi)
        s = self.settings
        return claim(graph, self.backend.supported_subgraphs,
                     max_iterations=s.max_partition_iterations, min_size=s.min_subgraph_size)

    def compile(self, fused: Any) -> Callable[..., Any]:
        from onnxrt.providers.tensorrt.engine import CompiledSubgraph

        return CompiledSubgraph(self, fused)

    # -- compiled models (EPContext nodes; context.py) -------------------------------------
    def export_context(self, fused: Any, compiled: Any) -> Any:
        from onnxrt.providers.tensorrt.context import export_blob

        return export_blob(self, compiled)

    def load_context(self, ctx: Any, fused: Any) -> Callable[..., Any]:
        from onnxrt.providers.tensorrt.context import import_blob

        fn = import_blob(ctx, fused, self)
        self.count("loaded_contexts")
        return fn

    @classmethod
    def compiled_model_compatibility(cls, info: str, devices: Sequence[OrtHardwareDevice]
                                     ) -> int:
        from onnxrt.providers.tensorrt.context import judge_compatibility

        if cls.unavailable_reason():
            return 3        # EP_UNSUPPORTED: no TensorRT here to load the engines
        from onnxrt.providers.tensorrt.runtime import TensorRTBackend

        backend = TensorRTBackend()
        gpus = [backend.gpu(int(s.options["device_id"])) for s in cls.supported_devices(devices)]
        return judge_compatibility(info, backend.version(), gpus)

    # -- devices and statistics ------------------------------------------------------------
    def data_transfer(self) -> DataTransfer | None:
        return self.backend.data_transfer(self.device.id)

    def count(self, what: str) -> None:
        with self._count_lock:
            self._counts[what] = self._counts.get(what, 0) + 1

    def allocation_stats(self) -> dict[str, int]:
        out = super().allocation_stats()
        out.update(self._counts)
        return out
