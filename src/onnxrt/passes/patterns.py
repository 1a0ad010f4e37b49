"""Sub-patterns the rewrite rules share: node and value tests, the tails several fusions
end in (an activation, ``0.5 * x * a``, ``1 + a``), and the rewrites of a Conv's weights
and of a value passed through."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper

from onnxrt.ir.graph import Graph, attr

__all__ = [
    "is_op",
    "producer",
    "sole_consumer",
    "other_input",
    "near",
    "is_float32",
    "unused",
    "make_node",
    "copy_attrs",
    "channel_vector",
    "conv_weights",
    "conv_affine",
    "rewrite_conv",
    "activation",
    "silu_tail",
    "half_x_tail",
    "plus_one",
    "cube_of",
    "reduce_axes",
    "last_axis",
    "onnx_op",
    "bypass",
    "reshaped",
    "axes_of",
]


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



def is_float32(g: Graph, name: str) -> bool:
    return g.elem_type(name) == TP.FLOAT



def unused(g: Graph, names: list[str]) -> bool:
    return all(not x or (not g.consumers(x) and not g.is_output(x)) for x in names)



def make_node(op: str, inputs: list[str], outputs: list[str], name: str, domain: str = "",
          **attrs) -> onnx.NodeProto:
    return helper.make_node(op, inputs, outputs, name=name, domain=domain,
                            **{k: v for k, v in attrs.items() if v is not None})



def copy_attrs(src: onnx.NodeProto, dst: onnx.NodeProto, skip: tuple[str, ...] = ()) -> None:
    for a in src.attribute:
        if a.name not in skip:
            dst.attribute.append(a)



def channel_vector(v: np.ndarray, m: int, rank: int) -> np.ndarray | None:
    """A per-output-channel constant of a Conv output of ``rank`` dims as shape (M,), or
    None when it varies along other axes too."""
    v = np.asarray(v)
    if v.ndim > rank:
        return None
    shape = (1,) * (rank - v.ndim) + v.shape
    if any(d != 1 for i, d in enumerate(shape) if i != 1) or shape[1] not in (1, m):
        return None
    return np.broadcast_to(v.reshape(-1), (m,))



def conv_weights(g: Graph, conv: onnx.NodeProto) -> tuple[str, int, np.dtype,
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



def rewrite_conv(g: Graph, conv: onnx.NodeProto, w: str, scale: np.ndarray | None,
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



# -- activations -------------------------------------------------------------------------
def activation(g: Graph, n: onnx.NodeProto,
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



def silu_tail(g: Graph, name: str) -> tuple[onnx.NodeProto, onnx.NodeProto] | None:
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



# -- GELU --------------------------------------------------------------------------------
def half_x_tail(g: Graph, x: str, a: str) -> tuple[str, list[onnx.NodeProto],
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



def plus_one(g: Graph, name: str) -> onnx.NodeProto | None:
    add = sole_consumer(g, name, "Add")
    if add is not None and near(g.scalar(other_input(add, name) or ""), 1.0, 1e-6):
        return add
    return None



def cube_of(g: Graph, name: str) -> tuple[str, list[onnx.NodeProto]] | None:
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



# -- LayerNormalization ------------------------------------------------------------------
def reduce_axes(g: Graph, n: onnx.NodeProto) -> list[int] | None:
    if attr(n, "keepdims", 1) != 1:
        return None
    a = attr(n, "axes")
    if a is None and len(n.input) > 1 and n.input[1]:
        v = g.const(n.input[1])
        a = None if v is None else [int(i) for i in v.reshape(-1)]
    return None if a is None else list(a)



def last_axis(g: Graph, x: str, axes: list[int] | None) -> bool:
    if axes is None or len(axes) != 1:
        return False
    r = g.rank(x)
    return axes[0] == -1 or (r is not None and axes[0] == r - 1)



def onnx_op(n: onnx.NodeProto, op: str) -> bool:
    return n.op_type == op and n.domain in ("", "ai.onnx")



def bypass(g: Graph, n: onnx.NodeProto, src: str, out: str,
            chain: tuple[onnx.NodeProto, ...] = ()) -> bool:
    """Remove ``n``, which passes ``src`` through as ``out`` (``chain``: the nodes between
    ``src`` and ``n``, removed too when nothing else reads them)."""
    if g.can_bypass(out):
        g.replace_uses(out, src)
        g.remove([n])
        return True
    # out is a graph output: let src's producer write it directly, if nothing else reads src
    p = g.producer(src)
    inside = {id(n)} | {id(c) for c in chain}
    if (p is None or not g.is_output(out) or g.is_output(src) or not g.can_bypass(src)
            or src in g.input_names):
        return False
    for v in [src] + [o for c in chain for o in c.output if o]:
        if g.is_output(v) or any(id(c) not in inside for c in g.consumers(v)):
            return False
    for i, o in enumerate(p.output):
        if o == src:
            p.output[i] = out
    g.remove([n, *chain])
    g.touch()
    return True



def reshaped(s_in: tuple[int, ...], target: np.ndarray | None,
              allowzero: int) -> tuple[int, ...] | None:
    """The output shape of Reshape(static s_in, constant target), or None."""
    if target is None:
        return None
    t = [int(v) for v in np.asarray(target).reshape(-1)]
    if not allowzero:
        t = [s_in[i] if v == 0 and i < len(s_in) else v for i, v in enumerate(t)]
    if t.count(-1) > 1:
        return None
    if -1 in t:
        rest = int(np.prod([v for v in t if v != -1], dtype=np.int64))
        total = int(np.prod(s_in, dtype=np.int64))
        if rest == 0 or total % rest:
            return None
        t[t.index(-1)] = total // rest
    return tuple(t)



def axes_of(g: Graph, n: onnx.NodeProto) -> list[int] | None:
    a = attr(n, "axes")
    if a is not None:
        return list(a)
    if len(n.input) > 1 and n.input[1]:
        v = g.const(n.input[1])
        return None if v is None else [int(i) for i in np.asarray(v).reshape(-1)]
    return None


def conv_affine(g: Graph, n: onnx.NodeProto, op: str) -> bool:
    """Conv -> ``op`` (Add or Mul) by a per-output-channel constant, folded into the Conv's
    bias (Add) or weight and bias (Mul)."""
    if not is_op(n, op) or len(n.input) != 2:
        return False
    conv = producer(g, n.input[0], "Conv") or producer(g, n.input[1], "Conv")
    if conv is None or not g.only_use(conv.output[0], n):
        return False
    c = g.const(other_input(n, conv.output[0]) or "")
    wb = conv_weights(g, conv)
    if c is None or wb is None or c.dtype != wb[2]:
        return False
    w, m, dt, b = wb
    r = g.rank(conv.output[0]) or len(g.shape(w))
    vec = channel_vector(c, m, r)
    if vec is None:
        return False
    vec = vec.astype(np.float64)
    if n.op_type == "Add":
        rewrite_conv(g, conv, w, None, b + vec, dt, n.output[0], [conv, n], n)
    else:
        rewrite_conv(g, conv, w, vec, b * vec, dt, n.output[0], [conv, n], n)
    return True
