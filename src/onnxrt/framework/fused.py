"""A fused node: the nodes a compile-based provider claimed as one group, handed to its
``compile`` as a standalone model (``FusedSubgraph``), and the callables the compiled
result runs through; a per-shape group its provider cannot compile at some input shapes
runs node by node on the session's host kernels at those shapes (``HostRun``), each such
decision kept as a ``HostFallback``."""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import onnx

from onnxrt.errors import CannotCompile, EPFail, RuntimeException

__all__ = ["FusedSubgraph", "FusedCall", "PerShapeCompile", "HostRun", "HostFallback",
           "HostGroup", "host_run_for", "record_host_fallback"]


class FusedSubgraph:
    """What a compile-based provider's ``compile`` receives: the fused nodes as a standalone
    ONNX model (``model``), plus their names, inputs and outputs."""

    def __init__(self, name: str, provider: str, nodes: list[onnx.NodeProto],
                 inputs: list[str], outputs: list[str], constants: dict[str, Any],
                 opsets: dict[str, int], types: dict[str, Any], graph_name: str) -> None:
        self.name = name
        self.provider = provider
        self.nodes = nodes
        self.inputs = inputs
        self.outputs = outputs
        self.constants = constants
        self.opsets = opsets
        self._types = types
        self.graph_name = graph_name
        self.input_shapes: list[list[Any] | None] = [None] * len(inputs)
        self._model: onnx.ModelProto | None = None

    @property
    def model(self) -> onnx.ModelProto:
        if self._model is None:
            self._model = self.build_model()
        return self._model

    def build_model(self, input_shapes: list[tuple[int, ...]] | None = None) -> onnx.ModelProto:
        from onnx import helper, numpy_helper

        def vi(name: str, shape: Any = None) -> onnx.ValueInfoProto:
            tp = self._types.get(name)
            v = onnx.ValueInfoProto()
            v.name = name
            if tp is not None:
                v.type.CopyFrom(tp)
                if shape is not None and v.type.HasField("tensor_type"):
                    v.type.tensor_type.ClearField("shape")
                    for d in shape:
                        v.type.tensor_type.shape.dim.add().dim_value = int(d)
            return v

        inits = []
        for n, arr in self.constants.items():
            try:
                inits.append(numpy_helper.from_array(np.asarray(arr), n))
            except Exception:
                continue
        g = helper.make_graph(
            self.nodes, self.name,
            [vi(n, input_shapes[i] if input_shapes else None) for i, n in enumerate(self.inputs)],
            [vi(n) for n in self.outputs], inits)
        ops = [helper.make_opsetid(d, v) for d, v in self.opsets.items()]
        return helper.make_model(g, opset_imports=ops, producer_name="onnxrt-fused")

    def output_dtypes(self) -> list[np.dtype | None]:
        """The NumPy dtype of each output, where its type is a known tensor type."""
        from onnxrt.ir.dtypes import np_dtype

        out: list[np.dtype | None] = []
        for n in self.outputs:
            tp = self._types.get(n)
            try:
                out.append(np_dtype(tp.tensor_type.elem_type) if tp is not None
                           and tp.HasField("tensor_type") and tp.tensor_type.elem_type
                           else None)
            except Exception:
                out.append(None)
        return out

    def __repr__(self) -> str:
        return (f"FusedSubgraph({self.name!r}, {len(self.nodes)} nodes, inputs={self.inputs}, "
                f"outputs={self.outputs})")


class FusedCall:
    """Calls a compiled fused node and checks what it returns."""

    __slots__ = ("fn", "n_out", "name", "provider")

    def __init__(self, fn: Callable[..., Any], n_out: int, name: str, provider: str) -> None:
        self.fn = fn
        self.n_out = n_out
        self.name = name
        self.provider = provider

    def __call__(self, *args: Any) -> Any:
        res = self.fn(*args)
        if self.n_out == 1 and not isinstance(res, (list, tuple)):
            return (res,)
        if len(res) != self.n_out:
            raise ValueError(f"the compiled fused node {self.name!r} of {self.provider} "
                             f"returned {len(res)} outputs, expected {self.n_out}")
        return res


@dataclass(frozen=True)
class HostFallback:
    """A fused group its provider could not compile at some input shapes, run there on the
    host kernels instead."""

    group: str
    provider: str                           # the provider that could not compile it
    shapes: tuple[tuple[int, ...], ...] | None   # the group's input shapes (None: all)
    reason: str
    nodes: int
    ran_on: str                             # the host provider(s) whose kernels ran it
    inputs: tuple[str, ...] = ()            # the group's input names
    # per node of the group, in its order, the host provider whose kernel ran it
    node_providers: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.shapes is None:
            at = "at any input shape"
        else:
            at = "at input shapes " + (
                ", ".join(f"{n}{list(s)}" for n, s in zip(self.inputs, self.shapes))
                if self.inputs else str([list(s) for s in self.shapes]))
        return (f"group {self.group} ({self.nodes} nodes): {self.provider} could not compile "
                f"it {at}: ran on {self.ran_on}: {self.reason}")


class _HostStep:
    __slots__ = ("fn", "inputs", "outputs", "multi", "name", "op", "ep")

    def __init__(self, fn: Callable[..., Any], node: onnx.NodeProto, multi: bool,
                 ep: str) -> None:
        self.fn = fn
        self.ep = ep
        self.inputs = tuple(node.input)
        self.outputs = tuple(node.output)
        self.multi = multi
        self.name = node.name
        self.op = node.op_type


class HostRun:
    """Runs a fused group's nodes one by one on the host kernels a ``KernelLookup`` finds
    (the kernels the session would have run them with had no provider claimed them).
    Raises ``ValueError`` naming the node when one has no plain host kernel (none at all,
    or one that needs the run context: control flow)."""

    def __init__(self, fused: FusedSubgraph, lookup: Any) -> None:
        from onnxrt import validate
        from onnxrt.framework.kernel import NodeInfo
        from onnxrt.framework.kernel_lookup import bind_kernel, node_attributes
        from onnxrt.ir.schemas import get_schema

        self.fused = fused
        consts = fused.constants
        types = fused._types
        steps = []
        used: dict[str, None] = {}
        for node in fused.nodes:
            domain = "" if node.domain == "ai.onnx" else node.domain
            opset = fused.opsets.get(domain, 1)
            schema = get_schema(node.op_type, opset, domain)
            since = schema.since_version if schema is not None else opset
            found = lookup.assign(node.op_type, domain, since)
            where = f"node {node.name!r} ({domain + '::' if domain else ''}{node.op_type})"
            if found is None:
                raise ValueError(f"{where} has no kernel on the host providers "
                                 f"({lookup.names()})")
            ep, kd = found
            if kd.context:
                raise ValueError(f"{where}: its host kernel on {ep.name} needs the run "
                                 f"context, which a fused group does not have")
            attrs, given = node_attributes(node, schema)
            info = NodeInfo(
                name=node.name, op_type=node.op_type, domain=domain, since_version=since,
                opset=opset, inputs=tuple(node.input), outputs=tuple(node.output),
                attrs=attrs,
                constant_inputs={k: consts[n] for k, n in enumerate(node.input)
                                 if n in consts},
                input_types=tuple(types.get(n) for n in node.input),
                output_types=tuple(types.get(n) for n in node.output), provider=ep.name)
            fn = bind_kernel(kd, info, given, schema)
            if validate.rules_for(domain, node.op_type) and not hasattr(fn, "check") \
                    and not hasattr(fn, "output_channels"):
                fn = validate.guard(info, fn)
            multi = len(node.output) > 1 or (schema is not None and schema.max_output > 1)
            steps.append(_HostStep(fn, node, multi, ep.name))
            used[ep.name] = None
        self.steps = steps
        self.ran_on = ", ".join(used) or "no provider"
        self.node_providers = tuple(st.ep for st in steps)

    def __call__(self, *args: Any) -> list[Any]:
        env: dict[str, Any] = dict(self.fused.constants)
        env.update(zip(self.fused.inputs, args))
        for st in self.steps:
            ins = [env[n] if n else None for n in st.inputs]
            try:
                res = st.fn(*ins)
            except Exception as e:
                raise RuntimeException(
                    f"node {st.name!r} ({st.op}) of fused group {self.fused.name!r}, run on "
                    f"the host because {self.fused.provider} could not compile it: "
                    f"{type(e).__name__}: {e}") from e
            if st.multi:
                for o, v in zip(st.outputs, res):
                    if o:
                        env[o] = v
            else:
                env[st.outputs[0]] = res
        return [env[o] for o in self.fused.outputs]


class PerShapeCompile:
    """Compiles a fused node again for every new combination of input shapes. Where the
    provider's ``compile`` raises ``CannotCompile`` and ``host`` (the session's
    ``KernelLookup``) is given, the group runs on the host kernels at those shapes: decided
    once per shape, recorded in ``fallbacks`` and in the provider's ``host_fallbacks``."""

    def __init__(self, ep: Any, fused: FusedSubgraph, host: Any = None) -> None:
        self.ep = ep
        self.fused = fused
        self.host = host
        self.cache: dict[tuple[Any, ...], Callable[..., Any]] = {}
        self.fallbacks: list[HostFallback] = []
        self._host_run: HostRun | None = None
        self.lock = threading.Lock()

    def __call__(self, *args: Any) -> Any:
        key = tuple(tuple(getattr(a, "shape", ())) for a in args)
        fn = self.cache.get(key)
        if fn is None:
            with self.lock:
                fn = self.cache.get(key)
                if fn is None:
                    shaped = FusedSubgraph(
                        self.fused.name, self.fused.provider, self.fused.nodes,
                        self.fused.inputs, self.fused.outputs, self.fused.constants,
                        self.fused.opsets, self.fused._types, self.fused.graph_name)
                    shaped.input_shapes = [list(k) for k in key]
                    shaped._model = shaped.build_model(list(key))
                    try:
                        fn = self.ep.compile(shaped)
                    except CannotCompile as e:
                        fn = self._on_host(key, e)
                    self.cache[key] = fn
        return fn(*args)

    def native_shapes(self) -> int:
        """How many input-shape combinations so far ran on the provider's compiled code."""
        return len(self.cache) - len(self.fallbacks)

    def _on_host(self, key: tuple[tuple[int, ...], ...], err: CannotCompile) -> HostRun:
        if self._host_run is None:
            self._host_run = host_run_for(self.ep, self.fused, self.host, key, err)
        self.fallbacks.append(record_host_fallback(self.ep, self.fused, self._host_run, key,
                                                   err))
        return self._host_run


def host_run_for(ep: Any, fused: FusedSubgraph, host: Any,
                 key: tuple[tuple[int, ...], ...] | None, err: CannotCompile) -> HostRun:
    """The group on the host kernels of ``host`` (the session's ``KernelLookup``, also
    ``fused.host``) because ``ep`` could not compile it, or ``EPFail`` where the provider's
    ``error_on_failure`` is set, the session forbids the CPU fallback (``host`` None) or the
    host cannot run one of the nodes."""
    at = "" if key is None else f" at input shapes {[list(k) for k in key]}"
    what = (f"{ep.name} could not compile fused node {fused.name!r} ({len(fused.nodes)} "
            f"nodes){at}: {err}")
    if getattr(ep, "error_on_failure", False):
        raise EPFail(what) from err
    if host is None:
        raise EPFail(f"{what}; running it on the host is not allowed here "
                     f"(session.disable_cpu_ep_fallback)") from err
    try:
        return HostRun(fused, host)
    except Exception as e:
        raise EPFail(f"{what}; the host cannot run it either: {e}") from err


def record_host_fallback(ep: Any, fused: FusedSubgraph, run: HostRun,
                         key: tuple[tuple[int, ...], ...] | None,
                         err: CannotCompile) -> HostFallback:
    """Record (in the provider's ``host_fallbacks``) and warn that ``fused`` runs on the host
    at ``key`` (None: at every shape); the caller keeps the record in its ``fallbacks``,
    which the placement report reads."""
    rec = HostFallback(fused.name, ep.name, key, str(err), len(fused.nodes), run.ran_on,
                       tuple(fused.inputs), tuple(getattr(run, "node_providers", ())))
    log = getattr(ep, "host_fallbacks", None)
    if isinstance(log, list):
        log.append(rec)
    warnings.warn(rec.describe(), UserWarning, stacklevel=4)
    return rec


class HostGroup:
    """A group its provider could not compile at all (``compile`` raised ``CannotCompile``
    at session creation): every call runs on the host kernels."""

    def __init__(self, ep: Any, fused: FusedSubgraph, host: Any, err: CannotCompile) -> None:
        self.run = host_run_for(ep, fused, host, None, err)
        self.fallbacks = [record_host_fallback(ep, fused, self.run, None, err)]

    def native_shapes(self) -> int:
        return 0

    def __call__(self, *args: Any) -> list[Any]:
        return self.run(*args)
