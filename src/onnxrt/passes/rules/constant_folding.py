"""The ConstantFolding rule (onnxruntime's name for it), the only constant folding a
session does: nodes whose inputs are all constants become constants.

ShapeFolding (shape_folding.py) folds ``Shape`` and ``Size`` of statically known shapes
first, so shape subgraphs (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) fold here.
Every foldable node is evaluated by the host kernels of the session (the
``KernelLookup`` it passes in as ``Graph.evaluate``), node by node in graph order; only
values the rest of the graph reads are kept.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import AttributeProto

from onnxrt.ir.attrs import constant_node_value
from onnxrt.ir.graph import Graph
from onnxrt.passes.registry import BASIC, rule

__all__ = ["fold_constants"]

_NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                     "Multinomial", "Bernoulli", "Dropout"}
# ops whose outputs are not plain tensors: folding them cannot give an initializer
_NOT_TENSOR = {"SequenceConstruct", "SequenceEmpty", "SequenceInsert", "SequenceErase",
               "SplitToSequence", "Optional", "OptionalGetElement", "OptionalHasElement",
               "SequenceMap", "ZipMap", "CastMap", "DictVectorizer"}


def _foldable(g: Graph, n: onnx.NodeProto, known: set[str]) -> bool:
    if n.op_type in _NONDETERMINISTIC or n.op_type in _NOT_TENSOR:
        return False
    if n.op_type == "DequantizeLinear":
        # kept, as onnxruntime keeps it: the QDQ fusions read the quantized weight behind
        # it (qdq_selector_action.py); dequantize_folding.py folds what they leave
        return False
    if any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in n.attribute):
        return False
    if any(g.is_output(o) for o in n.output if o):
        return False
    ins = [x for x in n.input if x]
    if not ins:
        return n.op_type == "Constant" and n.domain in ("", "ai.onnx")
    return all(x in known for x in ins)


@rule("ConstantFolding", BASIC, order=40, ops=None)
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
