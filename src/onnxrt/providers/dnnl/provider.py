"""DnnlExecutionProvider: a compile-based provider that runs groups of float32 CNN and
matrix ops as chains of oneDNN primitives, with onnxruntime's provider name."""

from __future__ import annotations

import threading
from typing import Any, Callable, ClassVar, Sequence

from onnxrt.errors import InvalidArgument
from onnxrt.framework.devices import DeviceSupport, OrtHardwareDevice, OrtHardwareDeviceType
from onnxrt.framework.grouping import claim_groups
from onnxrt.framework.provider import ExecutionProvider, _truthy
from onnxrt.providers.dnnl import library
from onnxrt.providers.dnnl.support import LAYOUT_ONLY, why_not

__all__ = ["DnnlExecutionProvider"]


class DnnlExecutionProvider(ExecutionProvider):
    """Claims connected groups of the float32 ops it maps to oneDNN primitives (``support``);
    each group is compiled per input shape into a primitive chain (``program``) whose
    activations stay in oneDNN's blocked layout between nodes.

    Options: ``use_arena`` (onnxruntime's; 1, the default: a group's intermediate buffers
    are allocated once per input shape and reused by every run; 0 is refused, there is no
    per-run allocation mode), ``num_of_threads`` (OpenMP threads for oneDNN's primitives,
    set in the calling thread before each run; 0: OpenMP's default).
    """

    name: ClassVar[str] = "DnnlExecutionProvider"
    options: ClassVar[dict[str, Any]] = {"use_arena": True, "num_of_threads": 0}
    ep_vendor: ClassVar[str] = "onnxrt"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        if not _truthy(self.provider_options["use_arena"]):
            raise InvalidArgument("DnnlExecutionProvider: use_arena=0 is not supported: "
                                  "intermediate buffers are always allocated once per "
                                  "input shape")
        self.provider_options["use_arena"] = True
        try:
            threads = int(self.provider_options["num_of_threads"])
        except (TypeError, ValueError):
            threads = -1
        if threads < 0:
            raise InvalidArgument(f"DnnlExecutionProvider: num_of_threads must be an integer "
                                  f">= 0, got {self.provider_options['num_of_threads']!r}")
        self.provider_options["num_of_threads"] = threads
        why = self.unavailable_reason()
        if why:
            raise RuntimeError(why)
        self.lib = library.load()
        if threads and self.lib.omp_set_num_threads is None:
            raise InvalidArgument(f"DnnlExecutionProvider: num_of_threads needs oneDNN's "
                                  f"OpenMP build; {self.lib.path} uses "
                                  f"{self.lib.cpu_runtime}")
        self.threads = threads
        self.compiled_groups = 0
        self.compilations = 0
        self._count_lock = threading.Lock()

    @classmethod
    def unavailable_reason(cls) -> str:
        err = library.import_error()
        if err:
            return (f"oneDNN cannot be loaded ({err}); install it with "
                    f"pip install onnxrt[dnnl]")
        return ""

    @classmethod
    def supported_devices(cls, devices: Sequence[OrtHardwareDevice]) -> list[DeviceSupport]:
        """The CPU: the libdnnl loaded here runs on its CPU engine only (the SYCL build's
        GPU engine is not used)."""
        return [DeviceSupport(d) for d in devices if d.type == OrtHardwareDeviceType.CPU]

    # -- partitioning --------------------------------------------------------------------
    def get_capability(self, graph: Any) -> list[Any]:
        verdict = {n.id: why_not(n, graph) for n in graph}
        return claim_groups(graph, verdict, LAYOUT_ONLY, "only moves data")

    # -- compiling -----------------------------------------------------------------------
    def compile(self, fused: Any) -> Callable[..., Any]:
        from onnxrt.providers.dnnl.compiled import CompiledGroup

        self.compiled_groups += 1
        return CompiledGroup(self, fused)

    def count_compilation(self) -> None:
        with self._count_lock:
            self.compilations += 1

    def allocation_stats(self) -> dict[str, int]:
        out = super().allocation_stats()
        out.update(compiled_groups=self.compiled_groups, compilations=self.compilations)
        return out
