"""TVMExecutionProvider: a compile-based provider that hands groups of nodes to Apache TVM
(Relax ONNX frontend, LLVM for the host CPU), with onnxruntime's TVM provider name and the
options of it that make sense for Relax on a CPU."""

from __future__ import annotations

import threading
from typing import Any, Callable, ClassVar

from onnxrt.errors import CannotCompile
from onnxrt.framework.grouping import claim_groups
from onnxrt.framework.provider import ExecutionProvider
from onnxrt.providers.tvm import runtime
from onnxrt.providers.tvm.options import DEFAULTS, parse_options

__all__ = ["TVMExecutionProvider"]


class TVMExecutionProvider(ExecutionProvider):
    """Claims the nodes TVM's Relax ONNX frontend converts, in cycle-free groups; each group
    is compiled once per combination of input shapes (static shapes: TVM's best code, and
    what its frontend converts most reliably) and kept as a shared library in ``so_folder``
    (default ``~/.cache/onnxrt/tvm``), so a second session loads it without compiling.

    Options (onnxruntime's TVM provider names): ``target`` (``llvm``, default: this CPU;
    ``llvm -mcpu=... -mattr=...``; or a JSON target config), ``target_host`` (empty: on the
    CPU the target is its own host), ``opt_level`` (0-3, default 3), ``executor`` (``vm``
    only), ``tuning_type`` (``MetaSchedule`` only) with ``tuning_file_path`` (a MetaSchedule
    database folder whose schedules are applied; nothing is tuned at session creation),
    ``so_folder`` (the compiled-module cache).

    Untuned TVM code is slow on CPUs (tens of times slower than onnxruntime here): use it
    with a tuning database, or to check TVM's numbers.
    """

    name: ClassVar[str] = "TVMExecutionProvider"
    options: ClassVar[dict[str, Any]] = dict(DEFAULTS)
    compile_per_shape: ClassVar[bool] = True
    ep_vendor: ClassVar[str] = "onnxrt"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        why = self.unavailable_reason() or runtime.load_error()
        if why:
            raise RuntimeError(f"TVMExecutionProvider cannot run here: {why}")
        self.settings = parse_options(self.provider_options, runtime.host_cpu())
        self.provider_options["so_folder"] = self.settings.cache_dir
        self._counts: dict[str, float] = {"compiled_groups": 0, "compilations": 0,
                                          "cache_loads": 0}
        self.seconds: dict[str, float] = {"compilations": 0.0, "cache_loads": 0.0}
        self._lock = threading.Lock()

    @classmethod
    def unavailable_reason(cls) -> str:
        err = runtime.import_error()
        if err:
            return (f"apache-tvm cannot be imported ({err}); install it with "
                    f"pip install onnxrt[tvm]")
        return ""

    # -- partitioning --------------------------------------------------------------------
    def get_capability(self, graph: Any) -> list[Any]:
        from onnxrt.providers.tvm.support import TRIVIAL, decline_reason

        verdict = {n.id: decline_reason(n, graph) for n in graph}
        return claim_groups(graph, verdict, TRIVIAL, "moves no arithmetic")

    # -- compiling -----------------------------------------------------------------------
    def compile(self, fused: Any) -> Callable[..., Any]:
        from onnxrt.providers.tvm.compiled import build_runner

        try:
            fn = build_runner(_static_inputs(fused), self.settings, self._count)
        except Exception as e:
            # the framework runs the group on the host kernels at these shapes, or raises
            # EPFail with error_on_failure (framework/fused.py PerShapeCompile)
            raise CannotCompile(f"TVM failed for {self.settings.target_key()}: "
                                f"{_short(e)}") from e
        with self._lock:
            self._counts["compiled_groups"] += 1
        return fn

    def _count(self, what: str, seconds: float) -> None:
        with self._lock:
            self._counts[what] += 1
            self.seconds[what] += seconds

    def allocation_stats(self) -> dict[str, int]:
        out = super().allocation_stats()
        out.update({k: int(v) for k, v in self._counts.items()})
        return out


def _static_inputs(fused: Any) -> Any:
    """The group's model with every input's shape as called. FusedSubgraph.build_model
    leaves a 0-d input without a shape (unknown rank), which TVM cannot compile."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(fused.model)
    for vi, shape in zip(m.graph.input, fused.input_shapes):
        if shape is None or not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        tt.ClearField("shape")
        tt.shape.SetInParent()
        for d in shape:
            tt.shape.dim.add().dim_value = int(d)
    return m


def _short(e: Exception) -> str:
    from onnxrt.providers.tvm.support import _first_line

    return _first_line(e)
