"""The FastGeluFusion rule (onnxruntime's name for it): 0.5 * x * (1 + tanh(sqrt(2/pi) * (x +
0.044715 * x^3))) into com.microsoft FastGelu."""

from __future__ import annotations

import math

import onnx

from onnxrt.ir.graph import MS_DOMAIN, Graph
from onnxrt.passes.patterns import (cube_of, half_x_tail, is_float32, is_op, make_node, near,
                                     other_input, plus_one, producer)
from onnxrt.passes.registry import EXTENDED, rule


@rule("FastGeluFusion", EXTENDED, order=160, ops=("Tanh",))
def fuse_fast_gelu(g: Graph, th: onnx.NodeProto) -> bool:
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) into com.microsoft FastGelu."""
    c1 = math.sqrt(2 / math.pi)
    if not is_op(th, "Tanh"):
        return False
    s = producer(g, th.input[0], "Mul")
    if s is None or not g.only_use(s.output[0], th):
        return False
    u = next((i for i in s.input if near(g.scalar(other_input(s, i) or ""), c1)), None)
    inner = producer(g, u or "", "Add")
    if inner is None or not g.only_use(inner.output[0], s):
        return False
    found = None
    for i in (0, 1):
        x, v = inner.input[i], inner.input[1 - i]
        mc = producer(g, v, "Mul")
        if mc is None or not g.only_use(v, inner):
            continue
        for j in (0, 1):
            if near(g.scalar(mc.input[j]), 0.044715):
                cube = cube_of(g, mc.input[1 - j])
                if cube is not None and cube[0] == x and g.only_use(mc.input[1 - j], mc):
                    found = (x, [mc] + cube[1])
    if found is None:
        return False
    x, mids = found
    if not is_float32(g, x):
        return False
    add = plus_one(g, th.output[0])
    if add is None:
        return False
    tail = half_x_tail(g, x, add.output[0])
    if tail is None:
        return False
    out, nodes, last = tail
    new = make_node("FastGelu", [x], [out], (th.name or "gelu") + "_fastgelu", MS_DOMAIN)
    g.replace(mids + [inner, s, th, add] + nodes, new, last)
    g.uses_domain(MS_DOMAIN)
    return True
