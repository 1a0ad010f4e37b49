"""The rules over a whole model as loaded, with the shapes it declares."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable

import onnx
from onnx import AttributeProto

from onnxrt.ir.attrs import attribute_value
from onnxrt.ir.schemas import get_schema
from onnxrt.validate import SpecError, error_for

__all__ = ["check_graphs", "declared_shapes", "check_attribute_types"]

_SPEC_DOMAINS = ("", "ai.onnx.ml")


@dataclass(frozen=True)
class _Node:
    name: str
    op_type: str
    domain: str
    since_version: int
    attrs: dict[str, Any] = field(default_factory=dict)


@lru_cache(maxsize=None)
def _defaults(op_type: str, opset: int, domain: str) -> tuple[int, tuple[tuple[str, Any], ...]]:
    schema = get_schema(op_type, opset, domain)
    if schema is None:
        return opset, ()
    out = []
    for name, a in schema.attributes.items():
        d = a.default_value
        if d is not None and d.name:
            out.append((name, attribute_value(d)))
    return schema.since_version, tuple(out)


@lru_cache(maxsize=None)
def _attr_types(op_type: str, opset: int, domain: str) -> dict[str, int] | None:
    schema = get_schema(op_type, opset, domain)
    if schema is None:
        return None
    return {name: int(a.type) for name, a in schema.attributes.items()}


def check_attribute_types(n: onnx.NodeProto, opset: int, dom: str) -> None:
    """Every attribute of a node of a spec op is one the schema declares, with its type:
    a mutated file gets the attribute named (onnxruntime refuses these too). A sparse tensor
    where a tensor is declared is accepted, as onnxruntime accepts it (a Constant's
    ``value`` given sparse: its own API tests build one that way)."""
    types = _attr_types(n.op_type, opset, dom)
    if types is None:
        return
    for a in n.attribute:
        want = types.get(a.name)
        if want is None:
            raise SpecError(f"attribute {a.name!r}", onnx.helper.get_attribute_value(a)
                            if a.type else None, f"{n.op_type} has no such attribute "
                            f"(it has {', '.join(sorted(types)) or 'none'})")
        if a.type != want and not (a.type == AttributeProto.SPARSE_TENSOR
                                   and want == AttributeProto.TENSOR):
            raise SpecError(f"attribute {a.name}", AttributeProto.AttributeType.Name(a.type)
                            if a.type in AttributeProto.AttributeType.values() else a.type,
                            f"the spec declares type "
                            f"{AttributeProto.AttributeType.Name(want)}")


def _dims(t: onnx.TypeProto) -> tuple[int | None, ...] | None:
    if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else None
                 for d in t.tensor_type.shape.dim)


def declared_shapes(g: onnx.GraphProto) -> dict[str, tuple[int | None, ...] | None]:
    """Shapes by value name from the graph's inputs, value_info, outputs, initializers and
    Constant nodes."""
    out: dict[str, Any] = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.HasField("type"):
            out[vi.name] = _dims(vi.type)
    for t in g.initializer:
        out[t.name] = tuple(int(d) for d in t.dims)
    for n in g.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and n.output:
            for a in n.attribute:
                if a.name == "value" and a.type == AttributeProto.TENSOR:
                    out[n.output[0]] = tuple(int(d) for d in a.t.dims)
    return out


def check_graphs(model: onnx.ModelProto, rules: dict[tuple[str, str], list[Callable]]) -> None:
    from onnxrt.validate import Shapes, check_node

    opsets = {("" if i.domain == "ai.onnx" else i.domain): i.version
              for i in model.opset_import}

    def walk(g: onnx.GraphProto, outer: dict[str, Any] | None) -> None:
        known: list[dict[str, Any]] = []      # the graph's shapes, built at first need

        def scope() -> dict[str, Any]:
            if not known:
                own = declared_shapes(g)
                known.append({**outer, **own} if outer else own)
            return known[0]

        for n in g.node:
            for a in n.attribute:
                if a.type == AttributeProto.GRAPH:
                    walk(a.g, scope())
                elif a.type == AttributeProto.GRAPHS:
                    for sg in a.graphs:
                        walk(sg, scope())
            dom = "" if n.domain == "ai.onnx" else n.domain
            if n.attribute and dom in _SPEC_DOMAINS and dom in opsets:
                try:
                    check_attribute_types(n, opsets[dom], dom)
                except SpecError as e:
                    since, _ = _defaults(n.op_type, opsets[dom], dom)
                    raise error_for(_Node(n.name, n.op_type, dom, since), e) from None
            if (dom, n.op_type) not in rules:
                continue
            opset = opsets.get(dom)
            if opset is None:
                continue    # the planner names the missing import
            since, defaults = _defaults(n.op_type, opset, dom)
            attrs = dict(defaults)
            for a in n.attribute:
                if a.type not in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
                    attrs[a.name] = attribute_value(a)
            shapes = scope()
            check_node(_Node(n.name, n.op_type, dom, since, attrs),
                       Shapes([shapes.get(i) if i else None for i in n.input]))

    walk(model.graph, None)

