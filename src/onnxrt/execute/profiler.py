"""Profiling in onnxruntime's Chrome-trace format.

Session events (``model_loading_uri``, ``session_initialization``, ``model_run``,
``SequentialExecutor::Execute``) and one ``<node>_kernel_time`` event per node run, whose
``args`` carry ``op_name``, ``provider``, ``node_index``, input and output type-shapes and
sizes, as onnxruntime writes them, so tools that read onnxruntime profiles read these.
"""

from __future__ import annotations

import datetime
import json
import os
import threading
import time
from typing import Any

import numpy as np

from onnxrt.ir.dtypes import elem_type_name, onnx_elem_type

__all__ = ["Profiler"]


def _type_shape_of(dt: Any, shape: Any) -> dict[str, list[int]]:
    try:
        name = elem_type_name(onnx_elem_type(np.dtype(dt)))
    except Exception:
        name = str(dt)
    return {name: [int(d) for d in (shape or ())]}


def _nbytes(v: Any) -> int:
    return int(getattr(v, "nbytes", 0) or 0)


class Profiler:
    """Collects events for one session; ``end()`` writes them and returns the path."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.t0 = time.perf_counter_ns()
        self.pid = os.getpid()
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.active = True
        self.main_plan: Any = None
        self._index: dict[int, int] = {}
        self._raw: list[tuple[Any, ...]] = []  # list.append is atomic: safe across threads

    def _us(self, ns: int) -> int:
        return (ns - self.t0) // 1000

    def session_event(self, name: str, start_ns: int, end_ns: int,
                      args: dict[str, Any] | None = None) -> None:
        if not self.active:
            return
        ev = {"cat": "Session", "pid": self.pid, "tid": threading.get_ident(),
              "dur": max(0, (end_ns - start_ns) // 1000), "ts": self._us(start_ns), "ph": "X",
              "name": name, "args": args or {}}
        with self.lock:
            self.events.append(ev)

    def set_plan(self, plan: Any) -> None:
        self.main_plan = plan
        self._index = {id(st): i for i, st in enumerate(plan.steps)}

    def node_event(self, step: Any, args: list[Any], outs: list[Any], t0: int,
                   plan: Any = None) -> None:
        end = time.perf_counter_ns()
        if not self.active:
            return
        # keep the hot path short: only references and shapes now, formatting at the end;
        # the node's own (and implicit) inputs only, not a step's planner-added ones
        # (plan/inplace.py)
        node = step.node
        own = len(node.inputs) + len(node.implicit_inputs)
        ins = [(getattr(a, "dtype", None), getattr(a, "shape", None), _nbytes(a),
                type(a).__name__ if not hasattr(a, "dtype") else "")
               for a in args[:own] if a is not None]
        res = [(getattr(o, "dtype", None), getattr(o, "shape", None), _nbytes(o),
                type(o).__name__ if not hasattr(o, "dtype") else "")
               for o in outs if o is not None]
        rec = (step, t0, end, ins, res, plan is None or plan is self.main_plan,
               getattr(plan, "name", ""), threading.get_ident())
        self._raw.append(rec)

    def _format(self, rec: tuple[Any, ...]) -> dict[str, Any]:
        step, t0, end, ins, res, top, graph, tid = rec
        node = step.node
        const = set(getattr(node, "constant_inputs", {}))
        params = sum(n for i, (_, _, n, _) in enumerate(ins) if i in const)

        def ts(meta: tuple[Any, ...]) -> dict[str, list[int]]:
            dt, shape, _, kind = meta
            if dt is None:
                return {kind: []}
            return _type_shape_of(dt, shape)

        return {"cat": "Node", "pid": self.pid, "tid": tid,
                "dur": max(0, (end - t0) // 1000), "ts": self._us(t0), "ph": "X",
                "name": f"{node.name or node.op_type}_kernel_time",
                "args": {"op_name": node.op_type, "provider": step.provider,
                         "node_index": str(self._index.get(id(step), -1)),
                         "graph": graph, "top_level": top,
                         "input_type_shape": [ts(m) for m in ins],
                         "output_type_shape": [ts(m) for m in res],
                         "activation_size": str(sum(m[2] for m in ins) - params),
                         "parameter_size": str(params),
                         "output_size": str(sum(m[2] for m in res))}}

    def end(self) -> str:
        """Write the trace and stop profiling; the path of the JSON file."""
        self.active = False
        with self.lock:
            self.events.extend(self._format(r) for r in self._raw)
            self._raw = []
        self.events.sort(key=lambda e: e["ts"])
        stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
        path = f"{self.prefix}_{stamp}.json"
        k = 1
        while os.path.exists(path):
            path = f"{self.prefix}_{stamp}_{k}.json"
            k += 1
        with open(path, "w") as f:
            json.dump(self.events, f)
        return path
