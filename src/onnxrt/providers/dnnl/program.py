"""One fused group, for one combination of input shapes, as a list of oneDNN primitives.

Activations keep the layout the primitives choose (channel-blocked on x86): a reorder is
added only where a consumer needs another layout (the group's edges, reshapes, matrix
products). Convolutions take BatchNormalization folded into their weights, and unary
activations and element-wise adds that follow them as post-ops. Constant weights are
reordered once into the primitive's layout and shared between shapes (``WeightCache``).

This module holds the builder's state and its building blocks (values, layouts, views,
reorders, weights, post-op chains) and runs the result; the per-op methods (``_op_*``) are
mixins by op family: ops_cnn.py (convolutions, pooling, normalizations), ops_tensor.py
(element-wise, matrix and layout ops).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxrt.providers.dnnl import library as L
from onnxrt.providers.dnnl.nodeattrs import BINARY_ALG, UNARY, attrs, unary
from onnxrt.providers.dnnl.ops_cnn import CnnOps
from onnxrt.providers.dnnl.ops_tensor import TensorOps
from onnxrt.providers.dnnl.patterns import Gelu, Nodes, match_gelu
from onnxrt.providers.dnnl.values import Val, WeightCache

__all__ = ["Program", "WeightCache", "infer_shapes"]


def infer_shapes(fused: Any, shapes: list[tuple[int, ...]],
                 values: dict[str, np.ndarray] | None = None) -> dict[str, tuple[int, ...]]:
    """Every value's static shape for these input shapes and the integer inputs' ``values``
    (ONNX shape inference with data propagation; big constants enter as shaped inputs so
    they are not copied into the model)."""
    values = values or {}
    g = onnx.GraphProto()
    g.node.extend(fused.nodes)
    for name, shp in zip(fused.inputs, shapes):
        if name in values:
            g.initializer.append(numpy_helper.from_array(values[name], name))
        else:
            g.input.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT,
                                                         list(shp)))
    for name, arr in fused.constants.items():
        arr = np.asarray(arr)
        if arr.size <= 64 or arr.dtype.kind in "iu":
            g.initializer.append(numpy_helper.from_array(arr, name))
        else:
            g.input.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(arr.dtype), list(arr.shape)))
    for o in fused.outputs:
        g.output.append(onnx.ValueInfoProto(name=o))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v)
                                            for d, v in fused.opsets.items()])
    m = onnx.shape_inference.infer_shapes(m, strict_mode=True, data_prop=True)
    out: dict[str, tuple[int, ...]] = {}
    for vi in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if vi.type.tensor_type.HasField("shape") and all(d.HasField("dim_value")
                                                          for d in dims):
            out[vi.name] = tuple(int(d.dim_value) for d in dims)
    return out



class Program(CnnOps, TensorOps):
    """Builds the primitives for ``fused`` at ``shapes`` and runs them."""

    def __init__(self, lib: L.Dnnl, fused: Any, shapes: list[tuple[int, ...]],
                 weights: WeightCache, values: dict[str, np.ndarray] | None = None) -> None:
        """``values``: the integer inputs (computed Reshape targets), constants here."""
        self.lib = lib
        self.fused = fused
        self.weights = weights
        values = values or {}
        self.shape = infer_shapes(fused, shapes, values)
        self.consts = {k: np.asarray(v) for k, v in fused.constants.items()}
        self.consts.update(values)
        self.keep: list[Any] = []          # arrays and ctypes objects the primitives use
        self.steps: list[tuple[Any, int, Any]] = []
        self.vals: dict[str, Val] = {}
        self.lock = threading.Lock()
        self.consumers: dict[str, list[onnx.NodeProto]] = {}
        for n in fused.nodes:
            for i in n.input:
                if i:
                    self.consumers.setdefault(i, []).append(n)
        self.outputs = set(fused.outputs)
        self.inputs: list[Val | None] = []
        for name, shp in zip(fused.inputs, shapes):
            if name in values:
                self.inputs.append(None)
                continue
            md = lib.md_strided(shp)
            v = Val(lib.memory(md, None), md, tuple(shp), is_input=True)
            self.vals[name] = v
            self.inputs.append(v)
        self.done: set[int] = set()
        # GELUs written out (patterns.py), by their input value and by their first node
        self.gelus = self._find_gelus()
        order = {id(n): i for i, n in enumerate(fused.nodes)}
        gelu_at = {id(min(g.nodes, key=lambda m: order[id(m)])): g
                   for g in self.gelus.values()}
        for n in fused.nodes:
            if id(n) in self.done:
                continue
            if id(n) in gelu_at:
                self._gelu(gelu_at[id(n)])
                continue
            handler = getattr(self, "_op_" + n.op_type, None)
            if handler is None:
                raise NotImplementedError(f"oneDNN program has no mapping for {n.op_type}")
            handler(n, attrs(n))
        self.out_mems = []
        for name in fused.outputs:
            v = self.vals[name]
            md = lib.md_strided(v.shape)
            mem = lib.memory(md, None)
            self._reorder(v.mem, v.md, mem, md)
            self.out_mems.append((mem, v.shape))

    def _scalar(self, name: str) -> float | None:
        c = self.consts.get(name)
        return float(c.reshape(())) if c is not None and c.size == 1 else None

    def _find_gelus(self) -> dict[str, Gelu]:
        producer = {o: n for n in self.fused.nodes for o in n.output if o}
        g = Nodes(producer.get, lambda v: self.consumers.get(v, []), self._scalar,
                  lambda n: list(n.input), lambda n: list(n.output))
        out: dict[str, Gelu] = {}
        for n in self.fused.nodes:
            m = match_gelu(g, n) if n.op_type in ("Erf", "Tanh") else None
            # every value but the last one stays inside the group
            if m is not None and not any(o in self.outputs for k in m.nodes for o in k.output
                                         if o != m.y):
                out[m.x] = m
        return out

    # -- running ---------------------------------------------------------------------------
    def run(self, args: tuple[np.ndarray, ...]) -> list[np.ndarray]:
        lib = self.lib
        feeds = [None if v is None else np.ascontiguousarray(a, dtype=np.float32)
                 for v, a in zip(self.inputs, args)]
        outs = [np.empty(shape, np.float32) for _, shape in self.out_mems]
        with self.lock:   # the intermediate buffers belong to the program
            for v, a in zip(self.inputs, feeds):
                if v is None:       # an integer input, read when the program was built
                    continue
                ptr = a.ctypes.data
                lib.set_handle(v.mem, ptr)
                for m in v.aliases:
                    lib.set_handle(m, ptr)
            for (mem, _), o in zip(self.out_mems, outs):
                lib.set_handle(mem, o.ctypes.data)
            for prim, n, arr in self.steps:
                lib.execute(prim, n, arr)
            lib.wait()
        return outs

    # -- building blocks ---------------------------------------------------------------------
    def _step(self, pd: Any, args: list[tuple[int, Any]]) -> None:
        prim = self.lib.primitive(pd)
        arr = (L.ExecArg * len(args))(*[L.ExecArg(a, m) for a, m in args])
        self.keep.append(arr)
        self.steps.append((prim, len(args), arr))

    def _reorder(self, src_mem: Any, src_md: Any, dst_mem: Any, dst_md: Any) -> None:
        pd = self.lib.reorder_pd(src_md, dst_md)
        self._step(pd, [(L.ARG_FROM, src_mem), (L.ARG_TO, dst_mem)])

    def _in(self, name: str) -> Val:
        """A value of the group, or a constant as a plain memory over its array."""
        v = self.vals.get(name)
        if v is not None:
            return v
        arr = np.ascontiguousarray(self.consts[name], dtype=np.float32)
        self.keep.append(arr)
        md = self.lib.md_strided(arr.shape)
        v = Val(self.lib.memory(md, ctypes.c_void_p(arr.ctypes.data)), md, arr.shape)
        self.vals[name] = v
        return v

    def _as(self, v: Val, md: Any) -> Any:
        """``v``'s data in layout ``md``: its own memory, or a reordered copy."""
        if self.lib.md_equal(v.md, md):
            return v.mem
        mem = self.lib.memory(md)
        self._reorder(v.mem, v.md, mem, md)
        return mem

    def _view(self, v: Val, md: Any) -> Any:
        """A memory over ``v``'s buffer described by ``md`` (a reshape or strided view)."""
        if v.is_input:
            mem = self.lib.memory(md, None)
            v.aliases.append(mem)
            return mem
        h = ctypes.c_void_p()
        self.lib.call("dnnl_memory_get_data_handle", v.mem, ctypes.byref(h))
        return self.lib.memory(md, h)

    def _plain(self, v: Val) -> Val:
        md = self.lib.md_strided(v.shape)
        if self.lib.md_equal(v.md, md):
            return v
        mem = self.lib.memory(md)
        self._reorder(v.mem, v.md, mem, md)
        return Val(mem, md, v.shape)

    def _reshaped(self, v: Val, shape: tuple[int, ...]) -> Val:
        p = self._plain(v)
        md = self.lib.md_strided(shape)
        # a view of a group input shares its alias list: run() sets every pointer in it
        return Val(self._view(p, md), md, tuple(shape), aliases=p.aliases,
                   is_input=p.is_input)

    def _weight(self, key: str, arr: np.ndarray, want_md: Any) -> Any:
        """``arr`` reordered into ``want_md`` once (cached by key and layout)."""
        lib = self.lib
        with self.weights.lock:
            for md, mem, _ in self.weights.items.get(key, []):
                if lib.md_equal(md, want_md):
                    return mem
            arr = np.ascontiguousarray(arr, dtype=np.float32)
            src_md = lib.md_strided(arr.shape)
            src = lib.memory(src_md, ctypes.c_void_p(arr.ctypes.data))
            dst = lib.memory(want_md)
            prim = lib.primitive(lib.reorder_pd(src_md, want_md))
            args = (L.ExecArg * 2)(L.ExecArg(L.ARG_FROM, src), L.ExecArg(L.ARG_TO, dst))
            lib.execute(prim, 2, args)
            lib.wait()
            lib.call("dnnl_primitive_destroy", prim)
            self.weights.items.setdefault(key, []).append((want_md, dst, arr))
            return dst

    def _dst(self, pd: Any) -> tuple[Any, Any]:
        md = self.lib.query_md(pd, L.Q_DST_MD)
        return self.lib.memory(md), md

    def _set(self, name: str, mem: Any, md: Any) -> None:
        self.vals[name] = Val(mem, md, self.shape[name])

    # -- post-op chains ----------------------------------------------------------------------
    def _post_ops(self, out: str, binary: bool = True,
                  flat: tuple[int, ...] | None = None
                  ) -> tuple[list[tuple[Any, ...]], list[tuple[int, Any]], str,
                             list[onnx.NodeProto]]:
        """Unary activations and (with ``binary``) same-shape adds/muls after ``out``, as
        post-ops: the post-op list, the extra execution arguments, the value the chain
        ends in and the nodes it takes (the caller marks them done). ``flat``: the shape
        the primitive sees its output as (binary operands are read as plain views of it)."""
        ops: list[tuple[Any, ...]] = []
        extra: list[tuple[int, Any]] = []
        taken: list[onnx.NodeProto] = []
        while out not in self.outputs:
            gelu = self.gelus.get(out)
            if gelu is not None and not any(id(m) in self.done for m in gelu.nodes):
                ops.append(("eltwise", L.ELTWISE[gelu.alg], 0.0, 0.0))
                taken.extend(gelu.nodes)
                out = gelu.y
                continue
            users = self.consumers.get(out, [])
            if len(users) != 1:
                break
            n = users[0]
            lin = self._linear(n, out)
            if lin is not None:
                ops.append(("eltwise", L.ELTWISE["linear"], *lin))
            elif n.op_type in UNARY:
                alg, a, b = unary(n, self.consts)
                ops.append(("eltwise", alg, a, b))
            elif binary and n.op_type in ("Add", "Sum", "Mul") and len(n.input) == 2 and \
                    n.input[0] != n.input[1]:
                other = n.input[1] if n.input[0] == out else n.input[0]
                ov = self.vals.get(other)
                if ov is None or ov.shape != self.shape.get(out):
                    break
                if flat is not None:
                    ov = self._reshaped(ov, flat)
                ops.append(("binary", L.BINARY[BINARY_ALG[n.op_type]], ov.md))
                extra.append((L.ARG_POST_OP_SRC1(len(ops) - 1), ov.mem))
            else:
                break
            taken.append(n)
            out = n.output[0]
        return ops, extra, out, taken

    def _linear(self, n: onnx.NodeProto, value: str) -> tuple[float, float] | None:
        """``n`` as alpha * value + beta where it adds, subtracts, multiplies or divides
        ``value`` by a constant scalar (oneDNN's ``linear`` eltwise); else None."""
        if n.op_type not in ("Add", "Sub", "Mul", "Div") or len(n.input) != 2 or \
                n.input[0] == n.input[1] or self.shape.get(n.output[0]) != \
                self.shape.get(value):
            return None
        first = n.input[0] == value
        k = self._scalar(n.input[1] if first else n.input[0])
        if k is None:
            return None
        if n.op_type == "Add":
            return 1.0, k
        if n.op_type == "Mul":
            return k, 0.0
        if n.op_type == "Sub":
            return (1.0, -k) if first else (-1.0, k)
        return (1.0 / k, 0.0) if first and k != 0 else None
