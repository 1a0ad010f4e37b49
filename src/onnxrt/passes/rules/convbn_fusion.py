"""The ConvBNFusion rule (onnxruntime's name for it): Conv -> BatchNormalization (inference) folds
into the Conv's weight and bias."""

from __future__ import annotations

import numpy as np
import onnx

from onnxrt.ir.graph import Graph, attr
from onnxrt.passes.patterns import conv_weights, is_op, producer, rewrite_conv, unused
from onnxrt.passes.registry import EXTENDED, rule


@rule("ConvBNFusion", EXTENDED, order=110, ops=("BatchNormalization",))
def fuse_conv_bn(g: Graph, bn: onnx.NodeProto) -> bool:
    """Conv -> BatchNormalization (inference) folds into the Conv's weight and bias."""
    if not is_op(bn, "BatchNormalization") or len(bn.input) != 5:
        return False
    if attr(bn, "training_mode", 0) or attr(bn, "spatial", 1) != 1 or \
            not unused(g, list(bn.output[1:])):
        return False
    conv = producer(g, bn.input[0], "Conv")
    if conv is None or not g.only_use(conv.output[0], bn):
        return False
    wb = conv_weights(g, conv)
    ps = [g.const(x) for x in bn.input[1:]]
    if wb is None or any(p is None for p in ps):
        return False
    w, m, dt, b = wb
    scale, bias, mean, var = (np.asarray(p, np.float64).reshape(-1) for p in ps)
    if not all(p.size == m for p in (scale, bias, mean, var)):
        return False
    s = scale / np.sqrt(var + float(attr(bn, "epsilon", 1e-5)))
    rewrite_conv(g, conv, w, s, (b - mean) * s + bias, dt, bn.output[0], [conv, bn], bn)
    return True
