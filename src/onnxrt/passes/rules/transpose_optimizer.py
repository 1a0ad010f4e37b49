"""The TransposeOptimizer rule (onnxruntime's name for it): Transpose(Transpose(x, p1), p2) ->
Transpose(x, p1[p2]) or x when that is identity."""

from __future__ import annotations

import onnx

from onnxrt.ir.graph import Graph, attr
from onnxrt.passes.patterns import bypass, onnx_op
from onnxrt.passes.registry import BASIC, rule


@rule("TransposeOptimizer", BASIC, order=60, ops=("Transpose",))
def fuse_transposes(g: Graph, n: onnx.NodeProto) -> bool:
    """Transpose(Transpose(x, p1), p2) -> Transpose(x, p1[p2]) or x when that is identity."""
    if not onnx_op(n, "Transpose"):
        return False
    p = g.producer(n.input[0])
    if p is None or not onnx_op(p, "Transpose"):
        return False
    p1, p2 = attr(p, "perm"), attr(n, "perm")
    if p1 is None or p2 is None or len(p1) != len(p2):
        return False
    perm = [p1[i] for i in p2]
    if perm == list(range(len(perm))):
        if bypass(g, n, p.input[0], n.output[0], (p,)):
            return True
        return False
    del n.attribute[:]
    n.attribute.append(onnx.helper.make_attribute("perm", perm))
    n.input[0] = p.input[0]
    g.touch()
    return True
