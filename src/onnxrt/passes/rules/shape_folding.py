"""The ShapeFolding rule (onnxruntime's name for it): Shape/Size of values whose static shape is
fully known become constants."""

from __future__ import annotations

import numpy as np
import onnx

from onnxrt.ir.graph import Graph, attr
from onnxrt.passes.registry import BASIC, rule


@rule("ShapeFolding", BASIC, order=30, ops=("Shape", "Size"))
def fold_shapes(g: Graph, n: onnx.NodeProto) -> bool:
    """Shape/Size of values whose static shape is fully known become constants."""
    if n.op_type not in ("Shape", "Size") or n.domain not in ("", "ai.onnx"):
        return False
    if not n.input or g.is_output(n.output[0]):
        return False
    s = g.shape(n.input[0])
    if s is None or not all(isinstance(d, int) for d in s):
        return False
    if n.op_type == "Size":
        val = np.array(int(np.prod(s, dtype=np.int64)), dtype=np.int64)
    else:
        r = len(s)
        start = int(attr(n, "start", 0))
        end = attr(n, "end", None)
        start = min(max(start + r if start < 0 else start, 0), r)
        end = r if end is None else int(end)
        end = min(max(end + r if end < 0 else end, 0), r)
        val = np.array(s[start:end], dtype=np.int64)
    name = g.add_const(val, n.output[0])
    if not g.can_bypass(n.output[0]):
        return False
    g.replace_uses(n.output[0], name)
    g.remove([n])
    return True
