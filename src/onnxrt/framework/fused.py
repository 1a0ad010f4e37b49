"""A fused node: the nodes a compile-based provider claimed as one group, handed to its
``compile`` as a standalone model (``FusedSubgraph``), and the callables the compiled
result runs through."""

from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np
import onnx

__all__ = ["FusedSubgraph", "FusedCall", "PerShapeCompile"]


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


class PerShapeCompile:
    """Compiles a fused node again for every new combination of input shapes."""

    def __init__(self, ep: Any, fused: FusedSubgraph) -> None:
        self.ep = ep
        self.fused = fused
        self.cache: dict[tuple[Any, ...], Callable[..., Any]] = {}
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
                    fn = self.ep.compile(shaped)
                    self.cache[key] = fn
        return fn(*args)
