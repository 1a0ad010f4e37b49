"""The UnsqueezeElimination rule (onnxruntime's name for it): Squeeze(Unsqueeze(x, axes), axes) ->
x."""

from __future__ import annotations

import onnx

from onnxrt.ir.graph import Graph
from onnxrt.passes.patterns import axes_of, bypass, onnx_op
from onnxrt.passes.registry import BASIC, rule


@rule("UnsqueezeElimination", BASIC, order=80, ops=("Squeeze",))
def eliminate_unsqueeze_squeeze(g: Graph, n: onnx.NodeProto) -> bool:
    """Squeeze(Unsqueeze(x, axes), axes) -> x."""
    if not onnx_op(n, "Squeeze"):
        return False
    p = g.producer(n.input[0])
    if p is None or not onnx_op(p, "Unsqueeze"):
        return False
    a1, a2 = axes_of(g, p), axes_of(g, n)
    if a1 is None or a2 is None:
        return False
    r = g.rank(p.input[0])
    if r is None:
        if any(a < 0 for a in a1 + a2):
            return False
        same = sorted(a1) == sorted(a2)
    else:
        out_rank = r + len(a1)
        same = sorted(a % out_rank for a in a1) == sorted(a % out_rank for a in a2)
    if same:
        return bypass(g, n, p.input[0], n.output[0], (p,))
    return False
