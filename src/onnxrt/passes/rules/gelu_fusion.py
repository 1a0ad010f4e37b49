"""The GeluFusion rule (onnxruntime's name for it): x * 0.5 * (1 + erf(x / sqrt(2))) into
com.microsoft Gelu."""

from __future__ import annotations

import math

import onnx

from onnxrt.ir.graph import MS_DOMAIN, Graph
from onnxrt.passes.patterns import (half_x_tail, is_float32, is_op, make_node, near, plus_one,
                                     producer)
from onnxrt.passes.registry import EXTENDED, rule


@rule("GeluFusion", EXTENDED, order=150, ops=("Erf",))
def fuse_gelu(g: Graph, erf: onnx.NodeProto) -> bool:
    """x * 0.5 * (1 + erf(x / sqrt(2))) into com.microsoft Gelu."""
    if not is_op(erf, "Erf"):
        return False
    d = producer(g, erf.input[0], "Div", "Mul")
    if d is None or not g.only_use(d.output[0], erf) or len(d.input) != 2:
        return False
    x, k = d.input[0], g.scalar(d.input[1])
    if not (near(k, math.sqrt(2)) if d.op_type == "Div" else near(k, 1 / math.sqrt(2))):
        if d.op_type == "Mul" and near(g.scalar(d.input[0]), 1 / math.sqrt(2)):
            x = d.input[1]
        else:
            return False
    if not is_float32(g, x):
        return False
    add = plus_one(g, erf.output[0])
    if add is None:
        return False
    tail = half_x_tail(g, x, add.output[0])
    if tail is None:
        return False
    out, nodes, last = tail
    new = make_node("Gelu", [x], [out], (erf.name or "gelu") + "_gelu", MS_DOMAIN)
    g.replace([d, erf, add] + nodes, new, last)
    g.uses_domain(MS_DOMAIN)
    return True
