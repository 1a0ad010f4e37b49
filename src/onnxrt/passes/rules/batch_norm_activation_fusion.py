"""The BatchNormActivationFusion rule (onnxruntime's name for it): BatchNormalization (inference,
not after a Conv it folds into) -> activation into a per-channel FusedConv: a depthwise 1x1
convolution is the same affine map (weight scale / sqrt(var + eps), bias shift), and FusedConv
applies the activation in the same pass (densenet: Concat -> BN -> Relu -> Conv). float32 images
only."""

from __future__ import annotations

import numpy as np
import onnx

from onnxrt.ir.graph import MS_DOMAIN, Graph, attr
from onnxrt.passes.patterns import activation, is_float32, is_op, make_node, sole_consumer, unused
from onnxrt.passes.registry import EXTENDED, rule


@rule("BatchNormActivationFusion", EXTENDED, order=230, ops=("BatchNormalization",))
def fuse_bn_activation(g: Graph, bn: onnx.NodeProto) -> bool:
    """BatchNormalization (inference, not after a Conv it folds into) -> activation into a
    per-channel FusedConv: a depthwise 1x1 convolution is the same affine map (weight
    scale / sqrt(var + eps), bias shift), and FusedConv applies the activation in the same
    pass (densenet: Concat -> BN -> Relu -> Conv). float32 images only."""
    if not is_op(bn, "BatchNormalization") or len(bn.input) != 5 or \
            not is_float32(g, bn.input[0]):
        return False
    if attr(bn, "training_mode", 0) or attr(bn, "spatial", 1) != 1 or \
            not unused(g, list(bn.output[1:])):
        return False
    s = g.shape(bn.input[0])
    if s is None or not 3 <= len(s) <= 5:
        return False
    act_node = sole_consumer(g, bn.output[0], "Relu", "Clip", "LeakyRelu", "Sigmoid",
                             "Tanh", "HardSigmoid")
    act = activation(g, act_node) if act_node is not None else None
    ps = [g.const(x) for x in bn.input[1:]]
    if act is None or any(p is None for p in ps):
        return False
    scale, bias, mean, var = (np.asarray(p, np.float64).reshape(-1) for p in ps)
    m = scale.size
    if not all(p.size == m for p in (bias, mean, var)) or (
            isinstance(s[1], int) and s[1] != m):
        return False
    mul = scale / np.sqrt(var + float(attr(bn, "epsilon", 1e-5)))
    spatial = len(s) - 2
    w = g.add_const(mul.astype(np.float32).reshape((m, 1) + (1,) * spatial), "bn_scale")
    b = g.add_const((bias - mean * mul).astype(np.float32), "bn_shift")
    act_name, params = act
    new = make_node("FusedConv", [bn.input[0], w, b], [act_node.output[0]],
                (bn.name or "bn") + "_fused", MS_DOMAIN, activation=act_name,
                activation_params=params if params else None, group=m,
                kernel_shape=[1] * spatial, strides=[1] * spatial,
                pads=[0] * (2 * spatial), dilations=[1] * spatial)
    g.replace([bn, act_node], new, act_node)
    g.uses_domain(MS_DOMAIN)
    return True
