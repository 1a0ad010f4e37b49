"""com.microsoft Tokenizer, NGramRepeatBlock, BifurcationDetector, WordConvEmbedding,
EmbedLayerNormalization, QEmbedLayerNormalization and QAttention against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.contrib_oracle import assert_close, both, ms_model, run_ort, run_ours

RNG = np.random.default_rng(66)


def _f(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def _s(*vals):
    a = np.empty(len(vals), dtype=object)
    a[:] = list(vals)
    return a


TEXTS = _s("Hello world, this is  a test.", "", "a;b;;c d", "\u00e9t\u00e9 caf\u00e9 na\u00efve!",
           "x")


@pytest.mark.parametrize("attrs", [
    {"separators": [" "]}, {"separators": [" ", ",", ";"]}, {"separators": ["[ ,.;!]+"]},
    {"separators": [""]}, {"tokenexp": "[a-zA-Z\u00e0-\u00ff]+"}, {"tokenexp": "."},
    {"tokenexp": "a|ab|abc"}, {"separators": ["s|st"]}])
@pytest.mark.parametrize("mark", [0, 1])
@pytest.mark.parametrize("minchar", [1, 2])
def test_tokenizer(attrs, mark, minchar):
    chars = attrs.get("separators") == [""] or attrs.get("tokenexp") == "."
    if chars and minchar > 1:
        # onnxruntime refuses mincharnum > 1 for character tokenization, and so does onnxrt
        m = ms_model("Tokenizer", [("x", TEXTS)], mark=mark, pad_value="#",
                     mincharnum=minchar, **attrs)
        with pytest.raises(Exception, match="mincharnum"):
            run_ours(m, {"x": TEXTS})
        return
    x = TEXTS if "a|ab" not in str(attrs) else _s("abcab xabab", "aab", "c")
    assert_close(*both("Tokenizer", [("x", x)], mark=mark, pad_value="#", mincharnum=minchar,
                       **attrs))


@pytest.mark.parametrize("pattern", ["(?u)\\b\\w+\\b", "a(?=b)", "(a)\\1"])
def test_tokenizer_refuses_what_re2_refuses(pattern):
    m = ms_model("Tokenizer", [("x", TEXTS)], mark=0, pad_value="#", mincharnum=1,
                 tokenexp=pattern)
    with pytest.raises(Exception, match="RE2"):
        run_ours(m, {"x": TEXTS})
    with pytest.raises(Exception):
        run_ort(m, {"x": TEXTS})


def test_tokenizer_2d_input():
    x = TEXTS[:4].reshape(2, 2)
    assert_close(*both("Tokenizer", [("x", x)], mark=1, pad_value="", mincharnum=1,
                       separators=[" "]))


@pytest.mark.parametrize("ngram", [1, 2, 3])
def test_ngram_repeat_block(ngram):
    ids = np.array([[1, 2, 3, 1, 2, 3, 1, 2], [4, 4, 4, 4, 5, 6, 4, 4]], np.int64)
    assert_close(*both("NGramRepeatBlock", [("i", ids), ("s", _f(2, 8))], ngram_size=ngram))


@pytest.mark.parametrize("case", ["nopred", "pred_match", "pred_diverge", "ambiguous"])
def test_bifurcation_detector(case):
    src = np.array([5, 6, 7, 8, 5, 6, 9, 10], np.int64)
    cur = np.array([1, 5, 6], np.int64)
    prev = np.array(1, np.int64)
    ins = [("src", src), ("cur", cur), ("prev", prev)]
    if case == "pred_match":
        ins.append(("pred", np.array([6, 7, 8, 5, 6, 9, 10, 11], np.int64)))
    elif case == "pred_diverge":
        ins.append(("pred", np.array([6, 7, 3, 3, 3, 3, 3, 3], np.int64)))
    elif case == "ambiguous":
        ins[1] = ("cur", np.array([9, 5, 6], np.int64))
    assert_close(*both("BifurcationDetector", ins, outputs=2, min_ngram_size=1,
                       max_ngram_size=3))


def test_word_conv_embedding():
    seq = np.array([[3, 5, 2, 0, 0, 0], [7, 1, 1, 4, 6, 2], [2, 0, 0, 0, 0, 0]], np.int32)
    ins = [("seq", seq), ("w", _f(4, 1, 3, 5)), ("b", _f(4)), ("c", _f(8, 5))]
    assert_close(*both("WordConvEmbedding", ins), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opts", [(), ("segment",), ("segment", "mask"),
                                  ("mask", "pos_ids"), ("segment", "sum")])
def test_embed_layer_normalization(opts):
    b, s, h = 2, 5, 8
    ids = RNG.integers(0, 20, (b, s)).astype(np.int32)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)
    ins = [("ids", ids),
           ("seg", RNG.integers(0, 2, (b, s)).astype(np.int32) if "segment" in opts else None),
           ("we", _f(20, h)), ("pe", _f(16, h)),
           ("se", _f(2, h) if "segment" in opts else None), ("g", _f(h)), ("be", _f(h)),
           ("m", mask if "mask" in opts else None),
           ("pid", RNG.integers(0, 16, (b, s)).astype(np.int32) if "pos_ids" in opts else None)]
    outs = 3 if "sum" in opts else 2
    assert_close(*both("EmbedLayerNormalization", ins, outputs=outs, epsilon=1e-5),
                 rtol=1e-5, atol=1e-5)


def test_qembed_layer_normalization():
    b, s, h = 2, 4, 8
    q = lambda *sh: RNG.integers(0, 256, sh).astype(np.uint8)  # noqa: E731
    sc = lambda v: np.array(v, np.float32)  # noqa: E731
    zp = lambda v: np.array(v, np.uint8)  # noqa: E731
    ins = [("ids", RNG.integers(0, 10, (b, s)).astype(np.int32)),
           ("seg", RNG.integers(0, 2, (b, s)).astype(np.int32)),
           ("we", q(10, h)), ("pe", q(8, h)), ("se", q(2, h)), ("g", q(h)), ("be", q(h)),
           ("m", np.array([[1, 1, 0, 0], [1, 1, 1, 1]], np.int32)),
           ("wes", sc(0.02)), ("pes", sc(0.01)), ("ses", sc(0.03)), ("gs", sc(0.01)),
           ("bs", sc(0.02)), ("wez", zp(128)), ("pez", zp(120)), ("sez", zp(3)),
           ("gz", zp(10)), ("bz", zp(128))]
    assert_close(*both("QEmbedLayerNormalization", ins, outputs=2, epsilon=1e-5),
                 rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("wdt", [np.int8, np.uint8])
@pytest.mark.parametrize("per_col", [False, True])
@pytest.mark.parametrize("extra", [(), ("mask",), ("past", "uni")])
def test_qattention(wdt, per_col, extra):
    b, s, hin, n, h = 2, 4, 16, 2, 4
    d = n * h
    lo, hi = (-60, 60) if wdt == np.int8 else (0, 255)   # no int16 pair saturation
    x = RNG.integers(0, 256, (b, s, hin)).astype(np.uint8)
    w = RNG.integers(lo, hi + 1, (hin, 3 * d)).astype(wdt)
    ws = (RNG.random(3 * d if per_col else 1) * 0.01 + 0.005).astype(np.float32)
    wz = (np.full(3 * d if per_col else 1, 0 if wdt == np.int8 else 128)).astype(wdt)
    ins = [("x", x), ("w", w), ("bias", _f(3 * d)), ("xs", np.array(0.02, np.float32)),
           ("ws", ws if per_col else ws.reshape(())),
           ("mi", np.array([3, 4], np.int32) if "mask" in extra else None),
           ("xz", np.array(120, np.uint8)), ("wz", wz if per_col else wz.reshape(())),
           ("past", _f(2, b, n, 3, h) if "past" in extra else None)]
    outs = 2 if "past" in extra else 1
    attrs = {"num_heads": n, "unidirectional": int("uni" in extra)}
    assert_close(*both("QAttention", ins, outputs=outs, consts=("w", "ws", "wz"), **attrs),
                 rtol=1e-4, atol=1e-4)
