"""The LayerNormFusion rule (onnxruntime's name for it):
ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div[/Mul/Add] over the last axis into LayerNormalization
(ONNX's at opset >= 17, onnxruntime's contrib op of the same name and domain before)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper

from onnxrt.ir.graph import Graph
from onnxrt.passes.patterns import (is_op, last_axis, make_node, near, other_input, reduce_axes,
                                     sole_consumer)
from onnxrt.passes.registry import EXTENDED, rule


@rule("LayerNormFusion", EXTENDED, order=180, ops=("ReduceMean",))
def fuse_layer_norm(g: Graph, r1: onnx.NodeProto) -> bool:
    """ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div[/Mul/Add] over the last axis into
    LayerNormalization (ONNX's at opset >= 17, onnxruntime's contrib op of the same name
    and domain before)."""
    if not is_op(r1, "ReduceMean"):
        return False
    x = r1.input[0]
    if not last_axis(g, x, reduce_axes(g, r1)) or g.elem_type(x) not in (
            TP.FLOAT, TP.FLOAT16):
        return False
    sub = sole_consumer(g, r1.output[0], "Sub")
    if sub is None or list(sub.input) != [x, r1.output[0]]:
        return False
    d = sub.output[0]
    users = g.consumers(d)
    if g.is_output(d) or len(users) != 2:
        return False
    sq = next((u for u in users if (is_op(u, "Pow") and u.input[0] == d
                                    and near(g.scalar(u.input[1]), 2.0, 1e-6))
               or (is_op(u, "Mul") and list(u.input) == [d, d])), None)
    div = next((u for u in users if is_op(u, "Div") and list(u.input)[0] == d), None)
    if sq is None or div is None:
        return False
    r2 = sole_consumer(g, sq.output[0], "ReduceMean")
    if r2 is None or not last_axis(g, x, reduce_axes(g, r2)):
        return False
    add_eps = sole_consumer(g, r2.output[0], "Add")
    eps = g.scalar(other_input(add_eps, r2.output[0]) or "") if add_eps else None
    if eps is None:
        return False
    sqrt = sole_consumer(g, add_eps.output[0], "Sqrt")
    if sqrt is None or list(div.input) != [d, sqrt.output[0]] or \
            not g.only_use(sqrt.output[0], div):
        return False
    nodes = [r1, sub, sq, r2, add_eps, sqrt, div]
    out = div.output[0]
    last = div
    h = g.shape(x)[-1] if g.shape(x) else None
    gamma = beta = None
    mul = sole_consumer(g, out, "Mul")
    if mul is not None:
        gamma = g.const(other_input(mul, out) or "")
        if gamma is not None and (gamma.ndim > 1 and any(s != 1 for s in gamma.shape[:-1])):
            gamma = None
        if gamma is not None:
            nodes.append(mul)
            out, last = mul.output[0], mul
            add = sole_consumer(g, out, "Add")
            if add is not None:
                beta = g.const(other_input(add, out) or "")
                if beta is not None and beta.ndim > 1 and any(
                        s != 1 for s in beta.shape[:-1]):
                    beta = None
                if beta is not None:
                    nodes.append(add)
                    out, last = add.output[0], add
    dt = helper.tensor_dtype_to_np_dtype(g.elem_type(x))
    if gamma is None:
        if not isinstance(h, int):
            return False
        gamma = np.ones(h, dt)
    size = h if isinstance(h, int) else max(gamma.size, 1 if beta is None else beta.size)
    try:
        gamma = np.broadcast_to(gamma.reshape(-1), (size,)).astype(dt)
        beta = None if beta is None else np.broadcast_to(beta.reshape(-1),
                                                         (size,)).astype(dt)
    except ValueError:
        return False
    ins = [x, g.add_const(gamma, "ln_gamma")]
    if beta is not None:
        ins.append(g.add_const(beta, "ln_beta"))
    # before opset 17 this is onnxruntime's contrib LayerNormalization, which it also
    # registers in the ONNX domain
    new = make_node("LayerNormalization", ins, [out], (r1.name or "ln") + "_layernorm",
                axis=-1, epsilon=float(eps))
    g.replace(nodes, new, last)
    return True
