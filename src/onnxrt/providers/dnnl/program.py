"""One fused group, for one combination of input shapes, as a list of oneDNN primitives.

Activations keep the layout the primitives choose (channel-blocked on x86): a reorder is
added only where a consumer needs another layout (the group's edges, reshapes, matrix
products). Convolutions take BatchNormalization folded into their weights, and unary
activations and element-wise adds that follow them as post-ops. Constant weights are
reordered once into the primitive's layout and shared between shapes (``WeightCache``).

One module over ~600 lines: ``Program`` is one builder whose per-op methods (``_op_*``)
all read and write the same state (the value table with each value's layout, the pending
post-ops of the last primitive, the weight cache); split by op family they would be mixins
over that state, no easier to read.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxrt.providers.dnnl import library as L

__all__ = ["Program", "WeightCache", "infer_shapes"]

_COMMUTATIVE = {"Add", "Sum", "Mul", "Max", "Min"}
_BINARY_ALG = {"Add": "add", "Sum": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Max": "max",
               "Min": "min"}


@dataclass
class Val:
    """A value inside the group: its oneDNN memory, the layout it is in, its ONNX shape."""
    mem: Any
    md: Any
    shape: tuple[int, ...]
    # memories that alias this value's buffer and need its handle each run (group inputs)
    aliases: list[Any] = field(default_factory=list)
    is_input: bool = False


class WeightCache:
    """Constant tensors reordered into a primitive's layout, kept for the group's lifetime
    (every input shape compiled for the group shares them)."""

    def __init__(self) -> None:
        self.items: dict[str, list[tuple[Any, Any, np.ndarray]]] = {}
        self.lock = threading.Lock()


def infer_shapes(fused: Any, shapes: list[tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """Every value's static shape for these input shapes (ONNX shape inference; big
    constants enter as shaped inputs so they are not copied into the model)."""
    g = onnx.GraphProto()
    g.node.extend(fused.nodes)
    for name, shp in zip(fused.inputs, shapes):
        g.input.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, list(shp)))
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


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class Program:
    """Builds the primitives for ``fused`` at ``shapes`` and runs them."""

    def __init__(self, lib: L.Dnnl, fused: Any, shapes: list[tuple[int, ...]],
                 weights: WeightCache) -> None:
        self.lib = lib
        self.fused = fused
        self.weights = weights
        self.shape = infer_shapes(fused, shapes)
        self.consts = {k: np.asarray(v) for k, v in fused.constants.items()}
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
        self.inputs: list[Val] = []
        for name, shp in zip(fused.inputs, shapes):
            md = lib.md_strided(shp)
            v = Val(lib.memory(md, None), md, tuple(shp), is_input=True)
            self.vals[name] = v
            self.inputs.append(v)
        self.done: set[int] = set()
        for n in fused.nodes:
            if id(n) in self.done:
                continue
            handler = getattr(self, "_op_" + n.op_type, None)
            if handler is None:
                raise NotImplementedError(f"oneDNN program has no mapping for {n.op_type}")
            handler(n, _attrs(n))
        self.out_mems = []
        for name in fused.outputs:
            v = self.vals[name]
            md = lib.md_strided(v.shape)
            mem = lib.memory(md, None)
            self._reorder(v.mem, v.md, mem, md)
            self.out_mems.append((mem, v.shape))

    # -- running ---------------------------------------------------------------------------
    def run(self, args: tuple[np.ndarray, ...]) -> list[np.ndarray]:
        lib = self.lib
        feeds = [np.ascontiguousarray(a, dtype=np.float32) for a in args]
        outs = [np.empty(shape, np.float32) for _, shape in self.out_mems]
        with self.lock:   # the intermediate buffers belong to the program
            for v, a in zip(self.inputs, feeds):
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
    def _post_ops(self, out: str, binary: bool = True
                  ) -> tuple[list[tuple[Any, ...]], list[tuple[int, Any]], str,
                             list[onnx.NodeProto]]:
        """Unary activations and (with ``binary``) same-shape adds/muls after ``out``, as
        post-ops: the post-op list, the extra execution arguments, the value the chain
        ends in and the nodes it takes (the caller marks them done)."""
        ops: list[tuple[Any, ...]] = []
        extra: list[tuple[int, Any]] = []
        taken: list[onnx.NodeProto] = []
        while out not in self.outputs:
            users = self.consumers.get(out, [])
            if len(users) != 1:
                break
            n = users[0]
            if n.op_type in _UNARY:
                alg, a, b = _unary(n, self.consts)
                ops.append(("eltwise", alg, a, b))
            elif binary and n.op_type in ("Add", "Sum", "Mul") and len(n.input) == 2 and \
                    n.input[0] != n.input[1]:
                other = n.input[1] if n.input[0] == out else n.input[0]
                ov = self.vals.get(other)
                if ov is None or ov.shape != self.shape.get(out):
                    break
                ops.append(("binary", L.BINARY[_BINARY_ALG[n.op_type]], ov.md))
                extra.append((L.ARG_POST_OP_SRC1(len(ops) - 1), ov.mem))
            else:
                break
            taken.append(n)
            out = n.output[0]
        return ops, extra, out, taken

    # -- ops -------------------------------------------------------------------------------
    def _op_Conv(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        lib = self.lib
        x = self.vals[n.input[0]]
        w = self.consts[n.input[1]].astype(np.float32)
        b = self.consts[n.input[2]].astype(np.float32) if len(n.input) > 2 and n.input[2] \
            else np.zeros(w.shape[0], np.float32)
        key = n.input[1]
        out = n.output[0]
        bn = self._single_user(out, "BatchNormalization")
        if bn is not None:
            ba = _attrs(bn)
            s, bb, mean, var = (self.consts[i].astype(np.float32) for i in bn.input[1:5])
            f = s / np.sqrt(var + np.float32(ba.get("epsilon", 1e-5)))
            w = w * f.reshape((-1,) + (1,) * (w.ndim - 1))
            b = (b - mean) * f + bb
            key = f"{key}|bn:{bn.output[0]}"
            self.done.add(id(bn))
            out = bn.output[0]
        nd = w.ndim - 2
        g = int(a.get("group", 1))
        strides = list(a.get("strides", [1] * nd))
        dil = list(a.get("dilations", [1] * nd))
        kern = list(w.shape[2:])
        pl, pr = _pads(a, x.shape[2:], kern, strides, dil)
        wshape = w.shape if g == 1 else (g, w.shape[0] // g) + w.shape[1:]
        first = None
        # the chosen layouts and post-ops can land on oneDNN's reference loops (grouped
        # convs of 34 channels a group, with an add post-op): try plain NCHW, then the
        # chain without its adds, and keep the first jitted choice
        for binary, make in ((True, lib.md_any), (True, lib.md_strided),
                             (False, lib.md_any), (False, lib.md_strided)):
            chain = self._post_ops(out, binary)
            yshape = self.shape[chain[2]]
            bmd = lib.md_strided(b.shape)
            pd = ctypes.c_void_p()
            lib.call("dnnl_convolution_forward_primitive_desc_create", ctypes.byref(pd),
                     lib.engine, L.FORWARD_INFERENCE, L.CONV_DIRECT, make(x.shape),
                     lib.md_any(wshape), bmd, make(yshape), L.dims(strides),
                     L.dims([d - 1 for d in dil]), L.dims(pl), L.dims(pr),
                     lib.attr(chain[0]))
            first = first or (pd, chain)
            if not lib.impl(pd).startswith("ref"):
                break
        else:
            pd, chain = first
        post, extra, out, taken = chain
        self.done.update(id(t) for t in taken)
        yshape = self.shape[out]
        src = self._as(x, lib.query_md(pd, L.Q_SRC_MD))
        wmem = self._weight(key, w.reshape(wshape), lib.query_md(pd, L.Q_WEIGHTS_MD))
        bmem = self._weight(key + "|bias", b, bmd)
        dst, dmd = self._dst(pd)
        self._step(pd, [(L.ARG_SRC, src), (L.ARG_WEIGHTS, wmem), (L.ARG_BIAS, bmem),
                        (L.ARG_DST, dst)] + extra)
        self.vals[out] = Val(dst, dmd, yshape)

    def _single_user(self, value: str, op: str) -> onnx.NodeProto | None:
        users = self.consumers.get(value, [])
        if value in self.outputs or len(users) != 1 or users[0].op_type != op:
            return None
        u = users[0]
        if op == "BatchNormalization" and not all(i in self.consts for i in u.input[1:5]):
            return None
        return u

    def _pool(self, n: onnx.NodeProto, alg: int, kern: list[int], strides: list[int],
              dil: list[int], pl: list[int], pr: list[int]) -> None:
        lib = self.lib
        x = self.vals[n.input[0]]
        out = n.output[0]
        yshape = self.shape[out]
        # ceil_mode: widen the end padding so oneDNN's floor division gives ONNX's size
        for i, (h, k, s, d) in enumerate(zip(x.shape[2:], kern, strides, dil)):
            need = (yshape[2 + i] - 1) * s + (k - 1) * d + 1 - h - pl[i]
            pr[i] = max(pr[i], need)
        pd = ctypes.c_void_p()
        lib.call("dnnl_pooling_forward_primitive_desc_create", ctypes.byref(pd), lib.engine,
                 L.FORWARD_INFERENCE, alg, x.md, lib.md_any(yshape), L.dims(strides),
                 L.dims(kern), L.dims([d - 1 for d in dil]), L.dims(pl), L.dims(pr), None)
        dst, dmd = self._dst(pd)
        args = [(L.ARG_SRC, x.mem), (L.ARG_DST, dst)]
        ws = lib.query_md(pd, L.Q_WORKSPACE_MD)   # training-only, but asked for all the same
        if ws is not None and lib.md_size(ws):
            args.append((L.ARG_WORKSPACE, lib.memory(ws)))
        self._step(pd, args)
        self.vals[out] = Val(dst, dmd, yshape)

    def _op_MaxPool(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        x = self.vals[n.input[0]]
        kern = list(a["kernel_shape"])
        strides = list(a.get("strides", [1] * len(kern)))
        dil = list(a.get("dilations", [1] * len(kern)))
        pl, pr = _pads(a, x.shape[2:], kern, strides, dil)
        self._pool(n, L.POOL_MAX, kern, strides, dil, pl, pr)

    def _op_AveragePool(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        x = self.vals[n.input[0]]
        kern = list(a["kernel_shape"])
        strides = list(a.get("strides", [1] * len(kern)))
        dil = list(a.get("dilations", [1] * len(kern)))
        pl, pr = _pads(a, x.shape[2:], kern, strides, dil)
        alg = L.POOL_AVG_INCLUDE if a.get("count_include_pad", 0) else L.POOL_AVG_EXCLUDE
        self._pool(n, alg, kern, strides, dil, pl, pr)

    def _global(self, n: onnx.NodeProto, alg: int) -> None:
        hw = list(self.vals[n.input[0]].shape[2:])
        z = [0] * len(hw)
        self._pool(n, alg, hw, [1] * len(hw), [1] * len(hw), z, list(z))

    def _op_GlobalAveragePool(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        self._global(n, L.POOL_AVG_EXCLUDE)

    def _op_GlobalMaxPool(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        self._global(n, L.POOL_MAX)

    def _op_BatchNormalization(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        lib = self.lib
        x = self.vals[n.input[0]]
        pd = ctypes.c_void_p()
        lib.call("dnnl_batch_normalization_forward_primitive_desc_create", ctypes.byref(pd),
                 lib.engine, L.FORWARD_INFERENCE, x.md, x.md,
                 ctypes.c_float(a.get("epsilon", 1e-5)),
                 L.USE_GLOBAL_STATS | L.USE_SCALE | L.USE_SHIFT, None)
        args = [(L.ARG_SRC, x.mem)]
        for arg, i in ((L.ARG_SCALE, 1), (L.ARG_SHIFT, 2), (L.ARG_MEAN, 3),
                       (L.ARG_VARIANCE, 4)):
            args.append((arg, self._in(n.input[i]).mem))
        dst, dmd = self._dst(pd)
        self._step(pd, args + [(L.ARG_DST, dst)])
        self.vals[n.output[0]] = Val(dst, dmd, self.shape[n.output[0]])

    def _op_LRN(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        lib = self.lib
        x = self.vals[n.input[0]]
        size = int(a["size"])
        pd = ctypes.c_void_p()
        lib.call("dnnl_lrn_forward_primitive_desc_create", ctypes.byref(pd), lib.engine,
                 L.FORWARD_INFERENCE, L.LRN_ACROSS, x.md, x.md, ctypes.c_int64(size),
                 ctypes.c_float(a.get("alpha", 1e-4)), ctypes.c_float(a.get("beta", 0.75)),
                 ctypes.c_float(a.get("bias", 1.0)), None)
        dst, dmd = self._dst(pd)
        args = [(L.ARG_SRC, x.mem), (L.ARG_DST, dst)]
        ws = lib.query_md(pd, L.Q_WORKSPACE_MD)
        if ws is not None and lib.md_size(ws):
            args.append((L.ARG_WORKSPACE, lib.memory(ws)))
        self._step(pd, args)
        self.vals[n.output[0]] = Val(dst, dmd, self.shape[n.output[0]])

    def _eltwise(self, n: onnx.NodeProto, alg: int, alpha: float, beta: float) -> None:
        lib = self.lib
        x = self.vals[n.input[0]]
        pd = ctypes.c_void_p()
        lib.call("dnnl_eltwise_forward_primitive_desc_create", ctypes.byref(pd), lib.engine,
                 L.FORWARD_INFERENCE, alg, x.md, x.md, ctypes.c_float(alpha),
                 ctypes.c_float(beta), None)
        dst, dmd = self._dst(pd)
        self._step(pd, [(L.ARG_SRC, x.mem), (L.ARG_DST, dst)])
        self.vals[n.output[0]] = Val(dst, dmd, self.shape[n.output[0]])

    def _channel_const(self, name: str, shape: tuple[int, ...]) -> np.ndarray | None:
        """Constant ``name`` as a (C,) vector when it broadcasts over an N-C-spatial value
        of ``shape`` along C only; else None."""
        c = self.consts.get(name)
        if c is None or len(shape) < 3 or c.ndim > len(shape):
            return None
        full = c.reshape((1,) * (len(shape) - c.ndim) + c.shape)
        if full.shape[0] != 1 or full.shape[2:] != (1,) * (len(shape) - 2) or \
                full.shape[1] not in (1, shape[1]):
            return None
        return np.broadcast_to(full.reshape(-1), (shape[1],)).astype(np.float32)

    def _per_channel(self, n: onnx.NodeProto) -> tuple[Val, np.ndarray] | None:
        """(the activation, its per-channel constant) for an Add or Mul of a value by a
        constant that varies along channels only; else None."""
        if n.op_type not in ("Add", "Mul") or len(n.input) != 2:
            return None
        for i in (0, 1):
            v = self.vals.get(n.input[i])
            c = self._channel_const(n.input[1 - i], v.shape) if v is not None else None
            if c is not None:
                return v, c
        return None

    def _next(self, value: str, op: str) -> onnx.NodeProto | None:
        """The only consumer of ``value`` when it is an ``op`` and ``value`` is internal."""
        users = self.consumers.get(value, [])
        if value in self.outputs or len(users) != 1 or users[0].op_type != op:
            return None
        return users[0]

    def _affine(self, n: onnx.NodeProto, x: Val, c: np.ndarray) -> None:
        """``x * s + b`` per channel (a Mul, an Add, or a Mul then an Add), and a Relu
        after it, as one batch-normalization primitive with zero mean and unit variance:
        oneDNN's binary kernels fall back to reference loops for some per-channel
        broadcasts over blocked layouts."""
        lib = self.lib
        scale = c if n.op_type == "Mul" else np.ones_like(c)
        shift = c if n.op_type == "Add" else np.zeros_like(c)
        out = n.output[0]
        add = self._next(out, "Add") if n.op_type == "Mul" else None
        if add is not None and len(add.input) == 2 and add.input[0] != add.input[1]:
            other = add.input[1] if add.input[0] == out else add.input[0]
            b = self._channel_const(other, x.shape)
            if b is not None:
                shift = b
                self.done.add(id(add))
                out = add.output[0]
        flags = L.USE_GLOBAL_STATS | L.USE_SCALE | L.USE_SHIFT
        relu = self._next(out, "Relu")
        if relu is not None:
            flags |= L.FUSE_NORM_RELU
            self.done.add(id(relu))
            out = relu.output[0]
        pd = ctypes.c_void_p()
        lib.call("dnnl_batch_normalization_forward_primitive_desc_create", ctypes.byref(pd),
                 lib.engine, L.FORWARD_INFERENCE, x.md, x.md, ctypes.c_float(0.0), flags,
                 None)
        key = f"affine:{out}"
        md = lib.md_strided(c.shape)
        args = [(L.ARG_SRC, x.mem), (L.ARG_SCALE, self._weight(key + "|s", scale, md)),
                (L.ARG_SHIFT, self._weight(key + "|b", shift, md)),
                (L.ARG_MEAN, self._weight(key + "|m", np.zeros_like(c), md)),
                (L.ARG_VARIANCE, self._weight(key + "|v", np.ones_like(c), md))]
        dst, dmd = self._dst(pd)
        self._step(pd, args + [(L.ARG_DST, dst)])
        self.vals[out] = Val(dst, dmd, self.shape[out])

    def _op_binary(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        lib = self.lib
        out = n.output[0]
        yshape = self.shape[out]
        pc = self._per_channel(n)
        if pc is not None:
            self._affine(n, *pc)
            return
        x0, x1 = self._in(n.input[0]), self._in(n.input[1])
        if x0.shape != yshape and n.op_type in _COMMUTATIVE:
            x0, x1 = x1, x0
        if x0.shape != yshape:
            raise NotImplementedError(f"{n.op_type} broadcasting its first input")
        if len(x1.shape) != len(yshape):
            x1 = self._reshaped(x1, (1,) * (len(yshape) - len(x1.shape)) + tuple(x1.shape))
        if x1.shape != yshape:
            x1 = self._plain(x1)   # a broadcast operand is read in plain layout
        elif not lib.md_equal(x0.md, x1.md):
            # two layouts send oneDNN to its reference loops: one jitted reorder is cheaper
            x1 = Val(self._as(x1, x0.md), x0.md, x1.shape)
        for attempt in (0, 1):
            pd = ctypes.c_void_p()
            lib.call("dnnl_binary_primitive_desc_create", ctypes.byref(pd), lib.engine,
                     L.BINARY[_BINARY_ALG[n.op_type]], x0.md, x1.md, x0.md, None)
            if attempt or x1.shape == yshape or not lib.impl(pd).startswith("ref"):
                break
            x0 = self._plain(x0)   # a broadcast over a blocked layout: plain runs jitted
        dst, dmd = self._dst(pd)
        self._step(pd, [(L.ARG_SRC, x0.mem), (L.ARG_SRC_1, x1.mem), (L.ARG_DST, dst)])
        self.vals[out] = Val(dst, dmd, yshape)

    _op_Add = _op_Sum = _op_Sub = _op_Mul = _op_Div = _op_Max = _op_Min = _op_binary

    def _op_Concat(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        lib = self.lib
        srcs = [self._in(i) for i in n.input if i]
        out = n.output[0]
        yshape = self.shape[out]
        axis = int(a["axis"]) % len(yshape)
        for attempt in (0, 1):
            mds = (ctypes.c_void_p * len(srcs))(*[s.md for s in srcs])
            pd = ctypes.c_void_p()
            lib.call("dnnl_concat_primitive_desc_create", ctypes.byref(pd), lib.engine,
                     lib.md_any(yshape), len(srcs), axis, mds, None)
            if attempt or not lib.impl(pd).startswith("ref"):
                break
            # inputs in different layouts: oneDNN concatenates them with reference loops;
            # in plain layout it is a strided copy
            srcs = [self._plain(s) for s in srcs]
        dst, dmd = self._dst(pd)
        self._step(pd, [(L.ARG_MULTIPLE_SRC + i, s.mem) for i, s in enumerate(srcs)]
                   + [(L.ARG_DST, dst)])
        self.vals[out] = Val(dst, dmd, yshape)

    def _softmax(self, n: onnx.NodeProto, a: dict[str, Any], alg: int) -> None:
        lib = self.lib
        x = self.vals[n.input[0]]
        opset = self.fused.opsets.get("", self.fused.opsets.get("ai.onnx", 13))
        axis = int(a.get("axis", -1 if opset >= 13 else 1)) % len(x.shape)
        if opset < 13:   # the older Softmax normalises over all dims from axis on
            rows = int(np.prod(x.shape[:axis]))
            src = self._reshaped(x, (rows, int(np.prod(x.shape[axis:]))))
            axis = 1
        else:
            src = self._plain(x)
        pd = ctypes.c_void_p()
        lib.call("dnnl_softmax_forward_primitive_desc_create", ctypes.byref(pd), lib.engine,
                 L.FORWARD_INFERENCE, alg, src.md, src.md, axis, None)
        dst, dmd = self._dst(pd)
        self._step(pd, [(L.ARG_SRC, src.mem), (L.ARG_DST, dst)])
        out = n.output[0]
        v = Val(dst, dmd, src.shape)
        self.vals[out] = v if src.shape == self.shape[out] else \
            self._reshaped(v, self.shape[out])

    def _op_Softmax(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        self._softmax(n, a, L.SOFTMAX_ACCURATE)

    def _op_LogSoftmax(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        self._softmax(n, a, L.SOFTMAX_LOG)

    def _matmul(self, n: onnx.NodeProto, x: Val, w: np.ndarray | None, wval: Val | None,
                bias: np.ndarray | None, key: str) -> None:
        """``x @ w (+ bias)`` with matmul; ``w`` a constant (reordered once) or a value."""
        lib = self.lib
        post, extra, out, taken = self._post_ops(n.output[0])
        self.done.update(id(t) for t in taken)
        yshape = self.shape[out]
        nd = len(yshape)
        xs = (1,) * (nd - len(x.shape)) + tuple(x.shape)
        src = self._reshaped(x, xs) if xs != x.shape else self._plain(x)
        attr = lib.attr(post)
        pd = ctypes.c_void_p()
        if w is not None:
            ws = (1,) * (nd - w.ndim) + w.shape
            wmd = lib.md_any(ws)
        else:
            ws = (1,) * (nd - len(wval.shape)) + tuple(wval.shape)
            wv = self._reshaped(wval, ws) if ws != wval.shape else self._plain(wval)
            wmd = wv.md
        bmd = None
        if bias is not None:
            bias = bias.reshape((1,) * (nd - bias.ndim) + bias.shape)
            bmd = lib.md_strided(bias.shape)
        lib.call("dnnl_matmul_primitive_desc_create", ctypes.byref(pd), lib.engine,
                 src.md, wmd, bmd, lib.md_strided(yshape), attr)
        if w is not None:
            wmem = self._weight(key, w.reshape(ws), lib.query_md(pd, L.Q_WEIGHTS_MD))
        else:
            wmem = wv.mem
        dst, dmd = self._dst(pd)
        args = [(L.ARG_SRC, src.mem), (L.ARG_WEIGHTS, wmem), (L.ARG_DST, dst)]
        if bias is not None:
            args.append((L.ARG_BIAS, self._weight(key + "|bias", bias, bmd)))
        self._step(pd, args + extra)
        self.vals[out] = Val(dst, dmd, yshape)

    def _op_MatMul(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        x = self.vals.get(n.input[0]) or self._in(n.input[0])
        if n.input[1] in self.consts:
            self._matmul(n, x, self.consts[n.input[1]].astype(np.float32), None, None,
                         n.input[1])
        else:
            self._matmul(n, x, None, self._in(n.input[1]), None, "")

    def _op_Gemm(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        x = self.vals[n.input[0]]
        w = self.consts[n.input[1]].astype(np.float32)
        if a.get("transB", 0):
            w = w.T
        w = w * np.float32(a.get("alpha", 1.0))
        bias = None
        if len(n.input) > 2 and n.input[2]:
            c = self.consts[n.input[2]].astype(np.float32) * np.float32(a.get("beta", 1.0))
            # C broadcasts over rows (a scalar, (N,), (1, N)) or is the full (M, N)
            bias = c if c.ndim == 2 and c.shape[0] != 1 else \
                np.broadcast_to(c.reshape(-1), (w.shape[1],)).copy()
        key = f"{n.input[1]}|gemm:{a.get('transB', 0)}:{a.get('alpha', 1.0)}"
        self._matmul(n, x, np.ascontiguousarray(w), None, bias, key)

    def _alias(self, n: onnx.NodeProto, shape: tuple[int, ...]) -> None:
        v = self._reshaped(self.vals[n.input[0]], shape)
        self.vals[n.output[0]] = v

    def _op_Reshape(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        self._alias(n, self.shape[n.output[0]])

    _op_Flatten = _op_Squeeze = _op_Unsqueeze = _op_Reshape

    def _op_Identity(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        self.vals[n.output[0]] = self.vals[n.input[0]]

    _op_Dropout = _op_Identity

    def _op_Transpose(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        lib = self.lib
        x = self._plain(self.vals[n.input[0]])
        perm = list(a.get("perm", range(len(x.shape) - 1, -1, -1)))
        strides = np.cumprod([1] + list(x.shape[:0:-1]))[::-1]
        yshape = tuple(x.shape[p] for p in perm)
        view_md = lib.md_strided(yshape, [int(strides[p]) for p in perm])
        view = self._view(x, view_md)
        md = lib.md_strided(yshape)
        mem = lib.memory(md)
        self._reorder(view, view_md, mem, md)
        self.vals[n.output[0]] = Val(mem, md, yshape)

    def _op_unary(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        alg, alpha, beta = _unary(n, self.consts)
        self._eltwise(n, alg, alpha, beta)

    for _op in ("Relu", "LeakyRelu", "Elu", "Tanh", "Sigmoid", "Exp", "Log", "Sqrt", "Abs",
                "Clip", "HardSigmoid", "HardSwish", "Softplus", "Neg", "Gelu", "Mish",
                "Pow"):
        locals()["_op_" + _op] = _op_unary
    del _op


_UNARY = frozenset({"Relu", "LeakyRelu", "Elu", "Tanh", "Sigmoid", "Exp", "Log", "Sqrt",
                    "Abs", "Clip", "HardSigmoid", "HardSwish", "Softplus", "Neg", "Gelu",
                    "Mish", "Pow"})


def _unary(n: onnx.NodeProto, consts: dict[str, np.ndarray]) -> tuple[int, float, float]:
    """The oneDNN eltwise algorithm and its alpha, beta for a unary ONNX node."""
    a = _attrs(n)
    E = L.ELTWISE
    op = n.op_type
    if op == "Relu":
        return E["relu"], 0.0, 0.0
    if op == "LeakyRelu":
        return E["relu"], float(a.get("alpha", 0.01)), 0.0
    if op == "Elu":
        return E["elu"], float(a.get("alpha", 1.0)), 0.0
    if op == "HardSigmoid":
        return E["hardsigmoid"], float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))
    if op == "HardSwish":
        return E["hardswish"], 1.0 / 6.0, 0.5
    if op == "Softplus":
        return E["soft_relu"], 1.0, 0.0
    if op == "Neg":
        return E["linear"], -1.0, 0.0
    if op == "Gelu":
        return (E["gelu_tanh"] if _s(a.get("approximate", "none")) == "tanh"
                else E["gelu_erf"]), 0.0, 0.0
    if op == "Clip":
        lo, hi = a.get("min", -np.inf), a.get("max", np.inf)
        if len(n.input) > 1 and n.input[1]:
            lo = float(consts[n.input[1]])
        if len(n.input) > 2 and n.input[2]:
            hi = float(consts[n.input[2]])
        return E["clip_v2"], float(max(lo, -3.4e38)), float(min(hi, 3.4e38))
    if op == "Pow":
        return E["pow"], 1.0, float(np.asarray(consts[n.input[1]]).reshape(()))
    if op == "Sigmoid":
        return E["logistic"], 0.0, 0.0
    return E[op.lower()], 0.0, 0.0


def _pads(a: dict[str, Any], spatial: tuple[int, ...], kern: list[int], strides: list[int],
          dil: list[int]) -> tuple[list[int], list[int]]:
    """Begin and end pads from ``pads`` or ``auto_pad`` (ONNX's rules)."""
    nd = len(kern)
    auto = _s(a.get("auto_pad", "NOTSET"))
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pl, pr = [], []
        for h, k, s, d in zip(spatial, kern, strides, dil):
            out = -(-h // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - h)
            small, big = total // 2, total - total // 2
            pl.append(small if auto == "SAME_UPPER" else big)
            pr.append(big if auto == "SAME_UPPER" else small)
        return pl, pr
    if auto == "VALID":
        return [0] * nd, [0] * nd
    pads = list(a.get("pads", [0] * (2 * nd)))
    return pads[:nd], pads[nd:]
