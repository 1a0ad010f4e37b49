"""The SkipLayerNormFusion rule (onnxruntime's name for it): Add(x, skip) [with a bias Add before
it] -> LayerNormalization(axis -1) into com.microsoft SkipLayerNormalization (3-D float32 inputs
of equal shapes)."""

from __future__ import annotations

import onnx

from onnxrt.ir.graph import MS_DOMAIN, Graph, attr
from onnxrt.passes.patterns import is_float32, make_node, other_input, producer, unused
from onnxrt.passes.registry import EXTENDED, rule


@rule("SkipLayerNormFusion", EXTENDED, order=200, ops=("LayerNormalization",))
def fuse_skip_layer_norm(g: Graph, ln: onnx.NodeProto) -> bool:
    """Add(x, skip) [with a bias Add before it] -> LayerNormalization(axis -1) into
    com.microsoft SkipLayerNormalization (3-D float32 inputs of equal shapes)."""
    if ln.op_type != "LayerNormalization" or ln.domain not in ("", "ai.onnx", MS_DOMAIN):
        return False
    if attr(ln, "axis", -1) not in (-1, 2) or len(ln.input) < 2 or \
            not unused(g, list(ln.output[1:])):
        return False
    add = producer(g, ln.input[0], "Add")
    if add is None or len(add.input) != 2 or not is_float32(g, add.output[0]):
        return False
    a, b = add.input
    sa, sb = g.shape(a), g.shape(b)
    if sa is None or sb is None or len(sa) != 3 or tuple(sa) != tuple(sb) or \
            any(d is None for d in sa):
        return False
    gamma = g.const(ln.input[1])
    beta = g.const(ln.input[2]) if len(ln.input) > 2 and ln.input[2] else None
    if gamma is None or gamma.ndim != 1 or (beta is not None and beta.ndim != 1):
        return False
    nodes = [add, ln]
    ins = [a, b, ln.input[1], ln.input[2] if beta is not None else ""]
    # a bias added right before (MatMul -> Add(bias) -> Add(residual)) joins too
    for i, v in ((0, a), (1, b)):
        pb = producer(g, v, "Add")
        if pb is None or not g.only_use(v, add):
            continue
        bias_in = next((j for j in pb.input if g.const(j) is not None
                        and g.const(j).ndim == 1 and g.shape(other_input(pb, j) or "")
                        is not None and tuple(g.shape(other_input(pb, j))) == tuple(sa)),
                       None)
        if bias_in is not None:
            ins[i] = other_input(pb, bias_in)
            ins.append(bias_in)
            nodes.insert(0, pb)
            break
    outs = [ln.output[0]]
    if g.consumers(add.output[0]) != [ln] or g.is_output(add.output[0]):
        outs += ["", "", add.output[0]]
    while len(ins) > 3 and not ins[-1]:
        ins.pop()
    new = make_node("SkipLayerNormalization", ins, outs, (ln.name or "ln") + "_skip",
                MS_DOMAIN, epsilon=float(attr(ln, "epsilon", 1e-5)))
    g.replace(nodes, new, ln)
    g.uses_domain(MS_DOMAIN)
    return True
