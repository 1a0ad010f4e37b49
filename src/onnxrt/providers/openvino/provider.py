"""OpenVINOExecutionProvider: a compile-based provider that hands groups of nodes to
Intel's OpenVINO runtime, with onnxruntime's provider name and options."""

from __future__ import annotations

import threading
from typing import Any, Callable, ClassVar, Sequence

from onnxrt.errors import CannotCompile
from onnxrt.framework.devices import (VENDOR_IDS, DeviceSupport, OrtHardwareDevice,
                                      OrtHardwareDeviceType)
from onnxrt.framework.provider import ExecutionProvider
from onnxrt.framework.grouping import claim_groups
from onnxrt.providers.openvino import runtime
from onnxrt.providers.openvino.options import DEFAULTS, check_against_devices, parse_options

__all__ = ["OpenVINOExecutionProvider"]

# groups made only of these ops move no arithmetic: a trip to OpenVINO would cost more than
# running them here
_TRIVIAL = frozenset({"Identity", "Reshape", "Shape", "Size", "Squeeze", "Unsqueeze",
                      "Flatten", "Constant", "Cast", "CastLike", "Dropout", "Gather",
                      "Concat", "Slice", "ConstantOfShape", "Expand"})


class OpenVINOExecutionProvider(ExecutionProvider):
    """Claims what OpenVINO's ``query_model`` says the device supports, in cycle-free groups;
    each group runs as one OpenVINO compiled model.

    Options (onnxruntime's): ``device_type`` (CPU, GPU, GPU.<n>, NPU, AUTO[:...],
    HETERO:..., MULTI:...), ``precision`` (FP32, FP16, BF16, ACCURACY; default FP32 on CPU,
    FP16 elsewhere), ``num_of_threads``, ``num_streams``, ``cache_dir`` (compiled models and
    query answers kept there, so a second session starts fast), ``enable_dynamic_shapes`` /
    ``disable_dynamic_shapes`` (off: compile once per new input shape), ``load_config`` (JSON
    text or file: ``{"CPU": {"PROPERTY": value}}``).
    """

    name: ClassVar[str] = "OpenVINOExecutionProvider"
    options: ClassVar[dict[str, Any]] = dict(DEFAULTS)
    ep_vendor: ClassVar[str] = "onnxrt"
    ep_vendor_id: ClassVar[int] = VENDOR_IDS["Intel"]   # OpenVINO is made for Intel hardware

    @classmethod
    def supported_devices(cls, devices: Sequence[OrtHardwareDevice]) -> list[DeviceSupport]:
        """The CPU, and the GPUs and NPUs OpenVINO itself lists, by OpenVINO's names."""
        present = runtime.available_devices()
        out = []
        for d in devices:
            name = "CPU" if d.type == OrtHardwareDeviceType.CPU else \
                d.metadata.get("openvino_device", "")
            if name and name in present:
                out.append(DeviceSupport(d, {"device_type": name}))
        return out

    @classmethod
    def options_for_devices(cls, supports: Sequence[DeviceSupport]) -> dict[str, str]:
        """Several devices run as OpenVINO's HETERO device, in the order chosen: each node
        on the first of them that supports it, as a priority list of providers does."""
        names = list(dict.fromkeys(s.options["device_type"] for s in supports))
        return {"device_type": names[0] if len(names) == 1 else "HETERO:" + ",".join(names)}

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.settings = parse_options(self.provider_options, set(options))
        # options as they act, reported as onnxruntime reports them
        self.provider_options["enable_dynamic_shapes"] = self.settings.dynamic
        self.provider_options["disable_dynamic_shapes"] = not self.settings.dynamic
        self.provider_options["cache_dir"] = self.settings.cache_dir
        precisions = set(self.settings.precision.values())
        if not self.provider_options["precision"] and len(precisions) == 1:
            self.provider_options["precision"] = precisions.pop()
        if runtime.import_error():
            raise RuntimeError(f"the openvino package cannot be imported "
                               f"({runtime.import_error()})")
        self.settings = check_against_devices(self.settings)
        # statistics: fused groups compiled, and OpenVINO compilations (one per new input
        # shape when dynamic shapes are off)
        self.compiled_groups = 0
        self.compilations = 0
        self.loaded_contexts = 0    # EPContext nodes loaded instead of compiled
        self._count_lock = threading.Lock()

    @classmethod
    def unavailable_reason(cls) -> str:
        err = runtime.import_error()
        if err:
            return (f"the openvino package cannot be imported ({err}); install it with "
                    f"pip install onnxrt[openvino]")
        if not runtime.available_devices():
            return "OpenVINO finds no device here"
        return ""

    # -- partitioning --------------------------------------------------------------------
    def get_capability(self, graph: Any) -> list[Any]:
        from onnxrt.providers.openvino.query import query_support

        s = self.settings
        verdict = query_support(graph, list(graph), s.device, _query_config(s),
                                s.cache_dir, s.key())
        return claim_groups(graph, verdict, _TRIVIAL, "moves no arithmetic")

    # -- compiling -----------------------------------------------------------------------
    def compile(self, fused: Any) -> Callable[..., Any]:
        from onnxrt.providers.openvino.compiled import build_runner

        model = fused.model
        try:
            fn = build_runner(model, list(fused.inputs), list(fused.outputs), self.settings,
                              self._counted)
        except Exception as e:
            # the session runs the group on its host kernels (and the placement report
            # says so), or fails with EPFail under error_on_failure
            raise CannotCompile(f"OpenVINO failed to compile it for {self.settings.device}: "
                                f"{_short(e)}") from e
        self.compiled_groups += 1
        return fn

    # -- compiled models (EPContext nodes) -----------------------------------------------
    def export_context(self, fused: Any, compiled: Any) -> Any:
        from onnxrt.providers.openvino.context import export_blob

        return export_blob(compiled, self.settings)

    def load_context(self, ctx: Any, fused: Any) -> Callable[..., Any]:
        from onnxrt.providers.openvino.compiled import _Runner
        from onnxrt.providers.openvino.context import import_blob

        fn = import_blob(ctx, fused, self.settings, _Runner)
        with self._count_lock:
            self.loaded_contexts += 1
        return fn

    @classmethod
    def compiled_model_compatibility(cls, info: str, devices: Sequence[OrtHardwareDevice]
                                     ) -> int:
        from onnxrt.providers.openvino.context import judge_compatibility

        names = [s.options["device_type"] for s in cls.supported_devices(devices)]
        return judge_compatibility(info, names)

    def _counted(self) -> None:
        with self._count_lock:
            self.compilations += 1

    def allocation_stats(self) -> dict[str, int]:
        out = super().allocation_stats()
        out.update(compiled_groups=self.compiled_groups, compilations=self.compilations,
                   loaded_contexts=self.loaded_contexts)
        return out


def _query_config(s: Any) -> dict[str, Any]:
    cfg = s.compile_config()
    cfg.pop("CACHE_DIR", None)
    return cfg


def _short(e: Exception) -> str:
    from onnxrt.providers.openvino.query import _first_line

    return _first_line(e)
