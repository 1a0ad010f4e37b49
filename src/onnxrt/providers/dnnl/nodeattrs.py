"""ONNX node attributes as the oneDNN program reads them: the attribute table, unary ops
as oneDNN eltwise algorithms with their alpha and beta, and convolution/pooling pads."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper

from onnxrt.providers.dnnl import library as L

__all__ = ["attrs", "text", "UNARY", "unary", "pads", "BINARY_ALG", "COMMUTATIVE"]

COMMUTATIVE = {"Add", "Sum", "Mul", "Max", "Min"}
BINARY_ALG = {"Add": "add", "Sum": "add", "Sub": "sub", "Mul": "mul", "Div": "div",
              "Max": "max", "Min": "min"}


def attrs(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


# unary ops as oneDNN eltwise algorithms (support.py claims them, program.py builds them).
# Not Softplus: oneDNN 3.2's soft_relu loses the negative tail (support.DECLINED_OPS)
UNARY = frozenset({"Relu", "LeakyRelu", "Elu", "Tanh", "Sigmoid", "Exp", "Log", "Sqrt",
                   "Abs", "Clip", "HardSigmoid", "HardSwish", "Neg", "Gelu", "Mish", "Pow"})


def unary(n: onnx.NodeProto, consts: dict[str, np.ndarray]) -> tuple[int, float, float]:
    """The oneDNN eltwise algorithm and its alpha, beta for a unary ONNX node."""
    a = attrs(n)
    E = L.ELTWISE
    op = n.op_type
    if op == "Relu":
        return E["relu"], 0.0, 0.0
    if op == "LeakyRelu":
        return E["relu"], float(a.get("alpha", 0.01)), 0.0
    if op == "Elu":
        return E["elu"], float(a.get("alpha", 1.0)), 0.0
    if op == "HardSigmoid":
        return E["hardsigmoid"], float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))
    if op == "HardSwish":
        return E["hardswish"], 1.0 / 6.0, 0.5
    if op == "Neg":
        return E["linear"], -1.0, 0.0
    if op == "Gelu":
        return (E["gelu_tanh"] if text(a.get("approximate", "none")) == "tanh"
                else E["gelu_erf"]), 0.0, 0.0
    if op == "Clip":
        lo, hi = a.get("min", -np.inf), a.get("max", np.inf)
        if len(n.input) > 1 and n.input[1]:
            lo = float(consts[n.input[1]])
        if len(n.input) > 2 and n.input[2]:
            hi = float(consts[n.input[2]])
        return E["clip_v2"], float(max(lo, -3.4e38)), float(min(hi, 3.4e38))
    if op == "Pow":
        return E["pow"], 1.0, float(np.asarray(consts[n.input[1]]).reshape(()))
    if op == "Sigmoid":
        return E["logistic"], 0.0, 0.0
    return E[op.lower()], 0.0, 0.0


def pads(a: dict[str, Any], spatial: tuple[int, ...], kern: list[int], strides: list[int],
          dil: list[int]) -> tuple[list[int], list[int]]:
    """Begin and end pads from ``pads`` or ``auto_pad`` (ONNX's rules)."""
    nd = len(kern)
    auto = text(a.get("auto_pad", "NOTSET"))
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pl, pr = [], []
        for h, k, s, d in zip(spatial, kern, strides, dil):
            out = -(-h // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - h)
            small, big = total // 2, total - total // 2
            pl.append(small if auto == "SAME_UPPER" else big)
            pr.append(big if auto == "SAME_UPPER" else small)
        return pl, pr
    if auto == "VALID":
        return [0] * nd, [0] * nd
    pads = list(a.get("pads", [0] * (2 * nd)))
    return pads[:nd], pads[nd:]
