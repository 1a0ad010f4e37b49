"""An LLM decoder as onnxruntime-genai's model builder writes it (GroupQueryAttention with
packed QKV and rotary inside, SkipSimplifiedLayerNormalization, SimplifiedLayerNormalization,
MatMulNBits for int4), built here offline from a tiny random Llama written by transformers'
``save_pretrained``: a prompt, then greedy token-by-token decoding feeding the present KV
back, against onnxruntime's logits and tokens, with separate past/present buffers and with
a max-length buffer as genai shares it."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnxruntime
import pytest

import onnxrt

pytest.importorskip("onnxruntime_genai", reason="onnxruntime-genai comes with the test extra")
pytest.importorskip("transformers", reason="transformers comes with the test extra")

LAYERS, HEADS, KV_HEADS, HIDDEN, VOCAB = 2, 4, 2, 64, 256


def _save_hf(folder: str) -> None:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN,
                      num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                      num_key_value_heads=KV_HEADS, max_position_embeddings=128,
                      bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():       # weights large enough that the tokens depend on them
        for p in model.parameters():
            p.mul_(4.0 if p.ndim > 1 else 1.0)
    model.save_pretrained(folder)
    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(VOCAB)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0", bos_token="t1",
                            eos_token="t2", pad_token="t0").save_pretrained(folder)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("genai")
    hf = str(d / "hf")
    _save_hf(hf)
    out = {}
    for prec in ("fp32", "int4"):
        o = str(d / prec)
        subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", hf,
                        "-o", o, "-p", prec, "-e", "cpu", "-c", str(d / "cache")],
                       check=True, capture_output=True)
        out[prec] = os.path.join(o, "model.onnx")
    return out


def _decode(sess, prompt: list[int], steps: int, max_len: int | None):
    """Greedy decoding: (tokens, last-position logits per step). ``max_len``: past and
    present in one buffer of that length (the present fed back whole), else growing."""
    names = [o.name for o in sess.get_outputs()]
    hd = HIDDEN // HEADS
    past = {f"past_key_values.{i}.{w}": np.zeros((1, KV_HEADS, max_len or 0, hd), np.float32)
            for i in range(LAYERS) for w in ("key", "value")}
    ids = np.array([prompt], np.int64)
    total = len(prompt)
    tokens, logits = [], []
    for _ in range(steps):
        outs = dict(zip(names, sess.run(None, {"input_ids": ids,
                                               "attention_mask": np.ones((1, total), np.int64),
                                               **past})))
        lg = outs["logits"][0, -1]
        logits.append(lg)
        tokens.append(int(lg.argmax()))
        for i in range(LAYERS):
            for w in ("key", "value"):
                past[f"past_key_values.{i}.{w}"] = outs[f"present.{i}.{w}"]
        ids = np.array([[tokens[-1]]], np.int64)
        total += 1
    return tokens, logits


@pytest.mark.parametrize("prec", ["fp32", "int4"])
@pytest.mark.parametrize("shared", [False, True])
def test_genai_decoder_matches_onnxruntime(models, prec, shared):
    path = models[prec]
    prompt = [int(t) for t in np.random.default_rng(3).integers(3, VOCAB, 11)]
    max_len = 32 if shared else None
    ref = _decode(onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]),
                  prompt, 12, max_len)
    got = _decode(onnxrt.InferenceSession(path), prompt, 12, max_len)
    assert got[0] == ref[0]
    assert len(set(ref[0])) > 2         # the model does not just repeat one token
    for a, b in zip(got[1], ref[1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
