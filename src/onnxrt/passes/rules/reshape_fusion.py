"""The ReshapeFusion rule (onnxruntime's name for it): Reshape(x) to x's own static shape -> x;
Reshape(Reshape(x, s1), s2) -> Reshape(x, s2) when s2 is constant and has no 0 that would copy a
dimension of the intermediate shape."""

from __future__ import annotations

import numpy as np
import onnx

from onnxrt.ir.graph import Graph, attr
from onnxrt.passes.patterns import bypass, onnx_op, reshaped
from onnxrt.passes.registry import BASIC, rule


@rule("ReshapeFusion", BASIC, order=70, ops=("Reshape",))
def fuse_reshapes(g: Graph, n: onnx.NodeProto) -> bool:
    """Reshape(x) to x's own static shape -> x; Reshape(Reshape(x, s1), s2) -> Reshape(x, s2)
    when s2 is constant and has no 0 that would copy a dimension of the intermediate shape."""
    if not onnx_op(n, "Reshape") or len(n.input) < 2:
        return False
    s_in = g.shape(n.input[0])
    if s_in is not None and all(isinstance(d, int) for d in s_in) and \
            reshaped(s_in, g.const(n.input[1]), attr(n, "allowzero", 0)) == tuple(s_in):
        if bypass(g, n, n.input[0], n.output[0]):   # a reshape to its own shape
            return True
    p = g.producer(n.input[0])
    if p is None or not onnx_op(p, "Reshape") or len(p.input) < 2:
        return False
    s2 = g.const(n.input[1])
    if s2 is None or (attr(n, "allowzero", 0) == 0 and np.any(np.asarray(s2) == 0)):
        return False
    n.input[0] = p.input[0]
    g.touch()
    return True
