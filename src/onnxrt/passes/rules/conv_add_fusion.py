"""The ConvAddFusion rule (onnxruntime's name for it): Conv -> Add by a per-output-channel
constant, folded into the Conv's bias."""

from __future__ import annotations

import onnx

from onnxrt.ir.graph import Graph
from onnxrt.passes.patterns import conv_affine
from onnxrt.passes.registry import EXTENDED, rule


@rule("ConvAddFusion", EXTENDED, order=130, ops=("Add",))
def fuse_conv_add(g: Graph, n: onnx.NodeProto) -> bool:
    return conv_affine(g, n, "Add")
