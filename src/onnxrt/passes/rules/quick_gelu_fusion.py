"""The QuickGeluFusion rule (onnxruntime's name for it): x * Sigmoid(x) (SiLU, the MLP
activation of Llama-style decoders) or x * Sigmoid(alpha * x) with a constant alpha into
com.microsoft QuickGelu(x, alpha): one node instead of two or three, float32.

It runs after ConvActivationFusion, which folds a Conv's SiLU into FusedConv first."""

from __future__ import annotations

import onnx

from onnxrt.ir.graph import MS_DOMAIN, Graph
from onnxrt.passes.patterns import is_float32, is_op, make_node, other_input, producer
from onnxrt.passes.registry import EXTENDED, rule


@rule("QuickGeluFusion", EXTENDED, order=250, ops=("Sigmoid",))
def fuse_quick_gelu(g: Graph, sig: onnx.NodeProto) -> bool:
    """Mul(x, Sigmoid(x)) or Mul(x, Sigmoid(Mul(x, alpha))) into QuickGelu(x, alpha)."""
    if not is_op(sig, "Sigmoid") or not g.only_use(sig.output[0]):
        return False
    mul = g.consumers(sig.output[0])[0]
    if not is_op(mul, "Mul"):
        return False
    x = other_input(mul, sig.output[0])
    if x is None or x == sig.output[0] or not is_float32(g, x):
        return False
    dead = [sig, mul]
    alpha = 1.0
    if sig.input[0] != x:
        pre = producer(g, sig.input[0], "Mul")
        if pre is None or not g.only_use(sig.input[0], sig) or other_input(pre, x) is None:
            return False
        cname = other_input(pre, x) or ""
        c, shape = g.scalar(cname), g.shape(x)
        # a constant of higher rank than x would broadcast x's shape up
        if c is None or shape is None or g.const(cname).ndim > len(shape):
            return False
        alpha = c
        dead.insert(0, pre)
    new = make_node("QuickGelu", [x], [mul.output[0]], (mul.name or "mul") + "_quick_gelu",
                    MS_DOMAIN, alpha=alpha)
    g.replace(dead, new, mul)
    g.uses_domain(MS_DOMAIN)
    return True
