"""The QDQLookupFusion rule: DequantizeLinear -> a chain of float element-wise ops of one
variable -> QuantizeLinear (BERT's Div -> Erf between a quantized bias Add and its
quantized Add, which QDQ quantization leaves in float) becomes a 256-entry table lookup.

With an 8-bit per-tensor input, the chain maps each of the 256 codes to one output code, so
the whole group is ``table[x]``: Cast(x -> int32) -> Gather(table). The table is the group
itself evaluated once on every code by the session's own kernels (the same float32 steps a
run would take), so the outputs are those of the float chain; an int8 code indexes from
the table's end (Gather's negative indices), where the table holds codes -128..-1.

A chain op is a unary element-wise op, or a binary one whose other input is a one-value
constant; every value inside the chain has that one reader. Runs after
QDQSelectorActionTransformer, which takes the groups that have an integer op of their own.
"""

from __future__ import annotations

import numpy as np
import onnx

from onnxrt.ir.graph import Graph
from onnxrt.passes.patterns import make_node
from onnxrt.passes.registry import EXTENDED, rule
from onnxrt.passes.rules.qdq_selector_action import _dq, _q

_UNARY = {"Erf", "Tanh", "Sigmoid", "Relu", "Exp", "Log", "Abs", "Neg", "Sqrt", "Reciprocal",
          "Softplus", "Softsign", "HardSigmoid", "HardSwish", "LeakyRelu", "Elu", "Selu",
          "Celu", "Gelu", "Mish", "Floor", "Ceil", "Round", "Sin", "Cos", "Identity"}
_BINARY = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"}
_MAX_CHAIN = 16


def _variable(g: Graph, n: onnx.NodeProto) -> str | None:
    """The input through which ``n`` is an element-wise function of one value (its other
    inputs one-value constants), float32 out; None where it is not such an op."""
    if n.domain not in ("", "ai.onnx") or len(n.output) != 1 or not n.input:
        return None
    if g.elem_type(n.output[0]) != onnx.TensorProto.FLOAT:
        return None
    if n.op_type in _UNARY:
        return n.input[0] if len(n.input) == 1 else None
    if n.op_type == "Clip":
        ok = all(not c or (g.const(c) is not None and g.const(c).size == 1)
                 for c in n.input[1:])
        return n.input[0] if ok else None
    if n.op_type in _BINARY and len(n.input) == 2:
        for x, other in ((n.input[0], n.input[1]), (n.input[1], n.input[0])):
            c = g.const(other)
            if g.const(x) is None and c is not None and c.size == 1:
                return x
    return None


@rule("QDQLookupFusion", EXTENDED, order=95, ops=("QuantizeLinear",))
def fuse_lookup(g: Graph, qn: onnx.NodeProto) -> bool:
    if g.evaluate is None or not qn.input or not qn.output:
        return False
    # walk back from the QuantizeLinear to the DequantizeLinear, one reader per value
    chain: list[onnx.NodeProto] = []
    v = qn.input[0]
    while True:
        n = g.producer(v)
        if n is None or len(chain) > _MAX_CHAIN:
            return False
        if n.op_type == "DequantizeLinear":
            break
        x = _variable(g, n)
        if x is None or not g.only_use(v):
            return False
        chain.append(n)
        v = x
    if not chain:
        return False
    dq = _dq(g, v)
    q = _q(g, chain[0].output[0])
    if dq is None or q is None or not dq.per_tensor or q.node is not qn:
        return False
    # the table: the group evaluated on every code of the input type, node by node
    cur = np.arange(256, dtype=np.uint8).view(dq.zp.dtype)
    var = dq.data
    for n in [dq.node] + chain[::-1] + [qn]:
        args = [cur if x == var else (g.const(x) if x else None) for x in n.input]
        vals = g.evaluate(n, args, tuple(g.types.get(x) for x in n.input))
        if not vals or not isinstance(vals[0], np.ndarray) or vals[0].shape != (256,):
            return False
        cur, var = vals[0], n.output[0]
    if cur.dtype != q.zp.dtype:
        return False
    base = qn.name or "lookup"
    table = g.add_const(np.ascontiguousarray(cur), base + "_table")
    idx = g.fresh(base + "_codes")
    cast = make_node("Cast", [dq.data], [idx], base + "_codes", to=onnx.TensorProto.INT32)
    gather = make_node("Gather", [table, idx], [qn.output[0]], base + "_lookup", axis=0)
    dead = chain + [qn] + ([dq.node] if g.only_use(dq.node.output[0]) else [])
    g.replace(dead, [cast, gather], qn)
    return True

