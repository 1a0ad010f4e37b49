"""The CastElimination rule (onnxruntime's name for it): Cast to the type a value already has;
Cast(Cast(x, wider), back to x's type)."""

from __future__ import annotations

import onnx
from onnx import TensorProto as TP

from onnxrt.ir.graph import Graph, attr
from onnxrt.passes.patterns import bypass, onnx_op
from onnxrt.passes.registry import BASIC, rule


# element types a value can round-trip through without loss (to -> set of from types)
_WIDER = {
    TP.DOUBLE: {TP.FLOAT, TP.FLOAT16, TP.BFLOAT16, TP.INT8, TP.UINT8, TP.INT16, TP.UINT16,
                TP.INT32, TP.UINT32, TP.BOOL},
    TP.FLOAT: {TP.FLOAT16, TP.BFLOAT16, TP.INT8, TP.UINT8, TP.INT16, TP.UINT16, TP.BOOL},
    TP.INT64: {TP.INT8, TP.UINT8, TP.INT16, TP.UINT16, TP.INT32, TP.UINT32, TP.BOOL},
    TP.INT32: {TP.INT8, TP.UINT8, TP.INT16, TP.UINT16, TP.BOOL},
    TP.INT16: {TP.INT8, TP.UINT8, TP.BOOL},
}



@rule("CastElimination", BASIC, order=50, ops=("Cast",))
def eliminate_casts(g: Graph, n: onnx.NodeProto) -> bool:
    """Cast to the type a value already has; Cast(Cast(x, wider), back to x's type)."""
    if not onnx_op(n, "Cast") or len(n.input) != 1:
        return False
    to = attr(n, "to", 0)
    src = n.input[0]
    t_src = g.elem_type(src)
    if t_src and t_src == to and attr(n, "saturate", 1) == 1:
        return bypass(g, n, src, n.output[0])
    p = g.producer(src)
    if p is None or not onnx_op(p, "Cast") or not p.input:
        return False
    x = p.input[0]
    t_x = g.elem_type(x)
    mid = attr(p, "to", 0)
    if t_x and t_x == to and t_x in _WIDER.get(mid, ()):
        if bypass(g, n, x, n.output[0], (p,)):
            return True
    return False
