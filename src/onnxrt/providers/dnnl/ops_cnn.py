"""The oneDNN program's convolution-network ops: Conv (with BatchNormalization folded into
its weights and activations/adds as post-ops), pooling, batch normalization, LRN, and
per-channel Mul/Add(/Relu) chains as one normalization primitive. A mixin of ``Program``
(program.py), whose state it reads and writes."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import onnx

from onnxrt.providers.dnnl import library as L
from onnxrt.providers.dnnl.nodeattrs import attrs, pads
from onnxrt.providers.dnnl.values import Val

__all__ = ["CnnOps"]


class CnnOps:
    """Convolutions, pooling and normalizations (mixed into ``Program``)."""

    lib: Any
    consts: dict[str, np.ndarray]
    vals: dict[str, Val]
    shape: dict[str, tuple[int, ...]]
    done: set[int]
    consumers: dict[str, list[onnx.NodeProto]]
    outputs: set[str]

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
            ba = attrs(bn)
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
        pl, pr = pads(a, x.shape[2:], kern, strides, dil)
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

    def _op_ConvTranspose(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        """oneDNN's deconvolution; ONNX's (C_in, C_out / group, k...) weights regrouped as
        its (group, C_out / group, C_in / group, k...). output_padding and explicit pads
        become the end padding that gives ONNX's output size (negative where
        output_padding exceeds the end pad)."""
        lib = self.lib
        x = self.vals[n.input[0]]
        w = self.consts[n.input[1]].astype(np.float32)
        g = int(a.get("group", 1))
        cin, cout_g, kern = w.shape[0], w.shape[1], list(w.shape[2:])
        b = self.consts[n.input[2]].astype(np.float32) if len(n.input) > 2 and n.input[2] \
            else np.zeros(cout_g * g, np.float32)
        nd = len(kern)
        wg = w.reshape((g, cin // g, cout_g) + tuple(kern)).swapaxes(1, 2)
        wshape = wg.shape if g > 1 else wg.shape[1:]
        strides = list(a.get("strides", [1] * nd))
        dil = list(a.get("dilations", [1] * nd))
        pads = list(a.get("pads", [0] * (2 * nd)))
        pl = pads[:nd]
        yfull = self.shape[n.output[0]]
        pr = [(h - 1) * s + (k - 1) * d + 1 - p - o for h, s, k, d, p, o in
              zip(x.shape[2:], strides, kern, dil, pl, yfull[2:])]
        key = f"{n.input[1]}|deconv"
        bmd = lib.md_strided(b.shape)
        for binary in (True, False):
            chain = self._post_ops(n.output[0], binary)
            pd = ctypes.c_void_p()
            try:
                lib.call("dnnl_deconvolution_forward_primitive_desc_create", ctypes.byref(pd),
                         lib.engine, L.FORWARD_INFERENCE, L.DECONV_DIRECT,
                         lib.md_any(x.shape), lib.md_any(wshape), bmd,
                         lib.md_any(self.shape[chain[2]]), L.dims(strides),
                         L.dims([d - 1 for d in dil]), L.dims(pl), L.dims(pr),
                         lib.attr(chain[0]))
                break
            except L.DnnlError:
                if not binary or not chain[0]:
                    raise
        post, extra, out, taken = chain
        self.done.update(id(t) for t in taken)
        src = self._as(x, lib.query_md(pd, L.Q_SRC_MD))
        wmem = self._weight(key, np.ascontiguousarray(wg.reshape(wshape)),
                            lib.query_md(pd, L.Q_WEIGHTS_MD))
        bmem = self._weight(key + "|bias", b, bmd)
        dst, dmd = self._dst(pd)
        self._step(pd, [(L.ARG_SRC, src), (L.ARG_WEIGHTS, wmem), (L.ARG_BIAS, bmem),
                        (L.ARG_DST, dst)] + extra)
        self.vals[out] = Val(dst, dmd, self.shape[out])

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
        pl, pr = pads(a, x.shape[2:], kern, strides, dil)
        self._pool(n, L.POOL_MAX, kern, strides, dil, pl, pr)

    def _op_AveragePool(self, n: onnx.NodeProto, a: dict[str, Any]) -> None:
        x = self.vals[n.input[0]]
        kern = list(a["kernel_shape"])
        strides = list(a.get("strides", [1] * len(kern)))
        dil = list(a.get("dilations", [1] * len(kern)))
        pl, pr = pads(a, x.shape[2:], kern, strides, dil)
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
