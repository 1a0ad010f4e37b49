"""Signal (DFT, STFT, windows, MelWeightMatrix), string ops, losses and random generators,
against onnxruntime or a NumPy formula."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto

import onnxrt
from models import named_node_model

ort = pytest.importorskip("onnxruntime")


def _model(op, inputs, attrs=None, n_out=1, opset=20, consts=()):
    """One-node model; ``inputs`` is a list of (name, array or None); names in ``consts``
    become initializers."""
    return named_node_model(op, inputs, attrs, n_out, opset, consts, ir_version=9)


def _run(model, feeds):
    return onnxrt.InferenceSession(model.SerializeToString()).run(None, feeds)


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)


def _both(op, inputs, attrs=None, n_out=1, opset=20, consts=(), rtol=1e-5, atol=1e-6):
    model = _model(op, inputs, attrs, n_out, opset, consts)
    feeds = {n: v for n, v in inputs if v is not None and n not in consts}
    exp, got = _ort(model, feeds), _run(model, feeds)
    for e, g in zip(exp, got):
        assert g.dtype == e.dtype, (g.dtype, e.dtype)
        assert g.shape == e.shape, (g.shape, e.shape)
        if e.dtype == object:
            assert g.tolist() == e.tolist()
        else:
            np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=rtol,
                                       atol=atol)
    return got


# -- DFT / STFT ---------------------------------------------------------------------------
def _cplx(v):
    return np.stack([v.real, v.imag], -1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis", [1, 2, -2, -3])
def test_dft_complex_axes_and_length(dtype, axis):
    rng = np.random.default_rng(0)
    z = rng.standard_normal((2, 6, 5)) + 1j * rng.standard_normal((2, 6, 5))
    x = _cplx(z).astype(dtype)
    ax = axis if axis >= 0 else axis + 4
    for n in (None, 4, 9):
        ins = [("x", x), ("n", None if n is None else np.array(n, np.int64)),
               ("axis", np.array(axis, np.int64))]
        for inverse in (0, 1):
            got = _run(_model("DFT", ins, {"inverse": inverse}), {k: v for k, v in ins
                                                                  if v is not None})[0]
            f = np.fft.ifft if inverse else np.fft.fft
            exp = _cplx(f(z, n=n, axis=ax))
            assert got.dtype == dtype
            np.testing.assert_allclose(got, exp, rtol=1e-4, atol=1e-4)


def test_dft_real_onesided_and_irfft_with_length():
    rng = np.random.default_rng(1)
    r = rng.standard_normal((3, 8))
    x = r[..., None].astype(np.float32)
    got = _run(_model("DFT", [("x", x)], {"onesided": 1, "axis": 1}, opset=17), {"x": x})[0]
    np.testing.assert_allclose(got, _cplx(np.fft.rfft(r, axis=1)), rtol=1e-4, atol=1e-5)
    spec = np.fft.rfft(r, axis=1)
    xs = _cplx(spec).astype(np.float32)
    for n in (None, 7, 8):
        ins = [("x", xs), ("n", None if n is None else np.array(n, np.int32))]
        feeds = {k: v for k, v in ins if v is not None}
        got = _run(_model("DFT", ins, {"onesided": 1, "inverse": 1, "axis": 1}, opset=17),
                   feeds)[0]
        np.testing.assert_allclose(got[..., 0], np.fft.irfft(spec, n=n, axis=1), rtol=1e-4,
                                   atol=1e-5)


def test_dft_vs_onnxruntime():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 16, 1)).astype(np.float32)
    _both("DFT", [("x", x)], {"axis": 1}, opset=17, rtol=1e-4, atol=1e-4)
    _both("DFT", [("x", x), ("n", np.array(10, np.int64))], {"axis": 1, "onesided": 1},
          opset=17, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("complex_in", [False, True])
def test_stft_vs_onnxruntime(complex_in):
    rng = np.random.default_rng(3)
    sig = rng.standard_normal((2, 64, 2 if complex_in else 1)).astype(np.float32)
    win = np.hanning(16).astype(np.float32)
    step = np.array(5, np.int64)
    fl = np.array(16, np.int64)
    onesided = 0 if complex_in else 1
    _both("STFT", [("s", sig), ("step", step), ("w", win), ("fl", fl)],
          {"onesided": onesided}, opset=17, rtol=1e-4, atol=1e-4)
    _both("STFT", [("s", sig), ("step", step), ("w", None), ("fl", fl)],
          {"onesided": onesided}, opset=17, rtol=1e-4, atol=1e-4)


def test_stft_window_only_and_full_spectrum():
    rng = np.random.default_rng(4)
    s = rng.standard_normal((1, 40))
    sig = s[..., None].astype(np.float64)
    win = np.hamming(12)
    got = _run(_model("STFT", [("s", sig), ("step", np.array(4, np.int64)), ("w", win)],
                      {"onesided": 0}, opset=17),
               {"s": sig, "step": np.array(4, np.int64), "w": win})[0]
    frames = np.stack([s[0, i * 4:i * 4 + 12] * win for i in range((40 - 12) // 4 + 1)])
    np.testing.assert_allclose(got[0], _cplx(np.fft.fft(frames, axis=-1)), atol=1e-10)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("size", [1, 2, 10])
def test_windows_vs_onnxruntime(op, periodic, size):
    _both(op, [("n", np.array(size, np.int64))], {"periodic": periodic}, opset=17,
          atol=1e-6)
    _both(op, [("n", np.array(size, np.int32))], {"periodic": periodic,
                                                   "output_datatype": TensorProto.DOUBLE},
          opset=17, atol=1e-6)


@pytest.mark.parametrize("args", [(8, 16, 8192, 0.0, 4096.0), (10, 64, 16000, 20.0, 7000.0),
                                  (5, 512, 22050, 100.0, 11025.0)])
def test_mel_weight_matrix_vs_onnxruntime(args):
    nm, nd, sr, lo, hi = args
    ins = [("a", np.array(nm, np.int64)), ("b", np.array(nd, np.int64)),
           ("c", np.array(sr, np.int64)), ("d", np.array(lo, np.float32)),
           ("e", np.array(hi, np.float32))]
    _both("MelWeightMatrix", ins, opset=17)


# -- strings ------------------------------------------------------------------------------
def _s(*v, shape=None):
    a = np.empty(len(v), dtype=object)
    a[:] = v
    return a.reshape(shape) if shape else a


@pytest.mark.parametrize("attrs", [
    {"case_change_action": "LOWER", "stopwords": ["the", "A"]},
    {"case_change_action": "UPPER", "stopwords": ["the", "A"], "is_case_sensitive": 1},
    {"stopwords": ["x", "y", "z"]},
    {"case_change_action": "NONE"},
])
def test_string_normalizer_vs_onnxruntime(attrs):
    attrs = {**attrs, "locale": "C.UTF-8"}  # the one UTF-8 locale a bare machine has
    for x in (_s("The", "a", "Cat", "the", "ÄBc"), _s("x", "Y", "z", shape=(1, 3))):
        _both("StringNormalizer", [("x", x)], attrs, opset=10)


@pytest.mark.parametrize("attrs", [{}, {"delimiter": ","}, {"delimiter": ", "},
                                   {"maxsplit": 1}, {"delimiter": ",", "maxsplit": 2},
                                   {"delimiter": "", "maxsplit": 0}])
def test_string_split_vs_onnxruntime(attrs):
    x = _s("a,b,,c", " lead  and trail ", "", ",", "no-delim", ", ,  x, y", "  ", "x",
           shape=(2, 4))
    _both("StringSplit", [("x", x)], attrs, n_out=2)


def test_string_concat_broadcast_and_regex():
    got = _run(_model("StringConcat", [("a", _s("a", "b", shape=(2, 1))), ("b", _s("x", "y"))]),
               {"a": _s("a", "b", shape=(2, 1)), "b": _s("x", "y")})[0]
    assert got.tolist() == [["ax", "ay"], ["bx", "by"]]
    x = _s("abc", "ABC", "a1", "", "x\ny", "ab12", "é", "ÉCOLE", "école", "a b", "٣", "ab]",
           "a-1", "[x]", shape=(2, 7))
    # RE2 specifics: ASCII-only Perl classes, Unicode case folding, POSIX and \p classes
    for pat in (r"[a-z]+", r"[[:alpha:]]+\d*", r"\Qa1\E", r"(?i)abc", r"a.*\z", r"x.y",
                r"\w+", r"(?i)école", r"\d", r"a\sb", r"[[:^alpha:]]+", r"\pL+", r"(?s)x.",
                r"[\w\]]+", r"[]ab]+", r"\bab\b.", r"[\d-]+|a-1", r"\Q[x]\E", r"\PL+",
                r"[^\w]", r"\W+", r"[[:alpha:][:digit:]-]+"):
        _both("RegexFullMatch", [("x", x)], {"pattern": pat})


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("skip", [0, 2])
@pytest.mark.parametrize("grams", [(1, 1), (1, 3), (2, 3)])
def test_tfidf_strings_vs_onnxruntime(mode, skip, grams):
    pool = ["a", "b", "c", "d", "a", "b", "b", "c", "c", "a", "a", "b", "c"]
    attrs = {"mode": mode, "min_gram_length": grams[0], "max_gram_length": grams[1],
             "max_skip_count": skip, "ngram_counts": [0, 4, 10],
             "ngram_indexes": [3, 0, 1, 2, 4, 5, 6, 7], "pool_strings": pool,
             "weights": [0.5, 1.5, 2.0, 1.0, 3.0, 0.25, 1.0, 2.0]}
    x = _s(*"a b c a b b c a a b c d e a b".split(), "zz", shape=(2, 8))
    _both("TfIdfVectorizer", [("x", x)], attrs, opset=9)
    _both("TfIdfVectorizer", [("x", x[0])], attrs, opset=9)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_tfidf_ints_vs_onnxruntime(dtype):
    attrs = {"mode": "TF", "min_gram_length": 1, "max_gram_length": 2, "max_skip_count": 3,
             "ngram_counts": [0, 3], "ngram_indexes": [5, 4, 3, 2, 1, 0],
             "pool_int64s": [7, 3, 10**12, 7, 3, 3, 7, 3, 10**12]}
    rng = np.random.default_rng(5)
    x = rng.choice(np.array([7, 3, 5, 10**12 % 2**31]), size=(3, 11)).astype(dtype)
    _both("TfIdfVectorizer", [("x", x)], attrs, opset=9)


# -- losses -------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ii", [None, 1, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_losses_vs_onnxruntime(reduction, weighted, ii, dtype):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 3, 5)).astype(dtype)
    t = rng.integers(0, 3, (4, 5)).astype(np.int64)
    if ii == -1:
        t[0, :2] = -1
    w = rng.random(3).astype(dtype) if weighted else None
    attrs = {"reduction": reduction}
    if ii is not None:
        attrs["ignore_index"] = ii
    _both("SoftmaxCrossEntropyLoss", [("x", x), ("t", t), ("w", w)], attrs, n_out=2,
          opset=13, rtol=1e-5, atol=1e-6)
    _both("NegativeLogLikelihoodLoss", [("x", x), ("t", t), ("w", w)], attrs, opset=13,
          rtol=1e-5, atol=1e-6)


def test_loss_float16_and_bad_target():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 4)).astype(np.float16)
    t = np.array([0, 3, 2, 1, 1], np.int32)
    m = _model("SoftmaxCrossEntropyLoss", [("x", x), ("t", t)], n_out=2, opset=13)
    loss, logp = _run(m, {"x": x, "t": t})
    xf = x.astype(np.float64)
    lp = xf - np.log(np.exp(xf).sum(1, keepdims=True))
    assert loss.dtype == np.float16 and logp.dtype == np.float16
    np.testing.assert_allclose(logp, lp, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(loss, -lp[np.arange(5), t].mean(), rtol=2e-3)
    with pytest.raises(Exception, match="out of range"):
        _run(m, {"x": x, "t": np.array([0, 4, 0, 0, 0], np.int32)})


# -- random -------------------------------------------------------------------------------
def test_random_seeded_is_reproducible_and_typed():
    for op, attrs in [("RandomNormal", {"mean": 2.0, "scale": 3.0}),
                      ("RandomUniform", {"low": -1.0, "high": 5.0})]:
        for dt in (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16,
                   TensorProto.BFLOAT16):
            m = _model(op, [], {"shape": [200, 50], "dtype": dt, "seed": 3.0, **attrs})
            a, b = _run(m, {})[0], _run(m, {})[0]
            assert a.shape == (200, 50) and a.dtype == onnx.helper.tensor_dtype_to_np_dtype(dt)
            np.testing.assert_array_equal(a.astype(np.float32), b.astype(np.float32))
            v = a.astype(np.float64)
            if op == "RandomNormal":
                assert abs(v.mean() - 2.0) < 0.1 and abs(v.std() - 3.0) < 0.1
            else:
                assert v.min() >= -1.0 and v.max() <= 5.0 and abs(v.mean() - 2.0) < 0.1
    x = np.zeros((3, 4), np.float64)
    got = _run(_model("RandomUniformLike", [("x", x)], {}), {"x": x})[0]
    assert got.shape == (3, 4) and got.dtype == np.float64
    got = _run(_model("RandomNormalLike", [("x", x)], {"dtype": TensorProto.FLOAT}),
               {"x": x})[0]
    assert got.dtype == np.float32


def test_bernoulli_and_multinomial():
    p = np.array([[0.0, 1.0, 0.0], [1.0, 1.0, 0.0]], np.float32)
    for dt, np_dt in [(None, np.float32), (TensorProto.BOOL, np.bool_),
                      (TensorProto.INT64, np.int64)]:
        attrs = {} if dt is None else {"dtype": dt}
        got = _run(_model("Bernoulli", [("p", p)], attrs, opset=15), {"p": p})[0]
        assert got.dtype == np_dt
        np.testing.assert_array_equal(got.astype(np.float32), p)
    p = np.full(20000, 0.3)
    got = _run(_model("Bernoulli", [("p", p)], {"seed": 1.0}, opset=15), {"p": p})[0]
    assert abs(got.mean() - 0.3) < 0.02

    probs = np.array([[0.1, 0.6, 0.3], [0.0, 0.0, 1.0]])
    logits = np.log(np.maximum(probs, 1e-300)).astype(np.float32)
    for dt, np_dt in [(TensorProto.INT32, np.int32), (TensorProto.INT64, np.int64)]:
        m = _model("Multinomial", [("x", logits)],
                   {"sample_size": 30000, "dtype": dt, "seed": 5.0}, opset=7)
        got = _run(m, {"x": logits})[0]
        assert got.shape == (2, 30000) and got.dtype == np_dt
        freq = np.stack([np.bincount(r, minlength=3) / r.size for r in got])
        np.testing.assert_allclose(freq, probs, atol=0.02)
        np.testing.assert_array_equal(got, _run(m, {"x": logits})[0])
