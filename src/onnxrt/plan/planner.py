"""Turn the annotated graph into a frozen GraphPlan: slots, steps and frees.

The graph arrives rewritten by the passes (constants folded there) and annotated by
partitioning (each node's provider and kernel, fused nodes with their compiled callables,
copy nodes); the planner adds nothing to it. Everything that can be done once per session
happens here: attributes parsed and defaults filled, kernels prepared, constants (and their
device copies) placed into slots, subgraphs and function bodies planned, and the last use of
every value computed so it is freed right after.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Iterable

import numpy as np
import onnx
from onnx import AttributeProto

from onnxrt import validate
from onnxrt.errors import InvalidGraph, NotImplemented as NotImplementedErr
from onnxrt.framework.device import CPU_DEVICE, Device
from onnxrt.framework.fused import FusedCall
from onnxrt.framework.kernel import NodeInfo
from onnxrt.framework.kernel_lookup import KernelLookup, bind_kernel, node_attributes
from onnxrt.ir.attrs import constant_node_value, sparse_to_dense, tensor_to_array
from onnxrt.ir.graph import Graph, SubGraph, const_type
from onnxrt.ir.schemas import function_body, get_schema, has_context_dependent_body, known_op
from onnxrt.ir.walk import graph_free_names, iter_subgraph_attrs, topo_order
from onnxrt.plan.inplace import concat_in_place
from onnxrt.plan.plan import (MODE_CTX, MODE_MULTI, MODE_POOL, MODE_SINGLE, NONE_SLOT,
                              SINK_SLOT, GraphPlan, Step, SubgraphRunner)

__all__ = ["Planner", "graph_free_names"]

FUNCTION_PROVIDER = "CPUExecutionProvider"  # runs function bodies' call steps


def _with_frees(steps: list[Step], output_slots: Iterable[int], input_slots: Iterable[int],
                outer_slots: Iterable[int], constant_slots: set[int]) -> list[Step]:
    """Steps that free every intermediate right after its last reader."""
    keep = set(output_slots) | {NONE_SLOT, SINK_SLOT} | set(input_slots) | set(outer_slots)
    keep |= constant_slots
    last_use: dict[int, int] = {}
    for i, st in enumerate(steps):
        for s in st.ins:
            last_use[s] = i
    frees: list[list[int]] = [[] for _ in steps]
    for i, st in enumerate(steps):
        for s in st.outs:  # produced but never read: free at once
            if s not in last_use and s not in keep:
                frees[i].append(s)
    for s, i in last_use.items():
        if s not in keep:
            frees[i].append(s)
    return [Step(st.fn, st.ins, st.outs, st.mode, tuple(sorted(set(f))), st.node, st.provider)
            for st, f in zip(steps, frees)]


def _graph_parts(graph: Graph | SubGraph | onnx.GraphProto) -> tuple[Any, ...]:
    """(nodes, constants by name, sparse initializers, inputs, outputs, types) of the
    session's graph, a nested graph, or a function body (a GraphProto)."""
    if isinstance(graph, (Graph, SubGraph)):
        consts = graph.constant_values()
        types = dict(graph.types)
        for name, v in consts.items():
            if name not in types:
                types[name] = const_type(v)
        return (graph.nodes, consts, graph.sparse_initializers, graph.inputs, graph.outputs,
                types)
    return (list(graph.node), {t.name: t for t in graph.initializer},
            list(graph.sparse_initializer), list(graph.input), list(graph.output),
            _type_map(graph))


def _type_map(graph: onnx.GraphProto) -> dict[str, onnx.TypeProto]:
    types: dict[str, onnx.TypeProto] = {}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        if vi.HasField("type"):
            types[vi.name] = vi.type
    for t in graph.initializer:
        if t.name not in types:
            types[t.name] = onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims))
    return types


def _known_shapes(in_types: tuple[Any, ...], const_in: dict[int, Any], names: Any
                  ) -> validate.Shapes:
    dims: list[Any] = []
    for i, t in enumerate(in_types):
        if i in const_in and hasattr(const_in[i], "shape"):
            dims.append(tuple(const_in[i].shape))
        elif (t is not None and t.HasField("tensor_type")
              and t.tensor_type.HasField("shape")):
            dims.append(tuple(d.dim_value if d.HasField("dim_value") else None
                              for d in t.tensor_type.shape.dim))
        else:
            dims.append(None)
    return validate.Shapes(dims, [i for i, n in enumerate(names) if not n])


class Planner:
    """Plans a model's graphs. One Planner per session."""

    def __init__(self, opsets: dict[str, int], functions: dict[tuple[str, str], onnx.FunctionProto],
                 lookup: KernelLookup, *, execute: Callable[..., list[Any]],
                 graph: Graph | None = None, providers: Any = None,
                 ir_version: int = 8,
                 reuse_memory: bool = True) -> None:
        self.opsets = {("" if k == "ai.onnx" else k): v for k, v in opsets.items()}
        self.functions = functions
        self.lookup = lookup
        # runs a planned subgraph or function body (the executor's, given by the session:
        # the planner does not import the execution stage)
        self.execute = execute
        # the session's graph: the annotations partitioning wrote (a bare graph without)
        self.graph = graph if graph is not None else Graph(onnx.ModelProto())
        self.reuse_memory = reuse_memory      # Concat inputs written in place (inplace.py)
        # before IR 4 every initializer was also listed as a graph input, and such inputs are
        # constants, not overridable (onnxruntime treats them the same way)
        self.initializer_inputs_are_constant = ir_version < 4
        providers = providers if providers is not None else lookup.providers
        self._device_provider = {}
        for ep in providers:
            self._device_provider.setdefault(ep.device, ep)

    def _copy_fn(self, src: Device, dst: Device) -> Callable[[Any], Any]:
        if dst.is_host:
            ep = self._device_provider.get(src)
            t = ep.transfer() if ep is not None else None
            if t is None:
                raise InvalidGraph(f"no provider can copy values from device {src} to the host")
            return t.to_host
        ep = self._device_provider.get(dst)
        t = ep.transfer() if ep is not None else None
        if t is None:
            raise InvalidGraph(f"no provider can copy values to device {dst}")
        return functools.partial(t.to_device, device=dst)

    # -- graphs ---------------------------------------------------------------------------
    def plan_graph(self, graph: Graph | SubGraph | onnx.GraphProto,
                   outer_scope: frozenset[str] = frozenset(),
                   opsets: dict[str, int] | None = None, *, is_main: bool = False,
                   outer_constants: dict[str, Any] | None = None) -> GraphPlan:
        """Plan one graph: the session's graph, a nested graph of it (annotated by
        partitioning) or a function body (a GraphProto, run on host providers).
        ``outer_constants``: values of enclosing scopes known at session creation (their
        initializers and folded nodes): a nested graph holds them as its own constants, so
        its kernels pre-pack weights read from the outer graph (an exported LSTM inside an
        If reads the main graph's weights) instead of receiving them as implicit inputs on
        every call."""
        opsets = self.opsets if opsets is None else opsets
        outer_constants = outer_constants or {}
        root = self.graph
        slots: dict[str, int] = {}
        initial: list[Any] = [None, None]
        slot_names = ["<none>", "<sink>"]
        slot_device: dict[int, Device] = {}

        def new_slot(name: str, value: Any = None) -> int:
            slots[name] = len(initial)
            initial.append(value)
            slot_names.append(name)
            return slots[name]

        g_nodes, g_consts, g_sparse, g_inputs, g_outputs, types = _graph_parts(graph)
        name = getattr(graph, "name", "")
        constants: dict[str, Any] = {}
        init_names = set()
        for cname, t in g_consts.items():
            init_names.add(cname)
            v = tensor_to_array(t) if isinstance(t, onnx.TensorProto) else t
            new_slot(cname, v)
            constants[cname] = v
        for sp in g_sparse:
            v = sparse_to_dense(sp)
            init_names.add(sp.values.name)
            new_slot(sp.values.name, v)
            constants[sp.values.name] = v
        input_names = []
        input_slots = []
        input_types = []
        for vi in g_inputs:
            if vi.name in slots:  # an overridable initializer: a default the caller may replace
                if self.initializer_inputs_are_constant:
                    continue
                constants.pop(vi.name, None)
                if not is_main:
                    input_names.append(vi.name)
                    input_slots.append(slots[vi.name])
                    input_types.append(vi.type if vi.HasField("type") else None)
                continue
            input_names.append(vi.name)
            input_slots.append(new_slot(vi.name))
            input_types.append(vi.type if vi.HasField("type") else None)

        outer_names: list[str] = []
        outer_slots: list[int] = []
        steps: list[Step] = []

        def slot_of(x: str, who: str) -> int:
            if not x:
                return NONE_SLOT
            s = slots.get(x)
            if s is not None:
                return s
            if x in outer_scope and x in outer_constants:
                v = outer_constants[x]
                constants[x] = v
                return new_slot(x, v)
            if x in outer_scope:
                s = new_slot(x)
                outer_names.append(x)
                outer_slots.append(s)
                return s
            raise InvalidGraph(
                f"{who} reads {x!r}, which no node, graph input or initializer of graph "
                f"{name!r} produces")

        for node in topo_order(g_nodes, name):
            meta = root.meta(node)
            who = f"node {node.name!r} ({node.op_type})"
            if meta is not None and meta.device is not None:      # a copy node
                src = slot_of(node.input[0], who)
                fn = self._copy_fn(meta.source, meta.device)
                dst = new_slot(node.output[0])
                slot_device[dst] = meta.device
                x = node.input[0]
                if x in constants and meta.source.is_host:   # constants: copied once, here
                    initial[dst] = fn(initial[src])
                    constants[node.output[0]] = initial[dst]
                    continue
                info = NodeInfo(name=node.name, op_type=node.op_type, domain="",
                                since_version=1, opset=1, inputs=(x,),
                                outputs=(node.output[0],))
                steps.append(Step(fn, (src,), (dst,), MODE_SINGLE, (), info, "copy"))
                continue
            if meta is not None and meta.fused is not None:       # a fused node
                steps.append(self._fused_step(node, meta, slot_of, new_slot, slots,
                                              slot_device, outer_scope, name))
                continue
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                v = constant_node_value(node)
                new_slot(node.output[0], v)
                constants[node.output[0]] = v
                continue
            ins = [slot_of(x, who) for x in node.input]
            # subgraphs see everything defined so far plus our own outer scope (the set is
            # built only for nodes that hold subgraphs: per node it made planning quadratic)
            subgraphs: dict[str, Any] = {}
            implicit: list[str] = []
            if any(a.type in _GRAPH_ATTRS for a in node.attribute):
                subgraphs, implicit = self._plan_subgraphs(
                    node, frozenset(slots) | outer_scope, opsets,
                    {**outer_constants, **constants}, name)
            moved = meta.implicit if meta is not None else {}
            implicit_slots = [slot_of(moved.get(x, x), who) for x in implicit]
            outs = []
            for o in node.output:
                if not o:
                    outs.append(SINK_SLOT)
                    continue
                if o in slots and o not in outer_scope:
                    raise InvalidGraph(f"value {o!r} is produced twice in graph {name!r} "
                                       f"(again by node {node.name!r}, {node.op_type})")
                outs.append(new_slot(o))
            const_in = {i: constants[x] for i, x in enumerate(node.input) if x in constants}
            in_types = tuple(types.get(x) for x in node.input)
            out_types = tuple(types.get(x) for x in node.output)
            step = self._make_step(node, opsets, subgraphs, implicit, const_in, in_types,
                                   out_types, tuple(ins + implicit_slots), tuple(outs), meta)
            if meta is not None and meta.provider is not None:
                for s in outs:
                    slot_device[s] = meta.provider.device
            steps.append(step)

        output_names = []
        output_slots = []
        output_types = []
        for vi in g_outputs:
            if vi.name not in slots:
                if vi.name in outer_scope:
                    slot_of(vi.name, f"graph {name!r} output")
                else:
                    raise InvalidGraph(f"graph {name!r} output {vi.name!r} is not "
                                       f"produced by any node, input or initializer")
            output_names.append(vi.name)
            output_slots.append(slots[vi.name])
            output_types.append(vi.type if vi.HasField("type") else None)

        if self.reuse_memory:
            steps = concat_in_place(steps, set(output_slots))
        steps = _with_frees(steps, output_slots, input_slots, outer_slots,
                            {slots[x] for x in constants if x in slots} |
                            {slots[x] for x in init_names if x in slots})
        plan = GraphPlan(
            name=name, n_slots=len(initial), initial=initial,
            input_names=tuple(input_names), input_slots=tuple(input_slots),
            output_names=tuple(output_names), output_slots=tuple(output_slots),
            steps=steps, outer_names=tuple(outer_names), outer_slots=tuple(outer_slots),
            input_types=tuple(input_types), output_types=tuple(output_types),
            slot_names=slot_names,
            output_devices=tuple(slot_device.get(s, CPU_DEVICE) for s in output_slots))
        return plan.freeze()

    def _fused_step(self, node: onnx.NodeProto, meta: Any, slot_of: Callable[..., int],
                    new_slot: Callable[..., int], slots: dict[str, int],
                    slot_device: dict[int, Device], outer_scope: frozenset[str],
                    graph_name: str) -> Step:
        """The step of a fused node: the callable its provider compiled at partitioning."""
        ep = meta.provider
        who = f"fused node {node.name!r}"
        ins = tuple(slot_of(x, who) for x in node.input)
        outs = []
        for o in node.output:
            if o in slots and o not in outer_scope:
                raise InvalidGraph(f"value {o!r} is produced twice in graph {graph_name!r}")
            s = new_slot(o)
            slot_device[s] = ep.device
            outs.append(s)
        info = NodeInfo(name=node.name, op_type=f"{ep.name}_fused", domain="",
                        since_version=1, opset=1, inputs=tuple(node.input),
                        outputs=tuple(node.output), provider=ep.name)
        return Step(FusedCall(meta.compiled, len(outs), node.name, ep.name), ins,
                    tuple(outs), MODE_MULTI, (), info, ep.name)

    def _plan_subgraphs(self, node: onnx.NodeProto, visible: frozenset[str],
                        opsets: dict[str, int], constants: dict[str, Any], parent: str,
                        ) -> tuple[dict[str, Any], list[str]]:
        subgraphs: dict[str, Any] = {}
        implicit: dict[str, None] = {}
        for a_name, k, proto in iter_subgraph_attrs(node):
            sub = self.graph.subgraph(node, a_name, k, proto,
                                      f"{parent}/{node.name or node.op_type}.{a_name}")
            p = self.plan_graph(sub, visible, opsets, outer_constants=constants)
            runner = SubgraphRunner(p, self.execute)
            for n in p.outer_names:
                implicit.setdefault(n, None)
            if k is None:
                subgraphs[a_name] = runner
            else:
                subgraphs.setdefault(a_name, []).append(runner)
        return subgraphs, list(implicit)

    # -- one node -------------------------------------------------------------------------
    def _make_step(self, node: onnx.NodeProto, opsets: dict[str, int],
                   subgraphs: dict[str, Any], implicit: list[str], const_in: dict[int, Any],
                   in_types: tuple[Any, ...], out_types: tuple[Any, ...],
                   ins: tuple[int, ...], outs: tuple[int, ...],
                   placement: Any = None) -> Step:
        domain = "" if node.domain == "ai.onnx" else node.domain
        opset = opsets.get(domain)
        if opset is None:
            if domain == "":
                opset = 1
            elif (domain, node.op_type) not in self.functions:
                raise InvalidGraph(
                    f"node {node.name!r} ({node.op_type}) uses domain {domain!r}, which the "
                    f"model does not import (opset_import has {sorted(opsets)})")
            else:
                opset = 1
        schema = get_schema(node.op_type, opset, domain)
        since = schema.since_version if schema is not None else opset
        attrs, given = node_attributes(node, schema, subgraphs)
        if placement is not None and placement.kernel is not None:
            provider, kd = placement.provider, placement.kernel
        else:       # not partitioned: a node of a function body, or no provider claimed it
            asg = self.lookup.assign(node.op_type, domain, since)
            provider, kd = asg if asg is not None else (None, None)
        info = NodeInfo(
            name=node.name, op_type=node.op_type, domain=domain, since_version=since,
            opset=opset, inputs=tuple(node.input), outputs=tuple(node.output), attrs=attrs,
            constant_inputs=const_in, input_types=in_types, output_types=out_types,
            subgraphs=subgraphs, implicit_inputs=tuple(implicit),
            provider=provider.name if kd is not None and provider is not None
            else "CPUExecutionProvider")
        multi = len(node.output) > 1 or (schema is not None and schema.max_output > 1)
        # the spec's rules for its attributes and the shapes known now (function bodies get
        # their attributes only here); what is left waits for the run (validate.guard)
        shapes_known = True
        if validate.rules_for(domain, node.op_type):
            shapes_known = validate.check_node(info, _known_shapes(in_types, const_in,
                                                                   node.input))
        if kd is not None and provider is not None:
            fn = bind_kernel(kd, info, given, schema)
            # kernels that check their own shapes (the conv and pool families, once per
            # shape) or that plan/inplace.py must see unwrapped are left as they are
            if not shapes_known and not hasattr(fn, "output_channels") \
                    and not hasattr(fn, "check"):
                fn = validate.guard(info, fn)
            mode = ((MODE_MULTI if multi else MODE_SINGLE) | (MODE_CTX if kd.context else 0)
                    | (MODE_POOL if kd.threads else 0))
            return Step(fn, ins, outs, mode, (), info, provider.name)

        # no kernel: a model-local function, or an op the spec defines as a function
        fproto = self.functions.get((domain, node.op_type))
        if fproto is not None:
            fn = self._function_call(fproto, node, None, in_types)
            return Step(fn, ins, outs, MODE_MULTI | MODE_CTX, (), info, FUNCTION_PROVIDER)
        if schema is not None:
            body = function_body(schema, opset, node, None)
            if body is not None:
                fn = self._function_call(body, node, schema, in_types)
                return Step(fn, ins, outs, MODE_MULTI | MODE_CTX, (), info, FUNCTION_PROVIDER)
            if has_context_dependent_body(schema, opset):
                fn = _LazyContextFunction(self, schema, opset, node)
                return Step(fn, ins, outs, MODE_MULTI | MODE_CTX, (), info, FUNCTION_PROVIDER)
        dom = domain or "ai.onnx"
        if schema is None and not known_op(node.op_type, domain):
            raise InvalidGraph(
                f"No op registered for {node.op_type} with domain {dom!r} version {opset} "
                f"(node {node.name!r}): neither the ONNX spec, a provider nor a model-local "
                f"function defines it")
        known = self.lookup.versions_known(domain, node.op_type)
        hint = f"; kernels exist for: {', '.join(known)}" if known else ""
        if schema is None:
            raise InvalidGraph(
                f"op {dom}::{node.op_type} has no schema at opset {opset} (node "
                f"{node.name!r}){hint}")
        raise NotImplementedErr(
            f"Could not find an implementation for {node.op_type}({since}) node with name "
            f"'{node.name}': no kernel for op {dom}::{node.op_type} at opset {opset} "
            f"(schema version {since}) on {self.lookup.names()}{hint}")

    # -- functions ------------------------------------------------------------------------
    def _function_call(self, fproto: onnx.FunctionProto, node: onnx.NodeProto, schema: Any,
                       in_types: tuple[Any, ...]) -> Callable[..., Any]:
        plan = self.plan_function(fproto, node, schema)
        n_out = len(node.output)

        execute = self.execute

        def call(*args: Any, ctx: Any) -> list[Any]:
            res = execute(plan, list(args), None, ctx)
            return res[:n_out]

        call.plan = plan  # type: ignore[attr-defined]
        return call

    def plan_function(self, fproto: onnx.FunctionProto, node: onnx.NodeProto,
                      schema: Any) -> GraphPlan:
        """Plan a function body with the calling node's attributes substituted."""
        attr_protos: dict[str, AttributeProto] = {}
        for a in fproto.attribute_proto:
            attr_protos[a.name] = a
        if schema is not None:
            for name, a in schema.attributes.items():
                if a.default_value is not None and a.default_value.name:
                    attr_protos[name] = a.default_value
        for a in node.attribute:
            attr_protos[a.name] = a
        g = onnx.GraphProto()
        g.name = f"{fproto.domain}::{fproto.name}" if fproto.domain else fproto.name
        for n in fproto.node:
            g.node.append(_substitute(n, attr_protos))
        # bind actual names: function inputs beyond those given are absent (None)
        for i, name in enumerate(fproto.input):
            vi = g.input.add()
            vi.name = name
        for name in fproto.output:
            vi = g.output.add()
            vi.name = name
        opsets = dict(self.opsets)
        for imp in fproto.opset_import:
            opsets["" if imp.domain == "ai.onnx" else imp.domain] = imp.version
        return self.plan_graph(g, frozenset(), opsets)


_GRAPH_ATTRS = (AttributeProto.GRAPH, AttributeProto.GRAPHS)


def _substitute(node: onnx.NodeProto, attrs: dict[str, AttributeProto]) -> onnx.NodeProto:
    """A copy of a function-body node with ``ref_attr_name`` attributes resolved."""
    if not any(a.ref_attr_name or a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS)
               for a in node.attribute):
        return node
    out = onnx.NodeProto()
    out.CopyFrom(node)
    del out.attribute[:]
    for a in node.attribute:
        if a.ref_attr_name:
            src = attrs.get(a.ref_attr_name)
            if src is None:
                continue  # not given by the caller: the body op's own default applies
            b = AttributeProto()
            b.CopyFrom(src)
            b.name = a.name
            out.attribute.append(b)
        elif a.type == AttributeProto.GRAPH:
            b = AttributeProto()
            b.CopyFrom(a)
            sub = onnx.GraphProto()
            sub.CopyFrom(a.g)
            del sub.node[:]
            sub.node.extend(_substitute(n, attrs) for n in a.g.node)
            b.g.CopyFrom(sub)
            out.attribute.append(b)
        else:
            out.attribute.append(a)
    return out


class _LazyContextFunction:
    """An op whose spec body depends on its input types: planned at first call per types."""

    def __init__(self, planner: Planner, schema: Any, opset: int, node: onnx.NodeProto) -> None:
        self.planner = planner
        self.schema = schema
        self.opset = opset
        self.node = node
        self.cache: dict[tuple[Any, ...], GraphPlan] = {}
        self.lock = threading.Lock()

    def __call__(self, *args: Any, ctx: Any) -> list[Any]:
        from onnxrt.ir.dtypes import onnx_elem_type

        key = tuple(None if a is None else (np.asarray(a).dtype.str, np.ndim(a)) for a in args)
        plan = self.cache.get(key)
        if plan is None:
            with self.lock:
                plan = self.cache.get(key)
                if plan is None:
                    types = []
                    for a in args:
                        if a is None:
                            types.append(onnx.TypeProto())
                        else:
                            arr = np.asarray(a)
                            types.append(onnx.helper.make_tensor_type_proto(
                                onnx_elem_type(arr.dtype), list(arr.shape)))
                    body = function_body(self.schema, self.opset, self.node, types)
                    if body is None:
                        raise NotImplementedErr(
                            f"no kernel and no function body for {self.node.op_type} "
                            f"at opset {self.opset}")
                    plan = self.planner.plan_function(body, self.node, self.schema)
                    self.cache[key] = plan
        return self.planner.execute(plan, list(args), None, ctx)[: len(self.node.output)]
