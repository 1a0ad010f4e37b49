"""The BatchNormMulAddFusion rule (onnxruntime's name for it): BatchNormalization -> Mul/Add by
per-channel constants fold into its scale and bias (Caffe2 exports, densenet: BN then a separate
affine)."""

from __future__ import annotations

import numpy as np
import onnx

from onnxrt.ir.graph import Graph, attr
from onnxrt.passes.patterns import channel_vector, is_op, other_input, producer, unused
from onnxrt.passes.registry import EXTENDED, rule


@rule("BatchNormMulAddFusion", EXTENDED, order=100, ops=("Add", "Mul"))
def fuse_bn_mul_add(g: Graph, n: onnx.NodeProto) -> bool:
    """BatchNormalization -> Mul/Add by per-channel constants fold into its scale and bias
    (Caffe2 exports, densenet: BN then a separate affine)."""
    if not is_op(n, "Add", "Mul") or len(n.input) != 2:
        return False
    bn = producer(g, n.input[0], "BatchNormalization") or \
        producer(g, n.input[1], "BatchNormalization")
    if bn is None or len(bn.input) != 5 or not g.only_use(bn.output[0], n):
        return False
    if attr(bn, "training_mode", 0) or attr(bn, "spatial", 1) != 1 or \
            not unused(g, list(bn.output[1:])):
        return False
    c = g.const(other_input(n, bn.output[0]) or "")
    scale, bias = g.const(bn.input[1]), g.const(bn.input[2])
    r = g.rank(bn.input[0])
    if c is None or scale is None or bias is None or r is None or c.dtype != scale.dtype:
        return False
    vec = channel_vector(c, scale.size, r)
    if vec is None:
        return False
    vec = vec.astype(np.float64)
    s64, b64 = scale.astype(np.float64).reshape(-1), bias.astype(np.float64).reshape(-1)
    if n.op_type == "Mul":
        s64, b64 = s64 * vec, b64 * vec
    else:
        b64 = b64 + vec
    new = onnx.NodeProto()
    new.CopyFrom(bn)
    new.input[1] = g.add_const(s64.astype(scale.dtype), bn.input[1])
    new.input[2] = g.add_const(b64.astype(bias.dtype), bn.input[2])
    del new.output[:]
    new.output.append(n.output[0])
    g.replace([bn, n], new, n)
    return True
