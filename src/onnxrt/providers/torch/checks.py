"""Attribute combinations the torch kernels cannot compute exactly: such nodes are declined
(with the reason in the placement report) and fall to the next provider."""

from __future__ import annotations

from typing import Any, Callable

from onnx import TensorProto

from onnxrt.providers.torch.registry import ALL

__all__ = ["decline_reason"]

_CAST_OK = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE,
                      TensorProto.BFLOAT16, TensorProto.INT8, TensorProto.INT16,
                      TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8, TensorProto.BOOL})


def _const(graph: Any, node: Any, i: int) -> Any:
    if i < len(node.inputs) and node.inputs[i] and graph.is_constant(node.inputs[i]):
        return graph.constant(node.inputs[i])
    return None


def _cast(node: Any, graph: Any) -> str:
    to = node.attributes.get("to")
    if to not in _CAST_OK:
        return f"torch has no exact cast to element type {to}"
    return ""


def _dropout(node: Any, graph: Any) -> str:
    if len(node.inputs) > 2 and node.inputs[2]:
        v = _const(graph, node, 2)
        if v is None or bool(v):
            return "training-mode Dropout is random: left to the next provider"
    return ""


def _batchnorm(node: Any, graph: Any) -> str:
    if node.attributes.get("training_mode", 0) or len([o for o in node.outputs if o]) > 1:
        return "training-mode BatchNormalization is not implemented on torch"
    return ""


def _resize(node: Any, graph: Any) -> str:
    a = node.attributes
    mode = a.get("mode", "nearest")
    ctm = a.get("coordinate_transformation_mode", "half_pixel")
    if node.since_version < 11:
        return ""
    if ctm == "tf_crop_and_resize":
        return "tf_crop_and_resize (roi, extrapolation) is not implemented on torch"
    if mode != "nearest" and a.get("antialias", 0):
        return "antialiased Resize (a widened filter when downsampling) is not implemented"
    return ""


def _pool_or_conv(node: Any, graph: Any) -> str:
    shape = node.input_shapes[0] if node.input_shapes else None
    if shape is not None and not 3 <= len(shape) <= 5:
        return f"{node.op_type} on torch handles 1-3 spatial dims, not {len(shape) - 2}"
    return ""


def _space(node: Any, graph: Any) -> str:
    shape = node.input_shapes[0] if node.input_shapes else None
    if shape is None or len(shape) != 4:
        return f"{node.op_type} on torch needs a rank-4 input"
    return ""


def _outputs_typed(node: Any, graph: Any) -> str:
    from onnxrt.ir.dtypes import np_dtype

    for vi in node.output_info:
        if vi.elem_type:
            try:
                ok = np_dtype(vi.elem_type) in ALL
            except Exception:
                ok = False
            if not ok:
                return f"output type {vi.type} has no torch kernel"
    return ""


_CHECKS: dict[str, Callable[[Any, Any], str]] = {
    "Cast": _cast, "Dropout": _dropout, "BatchNormalization": _batchnorm,
    "AveragePool": _pool_or_conv, "Resize": _resize, "Upsample": _resize, "Conv": _pool_or_conv,
    "ConvTranspose": _pool_or_conv, "MaxPool": _pool_or_conv,
    "DepthToSpace": _space, "SpaceToDepth": _space,
}


def decline_reason(node: Any, graph: Any) -> str:
    """Why the torch kernel of ``node`` cannot run it exactly ("" when it can)."""
    if node.has_subgraphs:
        return "ops with subgraphs stay with the host's control flow"
    fn = _CHECKS.get(node.op_type)
    why = fn(node, graph) if fn is not None else ""
    return why or _outputs_typed(node, graph)
