"""The DynamicQuantizeMatMulFusion rule (onnxruntime's name for it): DynamicQuantizeLinear
-> MatMulIntegerToFloat (made by MatMulIntegerToFloatFusion) into one com.microsoft
DynamicQuantizeMatMul that quantizes the float input itself. Only where the quantized input,
its scale and zero point are read by that product alone: a DynamicQuantizeLinear shared by
several products (attention's Q, K and V) stays, quantizing once for all of them."""

from __future__ import annotations

import onnx

from onnxrt.ir.graph import MS_DOMAIN, Graph
from onnxrt.passes.patterns import make_node, producer
from onnxrt.passes.registry import EXTENDED, rule


@rule("DynamicQuantizeMatMulFusion", EXTENDED, order=94, ops=("MatMulIntegerToFloat",))
def fuse_dynamic_quantize_matmul(g: Graph, m: onnx.NodeProto) -> bool:
    if m.domain != MS_DOMAIN or len(m.input) < 5:
        return False
    d = producer(g, m.input[0], "DynamicQuantizeLinear")
    if d is None or len(d.output) != 3 or m.input[2] != d.output[1] or m.input[4] != d.output[2]:
        return False
    if not all(g.only_use(o, m) for o in d.output):
        return False
    bias = m.input[6] if len(m.input) > 6 else ""
    ins = [d.input[0], m.input[1], m.input[3], m.input[5] if len(m.input) > 5 else "", bias]
    while ins and not ins[-1]:
        ins.pop()
    new = make_node("DynamicQuantizeMatMul", ins, [m.output[0]],
                    (m.name or "matmul") + "_dynamic", MS_DOMAIN)
    g.replace([d, m], new, m)
    return True
