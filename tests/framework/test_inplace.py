"""Concatenations written in place (plan/inplace.py): convs write their slices of a Concat's
output directly at batch 1; everything else, and every failed check, keeps the copy. Results
against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import onnxrt
from onnxrt.plan import inplace
from models import model


def _fire(batch="N", dtype=np.float32, extra_reader=False, expose=False, axis=1,
          pool_branch=False, sq=8):
    """squeezenet's fire module: a 1x1 squeeze, then a 1x1 and a 3x3 expand of it joined
    along the channels (optionally a third branch, a max pool of the squeeze)."""
    rng = np.random.default_rng(0)
    tt = T.FLOAT16 if dtype == np.float16 else T.FLOAT

    def w(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(dtype), name)

    m1 = 12 if axis == 1 else 20     # along another axis the channels must agree
    inits = [w("ws", sq, 16, 1, 1), w("bs", sq), w("w1", m1, sq, 1, 1), w("b1", m1),
             w("w3", 20, sq, 3, 3), w("b3", 20)]
    nodes = [h.make_node("Conv", ["x", "ws", "bs"], ["s0"]),
             h.make_node("Relu", ["s0"], ["s"]),
             h.make_node("Conv", ["s", "w1", "b1"], ["e1c"]),
             h.make_node("Relu", ["e1c"], ["e1"]),
             h.make_node("Conv", ["s", "w3", "b3"], ["e3c"], pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["e3c"], ["e3"])]
    joined = ["e1", "e3"]
    if pool_branch:
        nodes.append(h.make_node("MaxPool", ["s"], ["p"], kernel_shape=[3, 3],
                                 pads=[1, 1, 1, 1]))
        joined.append("p")
    nodes.append(h.make_node("Concat", joined, ["cat"], axis=axis))
    nodes.append(h.make_node("Sigmoid", ["cat"], ["y"]))
    outs = [h.make_tensor_value_info("y", tt, None)]
    if extra_reader:
        nodes.append(h.make_node("Neg", ["e3"], ["other"]))
        outs.append(h.make_tensor_value_info("other", tt, None))
    if expose:
        outs.append(h.make_tensor_value_info("e1", tt, [batch, m1, 9, 9]))
    return model(nodes, [h.make_tensor_value_info("x", tt, [batch, 16, 9, 9])], outs,
                 inits).SerializeToString()


def _steps(sess, kind):
    return [st for st in sess._plan.steps if isinstance(st.fn, kind)]


def _both(mb, x, **opts):
    so = onnxrt.SessionOptions()
    for k, v in opts.items():
        setattr(so, k, v)
    sess = onnxrt.InferenceSession(mb, so)
    ref = onnxruntime.InferenceSession(mb, providers=["CPUExecutionProvider"])
    return sess, ref


def _spy_fallbacks(sess):
    """Count the Concat steps that fell back to copying."""
    calls = []
    for st in _steps(sess, inplace._Joined):
        real = st.fn.fn
        st.fn.fn = lambda *xs, real=real: calls.append(1) or real(*xs)
    return calls


@pytest.mark.parametrize("pool_branch", [False, True])
def test_fire_module_at_batch_one_writes_in_place(pool_branch):
    mb = _fire(pool_branch=pool_branch)
    x = np.random.default_rng(1).standard_normal((1, 16, 9, 9)).astype(np.float32)
    sess, ref = _both(mb, x)
    # a pool cannot write into the output: the Concat copies its part only
    assert len(_steps(sess, inplace._Joined)) == 1
    assert len(_steps(sess, inplace._First)) == 1
    assert len(_steps(sess, inplace._Later)) == 1
    fell_back = _spy_fallbacks(sess)
    y = sess.run(None, {"x": x})[0]
    np.testing.assert_allclose(y, ref.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)
    assert not fell_back


def test_outputs_of_two_runs_are_separate_arrays():
    mb = _fire()
    rng = np.random.default_rng(2)
    x1, x2 = (rng.standard_normal((1, 16, 9, 9)).astype(np.float32) for _ in range(2))
    sess = onnxrt.InferenceSession(mb)
    y1 = sess.run(None, {"x": x1})[0]
    keep = y1.copy()
    y2 = sess.run(None, {"x": x2})[0]
    np.testing.assert_array_equal(y1, keep)
    assert not np.shares_memory(y1, y2)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("sq", [8, 64])
def test_a_batch_writes_strided_slices(threads, sq):
    """Beyond one image each conv's slice of channels is strided: the compiled conv writes
    through it (images, bands or channel blocks over the threads; im2col, or with 64
    squeeze channels the 3x3 expand's tap-by-tap products), the Concat copies nothing."""
    mb = _fire(sq=sq)
    x = np.random.default_rng(3).standard_normal((3, 16, 9, 9)).astype(np.float32)
    sess, ref = _both(mb, x, intra_op_num_threads=threads)
    fell_back = _spy_fallbacks(sess)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], ref.run(None, {"x": x})[0],
                               rtol=1e-5, atol=1e-6)
    assert not fell_back


def test_batch_size_changing_between_runs():
    """The joined array is sized per run from the producers' output shapes."""
    mb = _fire(batch="N")
    sess = onnxrt.InferenceSession(mb)
    ref = onnxruntime.InferenceSession(mb, providers=["CPUExecutionProvider"])
    for b in (1, 2, 1):
        x = np.random.default_rng(b).standard_normal((b, 16, 9, 9)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], ref.run(None, {"x": x})[0],
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["extra_reader", "expose", "axis"])
def test_no_slice_where_another_reader_would_see_it(case):
    """A producer's output read by another node, or returned to the caller, stays its own
    array (the Concat copies it; the other expand still writes in place); a Concat along
    another axis has no channel slices."""
    mb = _fire(**{case: True} if case != "axis" else {"axis": 2})
    x = np.random.default_rng(4).standard_normal((1, 16, 9, 9)).astype(np.float32)
    sess, ref = _both(mb, x)
    assert len(_steps(sess, inplace._Joined)) == (0 if case == "axis" else 1)
    assert len(_steps(sess, inplace._First)) == (0 if case == "axis" else 1)
    assert not _steps(sess, inplace._Later)
    for o, r in zip(sess.run(None, {"x": x}), ref.run(None, {"x": x})):
        np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-6)


def _dense_block(layers=3, bn=False):
    """densenet's pattern: each layer's new features join everything before them, each
    Concat extending the previous one's output, which the next layer reads too (with ``bn``
    through BatchNormalization -> Relu, fused into a per-channel affine); the block input
    is a pool's output (copied once)."""
    rng = np.random.default_rng(0)
    inits, nodes = [], [h.make_node("MaxPool", ["x"], ["c0"], kernel_shape=[2, 2],
                                    strides=[2, 2])]
    prev, ch = "c0", 8
    for k in range(1, layers + 1):
        inits += [numpy_helper.from_array((rng.standard_normal((4, ch, 3, 3)) * 0.2)
                                          .astype(np.float32), f"w{k}")]
        src = prev
        if bn:
            for name in ("g", "b", "m", "v"):
                vals = rng.standard_normal(ch).astype(np.float32) * 0.3
                inits.append(numpy_helper.from_array(
                    np.abs(vals) + 0.5 if name in "gv" else vals, f"{name}{k}"))
            nodes.append(h.make_node("BatchNormalization",
                                     [prev, f"g{k}", f"b{k}", f"m{k}", f"v{k}"], [f"bn{k}"]))
            src = f"bn{k}"
        nodes += [h.make_node("Relu", [src], [f"r{k}"]),
                  h.make_node("Conv", [f"r{k}", f"w{k}"], [f"n{k}"], pads=[1, 1, 1, 1]),
                  h.make_node("Concat", [prev, f"n{k}"], [f"c{k}"], axis=1)]
        prev, ch = f"c{k}", ch + 4
    nodes.append(h.make_node("Sigmoid", [prev], ["y"]))
    return model(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["N", 8, 10, 10])],
                 [h.make_tensor_value_info("y", T.FLOAT, None)], inits).SerializeToString()


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("bn", [False, True])
def test_dense_block_shares_one_array(batch, bn):
    """One array for the block; the per-channel affine reads its strided prefix where it
    lies beyond one image."""
    mb = _dense_block(bn=bn)
    x = np.random.default_rng(8).standard_normal((batch, 8, 10, 10)).astype(np.float32)
    sess, ref = _both(mb, x, intra_op_num_threads=2)
    assert len(_steps(sess, inplace._Joined)) == 3
    assert len(_steps(sess, inplace._First)) == 1 and len(_steps(sess, inplace._Later)) == 2
    fell_back = _spy_fallbacks(sess)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], ref.run(None, {"x": x})[0],
                               rtol=1e-5, atol=1e-6)
    assert not fell_back
    if bn:
        assert sum(getattr(st.fn, "affine", None) is not None
                   for st in sess._plan.steps) == 3


def test_float16_convs_copy_into_their_slices():
    """The compiled conv computes float16 in float32: its result is copied into the slice."""
    mb = _fire(dtype=np.float16)
    x = np.random.default_rng(5).standard_normal((1, 16, 9, 9)).astype(np.float16)
    sess, ref = _both(mb, x)
    fell_back = _spy_fallbacks(sess)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0].astype(np.float32),
                               ref.run(None, {"x": x})[0].astype(np.float32), rtol=2e-3,
                               atol=2e-3)
    assert not fell_back


def test_parallel_execution_mode():
    """ORT_PARALLEL runs the two expands on different threads: the later one still waits
    for the first (its extra input) and both write their own slices."""
    mb = _fire()
    x = np.random.default_rng(6).standard_normal((1, 16, 9, 9)).astype(np.float32)
    sess, ref = _both(mb, x, execution_mode=onnxrt.ExecutionMode.ORT_PARALLEL,
                      inter_op_num_threads=2)
    want = ref.run(None, {"x": x})[0]
    for _ in range(5):
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-5, atol=1e-6)


def test_profile_lists_the_nodes_own_inputs(tmp_path):
    """The later producer's planner-added input stays out of the trace: each Conv event
    lists X, W and B, as onnxruntime's do."""
    import json
    so = onnxrt.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "p")
    sess = onnxrt.InferenceSession(_fire(), so)
    assert _steps(sess, inplace._Later)
    sess.run(None, {"x": np.ones((1, 16, 9, 9), np.float32)})
    events = json.load(open(sess.end_profiling()))
    convs = [e for e in events if e.get("cat") == "Node" and e["args"].get("op_name") in
             ("Conv", "FusedConv") and e["name"].endswith("_kernel_time")]
    assert len(convs) == 3
    assert all(len(e["args"]["input_type_shape"]) == 3 for e in convs)


def test_enable_mem_reuse_off_keeps_every_copy():
    """onnxruntime's SessionOptions.enable_mem_reuse = False turns the in-place Concats off."""
    so = onnxrt.SessionOptions()
    so.enable_mem_reuse = False
    assert "enable_mem_reuse" not in onnxrt.SessionOptions.LENIENT
    sess = onnxrt.InferenceSession(_fire(), so)
    assert not _steps(sess, inplace._Joined) and not _steps(sess, inplace._First)
    x = np.random.default_rng(10).standard_normal((1, 16, 9, 9)).astype(np.float32)
    ref = onnxruntime.InferenceSession(_fire(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], ref.run(None, {"x": x})[0],
                               rtol=1e-5, atol=1e-6)


def test_a_concat_that_is_a_graph_output():
    """The caller gets the joined array itself (never a view of a larger one): a Concat
    that is a graph output ends its chain, and its writers still write in place."""
    m = _dense_block(layers=2)
    import onnx
    mp = onnx.load_from_string(m)
    mp.graph.output.append(h.make_tensor_value_info("c1", T.FLOAT, ["N", 12, 5, 5]))
    mp.graph.output.append(h.make_tensor_value_info("c2", T.FLOAT, ["N", 16, 5, 5]))
    mb = mp.SerializeToString()
    x = np.random.default_rng(11).standard_normal((2, 8, 10, 10)).astype(np.float32)
    sess, ref = _both(mb, x)
    assert len(_steps(sess, inplace._Joined)) == 2
    fell_back = _spy_fallbacks(sess)
    outs = sess.run(None, {"x": x})
    for o, r in zip(outs, ref.run(None, {"x": x})):
        np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-6)
    assert not fell_back
    c1, c2 = outs[1], outs[2]
    assert c1.flags.c_contiguous and c2.flags.c_contiguous
    assert not np.shares_memory(c1, c2)
