"""The pass list by level and the driver that runs it.

Pass names follow onnxruntime's optimizer names so ``disabled_optimizers`` lists written
for onnxruntime keep working. Basic passes repeat until nothing changes (folding exposes
eliminations and the other way round); fusions run once each, in an order where an earlier
fusion makes the next one's pattern (Conv+BN before Conv+activation, MatMul+Add before
Gemm+activation, LayerNorm before SkipLayerNorm).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import onnx

from onnxrt.passes import constant_folding as cf
from onnxrt.passes import elimination as el
from onnxrt.passes import fusions as fu
from onnxrt.passes.graph import Graph, attr

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
    ("BatchNormActivationFusion", EXTENDED, fu.fuse_bn_activation),
    ("GemmActivationFusion", EXTENDED, fu.fuse_gemm_activation),
]

_MAX_ROUNDS = 4


def _without_weights(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with large initializers replaced by typed inputs: shape inference needs
    their shapes only, and serializing hundreds of MB of weights for it is slow."""
    g0 = model.graph
    # sized by their dims: reading t.raw_data copies the bytes out of the message (a BERT
    # embedding's 94 MB, twice: ~0.1 s of a session's creation)
    large = {t.name for t in g0.initializer if _elements(t) * 4 > _SMALL}
    if not large:
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
        if t.name not in large:
            g.initializer.append(t)
        elif t.name not in inputs:
            g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, t.dims))
    return light


_SMALL = 1 << 12


def _elements(t: onnx.TensorProto) -> int:
    n = 1
    for d in t.dims:
        n *= d
    return n


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
    _resolve_reshape_symbols(g)


def _reshaped_symbol(s_in: tuple, target: list[int], allowzero: int) -> tuple[int, Any] | None:
    """(position, dim) of the -1 of a Reshape target where ONNX shape inference leaves it
    unknown although the input's symbols settle it: (N, 240, 28, 28) -> (-1, 3, 80, 28, 28)
    keeps N there (the volume of the known dims is equal on both sides)."""
    if target.count(-1) != 1:
        return None
    sym_in = [d for d in s_in if not isinstance(d, int)]
    if any(d is None for d in sym_in):
        return None
    int_in = math.prod(d for d in s_in if isinstance(d, int))
    if int_in == 0:   # an empty tensor: -1 is not determined by the volume
        return None
    int_out, sym_out = 1, []
    for i, t in enumerate(target):
        if t == 0 and not allowzero:
            if i >= len(s_in):
                return None
            d = s_in[i]
            if isinstance(d, int):
                int_out *= d
            elif d is None:
                return None
            else:
                sym_out.append(d)
        elif t > 0:
            int_out *= t
        elif t != -1:
            return None
    for d in sym_out:
        if d not in sym_in:
            return None
        sym_in.remove(d)
    if len(sym_in) != 1 or int_in != int_out:
        return None
    return target.index(-1), sym_in[0]


def _resolve_reshape_symbols(g: Graph) -> None:
    """Names the dims that shape inference calls ``unk__k`` after a Reshape with -1 when the
    input's symbols settle them (shufflenet's channel shuffle at a symbolic batch), so the
    fusions that need equal shapes (a residual into FusedConv) see them equal."""
    subst: dict[str, str] = {}

    def dims(name: str) -> tuple | None:
        s = g.shape(name)
        return None if s is None else tuple(subst.get(d, d) if isinstance(d, str) else d
                                            for d in s)

    for n in g.nodes:
        if n.op_type != "Reshape" or n.domain not in ("", "ai.onnx") or len(n.input) < 2:
            continue
        s_in, s_out, c = dims(n.input[0]), dims(n.output[0]), g.const(n.input[1])
        if s_in is None or s_out is None or c is None or c.ndim != 1 or len(s_out) != c.size:
            continue
        found = _reshaped_symbol(s_in, [int(v) for v in c], int(attr(n, "allowzero", 0)))
        if found is None:
            continue
        i, sym = found
        d = s_out[i]
        if isinstance(d, str) and d.startswith("unk__") and d != sym:
            subst[d] = sym
    if not subst:
        return
    for name, t in list(g.types.items()):
        tt = t.tensor_type if t.HasField("tensor_type") else None
        if tt is None or not tt.HasField("shape") or not any(
                d.dim_param in subst for d in tt.shape.dim):
            continue
        t = onnx.TypeProto()
        t.CopyFrom(g.types[name])
        for d in t.tensor_type.shape.dim:
            if d.dim_param in subst:
                d.dim_param = subst[d.dim_param]
        g.types[name] = t


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
    # rebuilt even when no pass changed it: the inferred intermediate types go with it
    return g.to_model(), applied
