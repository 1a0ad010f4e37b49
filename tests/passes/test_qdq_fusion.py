"""QDQSelectorActionTransformer (passes/rules/qdq_selector_action.py): each DQ -> op -> Q
pattern onnxruntime's quantization tool writes, run by a session, against onnxruntime on the
same model unoptimized (the float semantics of the QDQ form) within one quantization step,
and the integer op present in the session's graph (saved through optimized_model_filepath)
with the DequantizeLinear / QuantizeLinear pair gone."""

from __future__ import annotations

import collections
import os
import tempfile

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper

import onnxrt as ort

RNG = np.random.default_rng(3)
U8, I8 = np.uint8, np.int8


class QDQ:
    """A float model in QDQ form: activations quantized per tensor to uint8 around each op."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.feeds: dict[str, np.ndarray] = {}
        self.n = 0

    def name(self, base: str) -> str:
        self.n += 1
        return f"{base}{self.n}"

    def const(self, v, base: str = "c") -> str:
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(v), n))
        return n

    def node(self, op: str, ins: list[str], domain: str = "", **attrs) -> str:
        out = self.name(op.lower())
        self.nodes.append(oh.make_node(op, ins, [out], domain=domain, **attrs))
        return out

    def input(self, shape, lo=-2.0, hi=2.0) -> str:
        n = self.name("x")
        self.inputs.append(oh.make_tensor_value_info(n, TP.FLOAT, list(shape)))
        self.feeds[n] = RNG.uniform(lo, hi, shape).astype(np.float32)
        return n

    def q(self, x: str, scale: float, zp: int = 128, dt=U8) -> str:
        return self.node("QuantizeLinear", [x, self.const(np.float32(scale), "s"),
                                            self.const(dt(zp), "z")])

    def dq(self, xq: str, scale: float, zp: int = 128, dt=U8) -> str:
        return self.node("DequantizeLinear", [xq, self.const(np.float32(scale), "s"),
                                              self.const(dt(zp), "z")])

    def qdq(self, x: str, scale: float, zp: int = 128) -> str:
        return self.dq(self.q(x, scale, zp), scale, zp)

    def weight(self, shape, scale, axis: int | None = None) -> str:
        """An int8 constant weight behind a DequantizeLinear (per channel along ``axis``)."""
        w = RNG.integers(-127, 128, shape).astype(I8)
        s = np.asarray(scale, np.float32)
        z = np.zeros(s.shape, I8)
        attrs = {} if axis is None else {"axis": axis}
        return self.node("DequantizeLinear", [self.const(w, "w"), self.const(s, "ws"),
                                              self.const(z, "wz")], **attrs)

    def bias(self, n: int, scale) -> str:
        b = RNG.integers(-500, 500, n).astype(np.int32)
        s = np.asarray(scale, np.float32)
        return self.node("DequantizeLinear", [self.const(b, "b"), self.const(s, "bs"),
                                              self.const(np.zeros(s.shape, np.int32), "bz")],
                         axis=0)

    def model(self, out: str, et: int = TP.UINT8, opset: int = 17) -> onnx.ModelProto:
        g = oh.make_graph(self.nodes, "qdq", self.inputs,
                          [oh.make_tensor_value_info(out, et, None)], self.inits)
        return oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)], ir_version=8)


def session_ops(model: onnx.ModelProto, **opts) -> tuple[collections.Counter, list]:
    """The ops of the session's optimized graph and its outputs on ``feeds``."""
    with tempfile.TemporaryDirectory() as d:
        so = ort.SessionOptions()
        so.optimized_model_filepath = os.path.join(d, "opt.onnx")
        sess = ort.InferenceSession(model.SerializeToString(), so, **opts)
        saved = onnx.load(so.optimized_model_filepath)
    return collections.Counter(n.op_type for n in saved.graph.node), sess


def reference(model: onnx.ModelProto, feeds) -> list[np.ndarray]:
    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxruntime.InferenceSession(model.SerializeToString(), so,
                                        providers=["CPUExecutionProvider"]).run(None, feeds)


def check(b: QDQ, out: str, fused: str | None, et: int = TP.UINT8, step: float = 1.0,
          absent: tuple[str, ...] = ("QuantizeLinear", "DequantizeLinear"), **kw):
    """``fused`` in the session's graph (and no op of ``absent``), outputs within ``step``
    (one quantization step of a uint8 output) of onnxruntime's unoptimized run."""
    m = b.model(out, et, **kw)
    ops, sess = session_ops(m)
    if fused is not None:
        assert ops[fused] >= 1, f"{fused} not in {dict(ops)}"
    for op in absent:
        assert ops[op] == 0, f"{op} left: {dict(ops)}"
    got, = sess.run(None, b.feeds)
    want, = reference(m, b.feeds)
    assert got.dtype == want.dtype and got.shape == want.shape
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert diff.max() <= step, f"max diff {diff.max()} > {step}"
    return ops


def _act(b: QDQ, shape, scale=0.02) -> tuple[str, float]:
    return b.qdq(b.input(shape), scale), scale


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("group", [1, 4])
def test_conv_to_qlinearconv(per_channel, group):
    b = QDQ()
    x, xs = _act(b, (1, 8, 10, 10))
    m = 8
    ws = RNG.uniform(0.002, 0.01, m).astype(np.float32) if per_channel else np.float32(0.005)
    w = b.weight((m, 8 // group, 3, 3), ws, axis=0 if per_channel else None)
    bias = b.bias(m, np.float32(xs) * ws)
    y = b.node("Conv", [x, w, bias], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 1],
               group=group)
    check(b, b.q(y, 0.03, 120), "QLinearConv", absent=("Conv", "DequantizeLinear"))


def test_matmul_to_qlinearmatmul_and_per_column():
    for per_col in (False, True):
        b = QDQ()
        a, sa = _act(b, (2, 5, 16))
        ws = RNG.uniform(0.002, 0.01, 12).astype(np.float32) if per_col else np.float32(0.004)
        w = b.weight((16, 12), ws, axis=1 if per_col else None)
        y = b.node("MatMul", [a, w])
        check(b, b.q(y, 0.02), "QLinearMatMul", absent=("MatMul", "DequantizeLinear"))


def test_matmul_of_two_activations():
    b = QDQ()
    a, _ = _act(b, (2, 3, 4, 8))
    c, _ = _act(b, (2, 3, 8, 5), 0.03)
    y = b.node("MatMul", [a, c])
    check(b, b.q(y, 0.05), "QLinearMatMul", absent=("MatMul",))


def test_matmul_float_out_to_matmulintegertofloat():
    b = QDQ()
    a, sa = _act(b, (3, 16))
    w = b.weight((16, 6), np.float32(0.004))
    y = b.node("MatMul", [a, w])
    m = b.model(y, TP.FLOAT)
    ops, sess = session_ops(m)
    assert ops["MatMulIntegerToFloat"] == 1 and ops["MatMul"] == 0, dict(ops)
    got, = sess.run(None, b.feeds)
    want, = reference(m, b.feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("requantized", [True, False])
def test_gemm_to_qgemm(requantized):
    b = QDQ()
    a, sa = _act(b, (4, 16))
    ws = np.float32(0.004)
    w = b.weight((10, 16), ws)
    c = b.bias(10, np.float32(sa) * ws)
    y = b.node("Gemm", [a, w, c], transB=1)
    if requantized:
        check(b, b.q(y, 0.03), "QGemm", absent=("Gemm", "DequantizeLinear"))
        return
    m = b.model(y, TP.FLOAT)
    ops, sess = session_ops(m)
    assert ops["QGemm"] == 1 and ops["Gemm"] == 0, dict(ops)
    np.testing.assert_allclose(sess.run(None, b.feeds)[0], reference(m, b.feeds)[0],
                               rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("op", ["Add", "Mul"])
def test_add_mul_to_qlinear(op):
    b = QDQ()
    x, _ = _act(b, (2, 6, 5))
    y, _ = _act(b, (6, 5), 0.03)
    z = b.node(op, [x, y])
    check(b, b.q(z, 0.04), "QLinear" + op, absent=(op, "DequantizeLinear"))


def test_pooling_and_concat():
    b = QDQ()
    x, _ = _act(b, (1, 4, 8, 8))
    p = b.node("AveragePool", [x], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    p = b.dq(b.q(p, 0.02), 0.02)
    g = b.node("GlobalAveragePool", [p])
    g = b.dq(b.q(g, 0.01, 100), 0.01, 100)
    o, _ = _act(b, (1, 4, 1, 1), 0.015)
    y = b.node("Concat", [g, o], axis=1)
    ops = check(b, b.q(y, 0.02), "QLinearConcat", absent=("AveragePool", "Concat",
                                                          "GlobalAveragePool"))
    assert ops["QLinearAveragePool"] == 1 and ops["QLinearGlobalAveragePool"] == 1


@pytest.mark.parametrize("op,attrs", [("Sigmoid", {}), ("LeakyRelu", {"alpha": 0.1}),
                                      ("Softmax", {"axis": -1})])
def test_unary_lookups(op, attrs):
    b = QDQ()
    x, _ = _act(b, (3, 7))
    y = b.node(op, [x], **attrs)
    scale, zp = (1 / 256, 0) if op in ("Sigmoid", "Softmax") else (0.02, 128)
    check(b, b.q(y, scale, zp), "QLinear" + op, absent=(op, "DequantizeLinear"))


def test_data_movement_drops_the_pair():
    """MaxPool, Reshape, Transpose, Flatten between a DQ and a Q of one scale and zero point
    run on the 8-bit tensor: no DequantizeLinear is left between them."""
    b = QDQ()
    x, s = _act(b, (1, 4, 6, 6))
    y = b.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    y = b.dq(b.q(y, s), s)
    y = b.node("Transpose", [y], perm=[0, 2, 3, 1])
    y = b.dq(b.q(y, s), s)
    y = b.node("Reshape", [y, b.const(np.array([1, -1], np.int64))])
    out = b.q(y, s)
    ops = check(b, out, "MaxPool", step=0, absent=("DequantizeLinear",))
    assert ops["Transpose"] == 1 and ops["Reshape"] == 1


def test_not_fused_when_scales_differ_or_disabled():
    b = QDQ()
    x, s = _act(b, (2, 6))
    y = b.node("Reshape", [x, b.const(np.array([3, 4], np.int64))])
    m = b.model(b.q(y, s * 2), TP.UINT8)
    ops, _ = session_ops(m)      # requantizing Reshape: not a data movement any more
    assert ops["DequantizeLinear"] == 1, dict(ops)

    b = QDQ()
    a, _ = _act(b, (3, 16))
    y = b.node("MatMul", [a, b.weight((16, 4), np.float32(0.01))])
    m = b.model(b.q(y, 0.05), TP.UINT8)
    ops, _ = session_ops(m, disabled_optimizers=["QDQSelectorActionTransformer"])
    assert ops["QLinearMatMul"] == 0 and ops["MatMul"] == 1, dict(ops)


def test_quantize_static_cnn_runs_on_integer_ops(tmp_path):
    """A small CNN quantized by onnxruntime's quantize_static (QDQ, per channel): every
    Conv, Add, pooling and Gemm becomes its integer op, and the logits stay within a few
    quantization steps of onnxruntime's."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    b = QDQ()
    x = b.input((1, 3, 16, 16))

    def conv(v, cin, cout, k=3, group=1, relu=True):
        w = (RNG.standard_normal((cout, cin // group, k, k)) * 0.3).astype(np.float32)
        y = b.node("Conv", [v, b.const(w), b.const(np.zeros(cout, np.float32))],
                   kernel_shape=[k, k], pads=[k // 2] * 4, group=group)
        return b.node("Relu", [y]) if relu else y

    y = conv(x, 3, 8)
    y = b.node("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])
    z = conv(conv(y, 8, 8, group=8), 8, 8, k=1, relu=False)
    y = b.node("Add", [y, z])
    y = b.node("Flatten", [b.node("GlobalAveragePool", [y])], axis=1)
    w = (RNG.standard_normal((8, 5)) * 0.3).astype(np.float32)
    y = b.node("Gemm", [y, b.const(w), b.const(np.zeros(5, np.float32))])
    g = oh.make_graph(b.nodes, "cnn", b.inputs, [oh.make_tensor_value_info(y, TP.FLOAT, None)],
                      b.inits)
    src, dst = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)], ir_version=8), src)

    class Reader:
        def __init__(self):
            self.it = iter([{x: RNG.uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32)}
                            for _ in range(3)])

        def get_next(self):
            return next(self.it, None)

    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    per_channel=True)
    m = onnx.load(dst)
    ops, sess = session_ops(m)
    assert ops["QLinearConv"] == 3 and ops["QLinearAdd"] == 1 and ops["QGemm"] == 1, dict(ops)
    assert ops["Conv"] == ops["Add"] == ops["Gemm"] == 0, dict(ops)
    feeds = {x: b.feeds[x]}
    got, = sess.run(None, feeds)
    want, = reference(m, feeds)
    out_scale = max(float(np.abs(want).max()) / 127, 1e-3)
    assert np.abs(got - want).max() <= 3 * out_scale


def test_session_disable_quant_qdq_turns_the_fusion_off():
    """onnxruntime's session.disable_quant_qdq: no QDQ fusion; the weight's DequantizeLinear
    then folds (at the basic level too) and the rest runs as float, as onnxruntime runs it."""
    b = QDQ()
    a, _ = _act(b, (3, 16))
    y = b.node("MatMul", [a, b.weight((16, 4), np.float32(0.01))])
    m = b.model(b.q(y, 0.05), TP.UINT8)
    with tempfile.TemporaryDirectory() as d:
        so = ort.SessionOptions()
        so.add_session_config_entry("session.disable_quant_qdq", "1")
        so.optimized_model_filepath = os.path.join(d, "opt.onnx")
        sess = ort.InferenceSession(m.SerializeToString(), so)
        ops = collections.Counter(n.op_type for n in onnx.load(so.optimized_model_filepath)
                                  .graph.node)
    assert ops["QLinearMatMul"] == 0 and ops["MatMul"] == 1, dict(ops)
    assert ops["DequantizeLinear"] == 1, dict(ops)      # the activation's; the weight's folded
    got, = sess.run(None, b.feeds)
    want, = reference(m, b.feeds)
    assert np.abs(got.astype(np.int32) - want.astype(np.int32)).max() <= 1


@pytest.mark.parametrize("switch, dq_left", [("0", 2), ("1", 1)])
def test_disable_quant_qdq_folds_the_weight_dequantize_at_the_basic_level(switch, dq_left):
    b = QDQ()
    a, _ = _act(b, (3, 16))
    y = b.node("MatMul", [a, b.weight((16, 4), np.float32(0.01))])
    m = b.model(b.q(y, 0.05), TP.UINT8)
    with tempfile.TemporaryDirectory() as d:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.add_session_config_entry("session.disable_quant_qdq", switch)
        so.optimized_model_filepath = os.path.join(d, "opt.onnx")
        sess = ort.InferenceSession(m.SerializeToString(), so)
        ops = collections.Counter(n.op_type for n in onnx.load(so.optimized_model_filepath)
                                  .graph.node)
    assert ops["DequantizeLinear"] == dq_left, dict(ops)
    got, = sess.run(None, b.feeds)
    want, = reference(m, b.feeds)
    assert np.abs(got.astype(np.int32) - want.astype(np.int32)).max() <= 1


@pytest.mark.parametrize("dt", [U8, I8])
def test_float_chain_to_lookup(dt):
    """DQ -> Div -> Erf -> Add -> Mul -> Q (float element-wise ops of one value, as BERT's
    QDQ GELU leaves them) becomes a table lookup: Cast + Gather, no float op left."""
    zp = 128 if dt == U8 else 0
    b = QDQ()
    x = b.dq(b.q(b.input((2, 7, 40), -4.0, 4.0), 0.03, zp, dt), 0.03, zp, dt)
    y = b.node("Div", [x, b.const(np.float32(1.4142135))])
    y = b.node("Erf", [y])
    y = b.node("Add", [b.const(np.float32(1.0)), y])
    y = b.node("Mul", [y, b.const(np.array([0.5], np.float32))])
    out = b.q(y, 1 / 255, 0 if dt == U8 else -128, dt)
    ops = check(b, out, "Gather", et=TP.UINT8 if dt == U8 else TP.INT8,
                absent=("DequantizeLinear", "Erf", "Div", "Add", "Mul"))
    assert ops["Cast"] == 1 and ops["QuantizeLinear"] == 1     # the input's only


def test_float_chain_not_taken():
    """A chain value read twice, or a non-scalar constant operand: left as written."""
    b = QDQ()
    x = b.qdq(b.input((3, 16)), 0.03)
    y = b.node("Erf", [x])
    y = b.node("Mul", [y, b.const(RNG.uniform(0.5, 1, 16).astype(np.float32))])
    ops = check(b, b.q(y, 0.01), None, absent=())
    assert ops["Gather"] == 0 and ops["Erf"] == 1


def test_float_chain_lookup_off_with_disable_quant_qdq():
    b = QDQ()
    y = b.node("Erf", [b.qdq(b.input((3, 16)), 0.03)])
    m = b.model(b.q(y, 0.01), TP.UINT8)
    so = ort.SessionOptions()
    so.add_session_config_entry("session.disable_quant_qdq", "1")
    with tempfile.TemporaryDirectory() as d:
        so.optimized_model_filepath = os.path.join(d, "opt.onnx")
        ort.InferenceSession(m.SerializeToString(), so)
        ops = collections.Counter(n.op_type for n in onnx.load(so.optimized_model_filepath)
                                  .graph.node)
    assert ops["Erf"] == 1 and ops["Gather"] == 0, dict(ops)
