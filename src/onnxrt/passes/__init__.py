"""Graph optimization passes, chosen by ``SessionOptions.graph_optimization_level``.

``optimize(model, level, disabled)`` returns the optimized model and the names of the passes
that changed it. Levels follow onnxruntime: basic (constant folding with shapes known
statically, dead nodes, Identity and inference Dropout, cast chains, Transpose pairs,
Reshape chains, Unsqueeze/Squeeze pairs), extended (Conv+BatchNormalization and per-channel
Mul/Add folded into Conv weights; FusedConv/FusedGemm with activations (a residual Add into
FusedConv's Z; a BatchNormalization left alone by Conv, with its activation, into a depthwise
1x1 FusedConv); MatMul+Add into Gemm; Gelu, FastGelu, BiasGelu; LayerNormalization,
SkipLayerNormalization; Attention and MultiHeadAttention, unidirectional from GPT-2's
causal buffer slice at static and dynamic shapes), all (weights pre-packed by the kernels at session creation).
Shapes are compared symbolically (``graph.same_shape``: equal numbers or equal
``dim_param`` names), so a model with a symbolic batch fuses as much as at a fixed one.
``disabled`` holds pass names as listed in ``pipeline.PASSES`` (onnxruntime's names).
Passes never modify the caller's model. Modules: ``graph`` (the editable view), ``pipeline``
(order and levels), ``constant_folding``, ``elimination``, ``fusions``, ``attention``.
"""

from __future__ import annotations

from onnxrt.passes.pipeline import PASSES, optimize, optimize_graph

__all__ = ["optimize", "optimize_graph", "PASSES"]
