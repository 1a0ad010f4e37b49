"""A fused group as the callable the session runs: one oneDNN program per combination of
input shapes (built on first sight of it), all sharing the group's reordered weights."""

from __future__ import annotations

import threading
import warnings
from typing import Any

import numpy as np

from onnxrt.errors import EPFail
from onnxrt.providers.dnnl.program import Program, WeightCache

__all__ = ["CompiledGroup"]


class CompiledGroup:
    def __init__(self, ep: Any, fused: Any) -> None:
        self.ep = ep
        self.fused = fused
        self.weights = WeightCache()
        self.programs: dict[tuple[tuple[int, ...], ...], Any] = {}
        self.lock = threading.Lock()

    def _program(self, key: tuple[tuple[int, ...], ...]) -> Any:
        prog = self.programs.get(key)
        if prog is not None:
            return prog
        with self.lock:
            prog = self.programs.get(key)
            if prog is None:
                try:
                    prog = Program(self.ep.lib, self.fused, list(key), self.weights)
                except Exception as e:
                    msg = (f"oneDNN could not compile {self.fused.name} "
                           f"({len(self.fused.nodes)} nodes) for input shapes {list(key)}: "
                           f"{type(e).__name__}: {e}")
                    if self.ep.error_on_failure:
                        raise EPFail(msg) from e
                    warnings.warn(f"{msg}; running that group with onnxrt's CPU provider "
                                  f"instead", UserWarning, stacklevel=3)
                    prog = _CpuFallback(self.fused)
                self.ep.count_compilation()
                self.programs[key] = prog
        return prog

    def __call__(self, *args: Any) -> list[np.ndarray]:
        key = tuple(tuple(int(d) for d in np.shape(a)) for a in args)
        prog = self._program(key)
        if self.ep.threads:
            self.ep.lib.omp_set_num_threads(self.ep.threads)
        return prog.run(args)


class _CpuFallback:
    """Runs a group oneDNN could not build with onnxrt's CPU provider."""

    def __init__(self, fused: Any) -> None:
        from onnxrt.session import InferenceSession

        self.sess = InferenceSession(fused.model.SerializeToString(),
                                     providers=["CPUExecutionProvider"])
        self.names = list(fused.inputs)

    def run(self, args: Any) -> list[Any]:
        return self.sess.run(None, dict(zip(self.names, args)))
