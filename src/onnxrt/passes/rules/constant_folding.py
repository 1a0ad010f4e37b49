"""The ConstantFolding rule (onnxruntime's name for it), the only constant folding a
session does: nodes whose inputs are all constants become constants.

ShapeFolding (shape_folding.py) folds ``Shape`` and ``Size`` of statically known shapes
first, so shape subgraphs (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) fold here.
Every foldable node is evaluated by the host kernels of the session (the
``KernelLookup`` it passes in as ``Graph.evaluate``), node by node in graph order; only
values the rest of the graph reads are kept.

Nested graphs (If branches, Loop and Scan bodies) fold the same way, seeing the constants of
every scope around them: an exported LSTM inside an If slices and concatenates the main
graph's weights in its branch, and those nodes must fold for the LSTM to pack its weights
once. What a body folds becomes an initializer of that body (the later stages read nested
graphs as their protos).
"""

from __future__ import annotations

import itertools
from typing import Any, Callable

import numpy as np
import onnx
from onnx import AttributeProto, numpy_helper

from onnxrt.ir.attrs import constant_node_value, tensor_to_array
from onnxrt.ir.graph import Graph, subgraph_reads
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
    if n.op_type == "DequantizeLinear" and not getattr(g, "fold_dequantize", False):
        # kept, as onnxruntime keeps it: the QDQ fusions read the quantized weight behind
        # it (qdq_selector_action.py); dequantize_folding.py folds what they leave. Under
        # session.disable_quant_qdq there is no QDQ fusion and it folds like any node
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
    changed = False
    # Constant nodes alone are left as they are written: nothing to gain
    if done and all(n.op_type == "Constant" for n in done):
        for o in made:
            del g.consts[o]
    elif done:
        g.remove(done)
        g.touch()
        g.folded.extend(n.name or n.op_type for n in done)
        read = g.read_names()
        for o in made:         # intermediates of folded chains are not kept
            if o not in read and not g.is_output(o):
                del g.consts[o]
        changed = True
    if evaluate is None:
        return changed
    main_known = set(g.consts) | set(g._lazy) | {
        n.output[0] for n in g.nodes if n.op_type == "Constant" and n.output}
    nested = False
    for n in g.nodes:
        if _has_graphs(n):
            nested |= _fold_bodies(g, n, main_known, g.const)
    if nested:
        g.touch()
    return changed or nested


def _bodies(n: onnx.NodeProto) -> list[onnx.GraphProto]:
    out: list[onnx.GraphProto] = []
    for a in n.attribute:
        if a.type == AttributeProto.GRAPH:
            out.append(a.g)
        elif a.type == AttributeProto.GRAPHS:
            out.extend(a.graphs)
    return out


def _copy_node(n: onnx.NodeProto) -> onnx.NodeProto:
    c = onnx.NodeProto()
    c.CopyFrom(n)
    return c


def _has_graphs(n: onnx.NodeProto) -> bool:
    return any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in n.attribute)


def _fold_bodies(g: Graph, n: onnx.NodeProto, outer_known: set[str],
                 outer_get: Callable[[str], Any]) -> bool:
    changed = False
    for body in _bodies(n):
        changed |= _fold_body(g, body, outer_known, outer_get)
    return changed


def _fold_body(g: Graph, body: onnx.GraphProto, outer_known: set[str],
               outer_get: Callable[[str], Any]) -> bool:
    """Fold the nodes of one nested graph whose inputs are constants of it or of a scope
    around it (its own inputs shadow outer names); then the bodies nested in it."""
    shadow = {i.name for i in body.input}
    inits = {t.name: t for t in body.initializer if t.name not in shadow}
    own: dict[str, np.ndarray] = {}
    known = (outer_known - shadow) | set(inits)
    outputs = {o.name for o in body.output}
    types = {vi.name: vi.type for vi in itertools.chain(body.input, body.value_info,
                                                         body.output) if vi.HasField("type")}

    def get(x: str) -> Any:
        v = own.get(x)
        if v is not None:
            return v
        t = inits.get(x)
        if t is not None:
            if t.data_location == onnx.TensorProto.EXTERNAL:
                return None
            v = own[x] = tensor_to_array(t)
            return v
        return None if x in shadow else outer_get(x)

    done: set[int] = set()      # positions: protobuf's node wrappers are not kept alive
    made: list[str] = []
    only_constants = True
    changed = False
    for k, n in enumerate(body.node):
        if _has_graphs(n):
            changed |= _fold_bodies(g, n, known, get)
            continue
        if n.op_type in _NONDETERMINISTIC or n.op_type in _NOT_TENSOR:
            continue
        if any(o in outputs for o in n.output if o):
            continue
        ins = [x for x in n.input if x]
        if not ins:
            if n.op_type != "Constant" or n.domain not in ("", "ai.onnx"):
                continue
            try:
                values = [constant_node_value(n)]
            except Exception:
                continue
        else:
            if not all(x in known for x in ins):
                continue
            args = [None if not x else get(x) for x in n.input]
            if any(x and v is None for x, v in zip(n.input, args)):
                continue
            values = g.evaluate(n, args, tuple(types.get(x) for x in n.input))
            if values is None:
                continue
        if not all(isinstance(v, np.ndarray) or not o for o, v in zip(n.output, values)):
            continue
        for o, v in zip(n.output, values):
            if o:
                own[o] = v
                known.add(o)
                made.append(o)
        done.add(k)
        only_constants &= n.op_type == "Constant"
    if not done or only_constants:
        return changed
    keep = [n for k, n in enumerate(body.node) if k not in done]
    reads = set(outputs)
    for n in keep:
        reads.update(n.input)
        reads.update(subgraph_reads(n))
    keep = [_copy_node(n) for n in keep]     # detached before the field is cleared
    del body.node[:]
    body.node.extend(keep)
    for o in made:
        if o in reads:
            body.initializer.append(numpy_helper.from_array(np.asarray(own[o]), o))
    g.folded.extend(o for o in made)
    return True
