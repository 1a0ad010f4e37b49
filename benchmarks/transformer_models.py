"""Transformer models for the benchmark, built with onnx.helper in the patterns PyTorch's
exporters write: a BERT-base-like encoder (TorchScript-exporter style: shapes computed by
Shape/Gather/Concat chains, erf GELU, decomposed attention with an additive mask) and a
GPT-2-small-like decoder (dynamo-exporter style: constant reshape targets, fused QKV
projection split three ways, tanh GELU, causal mask through Where)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

OPSET = 17


class _Builder:
    def __init__(self, seed: int = 0) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(seed)
        self.n = 0

    def name(self, base: str) -> str:
        self.n += 1
        return f"{base}_{self.n}"

    def const(self, value: np.ndarray, base: str = "c") -> str:
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(value), n))
        return n

    def weight(self, shape: tuple[int, ...], base: str, scale: float = 0.02) -> str:
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32), base)

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs) -> list[str] | str:
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(h.make_node(op_type, inputs, outs, name=self.name(op_type), **attrs))
        return outs if n_out > 1 else outs[0]

    def linear(self, x: str, k: int, n: int, base: str) -> str:
        y = self.op("MatMul", [x, self.weight((k, n), base + "_w")])
        return self.op("Add", [y, self.weight((n,), base + "_b")])

    def layernorm(self, x: str, hidden: int) -> str:
        return self.op("LayerNormalization",
                       [x, self.const(np.ones(hidden, np.float32), "ln_g"),
                        self.const(np.zeros(hidden, np.float32), "ln_b")], axis=-1,
                       epsilon=1e-5)

    def scalar(self, v: float) -> str:
        return self.const(np.array(v, np.float32))

    def ints(self, v: list[int]) -> str:
        return self.const(np.array(v, np.int64))


def _gelu_erf(b: _Builder, x: str) -> str:
    d = b.op("Div", [x, b.scalar(1.4142135)])
    e = b.op("Erf", [d])
    a = b.op("Add", [e, b.scalar(1.0)])
    m = b.op("Mul", [x, a])
    return b.op("Mul", [m, b.scalar(0.5)])


def _gelu_tanh(b: _Builder, x: str) -> str:
    p = b.op("Pow", [x, b.scalar(3.0)])
    m = b.op("Mul", [p, b.scalar(0.044715)])
    a = b.op("Add", [x, m])
    s = b.op("Mul", [a, b.scalar(0.7978845608)])
    t = b.op("Tanh", [s])
    one = b.op("Add", [t, b.scalar(1.0)])
    hx = b.op("Mul", [x, b.scalar(0.5)])
    return b.op("Mul", [hx, one])


def _dyn_shape(b: _Builder, x: str, tail: list[int]) -> str:
    """[B, S] of x (from Shape/Gather as the TorchScript exporter writes it) + tail."""
    shp = b.op("Shape", [x])
    parts = []
    for i in (0, 1):
        g = b.op("Gather", [shp, b.const(np.array(i, np.int64))], axis=0)
        parts.append(b.op("Unsqueeze", [g, b.ints([0])]))
    return b.op("Concat", parts + [b.ints(tail)], axis=0)


def bert(layers: int = 12, hidden: int = 768, heads: int = 12, vocab: int = 30522,
         max_pos: int = 512, ffn: int = 3072) -> onnx.ModelProto:
    b = _Builder(0)
    d = hidden // heads
    word = b.weight((vocab, hidden), "word_emb")
    pos = b.weight((max_pos, hidden), "pos_emb")
    typ = b.weight((2, hidden), "type_emb")
    e = b.op("Add", [b.op("Gather", [word, "input_ids"]), b.op("Gather", [typ, "token_type_ids"])])
    seq = b.op("Gather", [b.op("Shape", ["input_ids"]), b.const(np.array(1, np.int64))], axis=0)
    pos_ids = b.op("Range", [b.const(np.array(0, np.int64)), seq, b.const(np.array(1, np.int64))])
    pos_ids = b.op("Unsqueeze", [pos_ids, b.ints([0])])
    x = b.layernorm(b.op("Add", [e, b.op("Gather", [pos, pos_ids])]), hidden)
    m = b.op("Cast", [b.op("Unsqueeze", ["attention_mask", b.ints([1, 2])])], to=T.FLOAT)
    mask = b.op("Mul", [b.op("Sub", [b.scalar(1.0), m]), b.scalar(-10000.0)])
    for _ in range(layers):
        heads_shape = _dyn_shape(b, x, [heads, d])
        q = b.op("Transpose", [b.op("Reshape", [b.linear(x, hidden, hidden, "q"), heads_shape])],
                 perm=[0, 2, 1, 3])
        k = b.op("Transpose", [b.op("Reshape", [b.linear(x, hidden, hidden, "k"), heads_shape])],
                 perm=[0, 2, 3, 1])
        v = b.op("Transpose", [b.op("Reshape", [b.linear(x, hidden, hidden, "v"), heads_shape])],
                 perm=[0, 2, 1, 3])
        s = b.op("Div", [b.op("MatMul", [q, k]), b.scalar(float(np.sqrt(d)))])
        p = b.op("Softmax", [b.op("Add", [s, mask])], axis=-1)
        ctx = b.op("Transpose", [b.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
        ctx = b.op("Reshape", [ctx, _dyn_shape(b, x, [hidden])])
        x = b.layernorm(b.op("Add", [b.linear(ctx, hidden, hidden, "o"), x]), hidden)
        f = _gelu_erf(b, b.linear(x, hidden, ffn, "ffn1"))
        x = b.layernorm(b.op("Add", [b.linear(f, ffn, hidden, "ffn2"), x]), hidden)
    b.nodes.append(h.make_node("Identity", [x], ["last_hidden_state"], name="out"))
    ids = [h.make_tensor_value_info(n, T.INT64, ["batch", "sequence"])
           for n in ("input_ids", "attention_mask", "token_type_ids")]
    g = h.make_graph(b.nodes, "bert_like", ids,
                     [h.make_tensor_value_info("last_hidden_state", T.FLOAT,
                                               ["batch", "sequence", hidden])], b.inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", OPSET)], ir_version=8,
                        producer_name="onnxrt-benchmark")


def gpt2(layers: int = 12, hidden: int = 768, heads: int = 12, vocab: int = 50257,
         seq: int = 128, ffn: int = 3072) -> onnx.ModelProto:
    b = _Builder(1)
    d = hidden // heads
    wte = b.weight((vocab, hidden), "wte")
    wpe = b.weight((1024, hidden), "wpe")
    pos_ids = b.const(np.arange(seq, dtype=np.int64)[None], "position_ids")
    x = b.op("Add", [b.op("Gather", [wte, "input_ids"]), b.op("Gather", [wpe, pos_ids])])
    causal = b.const(np.tril(np.ones((seq, seq), bool))[None, None], "causal")
    neg = b.scalar(float(np.finfo(np.float32).min))
    for _ in range(layers):
        hn = b.layernorm(x, hidden)
        qkv = b.linear(hn, hidden, 3 * hidden, "c_attn")
        q, k, v = b.op("Split", [qkv, b.ints([hidden] * 3)], n_out=3, axis=2)
        target = b.ints([1, seq, heads, d])
        q = b.op("Transpose", [b.op("Reshape", [q, target])], perm=[0, 2, 1, 3])
        k = b.op("Transpose", [b.op("Reshape", [k, target])], perm=[0, 2, 3, 1])
        v = b.op("Transpose", [b.op("Reshape", [v, target])], perm=[0, 2, 1, 3])
        s = b.op("Mul", [b.op("MatMul", [q, k]), b.scalar(float(1 / np.sqrt(d)))])
        s = b.op("Where", [causal, s, neg])
        p = b.op("Softmax", [s], axis=-1)
        ctx = b.op("Transpose", [b.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
        ctx = b.op("Reshape", [ctx, b.ints([1, seq, hidden])])
        x = b.op("Add", [x, b.linear(ctx, hidden, hidden, "c_proj")])
        hn = b.layernorm(x, hidden)
        f = _gelu_tanh(b, b.linear(hn, hidden, ffn, "c_fc"))
        x = b.op("Add", [x, b.linear(f, ffn, hidden, "mlp_proj")])
    x = b.layernorm(x, hidden)
    logits = b.op("MatMul", [x, b.op("Transpose", [wte], perm=[1, 0])])
    b.nodes.append(h.make_node("Identity", [logits], ["logits"], name="out"))
    g = h.make_graph(b.nodes, "gpt2_like",
                     [h.make_tensor_value_info("input_ids", T.INT64, [1, seq])],
                     [h.make_tensor_value_info("logits", T.FLOAT, [1, seq, vocab])], b.inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", OPSET)], ir_version=8,
                        producer_name="onnxrt-benchmark")


def bert_inputs(batch: int, seq: int = 128, vocab: int = 30522) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    mask = np.ones((batch, seq), np.int64)
    mask[:, seq - seq // 8:] = 0  # some padding
    return {"input_ids": rng.integers(0, vocab, (batch, seq)).astype(np.int64),
            "attention_mask": mask,
            "token_type_ids": np.zeros((batch, seq), np.int64)}


def gpt2_inputs(seq: int = 128, vocab: int = 50257) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {"input_ids": rng.integers(0, vocab, (1, seq)).astype(np.int64)}
