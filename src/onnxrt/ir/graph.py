"""The one in-memory graph a session builds from its model and hands from stage to stage.

Built once after loading (``Graph(model)``), typed once by shape inference
(``ir.shapes.infer_types``), rewritten in place by the passes, annotated by partitioning
(``placement``: node -> provider and kernel; fused nodes and device copies are nodes of it)
and turned into a plan by the planner. ``to_model()`` serializes it (the optimized model a
session writes, ``onnxrt inspect``).

Nodes stay ``onnx.NodeProto`` (nested graphs stay ``onnx.GraphProto`` inside them);
constants are NumPy arrays keyed by value name (initializers that are not graph inputs,
Constant nodes and values folded by a pass), initializers as loaded are read only when
asked. Use-def maps are rebuilt lazily after each edit, so a pass edits freely and asks
again.

Why not onnx_ir's ``ir.Model`` (docs/architecture.md has the numbers):
``onnx_ir.serde.deserialize_model`` takes 2.2 s for a chain of 100,000 nodes, about half of
what onnxruntime takes to create that whole session, and serializing it back for ONNX shape
inference 1.1 s more, while the NodeProtos as parsed cost nothing to keep; kernels,
compile-based providers and the views providers see are written against
``onnx.NodeProto``/``TypeProto``, so every node would be converted back as well.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np
import onnx
from onnx import AttributeProto, helper, numpy_helper

from onnxrt.ir.attrs import attribute_value, tensor_to_array

__all__ = ["Graph", "SubGraph", "NodeMeta", "MS_DOMAIN", "attr", "same_dim", "same_shape",
           "subgraph_reads", "const_type"]

MS_DOMAIN = "com.microsoft"


def attr(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    for a in node.attribute:
        if a.name == name:
            return attribute_value(a)
    return default


def same_dim(a: Any, b: Any) -> bool:
    """Two dims of ``Graph.shape`` are known to be equal: the same number, or the same
    symbol (``dim_param``: one name means one size within a model; shape inference's
    ``unk__`` names are unique to one unknown). Unknown dims (None) are never equal."""
    if isinstance(a, str):
        return a == b
    return a is not None and a == b and not isinstance(b, str)


def same_shape(a: tuple[Any, ...] | None, b: tuple[Any, ...] | None) -> bool:
    """Two shapes of ``Graph.shape`` are known to be equal, dim by dim (symbols too)."""
    return a is not None and b is not None and len(a) == len(b) and \
        all(same_dim(x, y) for x, y in zip(a, b))


def subgraph_reads(node: onnx.NodeProto) -> set[str]:
    """Outer-scope names a node's graph attributes read (they count as uses)."""
    out: set[str] = set()
    for a in node.attribute:
        graphs = [a.g] if a.type == AttributeProto.GRAPH else (
            list(a.graphs) if a.type == AttributeProto.GRAPHS else [])
        for g in graphs:
            known = {i.name for i in g.input} | {t.name for t in g.initializer}
            for n in g.node:
                out.update(x for x in n.input if x and x not in known)
                out.update(x for x in subgraph_reads(n) if x not in known)
                known.update(n.output)
    return out


@dataclass(eq=False)
class NodeMeta:
    """What partitioning writes on a node for the planner to read."""

    provider: Any = None        # the ExecutionProvider that runs the node
    kernel: Any = None          # its KernelDef (None: a fused node, a copy, a function call)
    fused: Any = None           # a fused node: the FusedSubgraph its provider compiled
    compiled: Any = None        # a fused node: the callable the provider returned
    device: Any = None          # a copy node: the device it copies to
    source: Any = None          # a copy node: the device it copies from
    # a node with subgraphs: outer values its subgraphs read, by name, from copies of them
    implicit: dict[str, str] = field(default_factory=dict)


class SubGraph:
    """A nested graph (an If branch, a Loop or Scan body) as the stages after the passes see
    it: its own node list, which partitioning edits (copies, fused nodes), its inputs,
    outputs (renamed where partitioning copies a result back to the host), constants and the
    types shape inference wrote into it."""

    def __init__(self, proto: onnx.GraphProto, name: str) -> None:
        self.proto = proto
        self.name = name
        # copies: partitioning renames inputs to copy nodes, which the proto (read by the
        # outer graph for what the subgraph needs from outside) must not see
        self.nodes: list[onnx.NodeProto] = [_copy(n) for n in proto.node]
        self.inputs = list(proto.input)
        self.outputs = [_copy_vi(vi) for vi in proto.output]
        self.sparse_initializers = list(proto.sparse_initializer)
        self._consts = {t.name: t for t in proto.initializer}
        self.types: dict[str, onnx.TypeProto] = {}
        for vi in itertools.chain(proto.input, proto.value_info, proto.output):
            if vi.HasField("type"):
                self.types[vi.name] = vi.type

    def constant_values(self) -> dict[str, Any]:
        return dict(self._consts)


def _copy_vi(vi: onnx.ValueInfoProto) -> onnx.ValueInfoProto:
    c = onnx.ValueInfoProto()
    c.CopyFrom(vi)
    return c


class Graph:
    """The main graph of a model, editable by passes, annotated by partitioning."""

    def __init__(self, model: onnx.ModelProto, copy: bool = True) -> None:
        """``copy``: the passes edit nodes in place; False when the caller's model is the
        session's own copy (the loader's), never shown to anyone else."""
        self.model = model
        g = model.graph
        self.name = g.name
        self.opsets = {("" if d.domain == "ai.onnx" else d.domain): d.version
                       for d in model.opset_import}
        self.opset = self.opsets.get("", 1)
        self.input_names = {i.name for i in g.input}
        self.output_names = [o.name for o in g.output]
        # edits pending on the node list (see ``nodes``): new nodes to put before a node,
        # and nodes to drop, both by id (the dropped nodes held here, so no id is reused)
        self._before: dict[int, list[onnx.NodeProto]] = {}
        self._gone: dict[int, onnx.NodeProto] = {}
        # copies: passes edit nodes in place, and the caller's model must stay as it was
        self.nodes = [_copy(n) for n in g.node] if copy else list(g.node)
        self._init_protos = {t.name: t for t in g.initializer}
        # initializers that are also graph inputs may be overridden (IR >= 4): never
        # constants; before IR 4 every initializer had to be listed as an input
        self.overridable = (set(self._init_protos) & self.input_names
                            if model.ir_version >= 4 else set())
        self.consts: dict[str, np.ndarray] = {}
        self._lazy: dict[str, onnx.TensorProto] = {
            n: t for n, t in self._init_protos.items() if n not in self.overridable}
        # constant folding's evaluator, given by the session: (node, input values, input
        # types) -> output values or None (passes/constant_folding.py)
        self.evaluate: Callable[..., list[Any] | None] | None = None
        self.folded: list[str] = []        # nodes constant folding replaced, by name
        self.types: dict[str, onnx.TypeProto] = {}
        for vi in itertools.chain(g.input, g.output, g.value_info):
            if vi.HasField("type"):
                self.types[vi.name] = vi.type
        self.has_subgraphs = False
        # node annotations (id of the node -> (node, meta)): nodes of nested graphs too
        self._meta: dict[int, tuple[onnx.NodeProto, NodeMeta]] = {}
        self._subgraphs: dict[tuple[int, str, int], tuple[onnx.NodeProto, SubGraph]] = {}
        self._names = itertools.count()
        self._dirty = True

    # -- constants ------------------------------------------------------------------------
    def is_const(self, name: str) -> bool:
        return (name in self.consts or name in self._lazy
                or self._const_node(name) is not None)

    def const(self, name: str) -> np.ndarray | None:
        v = self.consts.get(name)
        if v is not None:
            return v
        t = self._lazy.get(name)
        if t is not None:
            if t.data_location == onnx.TensorProto.EXTERNAL:
                return None
            v = tensor_to_array(t)
            self.consts[name] = v
            return v
        node = self._const_node(name)
        if node is not None and len(node.attribute) == 1:
            a = node.attribute[0]
            v = attribute_value(a)
            if a.name == "value" and isinstance(v, np.ndarray):
                return v
            if a.name in ("value_float", "value_floats"):
                return np.array(v, dtype=np.float32)
            if a.name in ("value_int", "value_ints"):
                return np.array(v, dtype=np.int64)
        return None

    def scalar(self, name: str) -> float | None:
        """A constant holding exactly one number, as a Python float."""
        v = self.const(name) if name else None
        if v is None or v.size != 1 or v.dtype.kind not in "fiu":
            return None
        return float(v.reshape(-1)[0])

    def _const_node(self, name: str) -> onnx.NodeProto | None:
        p = self.producer(name)
        if p is not None and p.op_type == "Constant" and p.domain in ("", "ai.onnx"):
            return p
        return None

    def add_const(self, array: np.ndarray, hint: str = "const") -> str:
        name = self.fresh(hint)
        self.consts[name] = np.asarray(array)
        self.types[name] = helper.make_tensor_type_proto(
            helper.np_dtype_to_tensor_dtype(np.asarray(array).dtype), array.shape) \
            if np.asarray(array).dtype != object else self.types.get(name, onnx.TypeProto())
        return name

    def fresh(self, hint: str) -> str:
        names = self._all_names()
        while True:
            name = f"{hint}__opt{next(self._names)}"
            if name not in names and name not in self.consts:
                names.add(name)
                return name

    def _all_names(self) -> set[str]:
        self._index()
        return self._names_cache

    # -- structure ------------------------------------------------------------------------
    @property
    def nodes(self) -> list[onnx.NodeProto]:
        """The nodes in order. ``replace`` and ``remove`` only record their edits, applied
        here in one walk when the list is next read: rewriting every list per edit made a
        pass over a graph of N nodes cost N per fusion (densenet's 420 fusions: 0.25 s)."""
        if self._before or self._gone:
            out: list[onnx.NodeProto] = []
            before, gone = self._before, self._gone
            for n in self._nodes:
                if id(n) not in before:
                    if id(n) not in gone:
                        out.append(n)
                    continue
                # new nodes go before their anchor, and may be anchors themselves
                stack: list[tuple[onnx.NodeProto, bool]] = [(n, False)]
                while stack:
                    m, expanded = stack.pop()
                    if expanded or id(m) not in before:
                        if id(m) not in gone:
                            out.append(m)
                        continue
                    stack.append((m, True))
                    stack.extend((x, False) for x in reversed(before.pop(id(m))))
            self._nodes = out
            self._before, self._gone = {}, {}
        return self._nodes

    @nodes.setter
    def nodes(self, value: list[onnx.NodeProto]) -> None:
        self._nodes = value
        self._before, self._gone = {}, {}

    def touch(self) -> None:
        self._dirty = True

    def _index(self) -> None:
        if not self._dirty:
            return
        prod: dict[str, onnx.NodeProto] = {}
        cons: dict[str, list[onnx.NodeProto]] = {}
        names = set(self.input_names) | set(self._init_protos) | set(self.consts)
        self.has_subgraphs = False
        for n in self.nodes:
            for o in n.output:
                if o:
                    prod[o] = n
                    names.add(o)
            reads = [x for x in n.input if x]
            if any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS)
                   for a in n.attribute):
                self.has_subgraphs = True
                reads += sorted(subgraph_reads(n))
            for x in dict.fromkeys(reads):
                cons.setdefault(x, []).append(n)
        self._prod, self._cons, self._names_cache = prod, cons, names
        self._dirty = False

    def producer(self, name: str) -> onnx.NodeProto | None:
        self._index()
        return self._prod.get(name)

    def consumers(self, name: str) -> list[onnx.NodeProto]:
        self._index()
        return self._cons.get(name, [])

    def read_names(self) -> set[str] | Any:
        """Every value some node reads (subgraphs' outer reads included), as a set view."""
        self._index()
        return self._cons.keys()

    def is_output(self, name: str) -> bool:
        return name in self.output_names

    def only_use(self, name: str, node: onnx.NodeProto | None = None) -> bool:
        """``name`` is read by exactly one node (``node`` if given) and is no graph output."""
        c = self.consumers(name)
        return (len(c) == 1 and (node is None or c[0] is node)
                and not self.is_output(name))

    def replace_uses(self, old: str, new: str) -> None:
        """Every reader of ``old`` reads ``new`` instead (not graph outputs; not subgraphs)."""
        readers = list(self.consumers(old))
        for n in readers:
            for i, x in enumerate(n.input):
                if x == old:
                    n.input[i] = new
        if not self._dirty:   # keep the index current: passes ask again right away
            self._cons.pop(old, None)
            lst = self._cons.setdefault(new, [])
            lst.extend(n for n in readers if all(m is not n for m in lst))

    def can_bypass(self, old: str) -> bool:
        """Readers of ``old`` can be rewired: no graph output and no subgraph reads it."""
        if self.is_output(old):
            return False
        return all(old in n.input for n in self.consumers(old)) and not any(
            old in subgraph_reads(n) for n in self.consumers(old)
            if any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS)
                   for a in n.attribute))

    def remove(self, dead: Iterable[onnx.NodeProto]) -> None:
        dead = list(dead)
        for n in dead:
            self._gone[id(n)] = n
        self._forget(dead)

    def _forget(self, dead: list[onnx.NodeProto]) -> None:
        if self._dirty:
            return
        for n in dead:   # keep the index current (cheap: only the removed nodes' names)
            for o in n.output:
                if self._prod.get(o) is n:
                    del self._prod[o]
            for x in set(n.input) | (subgraph_reads(n) if self.has_subgraphs else set()):
                lst = self._cons.get(x)
                if lst:
                    lst[:] = [m for m in lst if m is not n]
                    if not lst:
                        del self._cons[x]

    def replace(self, dead: Iterable[onnx.NodeProto],
                new: onnx.NodeProto | list[onnx.NodeProto], at: onnx.NodeProto) -> None:
        """Remove ``dead`` and put ``new`` (one node or a list in order) where ``at`` was (the
        last node of the pattern, so every input of ``new`` is already produced there)."""
        new = new if isinstance(new, list) else [new]
        dead = list(dead)
        moved = {id(n) for n in new}
        if any(id(n) in moved for n in dead) or any(i in self._gone for i in moved):
            # a node that moves: drop and insert it at once, not by id
            ids = {id(n) for n in dead}
            out = []
            for n in self.nodes:
                if n is at:
                    out.extend(new)
                if id(n) not in ids:
                    out.append(n)
            self.nodes = out
            self._forget(dead)
        else:
            self._before.setdefault(id(at), []).extend(new)
            self.remove(dead)
        if self._dirty:
            return
        for n in new:   # index the new nodes (outer-scope reads of subgraphs: rebuild)
            if any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS)
                   for a in n.attribute):
                self.touch()
                return
            for o in n.output:
                if o:
                    self._prod[o] = n
                    self._names_cache.add(o)
            for x in dict.fromkeys(x for x in n.input if x):
                self._cons.setdefault(x, []).append(n)

    # -- types ----------------------------------------------------------------------------
    def elem_type(self, name: str) -> int:
        if name in self.consts or name in self._lazy:
            v = self.const(name)
            if v is not None and v.dtype != object:
                return helper.np_dtype_to_tensor_dtype(v.dtype)
        t = self.types.get(name)
        if t is not None and t.HasField("tensor_type"):
            return t.tensor_type.elem_type
        return 0

    def shape(self, name: str) -> tuple[Any, ...] | None:
        """Dims (int, or str/None where symbolic), or None when the rank is unknown."""
        v = self.consts.get(name)
        if v is not None:
            return v.shape
        if name in self._lazy:
            return tuple(self._lazy[name].dims)
        t = self.types.get(name)
        if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
            return None
        return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                     for d in t.tensor_type.shape.dim)

    def rank(self, name: str) -> int | None:
        s = self.shape(name)
        return None if s is None else len(s)

    def uses_domain(self, domain: str, version: int = 1) -> None:
        if domain not in self.opsets:
            self.opsets[domain] = version

    # -- annotations ------------------------------------------------------------------
    def annotate(self, node: onnx.NodeProto, **fields: Any) -> NodeMeta:
        """The node's annotations, created on first use, with ``fields`` set."""
        entry = self._meta.get(id(node))
        if entry is None or entry[0] is not node:
            entry = self._meta[id(node)] = (node, NodeMeta())
        for k, v in fields.items():
            setattr(entry[1], k, v)
        return entry[1]

    def meta(self, node: onnx.NodeProto) -> NodeMeta | None:
        entry = self._meta.get(id(node))
        return entry[1] if entry is not None and entry[0] is node else None

    def subgraph(self, node: onnx.NodeProto, attr_name: str, k: int | None,
                 proto: onnx.GraphProto, name: str) -> SubGraph:
        """The SubGraph of a graph attribute of ``node`` (``k``: the position in a GRAPHS
        attribute), made on first use; ``name`` labels it (its path)."""
        key = (id(node), attr_name, -1 if k is None else k)
        entry = self._subgraphs.get(key)
        if entry is None or entry[0] is not node:
            entry = self._subgraphs[key] = (node, SubGraph(proto, name))
        return entry[1]

    # -- what later stages read ------------------------------------------------------
    @property
    def inputs(self) -> list[onnx.ValueInfoProto]:
        """The graph inputs (overridable initializers among them)."""
        return list(self.model.graph.input)

    @property
    def outputs(self) -> list[onnx.ValueInfoProto]:
        return list(self.model.graph.output)

    def constant_values(self) -> dict[str, Any]:
        """Every constant the nodes read, by name: initializers as loaded (TensorProto, read
        by the caller when needed), overridable ones included, and values the passes made
        (ndarray). Unread initializers are left out."""
        self._index()
        used = set(self._cons) | set(self.output_names)
        out: dict[str, Any] = {}
        for name, t in self._init_protos.items():
            if name in self.overridable or (name in used and name not in self._prod):
                # an array a pass already read is handed on, not converted a second time
                # (the session would hold every weight a pass looked at twice)
                v = self.consts.get(name) if name not in self.overridable else None
                out[name] = t if v is None else v
        for name, v in self.consts.items():
            if (name in used and name not in self._prod and name not in self._init_protos
                    and name not in self.input_names):
                out[name] = v
        return out

    def prune_consts(self) -> None:
        """Drop the arrays no node reads any more (weights a fusion rewrote, initializers
        read by a pass): the session keeps its graph as long as it lives."""
        self._index()
        for name in [n for n in self.consts if n not in self._cons
                     and n not in self.output_names and n not in self.overridable]:
            del self.consts[name]

    @property
    def sparse_initializers(self) -> list[onnx.SparseTensorProto]:
        return list(self.model.graph.sparse_initializer)

    def as_model_for_inference(self) -> onnx.ModelProto:
        """The model as loaded (shape inference runs on the graph before any pass)."""
        return self.model

    # -- output ---------------------------------------------------------------------------
    def to_model(self) -> onnx.ModelProto:
        """A new ModelProto: the edited nodes, initializers still read, value infos kept for
        surviving values, opset imports for domains the fusions introduced. FusedConv nodes
        whose activation onnxruntime's FusedConv lacks (HardSwish, Silu) are written as a
        FusedConv and the activation's nodes, so the file loads in onnxruntime too."""
        self._index()
        m = onnx.ModelProto()
        g0 = self.model.graph
        used = set(self._cons) | set(self.output_names)
        g = onnx.GraphProto()
        g.name = g0.name
        g.doc_string = g0.doc_string
        g.node.extend(_onnxruntime_form(self.nodes, self.fresh))
        legacy = self.model.ir_version < 4   # initializers must be listed as inputs
        dropped = set()
        for name, t in self._init_protos.items():   # originals: kept as they were
            if name in self.overridable or (name in used and name not in self._prod):
                g.initializer.append(t)
            else:
                dropped.add(name)
        g.input.extend(i for i in g0.input if i.name not in dropped)
        g.output.extend(g0.output)
        for name, v in self.consts.items():         # new values (fresh names)
            if (name in used and name not in self._prod and name not in self._init_protos
                    and name not in self.input_names):
                t = _to_tensor(v, name)
                g.initializer.append(t)
                if legacy:
                    g.input.append(helper.make_tensor_value_info(name, t.data_type, t.dims))
        g.sparse_initializer.extend(g0.sparse_initializer)
        alive = set(self._prod) | self.input_names
        declared = set()
        for vi in g0.value_info:
            if vi.name in alive and vi.name not in self.consts:
                g.value_info.append(vi)
                declared.add(vi.name)
        # the intermediate types shape inference found: kernels prepare for them (compiled
        # kernels by dtype, plain ufuncs bound directly where ranks are known)
        outputs = set(self.output_names)
        for name in self._prod:
            t = self.types.get(name)
            if (t is not None and name not in declared and name not in outputs
                    and name not in self.consts and t.HasField("tensor_type")
                    and t.tensor_type.elem_type):
                vi = g.value_info.add()
                vi.name = name
                vi.type.CopyFrom(t)
        g.quantization_annotation.extend(g0.quantization_annotation)
        g.metadata_props.extend(g0.metadata_props)
        for f in ("ir_version", "producer_name", "producer_version", "domain",
                  "model_version", "doc_string"):
            if self.model.HasField(f):      # unset stays unset (metadata tells them apart)
                setattr(m, f, getattr(self.model, f))
        m.metadata_props.extend(self.model.metadata_props)
        m.functions.extend(self.model.functions)
        m.training_info.extend(self.model.training_info)
        for d, v in self.opsets.items():
            m.opset_import.append(helper.make_opsetid(d, v))
        m.graph.CopyFrom(g)
        return m


# FusedConv activations onnxrt's kernel applies but onnxruntime's FusedConv refuses:
# written as FusedConv without an activation and the activation's own nodes after it
_NOT_IN_ONNXRUNTIME = ("HardSwish", "Silu")


def _onnxruntime_form(nodes: list[onnx.NodeProto], fresh: Callable[[str], str]
                      ) -> list[onnx.NodeProto]:
    """The nodes as a model file holds them: loadable by onnxruntime as well."""
    out: list[onnx.NodeProto] = []
    for n in nodes:
        act = attr(n, "activation") if n.op_type == "FusedConv" and \
            n.domain == MS_DOMAIN else None
        if act not in _NOT_IN_ONNXRUNTIME:
            out.append(n)
            continue
        conv = _copy(n)
        del conv.attribute[:]
        conv.attribute.extend(a for a in n.attribute
                              if a.name not in ("activation", "activation_params"))
        y = n.output[0]
        t = fresh(y + "_conv")
        conv.output[0] = t
        out.append(conv)
        if act == "HardSwish":
            out.append(helper.make_node("HardSwish", [t], [y], name=fresh(y + "_hardswish")))
        else:
            s = fresh(y + "_sigmoid")
            out += [helper.make_node("Sigmoid", [t], [s], name=s),
                    helper.make_node("Mul", [t, s], [y], name=fresh(y + "_silu"))]
    return out


def _copy(n: onnx.NodeProto) -> onnx.NodeProto:
    c = onnx.NodeProto()
    c.CopyFrom(n)
    return c


def _to_tensor(v: np.ndarray, name: str) -> onnx.TensorProto:
    v = np.asarray(v)
    if v.dtype == object:
        t = numpy_helper.from_array(np.array([s.encode() if isinstance(s, str) else s
                                              for s in v.reshape(-1)], dtype=object)
                                    .reshape(v.shape), name)
        return t
    return numpy_helper.from_array(v, name)


def const_type(v: Any) -> onnx.TypeProto:
    """The tensor type of a constant: a TensorProto as loaded or an ndarray."""
    if isinstance(v, onnx.TensorProto):
        return helper.make_tensor_type_proto(v.data_type, list(v.dims))
    v = np.asarray(v)
    if v.dtype == object:
        return helper.make_tensor_type_proto(onnx.TensorProto.STRING, v.shape)
    try:
        return helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(v.dtype),
                                             v.shape)
    except Exception:   # a dtype without an ONNX element type: type unknown
        return onnx.TypeProto()
