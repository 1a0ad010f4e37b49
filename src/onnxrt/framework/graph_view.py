"""What a provider sees when it is asked for its capability: a read-only view of the
nodes no provider ranked above it has claimed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import onnx

from onnxrt.ir.attrs import attribute_value
from onnxrt.ir.dtypes import type_string
from onnxrt.ir.walk import graph_free_names, node_reads

__all__ = ["NodeView", "GraphView", "ValueInfo", "ValueInfos", "node_reads",
           "graph_free_names"]


_TENSOR_TYPES: dict[int, str] = {}


@dataclass(frozen=True)
class ValueInfo:
    """The type and shape of a value where known: ``type`` like ``tensor(float)``,
    ``shape`` a list of ints, dim names and None, or None when the rank is unknown."""

    name: str
    type: str
    shape: list[Any] | None
    elem_type: int = 0

    @classmethod
    def from_type(cls, name: str, tp: onnx.TypeProto | None) -> "ValueInfo":
        if tp is None:
            return cls(name, "unknown", None)
        shape: list[Any] | None = None
        elem = 0
        if tp.HasField("tensor_type"):
            tt = tp.tensor_type
            elem = tt.elem_type
            if tt.HasField("shape"):
                shape = [d.dim_value if d.HasField("dim_value") else
                         (d.dim_param if d.HasField("dim_param") else None)
                         for d in tt.shape.dim]
            ts = _TENSOR_TYPES.get(elem)
            if ts is None:      # one string per element type (once per value was measurable)
                ts = _TENSOR_TYPES[elem] = type_string(tp)
            return cls(name, ts, shape, elem)
        return cls(name, type_string(tp), shape, elem)


class ValueInfos(dict):
    """ValueInfo by value name, each made from the graph's types when first asked for (a
    provider that never looks at types costs nothing per value)."""

    def __init__(self, types: dict[str, Any]) -> None:
        super().__init__()
        self._types = types

    def __missing__(self, name: str) -> ValueInfo:
        v = self[name] = ValueInfo.from_type(name, self._types.get(name))
        return v

    def __contains__(self, name: object) -> bool:
        return name in self._types or dict.__contains__(self, name)

    def get(self, name: str, default: Any = None) -> Any:   # type: ignore[override]
        return self[name] if name in self else default

    def keys(self) -> Any:      # type: ignore[override]
        return self._types.keys()

    def __iter__(self) -> Any:
        return iter(self._types)

    def __len__(self) -> int:
        return len(self._types)

    def items(self) -> Any:     # type: ignore[override]
        return ((k, self[k]) for k in self._types)

    def values(self) -> Any:    # type: ignore[override]
        return (self[k] for k in self._types)


@dataclass(frozen=True, eq=False)
class NodeView:
    """One node as providers see it. ``id`` is unique within the model (all graphs)."""

    id: int
    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    opset: int
    since_version: int
    graph: str                       # "main", or the path of a nested graph
    proto: onnx.NodeProto = field(repr=False)
    host_inputs: frozenset[int] = frozenset()
    # the value infos of the node's graph, read when a provider asks (ValueInfos)
    values: Any = field(default=None, repr=False)
    read_names: tuple[str, ...] | None = field(default=None, repr=False)

    @property
    def input_info(self) -> tuple[ValueInfo, ...]:
        vals = self.values
        return () if vals is None else tuple(vals[x] for x in self.inputs)

    @property
    def output_info(self) -> tuple[ValueInfo, ...]:
        vals = self.values
        return () if vals is None else tuple(vals[x] for x in self.outputs)

    @property
    def attributes(self) -> dict[str, Any]:
        """Attribute values as plain Python values (GraphProto for graph attributes)."""
        return {a.name: attribute_value(a) for a in self.proto.attribute}

    @property
    def input_types(self) -> list[str]:
        return [v.type for v in self.input_info]

    @property
    def output_types(self) -> list[str]:
        return [v.type for v in self.output_info]

    @property
    def input_shapes(self) -> list[list[Any] | None]:
        return [v.shape for v in self.input_info]

    @property
    def output_shapes(self) -> list[list[Any] | None]:
        return [v.shape for v in self.output_info]

    @property
    def reads(self) -> tuple[str, ...]:
        """Every value the node reads: its inputs and what its subgraphs read from outside."""
        if self.read_names is not None:
            return self.read_names
        return tuple(node_reads(self.proto))

    @property
    def has_subgraphs(self) -> bool:
        return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                   for a in self.proto.attribute)

    def __hash__(self) -> int:
        return self.id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NodeView) and other.id == self.id


class GraphView:
    """The unclaimed nodes of one graph, in topological order, plus what is known about the
    values between them. Providers may call ``decline(node, reason)`` to say why they left a
    node (shown in the placement report)."""

    def __init__(self, name: str, nodes: list[NodeView], all_nodes: list[NodeView],
                 graph_inputs: list[str], graph_outputs: list[str],
                 initializers: dict[str, Any], value_info: dict[str, ValueInfo],
                 opsets: dict[str, int], provider: str = "",
                 decline: Callable[[NodeView, str, str], None] | None = None,
                 kernel_lookup: Callable[[str, str, int], Any] | None = None) -> None:
        self.name = name
        self.nodes = list(nodes)
        self._all = all_nodes
        self.all_nodes = list(all_nodes)  # claimed ones too: paths run through them
        self.inputs = list(graph_inputs)
        self.outputs = list(graph_outputs)
        self._initializers = initializers
        self.value_info = value_info
        self.opsets = dict(opsets)
        self._provider = provider
        self._decline = decline
        # (domain, op_type, since_version) -> the asking provider's KernelDef or None
        # (onnxruntime hands GetCapability a kernel lookup beside the graph viewer)
        self.kernel_lookup = kernel_lookup
        self._producer: dict[str, NodeView] = {}
        self._consumers: dict[str, list[NodeView]] = {}
        for n in all_nodes:
            for o in n.outputs:
                if o:
                    self._producer[o] = n
            for i in dict.fromkeys(n.reads):
                if i:
                    self._consumers.setdefault(i, []).append(n)

    def __iter__(self) -> Iterator[NodeView]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def node(self, key: int | str) -> NodeView:
        for n in self._all:
            if n.id == key or n.name == key:
                return n
        raise KeyError(key)

    def producer(self, value: str) -> NodeView | None:
        """The node (claimed or not) that produces ``value``; None for inputs/constants."""
        return self._producer.get(value)

    def consumers(self, value: str) -> list[NodeView]:
        return list(self._consumers.get(value, ()))

    def is_constant(self, value: str) -> bool:
        return value in self._initializers

    def constant(self, value: str) -> Any:
        return self._initializers[value]

    def decline(self, node: NodeView, reason: str) -> None:
        if self._decline is not None:
            self._decline(node, self._provider, reason)
