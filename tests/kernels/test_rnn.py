"""RNN, GRU and LSTM against onnxruntime (and onnx.reference where onnxruntime's CPU
kernels stop: layout=1, float64, float16)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxrt

ort = pytest.importorskip("onnxruntime")

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
OPSET = {"RNN": 14, "GRU": 14, "LSTM": 14}


def _model(op, inputs, attrs, n_out, elem=TensorProto.FLOAT, opset=14):
    names = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
    ins = []
    vis = []
    for n, v in zip(names, inputs):
        if v is None:
            ins.append("")
            continue
        ins.append(n)
        et = TensorProto.INT32 if n == "sequence_lens" else elem
        vis.append(helper.make_tensor_value_info(n, et, list(v.shape)))
    while ins and ins[-1] == "":
        ins.pop()
    outs = ["Y", "Y_h", "Y_c"][:n_out]
    node = helper.make_node(op, ins, outs, **attrs)
    graph = helper.make_graph([node], "g", vis,
                              [helper.make_tensor_value_info(o, elem, None) for o in outs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)


def _feeds(inputs):
    names = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
    return {n: v for n, v in zip(names, inputs) if v is not None}


def _inputs(op, T=5, B=3, I=4, H=6, D=1, bias=True, lens=None, init=True, peep=False,
            layout=0, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    G = GATES[op]
    X = rng.standard_normal((B, T, I) if layout else (T, B, I)).astype(dtype)
    W = (rng.standard_normal((D, G * H, I)) * 0.5).astype(dtype)
    R = (rng.standard_normal((D, G * H, H)) * 0.5).astype(dtype)
    Bv = (rng.standard_normal((D, 2 * G * H)) * 0.5).astype(dtype) if bias else None
    sl = None if lens is None else np.array(lens, np.int32)
    shape = (B, D, H) if layout else (D, B, H)
    h0 = rng.standard_normal(shape).astype(dtype) if init else None
    ins = [X, W, R, Bv, sl, h0]
    if op == "LSTM":
        ins.append(rng.standard_normal(shape).astype(dtype) if init else None)
        ins.append(rng.standard_normal((D, 3 * H)).astype(dtype) if peep else None)
    return ins


def _run_ours(model, feeds):
    return onnxrt.InferenceSession(model.SerializeToString()).run(None, feeds)


def _check(op, attrs, rtol=1e-4, atol=1e-5, oracle="ort", **kw):
    D = 2 if attrs.get("direction") == "bidirectional" else 1
    ins = _inputs(op, D=D, layout=attrs.get("layout", 0), **kw)
    H = ins[2].shape[-1]
    n_out = 3 if op == "LSTM" else 2
    elem = helper.np_dtype_to_tensor_dtype(ins[0].dtype)
    model = _model(op, ins, {"hidden_size": H, **attrs}, n_out, elem)
    feeds = _feeds(ins)
    if oracle == "ort":
        sess = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        exp = sess.run(None, feeds)
    else:
        from onnx.reference import ReferenceEvaluator
        exp = ReferenceEvaluator(model).run(None, feeds)
    got = _run_ours(model, feeds)
    for e, g in zip(exp, got):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=rtol,
                                   atol=atol)


CASES = [
    {},
    {"direction": "reverse"},
    {"direction": "bidirectional"},
    {"clip": 0.7},
    {"direction": "bidirectional", "clip": 0.5},
]


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("attrs", CASES)
def test_directions_and_clip(op, attrs):
    _check(op, attrs)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_sequence_lens(op, direction):
    _check(op, {"direction": direction}, lens=[5, 2, 3])
    _check(op, {"direction": direction}, lens=[3, 1, 2], init=False)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_no_bias_no_initial(op):
    _check(op, {"direction": "bidirectional"}, bias=False, init=False)


def test_gru_linear_before_reset():
    _check("GRU", {"linear_before_reset": 1})
    _check("GRU", {"linear_before_reset": 1, "direction": "bidirectional"}, lens=[4, 5, 1])


def test_lstm_peepholes_and_input_forget():
    _check("LSTM", {}, peep=True)
    _check("LSTM", {"direction": "bidirectional"}, peep=True, lens=[2, 5, 4])
    _check("LSTM", {"input_forget": 1}, peep=True)


@pytest.mark.parametrize("op,acts", [
    ("RNN", ["Relu"]),
    ("RNN", ["LeakyRelu", "Softsign"]),
    ("GRU", ["HardSigmoid", "Affine"]),
    ("GRU", ["Sigmoid", "Elu", "HardSigmoid", "Softplus"]),
    ("LSTM", ["HardSigmoid", "ScaledTanh", "Affine"]),
    ("LSTM", ["Sigmoid", "ThresholdedRelu", "Tanh", "Sigmoid", "Tanh", "LeakyRelu"]),
])
def test_activations_with_alpha_beta(op, acts):
    D = len(acts) // {"RNN": 1, "GRU": 2, "LSTM": 3}[op]
    attrs = {"activations": acts, "activation_alpha": [0.3, 0.6, 0.4],
             "activation_beta": [0.2, 0.1]}
    if D == 2:
        attrs["direction"] = "bidirectional"
    _check(op, attrs)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_layout_batchwise(op):
    _check(op, {"layout": 1, "direction": "bidirectional"}, oracle="ref", lens=None)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_float64_and_float16(op):
    _check(op, {"direction": "bidirectional"}, oracle="ref", dtype=np.float64, rtol=1e-10,
           atol=1e-12)
    _check(op, {}, oracle="ref", dtype=np.float16, rtol=1e-2, atol=1e-2)


def test_opset1_default_direction_and_constant_weights():
    # opset 1's schema misspells the default direction ("foward"); weights as initializers
    ins = _inputs("GRU")
    X, W, R, Bv = ins[:4]
    node = helper.make_node("GRU", ["X", "W", "R", "B"], ["Y", "Y_h"], hidden_size=6)
    inits = [onnx.numpy_helper.from_array(v, n) for n, v in zip("WRB", (W, R, Bv))]
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(X.shape))],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("Y", "Y_h")],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 7)], ir_version=9)
    exp = ort.InferenceSession(model.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, {"X": X})
    model1 = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 1)], ir_version=9)
    for m in (model, model1):
        got = _run_ours(m, {"X": X})
        for e, g in zip(exp, got):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_only_y_h_requested():
    ins = _inputs("LSTM")
    node = helper.make_node("LSTM", ["X", "W", "R", "B"], ["", "Y_h"], hidden_size=6)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(v.shape))
         for n, v in zip("XWRB", ins)],
        [helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=9)
    feeds = dict(zip("XWRB", ins))
    exp = ort.InferenceSession(model.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, feeds)
    got = _run_ours(model, feeds)
    np.testing.assert_allclose(got[0], exp[0], rtol=1e-4, atol=1e-5)


# -- the compiled time loop (rnn/compiled.py) and its edges ---------------------------------

def _session_kernel(model):
    """The session and the kernel object of its one recurrent node."""
    sess = onnxrt.InferenceSession(model.SerializeToString())
    fns = [s.fn for s in sess._plan.steps if hasattr(s.fn, "num_dir")]
    assert len(fns) == 1
    return sess, fns[0]


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_sequence_lens_with_zeros(op, direction):
    # a row of length 0: Y all zeros for it and, as onnxruntime writes, zero Y_h / Y_c
    _check(op, {"direction": direction}, lens=[0, 5, 3])
    _check(op, {"direction": direction}, lens=[2, 0, 0], init=False)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_batch_one_and_zero(op):
    _check(op, {"direction": "bidirectional"}, B=1)
    _check(op, {}, B=1, lens=[4])
    # batch 0: empty outputs of the right shapes (onnx.reference: onnxruntime refuses it)
    ins = _inputs(op, B=0, init=False)
    n_out = 3 if op == "LSTM" else 2
    model = _model(op, ins, {"hidden_size": 6}, n_out)
    got = _run_ours(model, _feeds(ins))
    assert got[0].shape == (5, 1, 0, 6) and all(g.shape == (1, 0, 6) for g in got[1:])


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_threads_split_directions_and_rows(op):
    # enough work that the loop splits: both directions, blocks of batch rows
    _check(op, {"direction": "bidirectional"}, T=40, B=5, I=16, H=48, lens=[40, 3, 0, 17, 40])
    _check(op, {"linear_before_reset": 1} if op == "GRU" else {"input_forget": 1},
           T=40, B=9, I=16, H=48)


def test_lstm_clip_with_peepholes():
    # the output gate is clipped after its peephole term (the new cell state) is added
    _check("LSTM", {"clip": 0.4}, peep=True)
    _check("LSTM", {"clip": 0.4, "direction": "bidirectional"}, peep=True, lens=[3, 5, 1])


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_layout_batchwise_with_lens(op, direction):
    # onnxruntime has no layout=1 and onnx.reference ignores sequence_lens: the oracle is
    # onnxruntime on the layout-0 model, its inputs and outputs transposed
    D = 2 if direction == "bidirectional" else 1
    ins = _inputs(op, D=D, layout=0, lens=[5, 2, 0])
    n_out = 3 if op == "LSTM" else 2
    attrs = {"hidden_size": 6, "direction": direction}
    exp = ort.InferenceSession(_model(op, ins, attrs, n_out).SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, _feeds(ins))
    ins1 = [ins[0].transpose(1, 0, 2)] + ins[1:5] + [
        v.transpose(1, 0, 2) if v is not None else None for v in ins[5:7]] + ins[7:]
    got = _run_ours(_model(op, ins1, {**attrs, "layout": 1}, n_out), _feeds(ins1))
    np.testing.assert_allclose(got[0], exp[0].transpose(2, 0, 1, 3), rtol=1e-4, atol=1e-5)
    for g, e in zip(got[1:], exp[1:]):
        np.testing.assert_allclose(g, e.transpose(1, 0, 2), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_compiled_loop_matches_numpy_path(op):
    from onnxrt.providers.cpu.nn import jit

    if not jit.enabled():
        pytest.skip("numba is disabled here (ONNXRT_JIT=0): only the NumPy path runs")
    ins = _inputs(op, D=2, lens=[5, 1, 4], peep=True)
    attrs = {"hidden_size": 6, "direction": "bidirectional", "clip": 1.5}
    if op == "GRU":
        attrs["linear_before_reset"] = 1
    model = _model(op, ins, attrs, 3 if op == "LSTM" else 2)
    feeds = _feeds(ins)
    sess, k = _session_kernel(model)
    assert k._loop is not None         # the compiled loop runs this node
    got = sess.run(None, feeds)
    jit.set_enabled(False)
    try:
        sess_np, k_np = _session_kernel(model)
        assert k_np._loop is None
        ref = sess_np.run(None, feeds)
    finally:
        jit.set_enabled(True)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)


def test_lstm_weights_from_outer_scope_inside_if():
    # an exported streaming model reads the LSTM's weights from the main graph inside an
    # If: the branch holds them as constants, so the kernel packs them once
    ins = _inputs("LSTM", T=1, B=1)
    X, W, R, Bv = ins[:4]
    node = helper.make_node("LSTM", ["X", "W", "R", "B"], ["", "Y_h"], hidden_size=6)
    branch = helper.make_graph([node], "then", [],
                               [helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, None)])
    neg = helper.make_graph(
        [helper.make_node("Neg", ["X"], ["Z"])], "else", [],
        [helper.make_tensor_value_info("Z", TensorProto.FLOAT, None)])
    top = helper.make_node("If", ["c"], ["out"], then_branch=branch, else_branch=neg)
    inits = [onnx.numpy_helper.from_array(v, n) for n, v in zip("WRB", (W, R, Bv))]
    g = helper.make_graph(
        [top], "g", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                     helper.make_tensor_value_info("X", TensorProto.FLOAT, list(X.shape))],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=9)
    feeds = {"c": np.array(True), "X": X}
    exp = ort.InferenceSession(model.SerializeToString(),
                               providers=["CPUExecutionProvider"]).run(None, feeds)
    sess = onnxrt.InferenceSession(model.SerializeToString())
    np.testing.assert_allclose(sess.run(None, feeds)[0], exp[0], rtol=1e-5, atol=1e-6)
    (step,) = [s for s in sess._plan.steps if s.node.op_type == "If"]
    assert set(step.node.implicit_inputs) == {"X"}     # W, R, B are the branch's own
    lstm = step.node.subgraphs["then_branch"].plan.steps[0].fn
    assert lstm._packed is not None



def _dynamic(model, with_lens):
    """``model`` with batch and length left free (and ``sequence_lens`` wired in when
    ``with_lens``)."""
    for vi in model.graph.input:
        if vi.name in ("X", "initial_h", "initial_c"):
            dims = vi.type.tensor_type.shape.dim
            dims[1].dim_param = "batch"
            if vi.name == "X":
                dims[0].dim_param = "time"
    if with_lens:
        model.graph.input.append(helper.make_tensor_value_info("sequence_lens",
                                                               TensorProto.INT32, ["batch"]))
        node = model.graph.node[0]
        while len(node.input) < 5:
            node.input.append("")
        node.input[4] = "sequence_lens"
    return model.SerializeToString()


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("with_lens", [False, True])
def test_one_session_many_runs_shapes_and_lens_change(op, direction, with_lens):
    # a streaming model runs one node many times: what a run leaves behind (the full
    # lengths kept by shape, the outputs it handed out) must not leak into the next run,
    # whose batch, length or sequence_lens differ; the results of earlier runs stay as given
    D = 2 if direction == "bidirectional" else 1
    n_out = 3 if op == "LSTM" else 2
    runs = [(1, 2, None), (4, 2, None), (4, 3, [4, 1, 0]), (4, 3, None), (1, 2, None),
            (4, 2, [2, 3]), (4, 2, None), (1, 3, [1, 0, 1])]
    base = _inputs(op, T=4, B=3, D=D, seed=7)
    H = base[2].shape[-1]
    model = _model(op, base, {"hidden_size": H, "direction": direction}, n_out)
    data = _dynamic(model, with_lens)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    ours = onnxrt.InferenceSession(data)
    kept = []
    for k, (T, B, lens) in enumerate(runs):
        if lens is not None and not with_lens:
            continue
        ins = _inputs(op, T=T, B=B, D=D, seed=k)
        ins[1:4] = base[1:4]
        ins[4] = np.array(lens if lens is not None else [T] * B, np.int32) \
            if with_lens else None
        feeds = _feeds(ins)
        exp = ref.run(None, feeds)
        got = ours.run(None, feeds)
        for e, g in zip(exp, got):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
        kept.append(([g.copy() for g in got], got))
    for snapshot, got in kept:
        for s, g in zip(snapshot, got):
            np.testing.assert_array_equal(g, s)
