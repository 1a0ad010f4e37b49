"""Which ONNX nodes the oneDNN provider runs: the op table and the per-node checks.

A node is claimed when its op is in the table, its tensors are float32 and what oneDNN
needs to know at session creation (weights, shapes, exponents) is a constant. The answer
is a reason string: "" when supported, else why not (shown in the placement report).
"""

from __future__ import annotations

from typing import Any

from onnxrt.providers.dnnl.nodeattrs import UNARY
from onnxrt.providers.dnnl.patterns import Nodes, match_gelu_erf

__all__ = ["why_not", "BINARY", "LAYOUT_ONLY", "SUPPORTED_OPS", "DECLINED_OPS"]

# Sum of two inputs is an Add
BINARY = frozenset({"Add", "Sum", "Sub", "Mul", "Div", "Max", "Min"})
# ops that only relabel or move data: a group of these alone gains nothing from oneDNN
LAYOUT_ONLY = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
                         "Identity", "Dropout", "Concat", "Split"})
_HEAVY = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm", "MaxPool", "AveragePool",
                    "GlobalAveragePool", "GlobalMaxPool", "BatchNormalization", "LRN",
                    "Softmax", "LogSoftmax", "LayerNormalization"})
# claimed only inside a pattern that maps to one primitive (patterns.py)
_IN_PATTERN = frozenset({"Erf"})
SUPPORTED_OPS = UNARY | BINARY | LAYOUT_ONLY | _HEAVY | _IN_PATTERN
# ops oneDNN has a primitive for whose numbers differ from the ONNX spec's, and how (found
# by the backend suite, tests/providers/dnnl/test_dnnl_suite.py)
DECLINED_OPS = {
    "Softplus": "oneDNN 3.2's soft_relu loses the negative tail: softplus(-15) came out 0 "
                "and softplus(-20) 1.9e-6 instead of 3.1e-7 and 2.1e-9 (the suite's "
                "mish_expanded)",
}

_FLOAT = "tensor(float)"
# inputs that are integer metadata rather than data: (op, input index)
_INT_INPUTS = {("Reshape", 1), ("Squeeze", 1), ("Unsqueeze", 1), ("Split", 1)}


def why_not(node: Any, graph: Any) -> str:
    """"" when the oneDNN provider can run ``node``; otherwise the reason."""
    if node.domain not in ("", "ai.onnx"):
        return f"domain {node.domain} is not ONNX's"
    op = node.op_type
    if op in DECLINED_OPS:
        return DECLINED_OPS[op]
    if op not in SUPPORTED_OPS:
        return f"{op} is not among the ops it maps to oneDNN primitives"
    for i, (name, vi) in enumerate(zip(node.inputs, node.input_info)):
        if not name or (op, i) in _INT_INPUTS:
            continue
        if vi.type != _FLOAT:
            return f"input {name!r} is {vi.type}; oneDNN runs float32 here"
    for name, vi in zip(node.outputs, node.output_info):
        if name and vi.type not in (_FLOAT, "unknown"):
            return f"output {name!r} is {vi.type}; oneDNN runs float32 here"
    check = _CHECKS.get(op)
    return check(node, graph) if check else ""


def _const(graph: Any, node: Any, i: int) -> bool:
    return i >= len(node.inputs) or not node.inputs[i] or graph.is_constant(node.inputs[i])


def _rank(node: Any, i: int) -> int | None:
    s = node.input_info[i].shape if i < len(node.input_info) else None
    return None if s is None else len(s)


def _conv(node: Any, graph: Any) -> str:
    if not _const(graph, node, 1) or not _const(graph, node, 2):
        return "its weights or bias are not constants (oneDNN reorders them once)"
    r = _rank(node, 0)
    if r is not None and not 3 <= r <= 5:
        return f"a {r}-D input (oneDNN convolves 1-D to 3-D images)"
    return ""


def _conv_transpose(node: Any, graph: Any) -> str:
    if not _const(graph, node, 1) or not _const(graph, node, 2):
        return "its weights or bias are not constants (oneDNN reorders them once)"
    r = _rank(node, 0)
    if r is None or not 3 <= r <= 5:
        return "an input of rank other than 3-5 or of unknown rank (oneDNN deconvolves " \
            "1-D to 3-D images)"
    auto = node.attributes.get("auto_pad", "NOTSET")
    if (auto.decode() if isinstance(auto, bytes) else auto) not in ("NOTSET", "VALID"):
        return "auto_pad SAME_* (pads follow output_shape at run time)"
    if node.attributes.get("output_shape"):
        return "an output_shape attribute (pads computed from it are not mapped)"
    return ""


def _layer_norm(node: Any, graph: Any) -> str:
    if len([o for o in node.outputs if o]) > 1:
        return "its Mean or InvStdDev output"
    if not _const(graph, node, 1) or not _const(graph, node, 2):
        return "scale or bias not constant"
    if int(node.attributes.get("stash_type", 1)) != 1:
        return "a stash_type other than float32"
    if _rank(node, 0) is None:
        return "an input of unknown rank"
    return ""


def _scalar(graph: Any, value: str) -> float | None:
    if not value or not graph.is_constant(value):
        return None
    try:
        c = graph.constant(value)
        return float(c.reshape(())) if c.size == 1 else None
    except Exception:
        return None


def _erf(node: Any, graph: Any) -> str:
    g = Nodes(graph.producer, graph.consumers, lambda v: _scalar(graph, v),
              lambda n: list(n.inputs), lambda n: list(n.outputs))
    m = match_gelu_erf(g, node)
    if m is None:
        return "an Erf outside the GELU pattern x * 0.5 * (1 + erf(x / sqrt(2))) " \
            "(oneDNN has gelu_erf, no erf)"
    for other in m.nodes:
        if other is not node and why_not(other, graph):
            return f"the GELU pattern's {other.op_type} is not claimed"
    return ""


def _matmul(node: Any, graph: Any) -> str:
    for i in (0, 1):
        r = _rank(node, i)
        if r is None or r < 2:
            return "an input of rank < 2 or of unknown rank"
    return ""


def _gemm(node: Any, graph: Any) -> str:
    if node.attributes.get("transA", 0):
        return "transA 1"
    if not _const(graph, node, 1):
        return "its B input is not a constant"
    if not _const(graph, node, 2):
        return "its C input is not a constant"
    if len(node.inputs) > 2 and node.inputs[2]:
        c = graph.constant(node.inputs[2])
        if c.ndim == 2 and c.shape[0] != 1 and _rank(node, 0) is None:
            return "a full (M, N) C with an unknown M"
        if c.ndim > 2 or (c.ndim >= 1 and c.shape[-1] == 1 and c.size > 1):
            return f"a C of shape {tuple(c.shape)} that broadcasts along columns"
    return ""


def _maxpool(node: Any, graph: Any) -> str:
    if len([o for o in node.outputs if o]) > 1:
        return "MaxPool's Indices output"
    if node.attributes.get("storage_order", 0):
        return "storage_order 1"
    return ""


def _avgpool(node: Any, graph: Any) -> str:
    a = node.attributes
    if a.get("ceil_mode", 0) and a.get("count_include_pad", 0):
        return "ceil_mode with count_include_pad"
    return ""


def _batchnorm(node: Any, graph: Any) -> str:
    if len([o for o in node.outputs if o]) > 1 or node.attributes.get("training_mode", 0):
        return "training mode (running statistics as outputs)"
    if not all(_const(graph, node, i) for i in (1, 2, 3, 4)):
        return "scale, bias, mean or variance not constant"
    return ""


def _lrn(node: Any, graph: Any) -> str:
    return "" if int(node.attributes.get("size", 1)) % 2 == 1 else \
        "an even size (oneDNN's window is centred)"


def _shape_input(node: Any, graph: Any) -> str:
    # a Reshape's computed target is read when its program is built (compiled.py keys the
    # programs by the integer inputs' values too)
    if len(node.inputs) > 1 and node.inputs[1] and not graph.is_constant(node.inputs[1]) \
            and node.op_type != "Reshape":
        return "its axes / split input is computed at run time"
    if node.op_type == "Reshape" and node.attributes.get("allowzero", 0):
        return "allowzero 1"
    return ""


def _dropout(node: Any, graph: Any) -> str:
    if len([o for o in node.outputs if o]) > 1:
        return "its mask output"
    if len(node.inputs) > 2 and node.inputs[2]:
        return "a training_mode input"
    return ""


def _clip(node: Any, graph: Any) -> str:
    return "" if _const(graph, node, 1) and _const(graph, node, 2) else \
        "min or max computed at run time"


def _pow(node: Any, graph: Any) -> str:
    if not _const(graph, node, 1):
        return "an exponent computed at run time"
    try:
        if graph.constant(node.inputs[1]).size != 1:
            return "a tensor exponent (oneDNN's pow takes one number)"
    except Exception:
        return "an unreadable exponent"
    return ""


def _gelu(node: Any, graph: Any) -> str:
    return "" if node.attributes.get("approximate", "none") in ("none", "tanh", b"none",
                                                                   b"tanh") else \
        "an unknown approximate value"


def _covers(big: list[Any], small: list[Any]) -> bool:
    """Whether ``small`` broadcasts to ``big`` without growing it (dims equal or 1)."""
    if len(small) > len(big):
        return False
    return all(d == 1 or d == b for d, b in zip(small[::-1], big[::-1]))


def _binary(node: Any, graph: Any) -> str:
    if len(node.inputs) != 2:
        return "not exactly two inputs"
    a, b = (vi.shape for vi in node.input_info)
    if a is None or b is None:
        return "an input of unknown rank"
    a, b = list(a), list(b)
    if node.op_type == "Div" and not a and not b and graph.is_constant(node.inputs[0]):
        # k / x is no linear eltwise, and the binary primitive holds the 0-d constant as a
        # 1-element 1-D memory (the backend suite's window functions)
        return "a 0-d constant divided by a 0-d value"
    if _covers(a, b):
        return ""
    if node.op_type == "Sub" and _scalar(graph, node.inputs[0]) is not None and \
            len(a) <= len(b):
        return ""          # k - x: a linear eltwise
    if node.op_type in ("Sub", "Div"):
        return "its first input broadcasts (oneDNN broadcasts only the second)"
    return "" if _covers(b, a) else "both inputs broadcast"


_CHECKS = {"Conv": _conv, "ConvTranspose": _conv_transpose, "MatMul": _matmul,
           "LayerNormalization": _layer_norm, "Erf": _erf, "Gemm": _gemm,
           "MaxPool": _maxpool, "AveragePool": _avgpool, "BatchNormalization": _batchnorm,
           "LRN": _lrn, "Reshape": _shape_input,
           "Squeeze": _shape_input, "Unsqueeze": _shape_input, "Split": _shape_input,
           "Dropout": _dropout,
           "Clip": _clip, "Pow": _pow, "Gelu": _gelu, **{op: _binary for op in BINARY}}
