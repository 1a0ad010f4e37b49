"""Kernel lookup and preparation: which provider's kernel runs a node, and that kernel
bound to the node's attributes, once per session.

``KernelLookup`` is what the stages are given instead of a provider's registry by name
(onnxruntime's IKernelLookup): the partitioner asks it which inputs a node's host kernel
reads on the host, constant folding evaluates nodes through it, the planner runs the
function bodies it plans through it. ``bind_kernel`` turns a ``KernelDef`` and a
``NodeInfo`` into the callable a plan step holds.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np
import onnx
from onnx import AttributeProto

from onnxrt.errors import InvalidGraph, NotImplemented as NotImplementedErr
from onnxrt.framework.kernel import KernelDef, NodeInfo
from onnxrt.ir.attrs import attribute_value
from onnxrt.ir.dtypes import np_dtype

__all__ = ["KernelLookup", "bind_kernel", "node_attributes", "evaluate_node"]


class KernelLookup:
    """The host providers of a session, in priority order, asked for kernels: the first
    with a kernel for a node runs it (nodes made after partitioning, such as function
    bodies, and constant folding run on the host)."""

    def __init__(self, providers: Sequence[Any]) -> None:
        self.providers = [ep for ep in providers if ep.device.is_host]

    def __call__(self, domain: str, op_type: str, since_version: int) -> KernelDef | None:
        found = self.assign(op_type, domain, since_version)
        return None if found is None else found[1]

    def assign(self, op_type: str, domain: str, since_version: int
               ) -> tuple[Any, KernelDef] | None:
        """(provider, kernel) of the first host provider with a kernel for the op."""
        for ep in self.providers:
            reg = ep.kernels
            if reg is None:
                continue
            kd = reg.lookup(domain, op_type, since_version)
            if kd is not None:
                return ep, kd
        return None

    def versions_known(self, domain: str, op_type: str) -> list[str]:
        out = []
        for ep in self.providers:
            if ep.kernels is not None:
                out.extend(f"{kd.describe()} on {ep.name}"
                           for kd in ep.kernels.versions(domain, op_type))
        return out

    def names(self) -> str:
        return ", ".join(ep.name for ep in self.providers)


def node_attributes(node: onnx.NodeProto, schema: Any,
                    subgraphs: dict[str, Any] | None = None) -> tuple[dict[str, Any], set[str]]:
    """A node's attributes as Python values with the schema's defaults filled in (graph
    attributes replaced by ``subgraphs``), and the names the node itself gives."""
    attrs: dict[str, Any] = {}
    if schema is not None:
        for name, a in schema.attributes.items():
            d = a.default_value
            if d is not None and d.name:
                attrs[name] = attribute_value(d)
    given = set()
    for a in node.attribute:
        if a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
            attrs[a.name] = (subgraphs or {}).get(a.name)
        else:
            attrs[a.name] = attribute_value(a)
        given.add(a.name)
    return attrs, given


def bind_kernel(kd: KernelDef, info: NodeInfo, given: set[str],
                schema: Any) -> Callable[..., Any]:
    """The callable that runs ``info``'s node: a class kernel prepared for it, or a function
    kernel with its attributes bound (an attribute the kernel does not take is refused
    unless it holds the schema's default)."""
    where = f"node {info.name!r} ({info.op_type}-{info.since_version})"
    if kd.is_class:
        try:
            return kd.impl(info)
        except (InvalidGraph, NotImplementedErr):
            raise
        except Exception as e:
            raise InvalidGraph(f"{where}: {type(e).__name__}: {e}") from e
    kwargs = dict(info.attrs)
    if kd.accepted_attrs is not None:
        defaults = {}
        if schema is not None:
            for name, a in schema.attributes.items():
                if a.default_value is not None and a.default_value.name:
                    defaults[name] = attribute_value(a.default_value)
        for name in list(kwargs):
            if name in kd.accepted_attrs:
                continue
            if name in given and not _same(kwargs[name], defaults.get(name, _MISSING)):
                raise NotImplementedErr(
                    f"{where}: the kernel {kd.describe()} does not support attribute "
                    f"{name!r} (value {kwargs[name]!r})")
            del kwargs[name]
    if kd.needs_node:
        kwargs["node"] = info
    direct = getattr(kd.impl, "direct", None)
    if direct is not None and not kwargs and _plain_arrays(info, direct[1]):
        return direct[0]
    return functools.partial(kd.impl, **kwargs) if kwargs else kd.impl


_MISSING = object()


def _same(a: Any, b: Any) -> bool:
    if b is _MISSING:
        return False
    try:
        return bool(np.all(np.asarray(a) == np.asarray(b)))
    except Exception:
        return False


def _plain_arrays(info: NodeInfo, kinds: str) -> bool:
    """Every input of the node is known to be a tensor of rank >= 1 whose element type maps
    to a NumPy dtype of one of ``kinds`` (what a kernel's ``direct`` ufunc needs)."""
    if not info.input_types or len(info.input_types) != len(info.inputs):
        return False
    for t in info.input_types:
        if t is None or not t.HasField("tensor_type"):
            return False
        tt = t.tensor_type
        if not tt.elem_type or not tt.HasField("shape") or len(tt.shape.dim) == 0:
            return False
        k = _kind(tt.elem_type)
        if not k or k not in kinds:
            return False
    return True


@functools.lru_cache(maxsize=None)
def _kind(elem_type: int) -> str:
    """The NumPy kind of an element type, "" without a NumPy dtype (one lookup per type,
    not one per node input)."""
    try:
        return np.dtype(np_dtype(elem_type)).kind
    except Exception:
        return ""


def evaluate_node(lookup: KernelLookup, node: onnx.NodeProto, opsets: dict[str, int],
                  inputs: list[Any], input_types: tuple[Any, ...] = ()) -> list[Any] | None:
    """The outputs of ``node`` on constant ``inputs`` through the host kernel the lookup
    finds (constant folding), or None when there is none or it declines: no kernel, a
    kernel that needs a run context, attributes or shapes the spec's rules refuse, or an
    error (left to the run, where it names the node)."""
    from onnxrt import validate
    from onnxrt.ir.schemas import get_schema

    domain = "" if node.domain == "ai.onnx" else node.domain
    opset = opsets.get(domain)
    if opset is None:
        return None
    schema = get_schema(node.op_type, opset, domain)
    since = schema.since_version if schema is not None else opset
    found = lookup.assign(node.op_type, domain, since)
    if found is None or found[1].context:
        return None
    ep, kd = found
    try:
        attrs, given = node_attributes(node, schema)
        info = NodeInfo(
            name=node.name, op_type=node.op_type, domain=domain, since_version=since,
            opset=opset, inputs=tuple(node.input), outputs=tuple(node.output), attrs=attrs,
            constant_inputs={i: v for i, v in enumerate(inputs) if v is not None},
            input_types=input_types, provider=ep.name)
        if validate.rules_for(domain, node.op_type):
            shapes = validate.Shapes([None if v is None else tuple(np.shape(v))
                                      for v in inputs],
                                     [i for i, n in enumerate(node.input) if not n])
            if not validate.check_node(info, shapes):
                return None
        fn = bind_kernel(kd, info, given, schema)
        res = fn(*inputs)
    except Exception:
        return None
    multi = len(node.output) > 1 or (schema is not None and schema.max_output > 1)
    if not multi:
        return [res]
    res = list(res)
    return res + [None] * (len(node.output) - len(res))
