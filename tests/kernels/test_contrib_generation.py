"""com.microsoft GreedySearch over a small GPT-2 style decoder subgraph (embeddings, one
attention layer with a KV cache, logits) against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper

from kernels.contrib_oracle import run_ort, run_ours

RNG = np.random.default_rng(7)
V, D, N, H, L = 11, 8, 2, 4, 2     # vocab, model width, heads, head size, layers


def _decoder(name, seed):
    rng = np.random.default_rng(seed)

    def init(n, *shape, scale=0.5):
        return numpy_helper.from_array((rng.normal(size=shape) * scale).astype(np.float32), n)
    nodes, inits = [], [init("E", V, D), init("P", 64, D), init("Wo", D, V, scale=1.5),
                        numpy_helper.from_array(np.array([0, 0, N, H], np.int64), "shp"),
                        numpy_helper.from_array(np.array([0, 0, D], np.int64), "shp3"),
                        numpy_helper.from_array(np.array([0], np.int64), "ax0"),
                        numpy_helper.from_array(np.array([1, 2], np.int64), "ax12"),
                        numpy_helper.from_array(np.array(-10000.0, np.float32), "big"),
                        numpy_helper.from_array(np.array(1.0, np.float32), "one")]
    nodes += [oh.make_node("Gather", ["E", "input_ids"], ["we"]),
              oh.make_node("Gather", ["P", "position_ids"], ["pe"]),
              oh.make_node("Add", ["we", "pe"], ["h0"]),
              oh.make_node("Cast", ["attention_mask"], ["mf"], to=TP.FLOAT),
              oh.make_node("Sub", ["one", "mf"], ["inv"]),
              oh.make_node("Mul", ["inv", "big"], ["mb"]),
              oh.make_node("Unsqueeze", ["mb", "ax12"], ["mask4"])]
    h = "h0"
    for layer in range(L):
        p = f"l{layer}_"
        inits += [init(p + "Wq", D, D), init(p + "Wk", D, D), init(p + "Wv", D, D)]
        for t in ("q", "k", "v"):
            nodes += [oh.make_node("MatMul", [h, p + "W" + t], [p + t]),
                      oh.make_node("Reshape", [p + t, "shp"], [p + t + "r"]),
                      oh.make_node("Transpose", [p + t + "r"], [p + t + "h"], perm=[0, 2, 1, 3])]
        nodes += [oh.make_node("Split", [f"past_{layer}"], [p + "pk", p + "pv"], axis=0),
                  oh.make_node("Squeeze", [p + "pk", "ax0"], [p + "pk3"]),
                  oh.make_node("Squeeze", [p + "pv", "ax0"], [p + "pv3"]),
                  oh.make_node("Concat", [p + "pk3", p + "kh"], [p + "K"], axis=2),
                  oh.make_node("Concat", [p + "pv3", p + "vh"], [p + "V"], axis=2),
                  oh.make_node("Unsqueeze", [p + "K", "ax0"], [p + "K5"]),
                  oh.make_node("Unsqueeze", [p + "V", "ax0"], [p + "V5"]),
                  oh.make_node("Concat", [p + "K5", p + "V5"], [f"present_{layer}"], axis=0),
                  oh.make_node("Transpose", [p + "K"], [p + "Kt"], perm=[0, 1, 3, 2]),
                  oh.make_node("MatMul", [p + "qh", p + "Kt"], [p + "s"]),
                  oh.make_node("Add", [p + "s", "mask4"], [p + "sm"]),
                  oh.make_node("Softmax", [p + "sm"], [p + "a"], axis=-1),
                  oh.make_node("MatMul", [p + "a", p + "V"], [p + "c"]),
                  oh.make_node("Transpose", [p + "c"], [p + "ct"], perm=[0, 2, 1, 3]),
                  oh.make_node("Reshape", [p + "ct", "shp3"], [p + "o"]),
                  oh.make_node("Add", [h, p + "o"], [p + "h"])]
        h = p + "h"
    nodes.append(oh.make_node("MatMul", [h, "Wo"], ["logits"]))
    ins = [oh.make_tensor_value_info("input_ids", TP.INT32, ["b", "s"]),
           oh.make_tensor_value_info("position_ids", TP.INT32, ["b", "s"]),
           oh.make_tensor_value_info("attention_mask", TP.INT32, ["b", "t"])]
    ins += [oh.make_tensor_value_info(f"past_{i}", TP.FLOAT, [2, "b", N, "p", H])
            for i in range(L)]
    outs = [oh.make_tensor_value_info("logits", TP.FLOAT, ["b", "s", V])]
    outs += [oh.make_tensor_value_info(f"present_{i}", TP.FLOAT, [2, "b", N, "t", H])
             for i in range(L)]
    return oh.make_graph(nodes, name, ins, outs, initializer=inits)


def _model(inputs, init_decoder=False, **attrs):
    names = [n if v is not None else "" for n, v in inputs]
    kw = dict(decoder=_decoder("dec", 1), eos_token_id=3, pad_token_id=0, **attrs)
    if init_decoder:
        kw["init_decoder"] = _decoder("init", 2)
    node = oh.make_node("GreedySearch", names, ["seq"], domain="com.microsoft", **kw)
    g_in = [oh.make_tensor_value_info(n, oh.np_dtype_to_tensor_dtype(np.asarray(v).dtype),
                                      np.shape(v)) for n, v in inputs if v is not None]
    g = oh.make_graph([node], "g", g_in, [oh.make_tensor_value_info("seq", TP.INT32, None)])
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17),
                                           oh.make_opsetid("com.microsoft", 1)], ir_version=9)


def _inputs(ids, max_len=9, **opt):
    i32 = lambda v: None if v is None else np.asarray(v, np.int32)  # noqa: E731
    return [("input_ids", i32(ids)), ("max_length", i32([max_len])),
            ("min_length", i32(opt.get("min_length"))),
            ("repetition_penalty", None if opt.get("penalty") is None else
             np.array([opt["penalty"]], np.float32)),
            ("vocab_mask", i32(opt.get("vocab_mask"))),
            ("prefix_vocab_mask", i32(opt.get("prefix_mask"))),
            ("attention_mask", i32(opt.get("attention_mask")))]


def _compare(inputs, **attrs):
    m = _model(inputs, **attrs)
    feeds = {n: v for n, v in inputs if v is not None}
    ref, got = run_ort(m, feeds), run_ours(m, feeds)
    # onnxruntime leaves the positions after an early stop unwritten: compare what it wrote
    seq_ref, seq_got = ref[0], got[0]
    ended = np.nonzero((seq_got == 0).all(axis=0) & (np.arange(seq_got.shape[1]) >=
                                                     np.asarray(feeds["input_ids"]).shape[1]))[0]
    upto = int(ended[0]) + 1 if ended.size else seq_got.shape[1]
    np.testing.assert_array_equal(seq_got[:, :upto], seq_ref[:, :upto])
    return seq_got


NO_PAD = np.ones(V, np.int32)
NO_PAD[0] = 0          # pad never generated: a pad in the output means the row ended


@pytest.mark.parametrize("opts", [{}, {"penalty": 1.7}, {"min_length": 7},
                                  {"prefix_mask": [[1, 1, 0, 1, 0, 1, 1, 1, 0, 1, 1],
                                                   [0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0]]}])
def test_greedy_search(opts):
    ids = [[5, 7, 2, 9], [4, 4, 8, 1]]
    _compare(_inputs(ids, vocab_mask=NO_PAD, **opts))


@pytest.mark.parametrize("ngram", [1, 2])
def test_greedy_search_no_repeat_ngram(ngram):
    _compare(_inputs([[5, 7, 2, 9], [4, 4, 8, 1]], max_len=12, vocab_mask=NO_PAD),
             no_repeat_ngram_size=ngram)


def test_greedy_search_padded_prompt_and_mask():
    ids = [[0, 0, 6, 2], [5, 7, 2, 9]]            # left padding with pad_token_id 0
    _compare(_inputs(ids, vocab_mask=NO_PAD))
    _compare(_inputs(ids, vocab_mask=NO_PAD, attention_mask=[[0, 1, 1, 1], [1, 1, 1, 1]]))


def test_greedy_search_init_decoder_and_eos():
    out = _compare(_inputs([[5, 7, 2, 9], [4, 4, 8, 1]], max_len=14, vocab_mask=NO_PAD),
                   init_decoder=True)
    assert out.shape == (2, 14)


def _beam_model(inputs, outputs=("seq", "seq_scores", "scores"), **attrs):
    names = [n if v is not None else "" for n, v in inputs]
    node = oh.make_node("BeamSearch", names, list(outputs), domain="com.microsoft",
                        decoder=_decoder("dec", 1), eos_token_id=3, pad_token_id=0, **attrs)
    g_in = [oh.make_tensor_value_info(n, oh.np_dtype_to_tensor_dtype(np.asarray(v).dtype),
                                      np.shape(v)) for n, v in inputs if v is not None]
    g_out = [oh.make_tensor_value_info(o, t, None)
             for o, t in zip(outputs, (TP.INT32, TP.FLOAT, TP.FLOAT))]
    g = oh.make_graph([node], "g", g_in, g_out)
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17),
                                           oh.make_opsetid("com.microsoft", 1)], ir_version=9)


def _beam_inputs(ids, max_len=9, beams=3, ret=2, **opt):
    i32 = lambda v: None if v is None else np.asarray(v, np.int32)  # noqa: E731
    f32 = lambda v: None if v is None else np.asarray([v], np.float32)  # noqa: E731
    # onnxruntime's kernel requires min_length and length_penalty, optional in the schema
    return [("input_ids", i32(ids)), ("max_length", i32([max_len])),
            ("min_length", i32([opt.get("min_length", 0)])), ("num_beams", i32([beams])),
            ("num_return_sequences", i32([ret])),
            ("length_penalty", f32(opt.get("length_penalty", 1.0))),
            ("repetition_penalty", f32(opt.get("penalty"))),
            ("vocab_mask", i32(opt.get("vocab_mask"))),
            ("prefix_vocab_mask", i32(opt.get("prefix_mask"))),
            ("attention_mask", i32(opt.get("attention_mask")))]


@pytest.mark.parametrize("opts,attrs", [
    ({}, {}), ({"length_penalty": 0.6}, {}), ({"penalty": 1.5, "min_length": 6}, {}),
    ({}, {"early_stopping": 1}), ({}, {"no_repeat_ngram_size": 2}),
    ({"beams": 4, "ret": 4, "max_len": 12}, {}), ({"beams": 1, "ret": 1}, {})])
def test_beam_search(opts, attrs):
    ids = [[5, 7, 2, 9], [4, 4, 8, 1]]
    kw = {k: opts[k] for k in ("beams", "ret", "max_len") if k in opts}
    rest = {k: v for k, v in opts.items() if k not in kw}
    inputs = _beam_inputs(ids, **kw, **rest)
    m = _beam_model(inputs, **attrs)
    feeds = {n: v for n, v in inputs if v is not None}
    ref, got = run_ort(m, feeds), run_ours(m, feeds)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-5, atol=1e-5)
    # the per-step scores of the steps run (onnxruntime leaves the rest unwritten)
    steps = int((np.abs(ref[2]).reshape(ref[2].shape[0], -1).max(axis=1) > 0).sum())
    np.testing.assert_allclose(got[2][:steps], ref[2][:steps], rtol=1e-5, atol=1e-4)


def test_beam_search_padded_prompt_and_prefix_mask():
    ids = [[0, 6, 2, 9], [5, 7, 2, 9]]
    prefix = np.ones((2, V), np.int32)
    prefix[0, [4, 10]] = 0
    inputs = _beam_inputs(ids, prefix_mask=prefix)
    m = _beam_model(inputs, outputs=("seq", "seq_scores"))
    feeds = {n: v for n, v in inputs if v is not None}
    ref, got = run_ort(m, feeds), run_ours(m, feeds)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-5, atol=1e-5)
