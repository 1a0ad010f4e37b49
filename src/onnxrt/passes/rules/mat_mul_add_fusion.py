"""The MatMulAddFusion rule (onnxruntime's name for it): MatMul(A 2-D, B 2-D) -> Add(bias) into
Gemm, as onnxruntime does (2-D only)."""

from __future__ import annotations

import onnx
from onnx import TensorProto as TP

from onnxrt.ir.graph import Graph, same_dim
from onnxrt.passes.patterns import is_op, make_node, other_input, sole_consumer
from onnxrt.passes.registry import EXTENDED, rule


@rule("MatMulAddFusion", EXTENDED, order=140, ops=("MatMul",))
def fuse_matmul_add(g: Graph, mm: onnx.NodeProto) -> bool:
    """MatMul(A 2-D, B 2-D) -> Add(bias) into Gemm, as onnxruntime does (2-D only)."""
    if not is_op(mm, "MatMul"):
        return False
    add = sole_consumer(g, mm.output[0], "Add")
    if add is None:
        return False
    a_shape, b_shape = g.shape(mm.input[0]), g.shape(mm.input[1])
    c = other_input(add, mm.output[0])
    c_shape = g.shape(c) if c else None
    if a_shape is None or b_shape is None or c_shape is None:
        return False
    if len(a_shape) != 2 or len(b_shape) != 2 or g.elem_type(mm.input[0]) not in (
            TP.FLOAT, TP.DOUBLE, TP.FLOAT16):
        return False
    n_dim = b_shape[1]
    m_dim = a_shape[0]
    ok = (len(c_shape) == 1 and same_dim(c_shape[0], n_dim)) or (
        len(c_shape) == 2 and same_dim(c_shape[1], n_dim)
        and (c_shape[0] == 1 or same_dim(c_shape[0], m_dim)))
    if not ok or g.elem_type(c) != g.elem_type(mm.input[0]):
        return False
    new = make_node("Gemm", [mm.input[0], mm.input[1], c], [add.output[0]],
                (mm.name or "matmul") + "_gemm")
    g.replace([mm, add], new, add)
    return True
