"""The EliminateIdentity rule (onnxruntime's name for it): EliminateIdentity"""

from __future__ import annotations

import onnx

from onnxrt.ir.graph import Graph
from onnxrt.passes.patterns import bypass, onnx_op
from onnxrt.passes.registry import BASIC, rule


@rule("EliminateIdentity", BASIC, order=10, ops=("Identity",))
def eliminate_identity(g: Graph, n: onnx.NodeProto) -> bool:
    if onnx_op(n, "Identity") and n.input and n.input[0]:
        if g.elem_type(n.input[0]) == 0 and n.input[0] not in g.consts:
            # a sequence or optional Identity: fine to bypass as well, types are equal
            pass
        return bypass(g, n, n.input[0], n.output[0])
    return False
