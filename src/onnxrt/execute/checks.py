"""Debug-mode contract checks on kernel outputs (session config ``session.debug_checks=1``
or the environment variable ``ONNXRT_DEBUG=1``): every output a kernel returns is a value
of the right kind and, where the graph declares it, of the declared element type."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.errors import Fail
from onnxrt.ir.dtypes import elem_type_name, np_dtype, onnx_elem_type

__all__ = ["OutputChecker"]


class OutputChecker:
    """A node-event hook that raises Fail naming the node when a kernel breaks the contract."""

    def __init__(self, inner: Any = None) -> None:
        self.inner = inner

    def node_event(self, step: Any, args: list[Any], outs: list[Any], t0: int,
                   plan: Any = None) -> None:
        node = step.node
        for i, (name, v) in enumerate(zip(node.outputs, outs)):
            if not name:
                continue
            where = (f"kernel of node {node.name!r} ({node.op_type}-{node.since_version}, "
                     f"{step.provider}) output {i} {name!r}")
            if v is None:
                tp = node.output_types[i] if i < len(node.output_types) else None
                if tp is not None and tp.WhichOneof("value") != "optional_type":
                    raise Fail(f"{where}: the kernel produced no value")
                continue
            if not isinstance(v, (np.ndarray, np.generic, list, dict)):
                raise Fail(f"{where}: a {type(v).__name__} is not an ONNX value")
            tp = node.output_types[i] if i < len(node.output_types) else None
            if tp is None or not tp.HasField("tensor_type") or not tp.tensor_type.elem_type:
                continue
            if not isinstance(v, (np.ndarray, np.generic)):
                raise Fail(f"{where}: expected a tensor, got a {type(v).__name__}")
            want = np_dtype(tp.tensor_type.elem_type)
            if np.dtype(v.dtype) != want:
                raise Fail(f"{where}: dtype {_name(v.dtype)}, the graph declares "
                           f"{elem_type_name(tp.tensor_type.elem_type)}")
        if self.inner is not None:
            self.inner.node_event(step, args, outs, t0, plan)


def _name(dt: Any) -> str:
    try:
        return elem_type_name(onnx_elem_type(np.dtype(dt)))
    except Exception:
        return str(dt)
