"""Nodes OpenVINO accepts but computes differently from the ONNX specification.

OpenVINO's own ``query_model`` decides what it *can* run; this table only removes the cases
where its answer is known to differ from the spec (found by running the ONNX backend node
suite through the provider, OpenVINO 2026.4). Each rule is as narrow as the evidence: an
attribute value, a non-constant input, a shape, never a whole op without reason.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import onnx

__all__ = ["known_difference"]

_SIGNED = {onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32,
           onnx.TensorProto.INT64}


def _attr(node: Any, name: str, default: Any = None) -> Any:
    v = node.attributes.get(name, default)
    return v.decode() if isinstance(v, bytes) else v


def _const(graph: Any, node: Any, i: int) -> np.ndarray | None:
    if i < len(node.inputs) and node.inputs[i] and graph.is_constant(node.inputs[i]):
        return np.asarray(graph.constant(node.inputs[i]))
    return None


def _random(node: Any, graph: Any) -> str:
    return "random numbers come from onnxrt's seeded generator, for reproducible results"


def _bitshift(node: Any, graph: Any) -> str:
    if node.input_info and node.input_info[0].elem_type in _SIGNED:
        return "OpenVINO shifts signed values differently (overflow, shifts >= width)"
    return ""


def _dft(node: Any, graph: Any) -> str:
    if node.since_version < 20:
        return "OpenVINO reads DFT-17 (axis attribute, onesided) differently"
    return ""


def _rnn(node: Any, graph: Any) -> str:
    if _attr(node, "layout", 0):
        return "OpenVINO ignores layout=1 (batch-major) recurrent inputs"
    return ""


def _pool(node: Any, graph: Any) -> str:
    if not _attr(node, "ceil_mode", 0):
        return ""
    # ONNX drops a last window that would start in the end padding; OpenVINO keeps it
    shape = node.input_info[0].shape if node.input_info else None
    kernel = _attr(node, "kernel_shape") or []
    if shape is None or any(not isinstance(d, int) for d in shape[2:]) or not kernel:
        return "ceil_mode with unknown spatial sizes (OpenVINO may keep an extra window)"
    nd = len(kernel)
    strides = _attr(node, "strides") or [1] * nd
    dil = _attr(node, "dilations") or [1] * nd
    pads = _attr(node, "pads") or [0] * (2 * nd)
    for k in range(nd):
        size = shape[2 + k]
        dk = (kernel[k] - 1) * dil[k] + 1
        span = size + pads[k] + pads[k + nd] - dk
        out = math.ceil(span / strides[k]) + 1
        if (out - 1) * strides[k] >= size + pads[k]:
            return "ceil_mode where the last window starts in the padding (OpenVINO keeps it)"
    return ""


def _reduce_extreme(node: Any, graph: Any) -> str:
    shape = node.input_info[0].shape if node.input_info else None
    if shape is not None and any(d == 0 for d in shape):
        return "OpenVINO reduces an empty set to the lowest finite value, not -inf/inf"
    # max of an all -inf row is -FLT_MAX in OpenVINO: only visible when compared to infinity
    for o in node.outputs:
        if any(c.op_type in ("Equal", "IsInf") for c in graph.consumers(o)):
            return ("its result is compared with infinity, and OpenVINO returns -FLT_MAX for "
                    "rows of -inf")
    return ""


def _resize(node: Any, graph: Any) -> str:
    if _attr(node, "antialias", 0):
        return "OpenVINO ignores antialias"
    if _attr(node, "exclude_outside", 0):
        return "OpenVINO ignores exclude_outside"
    if _attr(node, "keep_aspect_ratio_policy", "stretch") != "stretch":
        return "OpenVINO ignores keep_aspect_ratio_policy"
    mode = _attr(node, "mode", "nearest")
    if _attr(node, "coordinate_transformation_mode", "half_pixel") == "align_corners" and \
            mode != "nearest":
        scales = _const(graph, node, 2)
        sizes = _const(graph, node, 3)
        shape = node.input_info[0].shape if node.input_info else None
        up = None
        if scales is not None and scales.size:
            up = bool(np.all(scales >= 1))
        elif sizes is not None and sizes.size and shape is not None and \
                all(isinstance(d, int) for d in shape) and len(shape) == sizes.size:
            up = bool(np.all(sizes >= np.asarray(shape)))
        if not up:
            return "OpenVINO downsamples with align_corners differently"
    return ""


def _roialign(node: Any, graph: Any) -> str:
    if _attr(node, "mode", "avg") == "max":
        return "OpenVINO's RoiAlign max mode differs from the ONNX definition"
    return ""


def _space_to_depth(node: Any, graph: Any) -> str:
    if _attr(node, "mode", "DCR") != "DCR":
        return "OpenVINO ignores SpaceToDepth's mode"
    return ""


def _tile(node: Any, graph: Any) -> str:
    if _const(graph, node, 1) is None:
        return "OpenVINO's Tile needs constant repeats"
    return ""


def _attention(node: Any, graph: Any) -> str:
    for a in ("left_window_size", "right_window_size"):
        if _attr(node, a, -1) >= 0:
            return f"OpenVINO ignores {a}"
    present = {i for i, n in enumerate(node.inputs) if n}
    if _attr(node, "is_causal", 0) and 3 in present and 4 in present:
        return "OpenVINO misplaces the causal mask when both attn_mask and past_key are given"
    return ""


def _quantize(node: Any, graph: Any) -> str:
    if _const(graph, node, 1) is None:
        return ("OpenVINO multiplies by 1/scale, which rounds ties differently when the scale "
                "is computed at run time")
    return ""


def _range(node: Any, graph: Any) -> str:
    if node.input_info and node.input_info[0].elem_type == onnx.TensorProto.BFLOAT16:
        return "OpenVINO's CPU plugin fails on bfloat16 Range"
    return ""


def _always(reason: str) -> Callable[[Any, Any], str]:
    return lambda node, graph: reason


_RULES: dict[tuple[str, str], Callable[[Any, Any], str]] = {
    ("", "Bernoulli"): _random, ("", "RandomNormal"): _random,
    ("", "RandomNormalLike"): _random, ("", "RandomUniform"): _random,
    ("", "RandomUniformLike"): _random, ("", "Multinomial"): _random,
    ("", "BitShift"): _bitshift,
    ("", "DFT"): _dft,
    ("", "GRU"): _rnn, ("", "LSTM"): _rnn, ("", "RNN"): _rnn,
    ("", "MaxPool"): _pool, ("", "AveragePool"): _pool,
    ("", "ReduceMax"): _reduce_extreme, ("", "ReduceMin"): _reduce_extreme,
    ("", "Resize"): _resize,
    ("", "RoiAlign"): _roialign,
    ("", "SpaceToDepth"): _space_to_depth,
    ("", "Tile"): _tile,
    ("", "Attention"): _attention,
    ("", "QuantizeLinear"): _quantize,
    ("", "Range"): _range,
    ("", "DynamicQuantizeLinear"): _always(
        "OpenVINO rounds the zero point differently"),
    ("", "NonMaxSuppression"): _always(
        "OpenVINO treats boxes whose IoU equals the threshold differently"),
    ("", "TopK"): _always("OpenVINO does not keep the lower index first among equal values"),
}


def known_difference(node: Any, graph: Any) -> str:
    """Why OpenVINO's result for ``node`` would differ from the spec ("" when it would not)."""
    rule = _RULES.get((node.domain, node.op_type))
    if rule is None:
        return ""
    try:
        return rule(node, graph)
    except Exception as e:  # a rule that cannot decide keeps the node here
        return f"could not check a known OpenVINO difference ({type(e).__name__}: {e})"
