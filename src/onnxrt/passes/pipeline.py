"""The pass list by level and the driver that runs it.

Pass names follow onnxruntime's optimizer names so ``disabled_optimizers`` lists written
for onnxruntime keep working. Basic passes repeat until nothing changes (folding exposes
eliminations and the other way round); fusions run once each, in an order where an earlier
fusion makes the next one's pattern (Conv+BN before Conv+activation, MatMul+Add before
Gemm+activation, LayerNorm before SkipLayerNorm).
"""

from __future__ import annotations

from typing import Callable

import onnx

from onnxrt.passes import constant_folding as cf
from onnxrt.passes import elimination as el
from onnxrt.passes import fusions as fu
from onnxrt.framework.kernel_lookup import KernelLookup, evaluate_node
from onnxrt.ir.graph import Graph
from onnxrt.ir.shapes import infer_types

__all__ = ["PASSES", "optimize", "optimize_graph"]

BASIC, EXTENDED, LAYOUT = 1, 2, 3

PASSES: list[tuple[str, int, Callable[[Graph], bool]]] = [
    ("EliminateIdentity", BASIC, el.eliminate_identity),
    ("EliminateDropout", BASIC, el.eliminate_dropout),
    ("ShapeFolding", BASIC, cf.fold_shapes),
    ("ConstantFolding", BASIC, cf.fold_constants),
    ("CastElimination", BASIC, el.eliminate_casts),
    ("TransposeOptimizer", BASIC, el.fuse_transposes),
    ("ReshapeFusion", BASIC, el.fuse_reshapes),
    ("UnsqueezeElimination", BASIC, el.eliminate_unsqueeze_squeeze),
    ("BatchNormMulAddFusion", EXTENDED, fu.fuse_bn_mul_add),
    ("ConvBNFusion", EXTENDED, fu.fuse_conv_bn),
    ("ConvMulFusion", EXTENDED, fu.fuse_conv_mul),
    ("ConvAddFusion", EXTENDED, fu.fuse_conv_add),
    ("MatMulAddFusion", EXTENDED, fu.fuse_matmul_add),
    ("GeluFusion", EXTENDED, fu.fuse_gelu),
    ("FastGeluFusion", EXTENDED, fu.fuse_fast_gelu),
    ("BiasGeluFusion", EXTENDED, fu.fuse_bias_gelu),
    ("LayerNormFusion", EXTENDED, fu.fuse_layer_norm),
    ("SimplifiedLayerNormFusion", EXTENDED, fu.fuse_rms_norm),
    ("SkipLayerNormFusion", EXTENDED, fu.fuse_skip_layer_norm),
    ("AttentionFusion", EXTENDED, fu.fuse_attention),
    ("ConvActivationFusion", EXTENDED, fu.fuse_conv_activation),
    ("BatchNormActivationFusion", EXTENDED, fu.fuse_bn_activation),
    ("GemmActivationFusion", EXTENDED, fu.fuse_gemm_activation),
]

_MAX_ROUNDS = 4


def optimize(model: onnx.ModelProto, level: int, disabled: frozenset[str] = frozenset(),
             kernels: KernelLookup | None = None) -> tuple[onnx.ModelProto, list[str]]:
    """The optimized model and the names of the passes that changed it (the caller's model
    is not modified); ``kernels`` evaluate constant folding (without, only Constant nodes
    and shapes fold). Sessions run ``optimize_graph`` on their graph instead."""
    if level <= 0 or not model.graph.node:
        return model, []
    g = Graph(model)
    infer_types(g)
    applied = optimize_graph(g, level, disabled, kernels)
    return g.to_model(), applied


def optimize_graph(g: Graph, level: int, disabled: frozenset[str] = frozenset(),
                   kernels: KernelLookup | None = None) -> list[str]:
    """Rewrite ``g`` in place by the passes of ``level``; the names of those that changed
    it. ``kernels``: the session's host kernels, which constant folding evaluates nodes
    with."""
    if level <= 0 or not g.nodes:
        return []
    if kernels is not None:
        opsets = g.opsets
        g.evaluate = lambda node, args, types: evaluate_node(kernels, node, opsets, args,
                                                             types)
    if "ConstantFolding" in disabled:   # onnxruntime folds shapes inside ConstantFolding
        disabled = disabled | {"ShapeFolding"}
    applied: list[str] = []
    basic = [(n, f) for n, lv, f in PASSES if lv == BASIC and n not in disabled]
    fusions = [(n, f) for n, lv, f in PASSES if BASIC < lv <= level and n not in disabled]

    def run(name: str, fn: Callable[[Graph], bool]) -> bool:
        if fn(g):
            if name not in applied:
                applied.append(name)
            if el.eliminate_dead(g) and "DeadNodeElimination" not in applied:
                applied.append("DeadNodeElimination")
            return True
        return False

    if el.eliminate_dead(g):
        applied.append("DeadNodeElimination")
    for _ in range(_MAX_ROUNDS):
        if not any([run(n, f) for n, f in basic]):
            break
    for n, f in fusions:
        run(n, f)
    g.evaluate = None
    g.prune_consts()
    return applied
