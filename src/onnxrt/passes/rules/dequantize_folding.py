"""The DequantizeFolding rule: a DequantizeLinear of constants that no QDQ fusion took
(qdq_selector_action.py) becomes the float constant it computes, once, after every fusion
of its level. ConstantFolding leaves DequantizeLinear alone so that those fusions still see
the quantized weights; at the basic level they stay in the graph, as in onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx

from onnxrt.ir.graph import Graph
from onnxrt.passes.registry import EXTENDED, rule


@rule("DequantizeFolding", EXTENDED, order=900, ops=("DequantizeLinear",))
def fold_dequantize(g: Graph, n: onnx.NodeProto) -> bool:
    if g.evaluate is None or not n.output or g.is_output(n.output[0]):
        return False
    args = [g.const(x) if x else None for x in n.input]
    if any(x and v is None for x, v in zip(n.input, args)):
        return False
    values = g.evaluate(n, args, tuple(g.types.get(x) for x in n.input))
    if not values or not isinstance(values[0], np.ndarray):
        return False
    g.consts[n.output[0]] = values[0]
    g.remove([n])
    g.touch()
    g.folded.append(n.name or n.op_type)
    return True
