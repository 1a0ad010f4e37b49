"""Helpers shared by the control-flow kernels."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from onnxrt.framework.kernel import NodeInfo
from onnxrt.ir.dtypes import np_dtype

__all__ = ["outer_of", "empty_stacked", "scalar_bool", "scalar_int", "check_io"]


def outer_of(node: NodeInfo, values: tuple[Any, ...]) -> dict[str, Any]:
    """Map the implicit (outer-scope) inputs, which follow the node's own inputs, by name."""
    return dict(zip(node.implicit_inputs, values))


def check_io(node: NodeInfo, runner: Any, n_in: int | None, n_out_min: int,
             what: str) -> None:
    """Fail at session creation when a body's arity cannot match the node."""
    got_in = len(runner.input_names)
    if n_in is not None and got_in != n_in:
        raise ValueError(f"{node.op_type} {what} has {got_in} inputs; the node implies {n_in}")
    if len(runner.output_names) < n_out_min:
        raise ValueError(f"{node.op_type} {what} has {len(runner.output_names)} outputs; the "
                         f"node needs at least {n_out_min}")


def empty_stacked(tp: onnx.TypeProto | None, axis: int = 0) -> Any:
    """The result of stacking zero per-iteration values whose type is ``tp``.

    The shape comes from the body's declared output type, with a 0 inserted at ``axis``;
    dimensions the body leaves unknown become 0 too (nothing was produced along them).
    """
    if tp is not None and tp.WhichOneof("value") == "sequence_type":
        return []
    dtype = np.dtype(np.float32)
    dims: list[int] = []
    if tp is not None and tp.WhichOneof("value") == "tensor_type":
        tt = tp.tensor_type
        if tt.elem_type:
            dtype = np_dtype(tt.elem_type)
        if tt.HasField("shape"):
            dims = [int(d.dim_value) if d.HasField("dim_value") else 0 for d in tt.shape.dim]
    if axis < 0:
        axis += len(dims) + 1
    dims.insert(max(0, min(axis, len(dims))), 0)
    return np.empty(dims, dtype=dtype)


def scalar_bool(v: Any, what: str) -> bool:
    if type(v) is np.ndarray and v.size == 1:      # every If of every run: the short way
        return bool(v)
    a = np.asarray(v)
    if a.size != 1:
        raise ValueError(f"{what} must hold exactly one element, got shape {a.shape}")
    return bool(a.reshape(-1)[0])


def scalar_int(v: Any, what: str) -> int:
    a = np.asarray(v)
    if a.size != 1:
        raise ValueError(f"{what} must hold exactly one element, got shape {a.shape}")
    return int(a.reshape(-1)[0])
