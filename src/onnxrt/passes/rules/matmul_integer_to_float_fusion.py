"""The MatMulIntegerToFloatFusion rule (onnxruntime's name for it): the chain
``quantize_dynamic`` writes after each quantized product -- MatMulInteger -> Cast to float
-> Mul by (a_scale * b_scale) [-> Add of a per-column bias] -- into one com.microsoft
MatMulIntegerToFloat, whose kernel scales the int32 sums (and adds the bias) as it writes
them instead of materializing int32 and float copies of the product."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as TP

from onnxrt.ir.graph import MS_DOMAIN, Graph, attr
from onnxrt.passes.patterns import is_op, make_node, other_input, producer, sole_consumer
from onnxrt.passes.registry import EXTENDED, rule

_Q8 = (TP.UINT8, TP.INT8)


def _scales(g: Graph, a: str, s: str) -> tuple[str, str] | None:
    """(a_scale, b_scale) of the scale product ``s`` = Mul(a_scale, b_scale): the factor
    that a DynamicQuantizeLinear of A gave is A's; else the scalar constant one."""
    m = producer(g, s, "Mul")
    if m is None or len(m.input) != 2:
        return None
    x, y = m.input
    dql = producer(g, a, "DynamicQuantizeLinear")
    if dql is not None and len(dql.output) > 1:
        if x == dql.output[1]:
            return x, y
        if y == dql.output[1]:
            return y, x
        return None
    sx, sy = g.const(x), g.const(y)
    if sx is not None and sx.size == 1:
        return x, y
    if sy is not None and sy.size == 1:
        return y, x
    return None


@rule("MatMulIntegerToFloatFusion", EXTENDED, order=92, ops=("MatMulInteger",))
def fuse_matmul_integer_to_float(g: Graph, mmi: onnx.NodeProto) -> bool:
    if not is_op(mmi, "MatMulInteger") or len(mmi.input) < 2:
        return False
    a, b = mmi.input[0], mmi.input[1]
    if g.elem_type(a) not in _Q8 or g.elem_type(b) not in _Q8:
        return False
    cast = sole_consumer(g, mmi.output[0], "Cast")
    if cast is None or attr(cast, "to") != TP.FLOAT:
        return False
    mul = sole_consumer(g, cast.output[0], "Mul")
    s = other_input(mul, cast.output[0]) if mul is not None else None
    sc = _scales(g, a, s) if s else None
    if sc is None:
        return False
    a_scale, b_scale = sc
    n = g.shape(b)[-1] if g.shape(b) else None
    bs = g.shape(b_scale)
    if bs is None or (int(np.prod(bs)) != 1 and (len(bs) != 1 or bs[0] != n)):
        return False
    ins = [a, b, a_scale, b_scale, mmi.input[2] if len(mmi.input) > 2 else "",
           mmi.input[3] if len(mmi.input) > 3 else ""]
    dead, out, at = [mmi, cast, mul], mul.output[0], mul
    add = sole_consumer(g, out, "Add")
    bias = other_input(add, out) if add is not None else None
    bv = g.const(bias) if bias else None
    if (bv is not None and bv.dtype == np.float32 and bv.ndim == 1 and isinstance(n, int)
            and bv.shape[0] == n):
        ins.append(bias)
        dead, out, at = dead + [add], add.output[0], add
    while ins and not ins[-1]:
        ins.pop()
    new = make_node("MatMulIntegerToFloat", ins, [out], (mmi.name or "matmul") + "_float",
                    MS_DOMAIN)
    g.replace(dead, new, at)
    g.uses_domain(MS_DOMAIN)
    return True
