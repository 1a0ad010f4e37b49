"""Constant folding: nodes whose inputs are all constants become initializers.

Shapes known statically (from ONNX shape inference) fold ``Shape`` and ``Size`` first, so
shape subgraphs (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) fold to constants.
Every foldable node is evaluated by onnxrt's own CPU kernels in one sub-session (cheaper
than one evaluation per node: the zoo's light models generate hundreds of weights with
ConstantOfShape); only values read by the rest of the graph become initializers.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import AttributeProto, helper

from onnxrt.ir.graph import Graph, attr

__all__ = ["fold_constants", "fold_shapes"]

_NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                     "Multinomial", "Bernoulli", "Dropout"}
# ops whose outputs are not plain tensors: folding them cannot give an initializer
_NOT_TENSOR = {"SequenceConstruct", "SequenceEmpty", "SequenceInsert", "SequenceErase",
               "SplitToSequence", "Optional", "OptionalGetElement", "OptionalHasElement",
               "SequenceMap", "ZipMap", "CastMap", "DictVectorizer"}


def fold_shapes(g: Graph) -> bool:
    """Shape/Size of values whose static shape is fully known become constants."""
    changed = False
    for n in list(g.nodes):
        if n.op_type not in ("Shape", "Size") or n.domain not in ("", "ai.onnx"):
            continue
        if not n.input or g.is_output(n.output[0]):
            continue
        s = g.shape(n.input[0])
        if s is None or not all(isinstance(d, int) for d in s):
            continue
        if n.op_type == "Size":
            val = np.array(int(np.prod(s, dtype=np.int64)), dtype=np.int64)
        else:
            r = len(s)
            start = int(attr(n, "start", 0))
            end = attr(n, "end", None)
            start = min(max(start + r if start < 0 else start, 0), r)
            end = r if end is None else int(end)
            end = min(max(end + r if end < 0 else end, 0), r)
            val = np.array(s[start:end], dtype=np.int64)
        name = g.add_const(val, n.output[0])
        if not g.can_bypass(n.output[0]):
            continue
        g.replace_uses(n.output[0], name)
        g.remove([n])
        changed = True
    return changed


def _foldable(g: Graph, n: onnx.NodeProto, known: set[str]) -> bool:
    if n.domain not in ("", "ai.onnx") or n.op_type in _NONDETERMINISTIC:
        return False
    if n.op_type in _NOT_TENSOR:
        return False
    if any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in n.attribute):
        return False
    if any(g.is_output(o) for o in n.output if o):
        return False
    ins = [x for x in n.input if x]
    if not ins:
        return n.op_type == "Constant"
    return all(x in known for x in ins)


def _closure(g: Graph, names: list[str], ids: set[int]) -> set[int]:
    """Ids of the folded nodes that ``names`` depend on."""
    out: set[int] = set()
    stack = list(names)
    while stack:
        p = g.producer(stack.pop())
        if p is not None and id(p) in ids and id(p) not in out:
            out.add(id(p))
            stack.extend(x for x in p.input if x)
    return out


def fold_constants(g: Graph) -> bool:
    """Fold constant subgraphs. Large results (known from shape inference to exceed
    ``DEFER_ELEMENTS``) keep their nodes: the planner folds them at session creation without
    the cost of writing them into the model and reading them back, and fusions see them as
    constants (``Graph.deferred``)."""
    known = set(g.consts) | set(g._lazy) | g.deferred
    folded: list[onnx.NodeProto] = []
    for n in g.nodes:
        if _foldable(g, n, known):
            folded.append(n)
            known.update(o for o in n.output if o)
    if not folded:
        return False
    ids = {id(n) for n in folded}
    produced = {o for n in folded for o in n.output if o}
    frontier = sorted(name for name in produced
                      if any(id(c) not in ids for c in g.consumers(name)))
    big = [name for name in frontier if _size(g, name) > DEFER_ELEMENTS]
    small = [name for name in frontier if name not in big]
    keep = _closure(g, big, ids)
    evaluate = _closure(g, small, ids)
    if all(g.producer(x).op_type == "Constant" for x in small):
        small, evaluate = [], set()
    changed = False
    if small:
        values = _evaluate(g, [n for n in folded if id(n) in evaluate], small, produced)
        if values is None:
            return False
        for name, v in zip(small, values):
            if isinstance(v, np.ndarray) and v.size <= DEFER_ELEMENTS:
                g.consts[name] = v
            else:   # a sequence, an optional, or large after all: its nodes stay
                keep |= _closure(g, [name], ids)
        for name in small:
            if name in g.consts and id(g.producer(name)) in keep:
                del g.consts[name]     # its producer stays: do not define it twice
        dead = [n for n in folded if id(n) in evaluate and id(n) not in keep]
        if dead:
            g.remove(dead)
            changed = True
    for n in folded:
        if id(n) in keep:
            g.deferred.update(o for o in n.output if o)
    return changed


DEFER_ELEMENTS = 1 << 16


def _size(g: Graph, name: str) -> int:
    s = g.shape(name)
    if s is None or not all(isinstance(d, int) for d in s):
        return 0
    return int(np.prod(s, dtype=np.int64))


def _evaluate(g: Graph, nodes: list[onnx.NodeProto], names: list[str],
              produced: set[str]) -> list | None:
    """Values of ``names`` computed by ``nodes`` with onnxrt's CPU kernels, or None."""
    import onnxrt
    from onnxrt.ir.graph import _to_tensor

    sub_inputs = sorted({x for n in nodes for x in n.input if x and x not in produced})
    inits = []
    for x in sub_inputs:
        t = g._init_protos.get(x)
        if t is not None and x not in g.consts:
            inits.append(t)
        else:
            v = g.const(x)
            if v is None:
                return None
            inits.append(_to_tensor(v, x))
    graph = helper.make_graph(nodes, "fold", [], [helper.make_value_info(o, onnx.TypeProto())
                                                  for o in names], inits)
    model = helper.make_model(graph, opset_imports=[
        helper.make_opsetid(d, v) for d, v in g.opsets.items()], ir_version=g.model.ir_version)
    model.functions.extend(g.model.functions)
    so = onnxrt.SessionOptions()
    so.graph_optimization_level = onnxrt.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.enable_cpu_mem_arena = False     # the user's session decides the process-wide arena
    try:
        sess = onnxrt.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        return sess.run(None, {})
    except Exception:  # an error here is the node's own: it is reported at run time
        return None
