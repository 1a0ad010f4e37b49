"""The EliminateDropout rule (onnxruntime's name for it): EliminateDropout"""

from __future__ import annotations

import numpy as np
import onnx

from onnxrt.ir.graph import Graph, attr
from onnxrt.passes.patterns import bypass, onnx_op
from onnxrt.passes.registry import BASIC, rule


@rule("EliminateDropout", BASIC, order=20, ops=("Dropout",))
def eliminate_dropout(g: Graph, n: onnx.NodeProto) -> bool:
    if not onnx_op(n, "Dropout") or not n.input or not n.input[0]:
        return False
    if len(n.output) > 1 and n.output[1] and (g.consumers(n.output[1])
                                              or g.is_output(n.output[1])):
        return False  # the mask is used
    if len(n.input) > 2 and n.input[2]:
        t = g.const(n.input[2])
        if t is None or bool(np.asarray(t).reshape(-1)[0]):
            return False  # training mode, or not known to be off
    if g.opset < 7 and attr(n, "is_test", 0) == 0:
        return False  # Dropout-1/6 without is_test scale in training mode
    return bypass(g, n, n.input[0], n.output[0])
