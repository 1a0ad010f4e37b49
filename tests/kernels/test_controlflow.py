"""Control flow, sequence and optional kernels: cases the ONNX backend suite leaves out.

Expected values come from onnxruntime (the oracle) or from a NumPy formula.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper as oh

import onnxrt

F = TensorProto.FLOAT
I64 = TensorProto.INT64
B = TensorProto.BOOL


def _model(nodes, inputs, outputs, inits=(), opset=21):
    g = oh.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)])
    m.ir_version = 8 if opset < 21 else 10
    return m


def _both(model, feeds):
    """Our outputs and onnxruntime's for the same model and feeds."""
    data = model.SerializeToString()
    ours = onnxrt.InferenceSession(data).run(None, feeds)
    ref = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    return ours, ref


def _check(model, feeds):
    ours, ref = _both(model, feeds)
    assert len(ours) == len(ref)
    for o, r in zip(ours, ref):
        if isinstance(r, list):
            assert isinstance(o, list) and len(o) == len(r)
            for a, b in zip(o, r):
                assert a.dtype == b.dtype
                np.testing.assert_allclose(a, b, rtol=1e-6)
        else:
            assert o.dtype == r.dtype, (o.dtype, r.dtype)
            assert o.shape == r.shape, (o.shape, r.shape)
            np.testing.assert_allclose(o, r, rtol=1e-6)
    return ours


def _t(name, et, shape):
    return oh.make_tensor_value_info(name, et, shape)


# -- If ---------------------------------------------------------------------------------------

def _if_model():
    # branches read outer values and produce different shapes
    then_g = oh.make_graph([oh.make_node("Add", ["x", "y"], ["t"])], "then", [],
                           [_t("t", F, None)])
    else_g = oh.make_graph([oh.make_node("Identity", ["z"], ["e"])], "else", [],
                           [_t("e", F, None)])
    node = oh.make_node("If", ["c"], ["out"], then_branch=then_g, else_branch=else_g)
    return _model([node], [_t("c", B, [1]), _t("x", F, [2]), _t("y", F, [2]),
                           _t("z", F, [3])], [_t("out", F, None)])


@pytest.mark.parametrize("cond", [True, False])
def test_if_outer_scope_and_shapes(cond):
    x = np.array([1, 2], np.float32)
    z = np.array([5, 6, 7], np.float32)
    out = _check(_if_model(), {"c": np.array([cond]), "x": x, "y": x, "z": z})
    assert out[0].shape == ((2,) if cond else (3,))


# -- Loop -------------------------------------------------------------------------------------

def _loop_body(with_scan=True):
    # carried: acc (float [2]); scan output: acc * i; cond_out = acc_sum < limit (outer)
    nodes = [
        oh.make_node("Cast", ["i"], ["fi"], to=F),
        oh.make_node("Add", ["acc_in", "step"], ["acc_out"]),   # "step" is an outer value
        oh.make_node("Mul", ["acc_out", "fi"], ["scan"]),
        oh.make_node("ReduceSum", ["acc_out"], ["s"], keepdims=0),
        oh.make_node("Less", ["s", "limit"], ["cond_out"]),
    ]
    outs = [_t("cond_out", B, []), _t("acc_out", F, [2])]
    if with_scan:
        outs.append(_t("scan", F, [2]))
    return oh.make_graph(nodes, "body", [_t("i", I64, []), _t("cond_in", B, []),
                                         _t("acc_in", F, [2])], outs)


def _loop_model(m_name, c_name):
    node = oh.make_node("Loop", [m_name, c_name, "a0"], ["acc", "scans"], body=_loop_body())
    inputs = [_t("a0", F, [2]), _t("step", F, [2]), _t("limit", F, [])]
    if m_name:
        inputs.append(_t("M", I64, []))
    if c_name:
        inputs.append(_t("C", B, []))
    return _model([node], inputs, [_t("acc", F, [2]), _t("scans", F, None)])


@pytest.mark.parametrize("m,c", [(5, True), (5, None), (10, None), (None, True), (3, False),
                                 (0, True), (100, True)])
def test_loop_modes(m, c):
    model = _loop_model("M" if m is not None else "", "C" if c is not None else "")
    feeds = {"a0": np.array([0, 1], np.float32), "step": np.array([1, 2], np.float32),
             "limit": np.array(20, np.float32)}
    if m is not None:
        feeds["M"] = np.array(m, np.int64)
    if c is not None:
        feeds["C"] = np.array(c)
    ours = _check(model, feeds)
    if m == 0 or c is False:  # no iteration: empty scan output typed from the body
        assert ours[1].shape == (0, 2) and ours[1].dtype == np.float32


def test_loop_body_input_shadows_outer_name():
    # the body's carried input is named like the outer value it starts from
    body = oh.make_graph(
        [oh.make_node("Add", ["x", "one"], ["x2"]), oh.make_node("Identity", ["c"], ["c2"])],
        "body", [_t("i", I64, []), _t("c", B, []), _t("x", F, [])],
        [_t("c2", B, []), _t("x2", F, [])])
    node = oh.make_node("Loop", ["M", "", "x"], ["y"], body=body)
    one = onnx.numpy_helper.from_array(np.array(1, np.float32), "one")
    model = _model([node], [_t("M", I64, []), _t("x", F, [])], [_t("y", F, [])], inits=[one])
    out = _check(model, {"M": np.array(4, np.int64), "x": np.array(0.5, np.float32)})
    assert out[0] == np.float32(4.5)


def test_if_inside_loop_reads_two_scopes():
    then_g = oh.make_graph([oh.make_node("Add", ["v", "k"], ["r"])], "then", [],
                           [_t("r", F, [])])
    else_g = oh.make_graph([oh.make_node("Sub", ["v", "k"], ["r2"])], "else", [],
                           [_t("r2", F, [])])
    body = oh.make_graph(
        [oh.make_node("Greater", ["v", "zero"], ["pos"]),
         oh.make_node("If", ["pos"], ["v2"], then_branch=then_g, else_branch=else_g),
         oh.make_node("Identity", ["c"], ["c2"])],
        "body", [_t("i", I64, []), _t("c", B, []), _t("v", F, [])],
        [_t("c2", B, []), _t("v2", F, []), _t("v2", F, [])])
    node = oh.make_node("Loop", ["M", "", "v0"], ["vf", "vs"], body=body)
    zero = onnx.numpy_helper.from_array(np.array(0, np.float32), "zero")
    model = _model([node], [_t("M", I64, []), _t("v0", F, []), _t("k", F, [])],
                   [_t("vf", F, []), _t("vs", F, None)], inits=[zero])
    for v0 in (1.0, -1.0):
        _check(model, {"M": np.array(6, np.int64), "v0": np.array(v0, np.float32),
                       "k": np.array(0.25, np.float32)})


def test_loop_sequence_carried():
    body = oh.make_graph(
        [oh.make_node("Cast", ["i"], ["fi"], to=F),
         oh.make_node("SequenceInsert", ["s_in", "fi"], ["s_out"]),
         oh.make_node("Identity", ["c"], ["c2"])],
        "body", [_t("i", I64, []), _t("c", B, []),
                 oh.make_tensor_sequence_value_info("s_in", F, None)],
        [_t("c2", B, []), oh.make_tensor_sequence_value_info("s_out", F, None)])
    nodes = [oh.make_node("SequenceEmpty", [], ["s0"], dtype=F),
             oh.make_node("Loop", ["M", "", "s0"], ["s"], body=body),
             oh.make_node("ConcatFromSequence", ["s"], ["y"], axis=0, new_axis=1)]
    model = _model(nodes, [_t("M", I64, [])], [_t("y", F, None)])
    out = _check(model, {"M": np.array(4, np.int64)})
    np.testing.assert_array_equal(out[0], [0, 1, 2, 3])


# -- Scan -------------------------------------------------------------------------------------

def _scan9_model(in_axes=None, in_dirs=None, out_axes=None, out_dirs=None):
    body = oh.make_graph(
        [oh.make_node("Add", ["s_in", "x"], ["s_out"]),
         oh.make_node("Mul", ["x", "w"], ["y"])],   # w: an outer value
        "body", [_t("s_in", F, [3]), _t("x", F, [3])],
        [_t("s_out", F, [3]), _t("y", F, [3])])
    attrs = {}
    for k, v in (("scan_input_axes", in_axes), ("scan_input_directions", in_dirs),
                 ("scan_output_axes", out_axes), ("scan_output_directions", out_dirs)):
        if v is not None:
            attrs[k] = v
    node = oh.make_node("Scan", ["s0", "X"], ["sf", "Y"], body=body, num_scan_inputs=1,
                        **attrs)
    return _model([node], [_t("s0", F, [3]), _t("X", F, None), _t("w", F, [3])],
                  [_t("sf", F, [3]), _t("Y", F, None)])


@pytest.mark.parametrize("in_axes,in_dirs,out_axes,out_dirs,shape", [
    (None, None, None, None, (4, 3)),
    ([1], [1], [1], [0], (3, 4)),
    ([-1], [0], [-1], [1], (3, 5)),
    ([0], [1], [0], [1], (2, 3)),
])
def test_scan9_axes_directions(in_axes, in_dirs, out_axes, out_dirs, shape):
    rng = np.random.default_rng(0)
    model = _scan9_model(in_axes, in_dirs, out_axes, out_dirs)
    _check(model, {"s0": rng.standard_normal(3).astype(np.float32),
                   "X": rng.standard_normal(shape).astype(np.float32),
                   "w": rng.standard_normal(3).astype(np.float32)})


def test_scan8_sequence_lens_and_reverse():
    body = oh.make_graph(
        [oh.make_node("Add", ["s_in", "x"], ["s_out"]),
         oh.make_node("Identity", ["s_out"], ["y"])],
        "body", [_t("s_in", F, [2]), _t("x", F, [2])],
        [_t("s_out", F, [2]), _t("y", F, [2])])
    node = oh.make_node("Scan", ["L", "s0", "X"], ["sf", "Y"], body=body, num_scan_inputs=1,
                        directions=[1])
    model = _model([node], [_t("L", I64, [3]), _t("s0", F, [3, 2]), _t("X", F, [3, 4, 2])],
                   [_t("sf", F, [3, 2]), _t("Y", F, [3, 4, 2])], opset=8)
    model.ir_version = 4
    x = np.arange(24, dtype=np.float32).reshape(3, 4, 2)
    s0 = np.ones((3, 2), np.float32)
    lens = np.array([4, 2, 0], np.int64)
    sf, y = onnxrt.InferenceSession(model.SerializeToString()).run(
        None, {"L": lens, "s0": s0, "X": x})
    # NumPy formula: reverse cumulative sums over each batch's first lens[b] steps
    for b, n in enumerate(lens):
        steps = x[b, :n][::-1]
        cum = s0[b] + np.cumsum(steps, axis=0) if n else np.zeros((0, 2), np.float32)
        np.testing.assert_allclose(y[b, :n], cum)
        np.testing.assert_allclose(sf[b], cum[-1] if n else s0[b])
        assert not y[b, n:].any()


def test_scan9_zero_length():
    # onnxruntime rejects an empty scan axis; the spec's pseudo-code gives the initial state
    # and an empty scan output shaped by the body's declared output type
    s0 = np.array([1, 2, 3], np.float32)
    sf, y = onnxrt.InferenceSession(_scan9_model().SerializeToString()).run(
        None, {"s0": s0, "X": np.zeros((0, 3), np.float32), "w": s0})
    np.testing.assert_array_equal(sf, s0)
    assert y.shape == (0, 3) and y.dtype == np.float32


# -- SequenceMap ------------------------------------------------------------------------------

def test_sequence_map_tensor_and_outer():
    body = oh.make_graph(
        [oh.make_node("Add", ["a", "b"], ["s"]), oh.make_node("Mul", ["s", "k"], ["o1"]),
         oh.make_node("Shape", ["a"], ["o2"])],
        "body", [_t("a", F, None), _t("b", F, [1])], [_t("o1", F, None), _t("o2", I64, [1])])
    nodes = [oh.make_node("SplitToSequence", ["X", "sp"], ["seq"], axis=0),
             oh.make_node("SequenceMap", ["seq", "bias"], ["r1", "r2"], body=body)]
    sp = onnx.numpy_helper.from_array(np.array([1, 3, 2], np.int64), "sp")
    model = _model(nodes, [_t("X", F, [6]), _t("bias", F, [1]), _t("k", F, [])],
                   [oh.make_tensor_sequence_value_info("r1", F, None),
                    oh.make_tensor_sequence_value_info("r2", I64, None)], inits=[sp])
    _check(model, {"X": np.arange(6, dtype=np.float32), "bias": np.array([1], np.float32),
                   "k": np.array(2, np.float32)})


# -- sequences --------------------------------------------------------------------------------

def _seq_model(nodes, inputs, out, opset=21):
    return _model(nodes, inputs, [out], opset=opset)


@pytest.mark.parametrize("pos", [0, 1, -1, -3, 3])
def test_sequence_insert_at_erase(pos):
    a, b, c = (_t(n, F, [2]) for n in "abc")
    p = onnx.numpy_helper.from_array(np.array(pos, np.int64), "p")
    q = onnx.numpy_helper.from_array(np.array(min(pos, 2), np.int64), "q")
    nodes = [oh.make_node("SequenceConstruct", ["a", "b", "c"], ["s"]),
             oh.make_node("SequenceInsert", ["s", "a", "p"], ["s2"]),
             oh.make_node("SequenceErase", ["s2", "q"], ["s3"]),
             oh.make_node("SequenceErase", ["s3"], ["s4"]),
             oh.make_node("SequenceAt", ["s4", "q2"], ["at"]),
             oh.make_node("SequenceLength", ["s4"], ["n"]),
             oh.make_node("ConcatFromSequence", ["s4"], ["cat"], axis=-1, new_axis=1)]
    q2 = onnx.numpy_helper.from_array(np.array(-1, np.int32), "q2")
    model = _model(nodes, [a, b, c], [_t("at", F, None), _t("n", I64, []),
                                      _t("cat", F, None)], inits=[p, q, q2])
    rng = np.random.default_rng(1)
    _check(model, {n: rng.standard_normal(2).astype(np.float32) for n in "abc"})


@pytest.mark.parametrize("split,axis,keepdims", [
    (None, 1, 1), (None, 1, 0), (None, -1, 0), (2, 1, 1), (np.array([1, 0, 4]), 1, 1),
    (np.array([3, 2]), 1, 0),
])
def test_split_to_sequence(split, axis, keepdims):
    inputs = [_t("X", F, [2, 5])]
    ins = ["X"]
    inits = []
    if split is not None:
        inits.append(onnx.numpy_helper.from_array(np.asarray(split, np.int64), "split"))
        ins.append("split")
    nodes = [oh.make_node("SplitToSequence", ins, ["s"], axis=axis, keepdims=keepdims)]
    model = _model(nodes, inputs, [oh.make_tensor_sequence_value_info("s", F, None)],
                   inits=inits)
    _check(model, {"X": np.arange(10, dtype=np.float32).reshape(2, 5)})


def test_split_to_sequence_does_not_share_input_mutably():
    x = np.arange(6, dtype=np.int64).reshape(3, 2)
    model = _model([oh.make_node("SplitToSequence", ["X"], ["s"], axis=0, keepdims=0)],
                   [_t("X", I64, [3, 2])], [oh.make_tensor_sequence_value_info("s", I64, None)])
    (seq,) = onnxrt.InferenceSession(model.SerializeToString()).run(None, {"X": x})
    np.testing.assert_array_equal(np.stack(seq), x)
    assert all(s.dtype == np.int64 and s.shape == (2,) for s in seq)


def test_string_sequence():
    nodes = [oh.make_node("SequenceConstruct", ["a", "b"], ["s"]),
             oh.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)]
    model = _model(nodes, [_t("a", TensorProto.STRING, [1]), _t("b", TensorProto.STRING, [2])],
                   [_t("y", TensorProto.STRING, [3])])
    a = np.array(["x"], dtype=object)
    b = np.array(["yy", "z"], dtype=object)
    (y,) = onnxrt.InferenceSession(model.SerializeToString()).run(None, {"a": a, "b": b})
    assert y.dtype == object and list(y) == ["x", "yy", "z"]


def test_sequence_at_out_of_range():
    nodes = [oh.make_node("SequenceConstruct", ["a"], ["s"]),
             oh.make_node("SequenceAt", ["s", "p"], ["y"])]
    model = _model(nodes, [_t("a", F, [1]), _t("p", I64, [])], [_t("y", F, [1])])
    sess = onnxrt.InferenceSession(model.SerializeToString())
    with pytest.raises(Exception, match="out of range"):
        sess.run(None, {"a": np.ones(1, np.float32), "p": np.array(1, np.int64)})


# -- optionals --------------------------------------------------------------------------------

def test_optional_wrap_has_get():
    nodes = [oh.make_node("Optional", ["x"], ["o"]),
             oh.make_node("OptionalHasElement", ["o"], ["h"]),
             oh.make_node("OptionalGetElement", ["o"], ["y"]),
             oh.make_node("OptionalHasElement", ["x"], ["h2"]),
             oh.make_node("OptionalGetElement", ["x"], ["y2"])]
    model = _model(nodes, [_t("x", F, [2])], [_t("h", B, []), _t("y", F, [2]),
                                              _t("h2", B, []), _t("y2", F, [2])])
    _check(model, {"x": np.array([1, 2], np.float32)})


def test_optional_empty():
    tp = oh.make_tensor_type_proto(F, [2])
    nodes = [oh.make_node("Optional", [], ["o"], type=tp),
             oh.make_node("OptionalHasElement", ["o"], ["h"]),
             oh.make_node("OptionalHasElement", [], ["h2"])]
    model = _model(nodes, [], [_t("h", B, []), _t("h2", B, [])])
    h, h2 = onnxrt.InferenceSession(model.SerializeToString()).run(None, {})
    assert h.dtype == np.bool_ and h.shape == () and not h and not h2


def test_loop_terminate_from_another_thread():
    import threading

    body = oh.make_graph(
        [oh.make_node("Add", ["x", "x"], ["x2"]), oh.make_node("Identity", ["c"], ["c2"])],
        "body", [_t("i", I64, []), _t("c", B, []), _t("x", F, [])],
        [_t("c2", B, []), _t("x2", F, [])])
    model = _model([oh.make_node("Loop", ["M", "", "x"], ["y"], body=body)],
                   [_t("M", I64, []), _t("x", F, [])], [_t("y", F, [])])
    sess = onnxrt.InferenceSession(model.SerializeToString())
    ro = onnxrt.RunOptions()
    timer = threading.Timer(0.1, lambda: setattr(ro, "terminate", True))
    timer.start()
    try:
        with pytest.raises(onnxrt.RunCanceled, match="terminate"):
            sess.run(None, {"M": np.array(10**9, np.int64), "x": np.array(0, np.float32)}, ro)
    finally:
        timer.cancel()
