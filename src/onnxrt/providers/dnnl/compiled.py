"""A fused group as the callable the session runs: one oneDNN program per combination of
input shapes (built on first sight of it), all sharing the group's reordered weights."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import onnx

from onnxrt.errors import CannotCompile
from onnxrt.framework.fused import host_run_for, record_host_fallback
from onnxrt.providers.dnnl.program import Program, WeightCache

__all__ = ["CompiledGroup"]


class CompiledGroup:
    def __init__(self, ep: Any, fused: Any) -> None:
        self.ep = ep
        self.fused = fused
        self.weights = WeightCache()
        self.programs: dict[tuple[tuple[int, ...], ...], Any] = {}
        self.fallbacks: list[Any] = []      # HostFallback records: the placement report's
        self.lock = threading.Lock()
        # integer inputs (a Reshape's target computed by the CPU provider) are read when a
        # program is built: their values are part of a program's key
        self.int_inputs = [i for i, name in enumerate(fused.inputs) if _is_int(fused, name)]

    def _program(self, key: Any, shapes: tuple[tuple[int, ...], ...],
                 args: tuple[Any, ...]) -> Any:
        prog = self.programs.get(key)
        if prog is not None:
            return prog
        with self.lock:
            prog = self.programs.get(key)
            if prog is None:
                values = {self.fused.inputs[i]: np.array(args[i]) for i in self.int_inputs}
                try:
                    prog = Program(self.ep.lib, self.fused, list(shapes), self.weights,
                                   values)
                except Exception as e:
                    # on the session's host kernels at these shapes (the placement
                    # report and the stats say so), or EPFail under error_on_failure
                    err = CannotCompile(f"oneDNN: {type(e).__name__}: {e}")
                    run = host_run_for(self.ep, self.fused, getattr(self.fused, "host", None),
                                       shapes, err)
                    self.fallbacks.append(record_host_fallback(self.ep, self.fused, run,
                                                               shapes, err))
                    prog = _OnHost(run)
                self.ep.count_compilation()
                self.programs[key] = prog
        return prog

    def native_shapes(self) -> int:
        """How many input-shape combinations so far run as oneDNN programs (the placement
        answers list a group that has none under the host provider that runs it)."""
        return len(self.programs) - len(self.fallbacks)

    def __call__(self, *args: Any) -> list[np.ndarray]:
        shapes = tuple(tuple(int(d) for d in np.shape(a)) for a in args)
        key: Any = shapes
        if self.int_inputs:
            key = (shapes, tuple(tuple(np.asarray(args[i]).reshape(-1).tolist())
                                 for i in self.int_inputs))
        prog = self._program(key, shapes, args)
        if self.ep.threads:
            self.ep.lib.omp_set_num_threads(self.ep.threads)
        return prog.run(args)


def _is_int(fused: Any, name: str) -> bool:
    tp = fused._types.get(name)
    return tp is not None and tp.HasField("tensor_type") and \
        tp.tensor_type.elem_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32)


class _OnHost:
    """A group oneDNN could not build at some shapes, run on the session's host kernels."""

    def __init__(self, run: Any) -> None:
        self.host_run = run

    def run(self, args: Any) -> list[Any]:
        return self.host_run(*args)
