"""com.microsoft DynamicQuantizeLSTM against onnxruntime: single nodes over its attributes,
and a float LSTM model through onnxruntime.quantization.quantize_dynamic as a user would."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper

from kernels.contrib_oracle import assert_close, ms_model, run_ort, run_ours

RNG = np.random.default_rng(77)


def _f(*shape, scale=1.0):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


def _qweights(nd, rows, h, dt, per_col):
    w = RNG.integers(-60, 61, (nd, rows, 4 * h)) if dt == np.int8 else \
        RNG.integers(60, 200, (nd, rows, 4 * h))
    scale = (RNG.random((nd, 4 * h) if per_col else (nd,)) * 0.02 + 0.01).astype(np.float32)
    zp = np.zeros(scale.shape, dt) if dt == np.int8 else np.full(scale.shape, 128, dt)
    return w.astype(dt), scale, zp


def _run(ins, outputs, **attrs):
    m = ms_model("DynamicQuantizeLSTM", ins, outputs=outputs, consts=("w", "r", "ws", "wz",
                                                                      "rs", "rz"), **attrs)
    feeds = {k: v for k, v in ins if v is not None and k not in ("w", "r", "ws", "wz", "rs",
                                                                 "rz")}
    # one thread: onnxruntime splits the batch over threads and quantizes each part alone
    return run_ort(m, feeds, intra_op_num_threads=1), run_ours(m, feeds)


@pytest.mark.parametrize("wdt", [np.int8, np.uint8])
@pytest.mark.parametrize("per_col", [False, True])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_dynamic_quantize_lstm(wdt, per_col, direction):
    s, b, i, h = 5, 3, 6, 4
    nd = 2 if direction == "bidirectional" else 1
    w, ws, wz = _qweights(nd, i, h, wdt, per_col)
    r, rs, rz = _qweights(nd, h, h, wdt, per_col)
    ins = [("x", _f(s, b, i)), ("w", w), ("r", r), ("b", _f(nd, 8 * h, scale=0.1)),
           ("sl", None), ("h0", _f(nd, b, h, scale=0.5)), ("c0", _f(nd, b, h, scale=0.5)),
           ("p", None), ("ws", ws), ("wz", wz), ("rs", rs), ("rz", rz)]
    ref, got = _run(ins, 3, hidden_size=h, direction=direction)
    assert_close(ref, got, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("extras", ["peephole", "input_forget", "clip", "seq_lens",
                                    "activations"])
def test_dynamic_quantize_lstm_options(extras):
    s, b, i, h = 4, 3, 5, 4
    w, ws, wz = _qweights(1, i, h, np.int8, True)
    r, rs, rz = _qweights(1, h, h, np.int8, True)
    ins = [("x", _f(s, b, i)), ("w", w), ("r", r), ("b", _f(1, 8 * h, scale=0.1)),
           ("sl", np.array([4, 2, 3], np.int32) if extras == "seq_lens" else None),
           ("h0", None), ("c0", None),
           ("p", _f(1, 3 * h, scale=0.3) if extras == "peephole" else None),
           ("ws", ws), ("wz", wz), ("rs", rs), ("rz", rz)]
    attrs = {"hidden_size": h}
    if extras == "input_forget":
        attrs["input_forget"] = 1
    if extras == "clip":
        attrs["clip"] = 0.7
    if extras == "activations":
        attrs["activations"] = ["HardSigmoid", "Tanh", "Relu"]
    ref, got = _run(ins, 3, **attrs)
    assert_close(ref, got, rtol=1e-4, atol=2e-5)


def test_quantize_dynamic_lstm_model(tmp_path):
    """A float LSTM model quantized the way users do it: its LSTM becomes
    DynamicQuantizeLSTM; onnxrt runs the quantized model as onnxruntime does."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    s, b, i, h = 6, 2, 8, 16
    # quantize_dynamic makes symmetric int8 weights spanning [-127, 127], and onnxruntime's
    # u8s8 products saturate int16 pair sums on CPUs without VNNI: one weight twice as large
    # as the rest, next to a zero, keeps every other code within 64 and every pair sum exact
    W = RNG.uniform(-0.3, 0.3, (1, 4 * h, i)).astype(np.float32)
    R = RNG.uniform(-0.3, 0.3, (1, 4 * h, h)).astype(np.float32)
    for m in (W, R):
        m[0, 0, 0], m[0, 0, 1] = 0.6, 0.0
    B = _f(1, 8 * h, scale=0.1)
    node = oh.make_node("LSTM", ["x", "W", "R", "B"], ["y", "yh", "yc"], hidden_size=h)
    g = oh.make_graph([node], "lstm", [oh.make_tensor_value_info("x", TP.FLOAT, [s, b, i])],
                      [oh.make_tensor_value_info(n, TP.FLOAT, None) for n in ("y", "yh", "yc")],
                      initializer=[numpy_helper.from_array(W, "W"),
                                   numpy_helper.from_array(R, "R"),
                                   numpy_helper.from_array(B, "B")])
    src, dst = tmp_path / "lstm.onnx", tmp_path / "lstm.q.onnx"
    onnx.save(oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)], ir_version=9), src)
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)
    q = onnx.load(str(dst))
    assert [n.op_type for n in q.graph.node if n.domain == "com.microsoft"] == \
        ["DynamicQuantizeLSTM"]
    feeds = {"x": _f(s, b, i)}
    assert_close(run_ort(q, feeds, intra_op_num_threads=1), run_ours(q, feeds), rtol=1e-4,
                 atol=2e-5)
