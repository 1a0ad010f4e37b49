"""Constant folding, the only one a session does: nodes whose inputs are all constants
become constants.

Shapes known statically (from ONNX shape inference) fold ``Shape`` and ``Size`` first, so
shape subgraphs (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) fold to constants.
Every other foldable node is evaluated by the host kernels of the session (the
``KernelLookup`` it passes in as ``Graph.evaluate``), node by node in graph order; only
values the rest of the graph reads are kept.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import AttributeProto

from onnxrt.ir.attrs import constant_node_value
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
    if n.op_type in _NONDETERMINISTIC or n.op_type in _NOT_TENSOR:
        return False
    if any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in n.attribute):
        return False
    if any(g.is_output(o) for o in n.output if o):
        return False
    ins = [x for x in n.input if x]
    if not ins:
        return n.op_type == "Constant" and n.domain in ("", "ai.onnx")
    return all(x in known for x in ins)


def fold_constants(g: Graph) -> bool:
    """Nodes whose inputs are all constants, evaluated once by the host kernels the
    session's kernel lookup gives (``g.evaluate``), become constants: NumPy arrays in the
    graph, however large (they enter a ModelProto only when the graph is saved). A node
    the kernels cannot evaluate stays, and so does everything after it."""
    evaluate = g.evaluate
    known = set(g.consts) | set(g._lazy)
    done: list[onnx.NodeProto] = []
    made: list[str] = []
    for n in g.nodes:
        if not _foldable(g, n, known):
            continue
        if n.op_type == "Constant":
            try:
                values = [constant_node_value(n)]
            except Exception:
                continue
        else:
            if evaluate is None:
                continue
            args = [None if not x else g.const(x) for x in n.input]
            if any(x and v is None for x, v in zip(n.input, args)):
                continue
            values = evaluate(n, args, tuple(g.types.get(x) for x in n.input))
            if values is None:
                continue
        if not all(isinstance(v, np.ndarray) or not o for o, v in zip(n.output, values)):
            continue        # a sequence, an optional or a map is no initializer
        for o, v in zip(n.output, values):
            if o:
                g.consts[o] = v
                made.append(o)
                known.add(o)
        done.append(n)
    if not done:
        return False
    # Constant nodes alone are left as they are written: nothing to gain
    if all(n.op_type == "Constant" for n in done):
        for o in made:
            del g.consts[o]
        return False
    g.remove(done)
    g.touch()
    g.folded.extend(n.name or n.op_type for n in done)
    read = g.read_names()
    for o in made:         # intermediates of folded chains are not kept
        if o not in read and not g.is_output(o):
            del g.consts[o]
    return True
