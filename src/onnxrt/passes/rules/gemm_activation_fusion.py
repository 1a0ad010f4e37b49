"""The GemmActivationFusion rule (onnxruntime's name for it): Gemm -> activation into com.microsoft
FusedGemm (float32)."""

from __future__ import annotations

import onnx

from onnxrt.ir.graph import MS_DOMAIN, Graph, attr
from onnxrt.passes.patterns import copy_attrs, is_float32, is_op, make_node, sole_consumer
from onnxrt.passes.registry import EXTENDED, rule


_GEMM_ACTS = {"Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "Elu"}



@rule("GemmActivationFusion", EXTENDED, order=240, ops=("Gemm",))
def fuse_gemm_activation(g: Graph, gemm: onnx.NodeProto) -> bool:
    """Gemm -> activation into com.microsoft FusedGemm (float32)."""
    if not is_op(gemm, "Gemm") or not is_float32(g, gemm.input[0]):
        return False
    act = sole_consumer(g, gemm.output[0], *_GEMM_ACTS)
    if act is None:
        return False
    if len(gemm.input) > 2 and gemm.input[2]:
        cs = g.shape(gemm.input[2])   # onnxruntime's FusedGemm wants C broadcastable
        if cs is None:
            return False
    a_alpha = a_beta = None
    if act.op_type in ("LeakyRelu", "Elu"):
        a_alpha = float(attr(act, "alpha", 0.01 if act.op_type == "LeakyRelu" else 1.0))
    elif act.op_type == "HardSigmoid":
        a_alpha, a_beta = float(attr(act, "alpha", 0.2)), float(attr(act, "beta", 0.5))
    new = make_node("FusedGemm", list(gemm.input), [act.output[0]],
                (gemm.name or "gemm") + "_fused", MS_DOMAIN, activation=act.op_type,
                activation_alpha=a_alpha, activation_beta=a_beta)
    copy_attrs(gemm, new, skip=("broadcast",))
    g.replace([gemm, act], new, act)
    g.uses_domain(MS_DOMAIN)
    return True
