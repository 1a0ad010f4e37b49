"""The oneDNN program's tensor ops: element-wise unary and binary ops (broadcasting the
second input), Concat, Softmax, MatMul and Gemm (with activations and adds as post-ops),
and the layout ops (Reshape and its kin as views, Transpose as one reorder). A mixin of
``Program`` (program.py), whose state it reads and writes."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import onnx

from onnxrt.providers.dnnl import library as L
from onnxrt.providers.dnnl.nodeattrs import BINARY_ALG, COMMUTATIVE, UNARY, unary
from onnxrt.providers.dnnl.values import Val

__all__ = ["TensorOps"]


class TensorOps:
    """Element-wise, matrix and layout ops (mixed into ``Program``)."""

    lib: Any
    fused: Any
    consts: dict[str, np.ndarray]
    vals: dict[str, Val]
    shape: dict[str, tuple[int, ...]]
    done: set[int]

    def _eltwise(self, n: onnx.NodeProto, alg: int, alpha: float, beta: float) -> None:
        self._eltwise_on(self.vals[n.input[0]], n.output[0], alg, alpha, beta)

    def _eltwise_on(self, x: Val, out: str, alg: int, alpha: float, beta: float) -> None:
        """``out`` = one eltwise primitive over ``x``, in ``x``'s layout."""
        lib = self.lib
        pd = ctypes.c_void_p()
        lib.call("dnnl_eltwise_forward_primitive_desc_create", ctypes.byref(pd), lib.engine,
                 L.FORWARD_INFERENCE, alg, x.md, x.md, ctypes.c_float(alpha),
                 ctypes.c_float(beta), None)
        dst, dmd = self._dst(pd)
        self._step(pd, [(L.ARG_SRC, x.mem), (L.ARG_DST, dst)])
        self.vals[out] = Val(dst, dmd, self.shape[out])

    def _gelu(self, g: Any) -> None:
        """A GELU written out (patterns.py) as one gelu_erf or gelu_tanh eltwise."""
        self._eltwise_on(self._in(g.x), g.y, L.ELTWISE[g.alg], 0.0, 0.0)
        self.done.update(id(m) for m in g.nodes)

    def _op_LayerNormalization(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        """Normalized over the axes from ``axis`` on, as oneDNN's layer normalization over
        the last axis of a (rows, features) view."""
        lib = self.lib
        x = self._in(n.input[0])
        axis = int(a.get("axis", -1)) % len(x.shape)
        feat = int(np.prod(x.shape[axis:]))
        src = self._reshaped(x, (int(np.prod(x.shape[:axis])), feat))
        scale = np.broadcast_to(self.consts[n.input[1]].astype(np.float32),
                                x.shape[axis:]).reshape(-1)
        shift = np.broadcast_to(self.consts[n.input[2]].astype(np.float32),
                                x.shape[axis:]).reshape(-1) \
            if len(n.input) > 2 and n.input[2] else np.zeros(feat, np.float32)
        pd = ctypes.c_void_p()
        lib.call("dnnl_layer_normalization_forward_primitive_desc_create", ctypes.byref(pd),
                 lib.engine, L.FORWARD_INFERENCE, src.md, src.md, None,
                 ctypes.c_float(a.get("epsilon", 1e-5)), L.USE_SCALE | L.USE_SHIFT, None)
        md = lib.md_strided((feat,))
        key = f"ln:{n.input[1]}:{n.input[2] if len(n.input) > 2 else ''}:{feat}"
        dst, dmd = self._dst(pd)
        args = [(L.ARG_SRC, src.mem), (L.ARG_DST, dst),
                (L.ARG_SCALE, self._weight(key + "|s", scale, md)),
                (L.ARG_SHIFT, self._weight(key + "|b", shift, md))]
        for arg in (L.ARG_MEAN, L.ARG_VARIANCE):
            # statistics are scratch at inference; an implementation may still ask for them
            smd = lib.query_md(pd, L.Q_EXEC_ARG_MD, arg)
            if smd is not None and lib.md_size(smd):
                args.append((arg, lib.memory(smd)))
        self._step(pd, args)
        out = n.output[0]
        v = Val(dst, dmd, src.shape)
        self.vals[out] = self._reshaped(v, self.shape[out])

    def _op_binary(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        lib = self.lib
        out = n.output[0]
        yshape = self.shape[out]
        for value in n.input:
            lin = self._linear(n, value) if value not in self.consts else None
            if lin is not None:    # by a constant scalar: alpha * x + beta
                self._eltwise_on(self._in(value), out, L.ELTWISE["linear"], *lin)
                return
        pc = self._per_channel(n)
        if pc is not None:
            self._affine(n, *pc)
            return
        x0, x1 = self._in(n.input[0]), self._in(n.input[1])
        if x0.shape != yshape and n.op_type in COMMUTATIVE:
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
                     L.BINARY[BINARY_ALG[n.op_type]], x0.md, x1.md, x0.md, None)
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
        start = n.output[0]
        bias_key = key + "|bias"
        if bias is None:
            # an Add of a constant row after it (a linear layer's bias): the matmul's bias
            add = self._next(start, "Add")
            row = self._row_const(add, start) if add is not None else None
            if row is not None:
                bias, bias_key = row
                self.done.add(id(add))
                start = add.output[0]
        if w is not None and w.ndim == 2 and (bias is None or bias.size == w.shape[1]) and \
                self._inner_product(x, w, bias, key, bias_key, start):
            return
        post, extra, out, taken = self._post_ops(start)
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
            args.append((L.ARG_BIAS, self._weight(bias_key, bias, bmd)))
        self._step(pd, args + extra)
        self.vals[out] = Val(dst, dmd, yshape)

    def _inner_product(self, x: Val, w: np.ndarray, bias: np.ndarray | None, key: str,
                       bias_key: str, start: str) -> bool:
        """``x @ w (+ bias)`` for constant 2-D weights as an inner product over the rows of
        ``x`` seen as (M, K): on AVX2 oneDNN 3.2 runs it with brgemm kernels, 3x faster
        than its matmul's gemm here (128x768 @ 768x3072: 9 ms against 30 ms, 2 threads).
        False where oneDNN offers only its reference loops (the caller uses matmul)."""
        lib = self.lib
        k, cols = w.shape
        rows = int(np.prod(x.shape[:-1]))
        post, extra, out, taken = self._post_ops(start, flat=(rows, cols))
        src = self._reshaped(x, (rows, k))
        bmd = lib.md_strided((cols,)) if bias is not None else None
        pd = ctypes.c_void_p()
        try:
            lib.call("dnnl_inner_product_forward_primitive_desc_create", ctypes.byref(pd),
                     lib.engine, L.FORWARD_INFERENCE, src.md, lib.md_any((cols, k)), bmd,
                     lib.md_strided((rows, cols)), lib.attr(post))
        except L.DnnlError:
            return False
        if lib.impl(pd).startswith("ref"):
            return False
        self.done.update(id(t) for t in taken)
        wmem = self._weight(key + "|ip", np.ascontiguousarray(w.T),
                            lib.query_md(pd, L.Q_WEIGHTS_MD))
        dst, dmd = self._dst(pd)
        args = [(L.ARG_SRC, src.mem), (L.ARG_WEIGHTS, wmem), (L.ARG_DST, dst)]
        if bias is not None:
            args.append((L.ARG_BIAS, self._weight(bias_key, bias.reshape(-1), bmd)))
        self._step(pd, args + extra)
        self.vals[out] = self._reshaped(Val(dst, dmd, (rows, cols)), self.shape[out])
        return True

    def _row_const(self, add: onnx.NodeProto, value: str) -> tuple[np.ndarray, str] | None:
        """The constant ``add`` adds to ``value`` as a (N,) row and its cache key, where it
        varies along the last axis only and does not grow the shape; else None."""
        if len(add.input) != 2 or add.input[0] == add.input[1]:
            return None
        other = add.input[1] if add.input[0] == value else add.input[0]
        c = self.consts.get(other)
        shape = self.shape.get(value)
        if c is None or shape is None or c.ndim > len(shape) or c.ndim == 0 or \
                c.shape[-1] != shape[-1] or c.size != shape[-1] or \
                self.shape.get(add.output[0]) != shape:
            return None
        return c.reshape(-1).astype(np.float32), f"bias:{other}"

    def _op_MatMul(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        x = self.vals.get(n.input[0]) or self._in(n.input[0])
        if n.input[1] in self.consts:
            self._matmul(n, x, np.asarray(self.consts[n.input[1]], np.float32), None, None,
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

    def _op_Split(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        """Each part one reorder from a block of the input's buffer (a sub-memory)."""
        lib = self.lib
        x = self._in(n.input[0])
        axis = int(a.get("axis", 0)) % len(x.shape)
        at = 0
        for o in n.output:
            shape = self.shape[o]
            if o:
                offsets = [0] * len(shape)
                offsets[axis] = at
                sub = lib.md_sub(x.md, shape, offsets)
                md = lib.md_strided(shape)
                mem = lib.memory(md)
                self._reorder(self._view(x, sub), sub, mem, md)
                self.vals[o] = Val(mem, md, shape)
            at += shape[axis]

    def _op_unary(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        alg, alpha, beta = unary(n, self.consts)
        self._eltwise(n, alg, alpha, beta)

    for _op in UNARY:
        locals()["_op_" + _op] = _op_unary
    del _op

