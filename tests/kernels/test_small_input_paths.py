"""The per-call shortcuts of small-input kernels (Pad with constant pads, Sigmoid on float32/
float64) against onnxruntime and onnx.reference: the calls they take, repeated in one session
over changing input shapes, and the calls they hand back to the general path."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import onnxrt
from models import named_node_model

ort = pytest.importorskip("onnxruntime")

I64 = np.int64
rng = np.random.default_rng(7)


def _dynamic(m: onnx.ModelProto) -> onnx.ModelProto:
    """Every graph input's dims made symbolic: one session sees many shapes."""
    for vi in m.graph.input:
        for k, d in enumerate(vi.type.tensor_type.shape.dim):
            d.ClearField("dim_value")
            d.dim_param = f"{vi.name}_d{k}"
    return m


def _sessions(op, inputs, attrs, consts, opset):
    m = _dynamic(named_node_model(op, inputs, attrs, 1, opset, consts)).SerializeToString()
    return (onnxrt.InferenceSession(m),
            ort.InferenceSession(m, providers=["CPUExecutionProvider"]))


# -- Pad with constant pads: the checked begin/end pads are kept per input shape ----------

@pytest.mark.parametrize("mode", ["reflect", "edge", "constant", "wrap"])
@pytest.mark.parametrize("pads,axes", [([0, 32, 0, 32], None), ([1, 2, 1, 1], None),
                                       ([2, 1], [-1]), ([0, 1, 0, 0], None)])
def test_pad_constant_pads_over_changing_shapes(mode, pads, axes):
    x0 = rng.standard_normal((2, 512)).astype(np.float32)
    ins = [("x", x0), ("pads", np.array(pads, I64)), ("v", np.array(1.5, np.float32))]
    consts = {"pads", "v"}
    if axes is not None:
        ins.append(("axes", np.array(axes, I64)))
        consts.add("axes")
    ours, theirs = _sessions("Pad", ins, {"mode": mode}, consts, 19)
    # the first shape again after others: a kept plan must be the one of that shape
    for shape in [(2, 512), (3, 40), (2, 512), (4, 33), (3, 40)]:
        x = rng.standard_normal(shape).astype(np.float32)
        got = ours.run(None, {"x": x})[0]
        want = theirs.run(None, {"x": x})[0]
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_pad_constant_negative_pads_crop_every_call():
    """Negative pads crop first (the general path, never kept): same as onnxruntime on every
    call."""
    x0 = rng.standard_normal((4, 6)).astype(np.float32)
    ours, theirs = _sessions("Pad", [("x", x0), ("pads", np.array([-1, 2, 1, -2], I64))],
                             {"mode": "edge"}, {"pads"}, 19)
    for shape in [(4, 6), (5, 9), (4, 6)]:
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(ours.run(None, {"x": x})[0],
                                      theirs.run(None, {"x": x})[0])


def test_pad_constant_pads_too_large_for_a_shape_is_a_clear_error():
    """Reflect pads must stay below the dim: a shape too small for the kept pads gets the
    error naming Pad, and the session keeps answering the shapes that fit."""
    x0 = rng.standard_normal((1, 64)).astype(np.float32)
    ours, theirs = _sessions("Pad", [("x", x0), ("pads", np.array([0, 32, 0, 32], I64))],
                             {"mode": "reflect"}, {"pads"}, 19)
    np.testing.assert_array_equal(ours.run(None, {"x": x0})[0], theirs.run(None, {"x": x0})[0])
    small = rng.standard_normal((1, 20)).astype(np.float32)
    with pytest.raises(Exception, match="Pad"):
        ours.run(None, {"x": small})
    with pytest.raises(Exception):
        theirs.run(None, {"x": small})
    np.testing.assert_array_equal(ours.run(None, {"x": x0})[0], theirs.run(None, {"x": x0})[0])


def test_pad_constant_pads_on_an_empty_axis():
    """Edge-padding an empty axis is refused (nothing to repeat); an empty axis left alone
    pads the others like onnxruntime."""
    x0 = np.zeros((0, 5), np.float32)
    ours, theirs = _sessions("Pad", [("x", x0), ("pads", np.array([0, 1, 0, 2], I64))],
                             {"mode": "edge"}, {"pads"}, 19)
    got = ours.run(None, {"x": x0})[0]
    want = theirs.run(None, {"x": x0})[0]
    assert got.shape == want.shape == (0, 8)
    ours2, _ = _sessions("Pad", [("x", x0), ("pads", np.array([1, 0, 0, 0], I64))],
                         {"mode": "edge"}, {"pads"}, 19)
    with pytest.raises(Exception, match="Pad.*empty"):
        ours2.run(None, {"x": x0})


def test_pad_pads_as_a_graph_input_take_the_general_path():
    x = rng.standard_normal((3, 7)).astype(np.float32)
    ours, theirs = _sessions("Pad", [("x", x), ("pads", np.array([1, 2, 2, 1], I64))],
                             {"mode": "reflect"}, set(), 19)
    for p in ([1, 2, 2, 1], [0, 3, 1, 0]):
        feeds = {"x": x, "pads": np.array(p, I64)}
        np.testing.assert_array_equal(ours.run(None, feeds)[0], theirs.run(None, feeds)[0])


# -- Sigmoid: float32/float64 without np.errstate (exp's argument capped) ------------------

@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_sigmoid_tails_and_specials(dt):
    """onnx.reference as the oracle (onnxruntime gives 0 below about -18 itself): the
    capped exp leaves at most the type's smallest sigmoid (~6e-39 in float32) where the
    exact one is smaller, NaN stays NaN, and no overflow warning escapes."""
    x = np.array([-np.inf, -1e4, -750.0, -104.0, -89.0, -88.0, -87.0, -30.0, -1.0, 0.0, 1e-3,
                  17.0, 88.0, 1e4, np.inf, np.nan], dt)
    x = np.concatenate([x, rng.standard_normal(200).astype(dt) * 20])
    from onnx.reference import ReferenceEvaluator

    m = named_node_model("Sigmoid", [("x", x)], {}, 1, 13)
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    got = onnxrt.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
    assert got.dtype == dt and got.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=2e-7 if dt == np.float32 else 1e-15,
                               atol=1e-38 if dt == np.float32 else 1e-300)
    assert np.isnan(got[15]) and got[0] >= 0 and got[14] == 1
    # runs are quiet, constant folding calls the kernel outside one: no overflow error there
    from onnxrt.providers.cpu.activations import sigmoid

    with np.errstate(over="raise", divide="raise", invalid="raise"):   # underflow is no error
        np.testing.assert_array_equal(sigmoid(x), got)


@pytest.mark.parametrize("x", [np.array(-3.0, np.float32), np.zeros((0, 4), np.float32),
                               np.array([[-200.0, 0.5]], np.float16),
                               np.asfortranarray(np.arange(-6, 6, dtype=np.float64)
                                                 .reshape(3, 4))])
def test_sigmoid_other_inputs_match_onnxruntime(x):
    """0-d and float16 go through the general path; empty and non-contiguous take the fast
    one."""
    m = named_node_model("Sigmoid", [("x", x)], {}, 1, 13).SerializeToString()
    got = onnxrt.InferenceSession(m).run(None, {"x": x})[0]
    want = ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=1e-3 if x.dtype == np.float16 else 1e-6, atol=1e-7)


# -- Gather with constant 1-D indices: wrapped and checked once per size of the axis -------

@pytest.mark.parametrize("idx,axis", [([2], 0), ([-1], 0), ([0, -2, 1], 0), ([1, -1], 1),
                                      ([0], -1)])
def test_gather_constant_indices_over_changing_shapes(idx, axis):
    x0 = np.arange(12, dtype=I64).reshape(3, 4) if axis else np.array([1, 128, 1], I64)
    ours, theirs = _sessions("Gather", [("x", x0), ("i", np.array(idx, I64))], {"axis": axis},
                             {"i"}, 13)
    shapes = [(3, 4), (2, 5), (3, 4), (4, 3)] if axis else [(3,), (5,), (3,), (4,)]
    for shape in shapes:
        x = rng.integers(-50, 50, shape).astype(I64)
        got = ours.run(None, {"x": x})[0]
        want = theirs.run(None, {"x": x})[0]
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_gather_constant_index_out_of_range_for_a_shape_is_a_clear_error():
    """An index that fits one shape and not the next: the error names the index and the
    axis, and the session keeps answering the shapes that fit."""
    x0 = np.array([1, 128, 1], I64)
    ours, theirs = _sessions("Gather", [("x", x0), ("i", np.array([2], I64))], {"axis": 0},
                             {"i"}, 13)
    np.testing.assert_array_equal(ours.run(None, {"x": x0})[0], [1])
    for bad in (np.array([7, 8], I64), np.zeros(0, I64)):
        with pytest.raises(Exception, match="Gather: index 2 is out of range"):
            ours.run(None, {"x": bad})
        with pytest.raises(Exception):
            theirs.run(None, {"x": bad})
    np.testing.assert_array_equal(ours.run(None, {"x": x0})[0], theirs.run(None, {"x": x0})[0])


@pytest.mark.parametrize("idx,const", [(np.array(1, I64), True), (np.array([0, 1], I64), False),
                                       (np.zeros((0,), I64), True),
                                       (np.array([[0], [1]], I64), True)])
def test_gather_other_indices_take_the_general_path(idx, const):
    """0-d, empty, 2-D or non-constant indices: the general kernel, like onnxruntime."""
    x = rng.standard_normal((2, 1, 8)).astype(np.float32)
    ours, theirs = _sessions("Gather", [("x", x), ("i", idx)], {"axis": 0},
                             {"i"} if const else set(), 13)
    feeds = {"x": x} if const else {"x": x, "i": idx}
    got = ours.run(None, feeds)[0]
    want = theirs.run(None, feeds)[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
