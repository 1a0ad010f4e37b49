"""The ConvActivationFusion rule (onnxruntime's name for it): Conv [-> Add(other)] -> activation
into com.microsoft FusedConv (float32). The Add becomes FusedConv's Z input: Y = act(conv(X, W)
+ B + Z)."""

from __future__ import annotations

import onnx

from onnxrt.ir.graph import MS_DOMAIN, Graph, same_shape
from onnxrt.passes.patterns import (activation, copy_attrs, is_float32, is_op, make_node,
                                     other_input, silu_tail)
from onnxrt.passes.registry import EXTENDED, rule


@rule("ConvActivationFusion", EXTENDED, order=220, ops=("Conv",))
def fuse_conv_activation(g: Graph, conv: onnx.NodeProto) -> bool:
    """Conv [-> Add(other)] -> activation into com.microsoft FusedConv (float32).
    The Add becomes FusedConv's Z input: Y = act(conv(X, W) + B + Z)."""
    if not is_op(conv, "Conv") or not is_float32(g, conv.input[0]):
        return False
    out = conv.output[0]
    silu = silu_tail(g, out)
    if silu is not None:
        # an extension: onnxruntime's FusedConv has no SiLU (YOLO's Conv-BN-SiLU)
        sig, mul = silu
        new = make_node("FusedConv", list(conv.input), [mul.output[0]],
                    (conv.name or "conv") + "_fused", MS_DOMAIN, activation="Silu")
        copy_attrs(conv, new)
        g.replace([conv, sig, mul], new, mul)
        g.uses_domain(MS_DOMAIN)
        return True
    if not g.only_use(out):
        return False
    nxt = g.consumers(out)[0]
    dead = [conv]
    z = None
    if is_op(nxt, "Add", "Sum") and len(nxt.input) == 2 and nxt.input[0] != nxt.input[1]:
        z = other_input(nxt, out)
        # onnxruntime's FusedConv adds Z without broadcasting: equal shapes, where a
        # symbolic batch ("N") counts as equal to itself
        if not same_shape(g.shape(out), g.shape(z)) or not g.only_use(nxt.output[0]):
            return False
        dead.append(nxt)
        nxt = g.consumers(nxt.output[0])[0]
    act = activation(g, nxt, onnxruntime_only=False)
    if act is None:
        if z is None:
            return False
        act_name, params, last = None, [], dead[-1]
    else:
        act_name, params = act
        last = nxt
        dead.append(nxt)
    ins = list(conv.input) + [""] * (3 - len(conv.input))
    if z is not None:
        ins = ins[:3] + [z]
    while ins and not ins[-1]:
        ins.pop()
    new = make_node("FusedConv", ins, [last.output[0]], (conv.name or "conv") + "_fused",
                MS_DOMAIN, activation=act_name,
                activation_params=params if params else None)
    copy_attrs(conv, new)
    g.replace(dead, new, last)
    g.uses_domain(MS_DOMAIN)
    return True
