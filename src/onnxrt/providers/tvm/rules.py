"""Nodes TVM's Relax ONNX frontend converts but computes differently from the ONNX
specification, or cannot build, found by running the whole backend node suite through
the provider (apache-tvm 0.27, ``ONNXRT_TVM_FULL_SUITE=1``). Each rule is as narrow as the
evidence: an attribute value, a type, a non-constant input; the answer is the reason the
placement report gives, "" where TVM's numbers are right."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import onnx

__all__ = ["known_difference"]

T = onnx.TensorProto
_FLOATS = {T.FLOAT, T.DOUBLE, T.FLOAT16, T.BFLOAT16}
_BITS = {T.INT8: 8, T.UINT8: 8, T.INT16: 16, T.UINT16: 16, T.INT32: 32, T.UINT32: 32,
         T.INT64: 64, T.UINT64: 64}


def _attr(node: Any, name: str, default: Any = None) -> Any:
    v = node.attributes.get(name, default)
    return v.decode() if isinstance(v, bytes) else v


def _elem(node: Any, i: int = 0) -> int:
    return node.input_info[i].elem_type if i < len(node.input_info) else 0


def _equal(node: Any, graph: Any) -> str:
    if any(vi.elem_type == T.INT64 for n, vi in zip(node.inputs, node.input_info) if n):
        # a computed shape compared with -1 (the attention-mask Expand of Hugging Face
        # exports) came out all False: the frontend evaluates it as a shape expression
        return "TVM's frontend compares int64 shape values wrongly (Equal)"
    return ""


def _isinf(node: Any, graph: Any) -> str:
    if not _attr(node, "detect_negative", 1) or not _attr(node, "detect_positive", 1):
        return "TVM's IsInf ignores detect_negative and detect_positive"
    return ""


def _bitshift(node: Any, graph: Any) -> str:
    # a shift by the bit width or more, or by a negative amount, is 0 in the spec; TVM
    # shifts as the hardware does (1 << 33 gave 2, -1 gave -1)
    bits = _BITS.get(_elem(node))
    name = node.inputs[1] if len(node.inputs) > 1 else ""
    if bits and name and graph.is_constant(name):
        amount = np.asarray(graph.constant(name)).astype(np.int64)
        if amount.size and 0 <= amount.min() and amount.max() < bits:
            return ""
    return "TVM shifts by the bit width or more, or by a negative amount, as the " \
        "hardware does (the spec gives 0): shift amounts must be constants below the width"


def _mod(node: Any, graph: Any) -> str:
    if not _attr(node, "fmod", 0) and _elem(node) in _FLOATS:
        return "TVM's floating floor_mod differs from the spec for infinite operands and " \
            "signed zeros (NaN where the spec gives inf, 3 or -1)"
    return ""


def _pow(node: Any, graph: Any) -> str:
    if _elem(node) not in _FLOATS:
        # a build failure: declined so no compile is tried per shape
        return "TVM's power only applies to float (its build fails for integer bases)"
    return ""


def _softplus(node: Any, graph: Any) -> str:
    return "TVM computes log(1 + exp(x)), 0.13% off the spec at x = -10 (the suite's " \
        "mish and mish_expanded)"


def _batchnorm(node: Any, graph: Any) -> str:
    if _attr(node, "training_mode", 0):
        return "TVM's training-mode running mean and variance differ from the spec's"
    return ""


def _conv_transpose(node: Any, graph: Any) -> str:
    if _attr(node, "output_shape"):
        return "TVM ignores ConvTranspose's output_shape attribute"
    return ""


def _rms_norm(node: Any, graph: Any) -> str:
    shape = node.input_info[0].shape if node.input_info else None
    axis = int(_attr(node, "axis", -1))
    if shape is not None and axis in (0, -len(shape)):
        # a build failure, not a wrong number: declined so no compile is tried per shape
        return "TVM's rms_norm over every axis fails to build (Tensor dimension mismatch)"
    return ""


def _roialign(node: Any, graph: Any) -> str:
    if _attr(node, "mode", "avg") == "max":
        return "TVM's RoiAlign in max mode gives other values than the spec"
    return ""


def _space_to_depth(node: Any, graph: Any) -> str:
    if _attr(node, "mode", "DCR") != "DCR":
        return "TVM ignores SpaceToDepth's mode (CRD)"
    return ""


def _einsum(node: Any, graph: Any) -> str:
    if _elem(node) == T.FLOAT16:
        # the frontend lowers Einsum itself, past legalize.py's float32 accumulation
        return "TVM's Einsum sums float16 products in float16 (over 256 terms up to 700 " \
            "times the 1e-3 relative tolerance off)"
    return ""


def _nms(node: Any, graph: Any) -> str:
    return "TVM's NonMaxSuppression selects other boxes than the spec"


_RULES: dict[str, Callable[[Any, Any], str]] = {
    "Equal": _equal, "IsInf": _isinf, "BitShift": _bitshift, "Mod": _mod, "Pow": _pow,
    "Softplus": _softplus, "Mish": _softplus, "BatchNormalization": _batchnorm,
    "ConvTranspose": _conv_transpose, "NonMaxSuppression": _nms, "Einsum": _einsum,
    "RMSNormalization": _rms_norm, "RoiAlign": _roialign, "SpaceToDepth": _space_to_depth,
}


def known_difference(node: Any, graph: Any) -> str:
    """Why TVM's numbers for ``node`` would differ from the spec's ("" when they do not)."""
    rule = _RULES.get(node.op_type)
    return rule(node, graph) if rule is not None else ""
