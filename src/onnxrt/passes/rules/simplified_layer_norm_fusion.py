"""The SimplifiedLayerNormFusion rule (onnxruntime's name for it): x / sqrt(mean(x^2, -1) + eps) *
gamma (T5, LLaMA) into SimplifiedLayerNormalization, which onnxruntime registers as a contrib op
of the ONNX domain."""

from __future__ import annotations

import numpy as np
import onnx

from onnxrt.ir.graph import Graph
from onnxrt.passes.patterns import (is_float32, is_op, last_axis, make_node, near, other_input,
                                     producer, reduce_axes, sole_consumer)
from onnxrt.passes.registry import EXTENDED, rule


@rule("SimplifiedLayerNormFusion", EXTENDED, order=190, ops=("ReduceMean",))
def fuse_rms_norm(g: Graph, r: onnx.NodeProto) -> bool:
    """x / sqrt(mean(x^2, -1) + eps) * gamma (T5, LLaMA) into SimplifiedLayerNormalization,
    which onnxruntime registers as a contrib op of the ONNX domain."""
    if not is_op(r, "ReduceMean"):
        return False
    sq = producer(g, r.input[0], "Pow", "Mul")
    if sq is None or not g.only_use(r.input[0], r):
        return False
    x = sq.input[0]
    if not ((sq.op_type == "Pow" and near(g.scalar(sq.input[1]), 2.0, 1e-6))
            or (sq.op_type == "Mul" and sq.input[1] == x)):
        return False
    if not last_axis(g, x, reduce_axes(g, r)) or not is_float32(g, x):
        return False
    add = sole_consumer(g, r.output[0], "Add")
    eps = g.scalar(other_input(add, r.output[0]) or "") if add else None
    sqrt = sole_consumer(g, add.output[0], "Sqrt") if eps is not None else None
    if sqrt is None or not g.only_use(sqrt.output[0]):
        return False
    nodes = [sq, r, add, sqrt]
    nxt = g.consumers(sqrt.output[0])[0]
    if is_op(nxt, "Div") and list(nxt.input) == [x, sqrt.output[0]]:
        nodes.append(nxt)
    elif is_op(nxt, "Reciprocal") or (is_op(nxt, "Div") and nxt.input[1] == sqrt.output[0]
                                      and near(g.scalar(nxt.input[0]), 1.0, 1e-6)):
        mul = sole_consumer(g, nxt.output[0], "Mul")
        if mul is None or other_input(mul, nxt.output[0]) != x:
            return False
        nodes += [nxt, mul]
    else:
        return False
    out = nodes[-1].output[0]
    scale = sole_consumer(g, out, "Mul")
    gamma = g.const(other_input(scale, out) or "") if scale is not None else None
    h = (g.shape(x) or [None])[-1]
    if gamma is None or gamma.ndim > 1 and any(d != 1 for d in gamma.shape[:-1]):
        return False
    try:
        gamma = np.broadcast_to(gamma.reshape(-1), (h if isinstance(h, int)
                                                    else gamma.size,)).astype(np.float32)
    except ValueError:
        return False
    nodes.append(scale)
    new = make_node("SimplifiedLayerNormalization", [x, g.add_const(gamma, "rms_gamma")],
                [scale.output[0]], (r.name or "rms") + "_rmsnorm", axis=-1,
                epsilon=float(eps))
    g.replace(nodes, new, scale)
    return True
