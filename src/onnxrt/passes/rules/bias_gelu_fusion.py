"""The BiasGeluFusion rule (onnxruntime's name for it): Add(x, bias 1-D constant) -> Gelu
(com.microsoft) into BiasGelu; into FastGelu's own bias input for FastGelu."""

from __future__ import annotations

import numpy as np
import onnx

from onnxrt.ir.graph import MS_DOMAIN, Graph
from onnxrt.passes.patterns import is_float32, make_node, producer
from onnxrt.passes.registry import EXTENDED, rule


@rule("BiasGeluFusion", EXTENDED, order=170, ops=("Gelu", "FastGelu"))
def fuse_bias_gelu(g: Graph, n: onnx.NodeProto) -> bool:
    """Add(x, bias 1-D constant) -> Gelu (com.microsoft) into BiasGelu; into FastGelu's own
    bias input for FastGelu."""
    if n.domain != MS_DOMAIN or n.op_type not in ("Gelu", "FastGelu") or len(n.input) != 1:
        return False
    add = producer(g, n.input[0], "Add")
    if add is None or not g.only_use(n.input[0], n) or len(add.input) != 2:
        return False
    for i in (0, 1):
        bias = g.const(add.input[i])
        x = add.input[1 - i]
        s = g.shape(x)
        if bias is not None and bias.ndim == 1 and s is not None and s[-1] == bias.shape[0] \
                and is_float32(g, x) and bias.dtype == np.float32:
            break
    else:
        return False
    op = "BiasGelu" if n.op_type == "Gelu" else "FastGelu"
    new = make_node(op, [x, add.input[i]], [n.output[0]], (n.name or "gelu") + "_bias",
                MS_DOMAIN)
    g.replace([add, n], new, n)
    return True
