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
from onnxrt.passes.graph import Graph

__all__ = ["PASSES", "optimize"]

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
    ("GemmActivationFusion", EXTENDED, fu.fuse_gemm_activation),
]

_MAX_ROUNDS = 4


def _without_weights(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with large initializers replaced by typed inputs: shape inference needs
    their shapes only, and serializing hundreds of MB of weights for it is slow."""
    g0 = model.graph
    if not any(len(t.raw_data) > _SMALL for t in g0.initializer):
        return model
    light = onnx.ModelProto()
    for f in ("ir_version", "opset_import", "functions"):
        v = getattr(model, f)
        if f == "ir_version":
            light.ir_version = v
        else:
            getattr(light, f).extend(v)
    g = light.graph
    g.node.extend(g0.node)
    g.input.extend(g0.input)
    g.output.extend(g0.output)
    g.value_info.extend(g0.value_info)
    inputs = {i.name for i in g0.input}
    for t in g0.initializer:
        if len(t.raw_data) <= _SMALL:
            g.initializer.append(t)
        elif t.name not in inputs:
            g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, t.dims))
    return light


_SMALL = 1 << 12


def _infer_types(g: Graph, model: onnx.ModelProto) -> None:
    """Types and shapes of intermediate values, where ONNX shape inference knows them."""
    model = _without_weights(model)
    try:   # data propagation gives the dims of reshapes whose shape is computed
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:
        try:
            inferred = onnx.shape_inference.infer_shapes(model)
        except Exception:  # an invalid model fails later with a precise error
            return
    for vi in inferred.graph.value_info:
        if vi.name not in g.types and vi.HasField("type"):
            g.types[vi.name] = vi.type


def optimize(model: onnx.ModelProto, level: int,
             disabled: frozenset[str] = frozenset()) -> tuple[onnx.ModelProto, list[str]]:
    """The optimized model and the names of the passes that changed it."""
    if level <= 0 or not model.graph.node:
        return model, []
    if "ConstantFolding" in disabled:   # onnxruntime folds shapes inside ConstantFolding
        disabled = disabled | {"ShapeFolding"}
    g = Graph(model)
    _infer_types(g, model)
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
    if not g.changed:
        return model, []
    return g.to_model(), applied
