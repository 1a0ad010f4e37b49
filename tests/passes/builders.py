"""Models built with onnx.helper the way PyTorch's exporters write them, for the pass tests.

``torchscript=True`` follows the old TorchScript exporter (opset 14: ReduceMean with axes
attributes, shape subgraphs Shape->Gather->Unsqueeze->Concat for reshapes, Div by sqrt(d),
keys transposed with perm (0,2,3,1) after the head split); ``torchscript=False`` follows the
dynamo exporter (opset 18: constant reshape shapes, LayerNormalization, scaled_dot_product
attention decomposed as Mul(q, sqrt(scale)) and Mul(Transpose(k), sqrt(scale))).
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper


class Builder:
    def __init__(self, seed: int = 0) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(seed)
        self.k = 0

    def name(self, hint: str) -> str:
        self.k += 1
        return f"{hint}_{self.k}"

    def const(self, v, hint: str = "c") -> str:
        n = self.name(hint)
        self.inits.append(numpy_helper.from_array(np.asarray(v), n))
        return n

    def weight(self, *shape, scale: float = 0.1) -> str:
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32), "w")

    def op(self, op: str, *inputs: str, n_out: int = 1, **attrs):
        outs = [self.name(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=self.name(op), **attrs))
        return outs[0] if n_out == 1 else outs

    def model(self, inputs, outputs, opset: int, ir: int = 8) -> onnx.ModelProto:
        g = helper.make_graph(self.nodes, "g", inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = ir
        return m


def shape_of(b: Builder, x: str, idx: int, opset: int) -> str:
    """Shape(x)[idx] as a 1-element tensor, as the TorchScript exporter writes it."""
    s = b.op("Shape", x)
    g = b.op("Gather", s, b.const(np.array(idx, np.int64)), axis=0)
    if opset >= 13:
        return b.op("Unsqueeze", g, b.const(np.array([0], np.int64)))
    return b.op("Unsqueeze", g, axes=[0])


def reshape_dyn(b: Builder, x: str, ref: str, tail: list[int], opset: int) -> str:
    parts = [shape_of(b, ref, 0, opset), shape_of(b, ref, 1, opset)]
    parts += [b.const(np.array([t], np.int64)) for t in tail]
    return b.op("Reshape", x, b.op("Concat", *parts, axis=0))


def linear(b: Builder, x: str, d_in: int, d_out: int) -> str:
    return b.op("Add", b.op("MatMul", x, b.weight(d_in, d_out)), b.weight(d_out))


def layer_norm_decomposed(b: Builder, x: str, d: int, opset: int, pow_form: bool = True) -> str:
    def mean(v):
        if opset >= 18:
            return b.op("ReduceMean", v, b.const(np.array([-1], np.int64)))
        return b.op("ReduceMean", v, axes=[-1])
    mu = mean(x)
    dd = b.op("Sub", x, mu)
    sq = b.op("Pow", dd, b.const(np.float32(2.0))) if pow_form else b.op("Mul", dd, dd)
    var = mean(sq)
    std = b.op("Sqrt", b.op("Add", var, b.const(np.float32(1e-12))))
    y = b.op("Div", dd, std)
    gamma = b.const((1 + 0.1 * b.rng.standard_normal(d)).astype(np.float32), "gamma")
    beta = b.const((0.1 * b.rng.standard_normal(d)).astype(np.float32), "beta")
    return b.op("Add", b.op("Mul", y, gamma), beta)


def gelu_erf(b: Builder, x: str) -> str:
    e = b.op("Erf", b.op("Div", x, b.const(np.float32(math.sqrt(2)))))
    a = b.op("Add", e, b.const(np.float32(1.0)))
    return b.op("Mul", b.op("Mul", x, a), b.const(np.float32(0.5)))


def gelu_tanh(b: Builder, x: str) -> str:
    """GPT-2's: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""
    c = b.op("Mul", b.const(np.float32(0.044715)), b.op("Pow", x, b.const(np.float32(3.0))))
    t = b.op("Tanh", b.op("Mul", b.const(np.float32(math.sqrt(2 / math.pi))),
                          b.op("Add", x, c)))
    h = b.op("Mul", b.const(np.float32(0.5)), x)
    return b.op("Mul", h, b.op("Add", b.const(np.float32(1.0)), t))


def attention(b: Builder, x: str, mask: str | None, d: int, heads: int, opset: int,
              torchscript: bool, qkv: tuple[str, str, str] | None = None) -> str:
    hd = d // heads
    q, k, v = qkv or tuple(linear(b, x, d, d) for _ in range(3))

    def split(t: str, perm: list[int]) -> str:
        if torchscript:
            r = reshape_dyn(b, t, x, [heads, hd], opset)
        else:
            r = b.op("Reshape", t, b.const(np.array([0, 0, heads, hd], np.int64)))
        return b.op("Transpose", r, perm=perm)

    if torchscript:
        qh = split(q, [0, 2, 1, 3])
        kt = split(k, [0, 2, 3, 1])
        s = b.op("Div", b.op("MatMul", qh, kt), b.const(np.float32(math.sqrt(hd))))
    else:
        sc = b.const(np.float32(math.sqrt(1 / math.sqrt(hd))))
        qh = b.op("Mul", split(q, [0, 2, 1, 3]), sc)
        kt = b.op("Mul", b.op("Transpose", split(k, [0, 2, 1, 3]), perm=[0, 1, 3, 2]), sc)
        s = b.op("MatMul", qh, kt)
    if mask is not None:
        s = b.op("Add", s, mask)
    p = b.op("Softmax", s, axis=-1 if opset >= 13 else 3)
    ctx = b.op("Transpose", b.op("MatMul", p, split(v, [0, 2, 1, 3])), perm=[0, 2, 1, 3])
    if torchscript:
        return reshape_dyn(b, ctx, x, [d], opset)
    return b.op("Reshape", ctx, b.const(np.array([0, 0, d], np.int64)))


def bert_layer_model(torchscript: bool = True, batch=2, seq=8, d=32, heads=4, layers=2,
                     static: bool = False, with_mask: bool = True) -> onnx.ModelProto:
    """A BERT encoder: attention + residual + LayerNorm + GELU feed-forward + LayerNorm."""
    opset = 14 if torchscript else 18
    b = Builder()
    x = "x"
    mask = None
    if with_mask:
        # BERT's extended mask: (1 - m[:, None, None, :]) * -10000
        m = b.op("Cast", "mask", to=TP.FLOAT)
        m = b.op("Unsqueeze", m, b.const(np.array([1, 2], np.int64)))
        m = b.op("Mul", b.op("Sub", b.const(np.float32(1.0)), m), b.const(np.float32(-10000.0)))
        mask = m
    h = x
    for _ in range(layers):
        a = attention(b, h, mask, d, heads, opset, torchscript)
        a = linear(b, a, d, d)
        if torchscript:
            h = layer_norm_decomposed(b, b.op("Add", a, h), d, opset)
        else:
            h = b.op("LayerNormalization", b.op("Add", a, h),
                     b.const((1 + 0.1 * b.rng.standard_normal(d)).astype(np.float32)),
                     b.const((0.1 * b.rng.standard_normal(d)).astype(np.float32)),
                     axis=-1, epsilon=1e-12)
        f = gelu_erf(b, linear(b, h, d, 4 * d))
        f = linear(b, f, 4 * d, d)
        if torchscript:
            h = layer_norm_decomposed(b, b.op("Add", f, h), d, opset, pow_form=False)
        else:
            h = b.op("LayerNormalization", b.op("Add", f, h),
                     b.const((1 + 0.1 * b.rng.standard_normal(d)).astype(np.float32)),
                     b.const((0.1 * b.rng.standard_normal(d)).astype(np.float32)),
                     axis=-1, epsilon=1e-12)
    bd, sd = (batch, seq) if static else ("batch", "seq")
    b.nodes.append(helper.make_node("Identity", [h], ["y"], name="out"))
    inputs = [helper.make_tensor_value_info("x", TP.FLOAT, [bd, sd, d])]
    if with_mask:
        inputs.append(helper.make_tensor_value_info("mask", TP.INT64, [bd, sd]))
    return b.model(inputs, [helper.make_tensor_value_info("y", TP.FLOAT, [bd, sd, d])], opset)


def bert_feeds(batch=2, seq=8, d=32, with_mask=True, seed=1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {"x": rng.standard_normal((batch, seq, d)).astype(np.float32)}
    if with_mask:
        m = np.ones((batch, seq), np.int64)
        m[0, seq - 3:] = 0
        feeds["mask"] = m
    return feeds


def gpt2_mlp_model(batch=2, seq=8, d=32) -> onnx.ModelProto:
    """GPT-2's feed-forward: LayerNorm (decomposed), Conv1D (MatMul+Add), tanh GELU."""
    b = Builder(3)
    h = layer_norm_decomposed(b, "x", d, 13)
    f = gelu_tanh(b, linear(b, h, d, 4 * d))
    y = b.op("Add", linear(b, f, 4 * d, d), "x")
    b.nodes[-1].output[0] = "y"
    return b.model([helper.make_tensor_value_info("x", TP.FLOAT, ["batch", seq, d])],
                   [helper.make_tensor_value_info("y", TP.FLOAT, ["batch", seq, d])], 13)


def gpt2_block_model(batch=2, seq=8, d=32, heads=4, static=True, hf_slices=False,
                     row_start: int = 0) -> onnx.ModelProto:
    """A GPT-2 block as the TorchScript exporter writes it: Conv1D (MatMul+Add) packed QKV
    and Split, causal Where over a slice of the constant ``bias`` buffer, additive padding
    mask, tanh GELU MLP, pre-LayerNorm residuals. ``hf_slices``: the causal slice as
    transformers writes it, ``bias[:, :, L - S:L, :L]`` (one Slice per axis, S and L from
    their own Shape nodes); ``row_start`` shifts the rows (then no longer causal)."""
    opset, hd = 14, d // heads
    b = Builder(5)
    x = "x"
    m = b.op("Cast", "mask", to=TP.FLOAT)
    m = b.op("Unsqueeze", m, b.const(np.array([1, 2], np.int64)))
    mask = b.op("Mul", b.op("Sub", b.const(np.float32(1.0)), m),
                b.const(np.float32(np.finfo(np.float32).min)))
    h = layer_norm_decomposed(b, x, d, opset)
    q, k, v = b.op("Split", linear(b, h, d, 3 * d), b.const(np.array([d] * 3, np.int64)),
                   axis=2, n_out=3)
    heads_of = []
    for t, perm in ((q, [0, 2, 1, 3]), (k, [0, 2, 3, 1]), (v, [0, 2, 1, 3])):
        r = reshape_dyn(b, t, x, [heads, hd], opset)
        heads_of.append(b.op("Transpose", r, perm=perm))
    s = b.op("Div", b.op("MatMul", heads_of[0], heads_of[1]),
             b.const(np.float32(math.sqrt(hd))))
    buf = b.const(np.tril(np.ones((1, 1, 64, 64), bool)), "bias_buffer")
    n_q = shape_of(b, x, 1, opset)
    if hf_slices:
        n_k = shape_of(b, x, 1, opset)
        start = b.op("Sub", n_k, n_q)
        if row_start:
            start = b.op("Add", start, b.const(np.array([row_start], np.int64)))
        rows = b.op("Slice", buf, start, n_k, b.const(np.array([2], np.int64)))
        causal = b.op("Slice", rows, b.const(np.array([0], np.int64)), n_k,
                      b.const(np.array([-1], np.int64)), b.const(np.array([1], np.int64)))
    else:
        causal = b.op("Slice", buf, b.const(np.array([row_start, 0], np.int64)),
                      b.op("Concat", n_q, n_q, axis=0), b.const(np.array([2, 3], np.int64)))
    s = b.op("Where", causal, s, b.const(np.float32(np.finfo(np.float32).min)))
    p = b.op("Softmax", b.op("Add", s, mask), axis=-1)
    ctx = b.op("Transpose", b.op("MatMul", p, heads_of[2]), perm=[0, 2, 1, 3])
    a = linear(b, reshape_dyn(b, ctx, x, [d], opset), d, d)
    h = b.op("Add", a, x)
    f = gelu_tanh(b, linear(b, layer_norm_decomposed(b, h, d, opset), d, 4 * d))
    b.op("Add", linear(b, f, 4 * d, d), h)
    b.nodes[-1].output[0] = "y"
    bd, sd = (batch, seq) if static else ("batch", "seq")
    return b.model([helper.make_tensor_value_info("x", TP.FLOAT, [bd, sd, d]),
                    helper.make_tensor_value_info("mask", TP.INT64, [bd, sd])],
                   [helper.make_tensor_value_info("y", TP.FLOAT, [bd, sd, d])], opset)
