"""LLM decoders made the way users make them: a Llama-architecture model with random weights
written by transformers' ``save_pretrained`` (a word-level tokenizer saved beside it), then
onnxruntime-genai's model builder (``-p fp32`` or ``-p int4``, ``-e cpu``), all offline.
Results are cached like quant_models.py's. Needs ``pip install -e ".[bench]"``."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np

import quant_models as qm

SIZES = {
    # hidden, layers, heads, kv heads, intermediate, vocab
    "small": (512, 4, 8, 4, 1408, 8000),
    "medium": (768, 6, 12, 4, 2048, 16000),
}


def save_hf(folder: str, hidden: int, layers: int, heads: int, kv_heads: int, inter: int,
            vocab: int, seed: int = 0) -> None:
    """A random LlamaForCausalLM and a word-level tokenizer ("t0".."t{vocab-1}")."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter,
                      num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=kv_heads, max_position_embeddings=512,
                      bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
    LlamaForCausalLM(cfg).eval().save_pretrained(folder)
    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(vocab)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0", bos_token="t1",
                            eos_token="t2", pad_token="t0").save_pretrained(folder)


def build(size: str, precision: str) -> bytes:
    """The genai builder's model.onnx for ``size`` and ``precision`` ("fp32" or "int4"),
    its external weights loaded in."""
    def make() -> bytes:
        import onnx

        with tempfile.TemporaryDirectory() as d:
            hf, out = os.path.join(d, "hf"), os.path.join(d, "out")
            save_hf(hf, *SIZES[size])
            subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", hf,
                            "-o", out, "-p", precision, "-e", "cpu", "-c",
                            os.path.join(d, "cache")], check=True, capture_output=True)
            return onnx.load(os.path.join(out, "model.onnx")).SerializeToString()
    return qm.cached(f"llm-{size}-{precision}", make)


def kv_layout(size: str) -> tuple[int, int, int]:
    hidden, layers, heads, kv_heads = SIZES[size][:4]
    return layers, kv_heads, hidden // heads


def prefill_feeds(size: str, prompt: int = 64) -> dict[str, Any]:
    layers, nkv, hd = kv_layout(size)
    vocab = SIZES[size][5]
    ids = np.random.default_rng(0).integers(3, vocab, (1, prompt)).astype(np.int64)
    feeds: dict[str, Any] = {"input_ids": ids, "attention_mask": np.ones((1, prompt), np.int64)}
    for i in range(layers):
        for w in ("key", "value"):
            feeds[f"past_key_values.{i}.{w}"] = np.zeros((1, nkv, 0, hd), np.float32)
    return feeds


def output_names(model: bytes) -> list[str]:
    import onnx

    m = onnx.ModelProto()
    m.ParseFromString(model)
    return [o.name for o in m.graph.output]


def decode_stream(size: str, names: list[str], past_len: int = 128, steps: int = 16) -> Any:
    """stream(run): ``steps`` greedy decoding steps from a past of ``past_len`` positions
    (random values: the speed does not depend on them), each feeding the present back;
    ``names`` the model's outputs in order."""
    layers, nkv, hd = kv_layout(size)
    where = {n: i for i, n in enumerate(names)}
    rng = np.random.default_rng(1)
    past0 = {f"past_key_values.{i}.{w}": rng.standard_normal((1, nkv, past_len, hd))
             .astype(np.float32) for i in range(layers) for w in ("key", "value")}

    def stream(run: Any) -> None:
        past = dict(past0)
        tok = 5
        for s in range(steps):
            total = past_len + s + 1
            outs = run({"input_ids": np.array([[tok]], np.int64),
                        "attention_mask": np.ones((1, total), np.int64), **past})
            tok = int(np.argmax(outs[where["logits"]][0, -1]))
            for i in range(layers):
                for w in ("key", "value"):
                    past[f"past_key_values.{i}.{w}"] = outs[where[f"present.{i}.{w}"]]
    return stream
