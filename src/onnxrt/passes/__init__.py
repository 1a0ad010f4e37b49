"""Graph optimization passes, chosen by ``SessionOptions.graph_optimization_level``.

``optimize_graph(graph, level, disabled, kernels)`` rewrites a session's graph in place and
returns the names of the rules that changed it (``optimize`` does the same on a copy of a
ModelProto). Levels follow onnxruntime: basic (constant folding with shapes known
statically, dead nodes, Identity and inference Dropout, cast chains, Transpose pairs,
Reshape chains, Unsqueeze/Squeeze pairs), extended (Conv+BatchNormalization and per-channel
Mul/Add folded into Conv weights; FusedConv/FusedGemm with activations (a residual Add into
FusedConv's Z; a BatchNormalization left alone by Conv, with its activation, into a depthwise
1x1 FusedConv); MatMul+Add into Gemm; Gelu, FastGelu, BiasGelu; LayerNormalization,
SkipLayerNormalization; Attention and MultiHeadAttention, unidirectional from GPT-2's
causal buffer slice at static and dynamic shapes), all (weights pre-packed by the kernels
at session creation). Shapes are compared symbolically (``ir.graph.same_shape``: equal
numbers or equal ``dim_param`` names), so a model with a symbolic batch fuses as much as at
a fixed one. ``disabled`` holds rule names (onnxruntime's; ``rule_names()`` lists them).
Modules: ``registry`` (the rule list as data), ``rules/`` (one rule per file, registered
there), ``patterns`` (sub-patterns the rules share), ``dead_nodes``, ``pipeline`` (the
driver).
"""

from __future__ import annotations

from onnxrt.passes.pipeline import optimize, optimize_graph, rule_names

__all__ = ["optimize", "optimize_graph", "rule_names", "QDQ_RULES"]

# the rules session.disable_quant_qdq = 1 turns off (onnxruntime's QDQ transformers; the
# dynamic-quantization fusions are not among them)
QDQ_RULES = frozenset({"QDQSelectorActionTransformer", "QDQLookupFusion"})
