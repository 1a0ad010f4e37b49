"""Shape inference, run once on the loaded model: types and shapes of intermediate values
for every stage after it (passes, partitioning, kernels preparing at planning).

ONNX shape inference runs on the model without its large initializers (their shapes are
all it needs; serializing hundreds of MB of weights for it is slow), with data propagation
so Reshape targets computed from shapes resolve. The nodes it returns carry the inferred
types of nested graphs (If/Loop/Scan bodies) too, and become the graph's nodes.
"""

from __future__ import annotations

import math
from typing import Any

import onnx

from onnxrt.ir.graph import Graph, _copy, attr

__all__ = ["infer_types", "typed_graph"]


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


def infer_types(g: Graph) -> bool:
    """Types and shapes of intermediate values, where ONNX shape inference knows them,
    into ``g.types``; the graph's nodes become the inferred model's (same nodes, nested
    graphs with their inferred types): True when they did."""
    model = _without_weights(g.as_model_for_inference())
    try:   # data propagation gives the dims of reshapes whose shape is computed
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:
        try:
            inferred = onnx.shape_inference.infer_shapes(model)
        except Exception:  # an invalid model fails later with a precise error
            return False
    for vi in inferred.graph.value_info:
        if vi.name not in g.types and vi.HasField("type"):
            g.types[vi.name] = vi.type
    replaced = len(inferred.graph.node) == len(g.nodes)
    if replaced:
        g.nodes = list(inferred.graph.node)
        g.touch()
    _resolve_reshape_symbols(g)
    return replaced


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


def typed_graph(model: onnx.ModelProto) -> Graph:
    """The graph of a loaded model with the types shape inference finds, for a session to
    rewrite: its nodes are the inferred model's, so the loaded model stays as it was."""
    g = Graph(model, copy=False)
    if not infer_types(g):   # inference failed: the nodes are the model's, copied now
        g.nodes = [_copy(n) for n in g.nodes]
        g.touch()
    return g
