"""Extended-level fusions: weights folded into Conv, activations into FusedConv/FusedGemm
(BatchNormalization -> activation too, as a per-channel FusedConv),
MatMul+Add into Gemm, GELU (erf and tanh forms), LayerNormalization, SkipLayerNormalization.

Fused ops use onnxruntime's com.microsoft names, inputs and attributes, so an optimized model
written with ``optimized_model_filepath`` loads in onnxruntime too. Fusions into
com.microsoft ops are limited to float32, as onnxruntime's CPU kernels are.
Attention lives in ``attention.py``.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper

from onnxrt.passes.attention import fuse_attention
from onnxrt.ir.graph import MS_DOMAIN, Graph, attr, same_dim, same_shape

__all__ = ["fuse_conv_bn", "fuse_conv_add", "fuse_conv_mul", "fuse_bn_mul_add",
           "fuse_conv_activation", "fuse_bn_activation", "fuse_gemm_activation",
           "fuse_matmul_add", "fuse_gelu", "fuse_fast_gelu", "fuse_bias_gelu",
           "fuse_layer_norm", "fuse_rms_norm", "fuse_skip_layer_norm", "fuse_attention"]


def is_op(n: onnx.NodeProto | None, *ops: str) -> bool:
    return n is not None and n.op_type in ops and n.domain in ("", "ai.onnx")


def producer(g: Graph, name: str, *ops: str) -> onnx.NodeProto | None:
    p = g.producer(name) if name else None
    return p if is_op(p, *ops) else None


def sole_consumer(g: Graph, name: str, *ops: str) -> onnx.NodeProto | None:
    """The one node reading ``name`` if it is one of ``ops`` (and ``name`` no graph output)."""
    if not g.only_use(name):
        return None
    c = g.consumers(name)[0]
    return c if is_op(c, *ops) else None


def other_input(n: onnx.NodeProto, name: str) -> str | None:
    """The other operand of a binary node one of whose inputs is ``name``."""
    if len(n.input) != 2:
        return None
    if n.input[0] == name:
        return n.input[1]
    if n.input[1] == name:
        return n.input[0]
    return None


def near(v: float | None, target: float, tol: float = 1e-3) -> bool:
    return v is not None and abs(v - target) <= tol * max(1.0, abs(target))


def _float32(g: Graph, name: str) -> bool:
    return g.elem_type(name) == TP.FLOAT


def _unused(g: Graph, names: list[str]) -> bool:
    return all(not x or (not g.consumers(x) and not g.is_output(x)) for x in names)


def _node(op: str, inputs: list[str], outputs: list[str], name: str, domain: str = "",
          **attrs) -> onnx.NodeProto:
    return helper.make_node(op, inputs, outputs, name=name, domain=domain,
                            **{k: v for k, v in attrs.items() if v is not None})


def _copy_attrs(src: onnx.NodeProto, dst: onnx.NodeProto, skip: tuple[str, ...] = ()) -> None:
    for a in src.attribute:
        if a.name not in skip:
            dst.attribute.append(a)


def _channel_vector(v: np.ndarray, m: int, rank: int) -> np.ndarray | None:
    """A per-output-channel constant of a Conv output of ``rank`` dims as shape (M,), or
    None when it varies along other axes too."""
    v = np.asarray(v)
    if v.ndim > rank:
        return None
    shape = (1,) * (rank - v.ndim) + v.shape
    if any(d != 1 for i, d in enumerate(shape) if i != 1) or shape[1] not in (1, m):
        return None
    return np.broadcast_to(v.reshape(-1), (m,))


# -- Conv weights ------------------------------------------------------------------------

def _conv_weights(g: Graph, conv: onnx.NodeProto) -> tuple[str, int, np.dtype,
                                                           np.ndarray] | None:
    """(weight name, output channels, dtype, bias as float64) of a Conv whose weight and
    bias are constants."""
    if len(conv.input) < 2 or g.const(conv.input[1]) is None:
        return None
    shape, et = g.shape(conv.input[1]), g.elem_type(conv.input[1])
    if shape is None or len(shape) < 3 or not isinstance(shape[0], int) or \
            et not in (TP.FLOAT, TP.DOUBLE, TP.FLOAT16):
        return None
    dt = helper.tensor_dtype_to_np_dtype(et)
    m = shape[0]
    if len(conv.input) > 2 and conv.input[2]:
        b = g.const(conv.input[2])
        if b is None or b.shape != (m,):
            return None
        b = b.astype(np.float64)
    else:
        b = np.zeros(m, np.float64)
    return conv.input[1], m, dt, b


def _rewrite_conv(g: Graph, conv: onnx.NodeProto, w: str, scale: np.ndarray | None,
                  b: np.ndarray, dt: np.dtype, out: str, dead: list[onnx.NodeProto],
                  at: onnx.NodeProto) -> None:
    """Conv with weight ``w`` scaled per output channel by ``scale`` and bias ``b``."""
    if scale is not None:
        rank = len(g.shape(w))
        s = scale.reshape((-1,) + (1,) * (rank - 1))
        w = g.add_const((g.const(w).astype(np.float64) * s).astype(dt), w)
    new = onnx.NodeProto()
    new.CopyFrom(conv)
    del new.input[:]
    del new.output[:]
    bias = conv.input[2] if len(conv.input) > 2 and conv.input[2] else w + "_bias"
    new.input.extend([conv.input[0], w, g.add_const(b.astype(dt), bias)])
    new.output.append(out)
    g.replace(dead, new, at)


def fuse_conv_bn(g: Graph) -> bool:
    """Conv -> BatchNormalization (inference) folds into the Conv's weight and bias."""
    changed = False
    for bn in list(g.nodes):
        if not is_op(bn, "BatchNormalization") or len(bn.input) != 5:
            continue
        if attr(bn, "training_mode", 0) or attr(bn, "spatial", 1) != 1 or \
                not _unused(g, list(bn.output[1:])):
            continue
        conv = producer(g, bn.input[0], "Conv")
        if conv is None or not g.only_use(conv.output[0], bn):
            continue
        wb = _conv_weights(g, conv)
        ps = [g.const(x) for x in bn.input[1:]]
        if wb is None or any(p is None for p in ps):
            continue
        w, m, dt, b = wb
        scale, bias, mean, var = (np.asarray(p, np.float64).reshape(-1) for p in ps)
        if not all(p.size == m for p in (scale, bias, mean, var)):
            continue
        s = scale / np.sqrt(var + float(attr(bn, "epsilon", 1e-5)))
        _rewrite_conv(g, conv, w, s, (b - mean) * s + bias, dt, bn.output[0], [conv, bn], bn)
        changed = True
    return changed


def fuse_conv_add(g: Graph) -> bool:
    """Conv -> Add(per-channel constant) folds into the bias."""
    return _fuse_conv_affine(g, "Add")


def fuse_conv_mul(g: Graph) -> bool:
    """Conv -> Mul(per-channel constant) folds into the weight and bias."""
    return _fuse_conv_affine(g, "Mul")


def _fuse_conv_affine(g: Graph, op: str) -> bool:
    changed = False
    for n in list(g.nodes):
        if not is_op(n, op) or len(n.input) != 2:
            continue
        conv = producer(g, n.input[0], "Conv") or producer(g, n.input[1], "Conv")
        if conv is None or not g.only_use(conv.output[0], n):
            continue
        c = g.const(other_input(n, conv.output[0]) or "")
        wb = _conv_weights(g, conv)
        if c is None or wb is None or c.dtype != wb[2]:
            continue
        w, m, dt, b = wb
        r = g.rank(conv.output[0]) or len(g.shape(w))
        vec = _channel_vector(c, m, r)
        if vec is None:
            continue
        vec = vec.astype(np.float64)
        if n.op_type == "Add":
            _rewrite_conv(g, conv, w, None, b + vec, dt, n.output[0], [conv, n], n)
        else:
            _rewrite_conv(g, conv, w, vec, b * vec, dt, n.output[0], [conv, n], n)
        changed = True
    return changed


def fuse_bn_mul_add(g: Graph) -> bool:
    """BatchNormalization -> Mul/Add by per-channel constants fold into its scale and bias
    (Caffe2 exports, densenet: BN then a separate affine)."""
    changed = False
    for n in list(g.nodes):
        if not is_op(n, "Add", "Mul") or len(n.input) != 2:
            continue
        bn = producer(g, n.input[0], "BatchNormalization") or \
            producer(g, n.input[1], "BatchNormalization")
        if bn is None or len(bn.input) != 5 or not g.only_use(bn.output[0], n):
            continue
        if attr(bn, "training_mode", 0) or attr(bn, "spatial", 1) != 1 or \
                not _unused(g, list(bn.output[1:])):
            continue
        c = g.const(other_input(n, bn.output[0]) or "")
        scale, bias = g.const(bn.input[1]), g.const(bn.input[2])
        r = g.rank(bn.input[0])
        if c is None or scale is None or bias is None or r is None or c.dtype != scale.dtype:
            continue
        vec = _channel_vector(c, scale.size, r)
        if vec is None:
            continue
        vec = vec.astype(np.float64)
        s64, b64 = scale.astype(np.float64).reshape(-1), bias.astype(np.float64).reshape(-1)
        if n.op_type == "Mul":
            s64, b64 = s64 * vec, b64 * vec
        else:
            b64 = b64 + vec
        new = onnx.NodeProto()
        new.CopyFrom(bn)
        new.input[1] = g.add_const(s64.astype(scale.dtype), bn.input[1])
        new.input[2] = g.add_const(b64.astype(bias.dtype), bn.input[2])
        del new.output[:]
        new.output.append(n.output[0])
        g.replace([bn, n], new, n)
        changed = True
    return changed


# -- activations -------------------------------------------------------------------------
def _activation(g: Graph, n: onnx.NodeProto,
                onnxruntime_only: bool = True) -> tuple[str, list[float]] | None:
    """An activation node as (name, params) in onnxruntime's FusedConv terms (and
    HardSwish, which only onnxrt's FusedConv takes, unless ``onnxruntime_only``)."""
    if is_op(n, "Relu", "Sigmoid", "Tanh"):
        return n.op_type, []
    if is_op(n, "LeakyRelu"):
        return "LeakyRelu", [float(attr(n, "alpha", 0.01))]
    if is_op(n, "HardSigmoid"):
        return "HardSigmoid", [float(attr(n, "alpha", 0.2)), float(attr(n, "beta", 0.5))]
    if is_op(n, "HardSwish") and not onnxruntime_only:
        # an extension: onnxruntime's FusedConv has no HardSwish (MobileNetV3's blocks)
        return "HardSwish", [1.0 / 6.0, 0.5]
    if is_op(n, "Clip"):
        if g.opset < 11:
            return "Clip", [float(attr(n, "min", -3.4028234663852886e38)),
                            float(attr(n, "max", 3.4028234663852886e38))]
        lo = g.scalar(n.input[1]) if len(n.input) > 1 and n.input[1] else -np.inf
        hi = g.scalar(n.input[2]) if len(n.input) > 2 and n.input[2] else np.inf
        if lo is None or hi is None:
            return None
        return "Clip", [max(lo, -3.4028234663852886e38), min(hi, 3.4028234663852886e38)]
    return None


def _silu_tail(g: Graph, name: str) -> tuple[onnx.NodeProto, onnx.NodeProto] | None:
    """(Sigmoid, Mul) where ``name`` is read by exactly those two and the Mul multiplies it
    by the Sigmoid's output, read nowhere else: x * sigmoid(x) as exporters write SiLU."""
    c = g.consumers(name)
    if len(c) != 2 or g.is_output(name):
        return None
    sig = next((n for n in c if is_op(n, "Sigmoid")), None)
    mul = next((n for n in c if is_op(n, "Mul")), None)
    if sig is None or mul is None or len(mul.input) != 2:
        return None
    if sorted(mul.input) != sorted([name, sig.output[0]]) or not g.only_use(sig.output[0], mul):
        return None
    return sig, mul


def fuse_conv_activation(g: Graph) -> bool:
    """Conv [-> Add(other)] -> activation into com.microsoft FusedConv (float32).
    The Add becomes FusedConv's Z input: Y = act(conv(X, W) + B + Z)."""
    changed = False
    for conv in list(g.nodes):
        if not is_op(conv, "Conv") or not _float32(g, conv.input[0]):
            continue
        out = conv.output[0]
        silu = _silu_tail(g, out)
        if silu is not None:
            # an extension: onnxruntime's FusedConv has no SiLU (YOLO's Conv-BN-SiLU)
            sig, mul = silu
            new = _node("FusedConv", list(conv.input), [mul.output[0]],
                        (conv.name or "conv") + "_fused", MS_DOMAIN, activation="Silu")
            _copy_attrs(conv, new)
            g.replace([conv, sig, mul], new, mul)
            g.uses_domain(MS_DOMAIN)
            changed = True
            continue
        if not g.only_use(out):
            continue
        nxt = g.consumers(out)[0]
        dead = [conv]
        z = None
        if is_op(nxt, "Add", "Sum") and len(nxt.input) == 2 and nxt.input[0] != nxt.input[1]:
            z = other_input(nxt, out)
            # onnxruntime's FusedConv adds Z without broadcasting: equal shapes, where a
            # symbolic batch ("N") counts as equal to itself
            if not same_shape(g.shape(out), g.shape(z)) or not g.only_use(nxt.output[0]):
                continue
            dead.append(nxt)
            nxt = g.consumers(nxt.output[0])[0]
        act = _activation(g, nxt, onnxruntime_only=False)
        if act is None:
            if z is None:
                continue
            act_name, params, last = None, [], dead[-1]
        else:
            act_name, params = act
            last = nxt
            dead.append(nxt)
        ins = list(conv.input) + [""] * (3 - len(conv.input))
        if z is not None:
            ins = ins[:3] + [z]
        while ins and not ins[-1]:
            ins.pop()
        new = _node("FusedConv", ins, [last.output[0]], (conv.name or "conv") + "_fused",
                    MS_DOMAIN, activation=act_name,
                    activation_params=params if params else None)
        _copy_attrs(conv, new)
        g.replace(dead, new, last)
        g.uses_domain(MS_DOMAIN)
        changed = True
    return changed


def fuse_bn_activation(g: Graph) -> bool:
    """BatchNormalization (inference, not after a Conv it folds into) -> activation into a
    per-channel FusedConv: a depthwise 1x1 convolution is the same affine map (weight
    scale / sqrt(var + eps), bias shift), and FusedConv applies the activation in the same
    pass (densenet: Concat -> BN -> Relu -> Conv). float32 images only."""
    changed = False
    for bn in list(g.nodes):
        if not is_op(bn, "BatchNormalization") or len(bn.input) != 5 or \
                not _float32(g, bn.input[0]):
            continue
        if attr(bn, "training_mode", 0) or attr(bn, "spatial", 1) != 1 or \
                not _unused(g, list(bn.output[1:])):
            continue
        s = g.shape(bn.input[0])
        if s is None or not 3 <= len(s) <= 5:
            continue
        act_node = sole_consumer(g, bn.output[0], "Relu", "Clip", "LeakyRelu", "Sigmoid",
                                 "Tanh", "HardSigmoid")
        act = _activation(g, act_node) if act_node is not None else None
        ps = [g.const(x) for x in bn.input[1:]]
        if act is None or any(p is None for p in ps):
            continue
        scale, bias, mean, var = (np.asarray(p, np.float64).reshape(-1) for p in ps)
        m = scale.size
        if not all(p.size == m for p in (bias, mean, var)) or (
                isinstance(s[1], int) and s[1] != m):
            continue
        mul = scale / np.sqrt(var + float(attr(bn, "epsilon", 1e-5)))
        spatial = len(s) - 2
        w = g.add_const(mul.astype(np.float32).reshape((m, 1) + (1,) * spatial), "bn_scale")
        b = g.add_const((bias - mean * mul).astype(np.float32), "bn_shift")
        act_name, params = act
        new = _node("FusedConv", [bn.input[0], w, b], [act_node.output[0]],
                    (bn.name or "bn") + "_fused", MS_DOMAIN, activation=act_name,
                    activation_params=params if params else None, group=m,
                    kernel_shape=[1] * spatial, strides=[1] * spatial,
                    pads=[0] * (2 * spatial), dilations=[1] * spatial)
        g.replace([bn, act_node], new, act_node)
        g.uses_domain(MS_DOMAIN)
        changed = True
    return changed


_GEMM_ACTS = {"Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "Elu"}


def fuse_gemm_activation(g: Graph) -> bool:
    """Gemm -> activation into com.microsoft FusedGemm (float32)."""
    changed = False
    for gemm in list(g.nodes):
        if not is_op(gemm, "Gemm") or not _float32(g, gemm.input[0]):
            continue
        act = sole_consumer(g, gemm.output[0], *_GEMM_ACTS)
        if act is None:
            continue
        if len(gemm.input) > 2 and gemm.input[2]:
            cs = g.shape(gemm.input[2])   # onnxruntime's FusedGemm wants C broadcastable
            if cs is None:
                continue
        a_alpha = a_beta = None
        if act.op_type in ("LeakyRelu", "Elu"):
            a_alpha = float(attr(act, "alpha", 0.01 if act.op_type == "LeakyRelu" else 1.0))
        elif act.op_type == "HardSigmoid":
            a_alpha, a_beta = float(attr(act, "alpha", 0.2)), float(attr(act, "beta", 0.5))
        new = _node("FusedGemm", list(gemm.input), [act.output[0]],
                    (gemm.name or "gemm") + "_fused", MS_DOMAIN, activation=act.op_type,
                    activation_alpha=a_alpha, activation_beta=a_beta)
        _copy_attrs(gemm, new, skip=("broadcast",))
        g.replace([gemm, act], new, act)
        g.uses_domain(MS_DOMAIN)
        changed = True
    return changed


def fuse_matmul_add(g: Graph) -> bool:
    """MatMul(A 2-D, B 2-D) -> Add(bias) into Gemm, as onnxruntime does (2-D only)."""
    changed = False
    for mm in list(g.nodes):
        if not is_op(mm, "MatMul"):
            continue
        add = sole_consumer(g, mm.output[0], "Add")
        if add is None:
            continue
        a_shape, b_shape = g.shape(mm.input[0]), g.shape(mm.input[1])
        c = other_input(add, mm.output[0])
        c_shape = g.shape(c) if c else None
        if a_shape is None or b_shape is None or c_shape is None:
            continue
        if len(a_shape) != 2 or len(b_shape) != 2 or g.elem_type(mm.input[0]) not in (
                TP.FLOAT, TP.DOUBLE, TP.FLOAT16):
            continue
        n_dim = b_shape[1]
        m_dim = a_shape[0]
        ok = (len(c_shape) == 1 and same_dim(c_shape[0], n_dim)) or (
            len(c_shape) == 2 and same_dim(c_shape[1], n_dim)
            and (c_shape[0] == 1 or same_dim(c_shape[0], m_dim)))
        if not ok or g.elem_type(c) != g.elem_type(mm.input[0]):
            continue
        new = _node("Gemm", [mm.input[0], mm.input[1], c], [add.output[0]],
                    (mm.name or "matmul") + "_gemm")
        g.replace([mm, add], new, add)
        changed = True
    return changed


# -- GELU --------------------------------------------------------------------------------
def _half_x_tail(g: Graph, x: str, a: str) -> tuple[str, list[onnx.NodeProto],
                                                   onnx.NodeProto] | None:
    """The end of ``0.5 * x * a`` in the orders exporters write it: (x*a)*0.5, (0.5*x)*a,
    x*(0.5*a) -> (output, nodes, last node)."""
    m = sole_consumer(g, a, "Mul")
    if m is None:
        return None
    o = other_input(m, a)
    if o == x:
        m2 = sole_consumer(g, m.output[0], "Mul")
        if m2 is not None and near(g.scalar(other_input(m2, m.output[0]) or ""), 0.5):
            return m2.output[0], [m, m2], m2
        return None
    h = producer(g, o or "", "Mul")
    if h is not None and g.only_use(h.output[0], m):
        if x in h.input and near(g.scalar(other_input(h, x) or ""), 0.5):
            return m.output[0], [h, m], m
    if o is not None and near(g.scalar(o), 0.5):   # (a * 0.5) * x
        m2 = sole_consumer(g, m.output[0], "Mul")
        if m2 is not None and other_input(m2, m.output[0]) == x:
            return m2.output[0], [m, m2], m2
    return None


def _plus_one(g: Graph, name: str) -> onnx.NodeProto | None:
    add = sole_consumer(g, name, "Add")
    if add is not None and near(g.scalar(other_input(add, name) or ""), 1.0, 1e-6):
        return add
    return None


def fuse_gelu(g: Graph) -> bool:
    """x * 0.5 * (1 + erf(x / sqrt(2))) into com.microsoft Gelu."""
    changed = False
    for erf in list(g.nodes):
        if not is_op(erf, "Erf"):
            continue
        d = producer(g, erf.input[0], "Div", "Mul")
        if d is None or not g.only_use(d.output[0], erf) or len(d.input) != 2:
            continue
        x, k = d.input[0], g.scalar(d.input[1])
        if not (near(k, math.sqrt(2)) if d.op_type == "Div" else near(k, 1 / math.sqrt(2))):
            if d.op_type == "Mul" and near(g.scalar(d.input[0]), 1 / math.sqrt(2)):
                x = d.input[1]
            else:
                continue
        if not _float32(g, x):
            continue
        add = _plus_one(g, erf.output[0])
        if add is None:
            continue
        tail = _half_x_tail(g, x, add.output[0])
        if tail is None:
            continue
        out, nodes, last = tail
        new = _node("Gelu", [x], [out], (erf.name or "gelu") + "_gelu", MS_DOMAIN)
        g.replace([d, erf, add] + nodes, new, last)
        g.uses_domain(MS_DOMAIN)
        changed = True
    return changed


def fuse_bias_gelu(g: Graph) -> bool:
    """Add(x, bias 1-D constant) -> Gelu (com.microsoft) into BiasGelu; into FastGelu's own
    bias input for FastGelu."""
    changed = False
    for n in list(g.nodes):
        if n.domain != MS_DOMAIN or n.op_type not in ("Gelu", "FastGelu") or len(n.input) != 1:
            continue
        add = producer(g, n.input[0], "Add")
        if add is None or not g.only_use(n.input[0], n) or len(add.input) != 2:
            continue
        for i in (0, 1):
            bias = g.const(add.input[i])
            x = add.input[1 - i]
            s = g.shape(x)
            if bias is not None and bias.ndim == 1 and s is not None and s[-1] == bias.shape[0] \
                    and _float32(g, x) and bias.dtype == np.float32:
                break
        else:
            continue
        op = "BiasGelu" if n.op_type == "Gelu" else "FastGelu"
        new = _node(op, [x, add.input[i]], [n.output[0]], (n.name or "gelu") + "_bias",
                    MS_DOMAIN)
        g.replace([add, n], new, n)
        changed = True
    return changed


def _cube_of(g: Graph, name: str) -> tuple[str, list[onnx.NodeProto]] | None:
    """x for a value computed as Pow(x, 3) or x*x*x -> (x, nodes)."""
    p = producer(g, name, "Pow")
    if p is not None and near(g.scalar(p.input[1]), 3.0, 1e-6):
        return p.input[0], [p]
    m = producer(g, name, "Mul")
    if m is not None and len(m.input) == 2:
        for i in (0, 1):
            sq = producer(g, m.input[i], "Mul")
            o = m.input[1 - i]
            if sq is not None and sq.input[0] == sq.input[1] == o and \
                    g.only_use(sq.output[0], m):
                return o, [sq, m]
    return None


def fuse_fast_gelu(g: Graph) -> bool:
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) into com.microsoft FastGelu."""
    changed = False
    c1 = math.sqrt(2 / math.pi)
    for th in list(g.nodes):
        if not is_op(th, "Tanh"):
            continue
        s = producer(g, th.input[0], "Mul")
        if s is None or not g.only_use(s.output[0], th):
            continue
        u = next((i for i in s.input if near(g.scalar(other_input(s, i) or ""), c1)), None)
        inner = producer(g, u or "", "Add")
        if inner is None or not g.only_use(inner.output[0], s):
            continue
        found = None
        for i in (0, 1):
            x, v = inner.input[i], inner.input[1 - i]
            mc = producer(g, v, "Mul")
            if mc is None or not g.only_use(v, inner):
                continue
            for j in (0, 1):
                if near(g.scalar(mc.input[j]), 0.044715):
                    cube = _cube_of(g, mc.input[1 - j])
                    if cube is not None and cube[0] == x and g.only_use(mc.input[1 - j], mc):
                        found = (x, [mc] + cube[1])
        if found is None:
            continue
        x, mids = found
        if not _float32(g, x):
            continue
        add = _plus_one(g, th.output[0])
        if add is None:
            continue
        tail = _half_x_tail(g, x, add.output[0])
        if tail is None:
            continue
        out, nodes, last = tail
        new = _node("FastGelu", [x], [out], (th.name or "gelu") + "_fastgelu", MS_DOMAIN)
        g.replace(mids + [inner, s, th, add] + nodes, new, last)
        g.uses_domain(MS_DOMAIN)
        changed = True
    return changed


# -- LayerNormalization ------------------------------------------------------------------
def _reduce_axes(g: Graph, n: onnx.NodeProto) -> list[int] | None:
    if attr(n, "keepdims", 1) != 1:
        return None
    a = attr(n, "axes")
    if a is None and len(n.input) > 1 and n.input[1]:
        v = g.const(n.input[1])
        a = None if v is None else [int(i) for i in v.reshape(-1)]
    return None if a is None else list(a)


def _last_axis(g: Graph, x: str, axes: list[int] | None) -> bool:
    if axes is None or len(axes) != 1:
        return False
    r = g.rank(x)
    return axes[0] == -1 or (r is not None and axes[0] == r - 1)


def fuse_layer_norm(g: Graph) -> bool:
    """ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div[/Mul/Add] over the last axis into
    LayerNormalization (ONNX's at opset >= 17, onnxruntime's contrib op of the same name
    and domain before)."""
    changed = False
    for r1 in list(g.nodes):
        if not is_op(r1, "ReduceMean"):
            continue
        x = r1.input[0]
        if not _last_axis(g, x, _reduce_axes(g, r1)) or g.elem_type(x) not in (
                TP.FLOAT, TP.FLOAT16):
            continue
        sub = sole_consumer(g, r1.output[0], "Sub")
        if sub is None or list(sub.input) != [x, r1.output[0]]:
            continue
        d = sub.output[0]
        users = g.consumers(d)
        if g.is_output(d) or len(users) != 2:
            continue
        sq = next((u for u in users if (is_op(u, "Pow") and u.input[0] == d
                                        and near(g.scalar(u.input[1]), 2.0, 1e-6))
                   or (is_op(u, "Mul") and list(u.input) == [d, d])), None)
        div = next((u for u in users if is_op(u, "Div") and list(u.input)[0] == d), None)
        if sq is None or div is None:
            continue
        r2 = sole_consumer(g, sq.output[0], "ReduceMean")
        if r2 is None or not _last_axis(g, x, _reduce_axes(g, r2)):
            continue
        add_eps = sole_consumer(g, r2.output[0], "Add")
        eps = g.scalar(other_input(add_eps, r2.output[0]) or "") if add_eps else None
        if eps is None:
            continue
        sqrt = sole_consumer(g, add_eps.output[0], "Sqrt")
        if sqrt is None or list(div.input) != [d, sqrt.output[0]] or \
                not g.only_use(sqrt.output[0], div):
            continue
        nodes = [r1, sub, sq, r2, add_eps, sqrt, div]
        out = div.output[0]
        last = div
        h = g.shape(x)[-1] if g.shape(x) else None
        gamma = beta = None
        mul = sole_consumer(g, out, "Mul")
        if mul is not None:
            gamma = g.const(other_input(mul, out) or "")
            if gamma is not None and (gamma.ndim > 1 and any(s != 1 for s in gamma.shape[:-1])):
                gamma = None
            if gamma is not None:
                nodes.append(mul)
                out, last = mul.output[0], mul
                add = sole_consumer(g, out, "Add")
                if add is not None:
                    beta = g.const(other_input(add, out) or "")
                    if beta is not None and beta.ndim > 1 and any(
                            s != 1 for s in beta.shape[:-1]):
                        beta = None
                    if beta is not None:
                        nodes.append(add)
                        out, last = add.output[0], add
        dt = helper.tensor_dtype_to_np_dtype(g.elem_type(x))
        if gamma is None:
            if not isinstance(h, int):
                continue
            gamma = np.ones(h, dt)
        size = h if isinstance(h, int) else max(gamma.size, 1 if beta is None else beta.size)
        try:
            gamma = np.broadcast_to(gamma.reshape(-1), (size,)).astype(dt)
            beta = None if beta is None else np.broadcast_to(beta.reshape(-1),
                                                             (size,)).astype(dt)
        except ValueError:
            continue
        ins = [x, g.add_const(gamma, "ln_gamma")]
        if beta is not None:
            ins.append(g.add_const(beta, "ln_beta"))
        # before opset 17 this is onnxruntime's contrib LayerNormalization, which it also
        # registers in the ONNX domain
        new = _node("LayerNormalization", ins, [out], (r1.name or "ln") + "_layernorm",
                    axis=-1, epsilon=float(eps))
        g.replace(nodes, new, last)
        changed = True
    return changed


def fuse_rms_norm(g: Graph) -> bool:
    """x / sqrt(mean(x^2, -1) + eps) * gamma (T5, LLaMA) into SimplifiedLayerNormalization,
    which onnxruntime registers as a contrib op of the ONNX domain."""
    changed = False
    for r in list(g.nodes):
        if not is_op(r, "ReduceMean"):
            continue
        sq = producer(g, r.input[0], "Pow", "Mul")
        if sq is None or not g.only_use(r.input[0], r):
            continue
        x = sq.input[0]
        if not ((sq.op_type == "Pow" and near(g.scalar(sq.input[1]), 2.0, 1e-6))
                or (sq.op_type == "Mul" and sq.input[1] == x)):
            continue
        if not _last_axis(g, x, _reduce_axes(g, r)) or not _float32(g, x):
            continue
        add = sole_consumer(g, r.output[0], "Add")
        eps = g.scalar(other_input(add, r.output[0]) or "") if add else None
        sqrt = sole_consumer(g, add.output[0], "Sqrt") if eps is not None else None
        if sqrt is None or not g.only_use(sqrt.output[0]):
            continue
        nodes = [sq, r, add, sqrt]
        nxt = g.consumers(sqrt.output[0])[0]
        if is_op(nxt, "Div") and list(nxt.input) == [x, sqrt.output[0]]:
            nodes.append(nxt)
        elif is_op(nxt, "Reciprocal") or (is_op(nxt, "Div") and nxt.input[1] == sqrt.output[0]
                                          and near(g.scalar(nxt.input[0]), 1.0, 1e-6)):
            mul = sole_consumer(g, nxt.output[0], "Mul")
            if mul is None or other_input(mul, nxt.output[0]) != x:
                continue
            nodes += [nxt, mul]
        else:
            continue
        out = nodes[-1].output[0]
        scale = sole_consumer(g, out, "Mul")
        gamma = g.const(other_input(scale, out) or "") if scale is not None else None
        h = (g.shape(x) or [None])[-1]
        if gamma is None or gamma.ndim > 1 and any(d != 1 for d in gamma.shape[:-1]):
            continue
        try:
            gamma = np.broadcast_to(gamma.reshape(-1), (h if isinstance(h, int)
                                                        else gamma.size,)).astype(np.float32)
        except ValueError:
            continue
        nodes.append(scale)
        new = _node("SimplifiedLayerNormalization", [x, g.add_const(gamma, "rms_gamma")],
                    [scale.output[0]], (r.name or "rms") + "_rmsnorm", axis=-1,
                    epsilon=float(eps))
        g.replace(nodes, new, scale)
        changed = True
    return changed


def fuse_skip_layer_norm(g: Graph) -> bool:
    """Add(x, skip) [with a bias Add before it] -> LayerNormalization(axis -1) into
    com.microsoft SkipLayerNormalization (3-D float32 inputs of equal shapes)."""
    changed = False
    for ln in list(g.nodes):
        if ln.op_type != "LayerNormalization" or ln.domain not in ("", "ai.onnx", MS_DOMAIN):
            continue
        if attr(ln, "axis", -1) not in (-1, 2) or len(ln.input) < 2 or \
                not _unused(g, list(ln.output[1:])):
            continue
        add = producer(g, ln.input[0], "Add")
        if add is None or len(add.input) != 2 or not _float32(g, add.output[0]):
            continue
        a, b = add.input
        sa, sb = g.shape(a), g.shape(b)
        if sa is None or sb is None or len(sa) != 3 or tuple(sa) != tuple(sb) or \
                any(d is None for d in sa):
            continue
        gamma = g.const(ln.input[1])
        beta = g.const(ln.input[2]) if len(ln.input) > 2 and ln.input[2] else None
        if gamma is None or gamma.ndim != 1 or (beta is not None and beta.ndim != 1):
            continue
        nodes = [add, ln]
        ins = [a, b, ln.input[1], ln.input[2] if beta is not None else ""]
        # a bias added right before (MatMul -> Add(bias) -> Add(residual)) joins too
        for i, v in ((0, a), (1, b)):
            pb = producer(g, v, "Add")
            if pb is None or not g.only_use(v, add):
                continue
            bias_in = next((j for j in pb.input if g.const(j) is not None
                            and g.const(j).ndim == 1 and g.shape(other_input(pb, j) or "")
                            is not None and tuple(g.shape(other_input(pb, j))) == tuple(sa)),
                           None)
            if bias_in is not None:
                ins[i] = other_input(pb, bias_in)
                ins.append(bias_in)
                nodes.insert(0, pb)
                break
        outs = [ln.output[0]]
        if g.consumers(add.output[0]) != [ln] or g.is_output(add.output[0]):
            outs += ["", "", add.output[0]]
        while len(ins) > 3 and not ins[-1]:
            ins.pop()
        new = _node("SkipLayerNormalization", ins, outs, (ln.name or "ln") + "_skip",
                    MS_DOMAIN, epsilon=float(attr(ln, "epsilon", 1e-5)))
        g.replace(nodes, new, ln)
        g.uses_domain(MS_DOMAIN)
        changed = True
    return changed
