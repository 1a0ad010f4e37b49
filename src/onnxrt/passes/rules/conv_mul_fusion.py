"""The ConvMulFusion rule (onnxruntime's name for it): Conv -> Mul by a per-output-channel
constant, folded into the Conv's weight and bias."""

from __future__ import annotations

import onnx

from onnxrt.ir.graph import Graph
from onnxrt.passes.patterns import conv_affine
from onnxrt.passes.registry import EXTENDED, rule


@rule("ConvMulFusion", EXTENDED, order=120, ops=("Mul",))
def fuse_conv_mul(g: Graph, n: onnx.NodeProto) -> bool:
    return conv_affine(g, n, "Mul")
