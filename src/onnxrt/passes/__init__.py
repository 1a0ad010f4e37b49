"""Graph optimization passes, chosen by ``SessionOptions.graph_optimization_level``.

``optimize(model, level, disabled)`` returns the optimized model and the names of the passes
that changed it. Levels follow onnxruntime: basic (constant folding with shapes known
statically, dead nodes, Identity and inference Dropout, cast chains, Transpose pairs,
Reshape chains, Unsqueeze/Squeeze pairs), extended (Conv+BatchNormalization and per-channel
Mul/Add folded into Conv weights; FusedConv/FusedGemm with activations; MatMul+Add into
Gemm; Gelu, FastGelu, BiasGelu; LayerNormalization, SkipLayerNormalization; Attention and
MultiHeadAttention), all (weights pre-packed by the kernels at session creation).
``disabled`` holds pass names as listed in ``pipeline.PASSES`` (onnxruntime's names).
Passes never modify the caller's model. Modules: ``graph`` (the editable view), ``pipeline``
(order and levels), ``constant_folding``, ``elimination``, ``fusions``, ``attention``.
"""

from __future__ import annotations

from onnxrt.passes.pipeline import PASSES, optimize

__all__ = ["optimize", "PASSES"]
