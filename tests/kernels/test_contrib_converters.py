"""Models as converters emit them: an skl2onnx text pipeline (StringNormalizer -> Tokenizer ->
TfIdfVectorizer) and a small CNN quantized by onnxruntime.quantization.quantize_static in
QOperator format (QLinearConv, QLinearAdd, QLinearMul, QLinearLeakyRelu, QLinearSigmoid,
QLinearAveragePool, QLinearGlobalAveragePool, QLinearConcat, QGemm...), each run on onnxrt
and onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper

from kernels.contrib_oracle import assert_close, assert_q_close, run_ort, run_ours

RNG = np.random.default_rng(2024)


@pytest.mark.parametrize("kind", ["tfidf", "count_bigrams", "token_pattern"])
def test_skl2onnx_text_pipeline(kind):
    pytest.importorskip("sklearn", reason="scikit-learn comes with the test extra")
    skl2onnx = pytest.importorskip("skl2onnx", reason="skl2onnx comes with the test extra")
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
    from skl2onnx.common.data_types import StringTensorType
    corpus = np.array(["The quick brown fox jumps.", "Never jump over the lazy dog quickly!",
                       "a fox, a dog; the end", "Bonjour, fox fox dog", "quick quick brown"])
    if kind == "tfidf":
        vec = TfidfVectorizer()
    elif kind == "count_bigrams":
        vec = CountVectorizer(ngram_range=(1, 2))
    else:
        # RE2 has no (?u) flag: onnxruntime refuses sklearn's default spelling of a pattern
        vec = TfidfVectorizer(token_pattern=r"\b\w+\b", lowercase=False)
    vec.fit(corpus)
    onx = skl2onnx.to_onnx(vec, initial_types=[("text", StringTensorType([None, 1]))],
                           target_opset=17)
    assert any(n.op_type == "Tokenizer" for n in onx.graph.node)
    for n in onx.graph.node:
        # onnxruntime's StringNormalizer builds a C++ locale (default en_US.UTF-8) and fails
        # where the machine has none installed; C.UTF-8 exists everywhere
        if n.op_type == "StringNormalizer":
            kept = [a for a in n.attribute if a.name != "locale"]
            del n.attribute[:]
            n.attribute.extend(kept + [oh.make_attribute("locale", "C.UTF-8")])
    queries = np.array(["the quick dog", "fox jumps over the lazy brown dog", "",
                        "Bonjour!"], dtype=object).reshape(-1, 1)
    feeds = {"text": queries}
    ref, got = run_ort(onx, feeds), run_ours(onx, feeds)
    assert_close(ref, got, rtol=1e-5, atol=1e-6)
    # and the pipeline's answer is scikit-learn's
    np.testing.assert_allclose(got[0], vec.transform(queries.ravel()).toarray(), rtol=1e-5,
                               atol=1e-6)


def _cnn(path):
    """Conv -> LeakyRelu -> [AvgPool | Conv -> Sigmoid * x] -> Concat -> Add -> GAP ->
    Flatten -> Gemm: float32, opset 17."""
    def init(name, *shape, scale=0.3):
        return numpy_helper.from_array((RNG.normal(size=shape) * scale).astype(np.float32),
                                       name)
    nodes = [
        oh.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        oh.make_node("LeakyRelu", ["c1"], ["r1"], alpha=0.1),
        oh.make_node("AveragePool", ["r1"], ["p1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                     strides=[1, 1]),
        oh.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        oh.make_node("Sigmoid", ["c2"], ["s2"]),
        oh.make_node("Mul", ["s2", "r1"], ["m2"]),
        oh.make_node("Concat", ["p1", "m2"], ["cat"], axis=1),
        oh.make_node("Conv", ["cat", "w3", "b3"], ["c3"]),
        oh.make_node("Add", ["c3", "r1"], ["a3"]),
        oh.make_node("GlobalAveragePool", ["a3"], ["g"]),
        oh.make_node("Flatten", ["g"], ["f"]),
        oh.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    inits = [init("w1", 8, 3, 3, 3), init("b1", 8, scale=0.1), init("w2", 8, 8, 3, 3),
             init("b2", 8, scale=0.1), init("w3", 8, 16, 1, 1), init("b3", 8, scale=0.1),
             init("wf", 5, 8), init("bf", 5, scale=0.1)]
    g = oh.make_graph(nodes, "cnn", [oh.make_tensor_value_info("x", TP.FLOAT, [1, 3, 12, 12])],
                      [oh.make_tensor_value_info("y", TP.FLOAT, [1, 5])], initializer=inits)
    onnx.save(oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)], ir_version=9), path)


@pytest.mark.parametrize("act_type", ["uint8", "int8"])
def test_quantize_static_qoperator_cnn(tmp_path, act_type):
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.data = iter([{"x": RNG.normal(size=(1, 3, 12, 12)).astype(np.float32)}
                              for _ in range(4)])

        def get_next(self):
            return next(self.data, None)

    src, dst = tmp_path / "cnn.onnx", tmp_path / "cnn.q.onnx"
    _cnn(src)
    at = QuantType.QUInt8 if act_type == "uint8" else QuantType.QInt8
    # int8 weights limited to 7 bits (reduce_range): onnxruntime's u8s8 products saturate
    # int16 pair sums on CPUs without VNNI, which 7-bit weights never reach
    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QOperator,
                    activation_type=at, weight_type=QuantType.QInt8, reduce_range=True,
                    extra_options={"ActivationSymmetric": act_type == "int8"})
    q = onnx.load(str(dst))
    ms_ops = {n.op_type for n in q.graph.node if n.domain == "com.microsoft"}
    assert {"QLinearLeakyRelu", "QLinearSigmoid", "QLinearAveragePool", "QLinearConcat",
            "QLinearAdd", "QLinearMul", "QLinearGlobalAveragePool"} <= ms_ops, ms_ops
    for _ in range(3):
        feeds = {"x": RNG.normal(size=(1, 3, 12, 12)).astype(np.float32)}
        ref, got = run_ort(q, feeds), run_ours(q, feeds)
        # float32 out of the last dequantization: a one-step difference inside the network
        # (a float tie) moves the logits by about one quantization step of the output
        np.testing.assert_allclose(got[0], ref[0], rtol=0, atol=0.05)


@pytest.mark.parametrize("act_type", ["uint8", "int8"])
def test_quantize_static_qoperator_intermediates_step_exact(tmp_path, act_type):
    """Every quantized tensor of the QOperator CNN within one step of onnxruntime's."""
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.data = iter([{"x": RNG.normal(size=(1, 3, 12, 12)).astype(np.float32)}
                              for _ in range(4)])

        def get_next(self):
            return next(self.data, None)

    src, dst = tmp_path / "cnn.onnx", tmp_path / "cnn.q.onnx"
    _cnn(src)
    at = QuantType.QUInt8 if act_type == "uint8" else QuantType.QInt8
    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QOperator,
                    activation_type=at, weight_type=QuantType.QInt8, reduce_range=True,
                    extra_options={"ActivationSymmetric": act_type == "int8"})
    q = onnx.load(str(dst))
    names = [o for n in q.graph.node for o in n.output
             if n.op_type not in ("DequantizeLinear",)]
    del q.graph.output[:]
    for name in names:
        q.graph.output.append(onnx.ValueInfoProto(name=name))
    feeds = {"x": RNG.normal(size=(1, 3, 12, 12)).astype(np.float32)}
    ref, got = run_ort(q, feeds), run_ours(q, feeds)
    for name, r, o in zip(names, ref, got):
        if np.asarray(r).dtype.kind in "iu":
            assert_q_close(r, o, max_off=1, frac=0.05)
