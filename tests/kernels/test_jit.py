"""The compiled (numba) depthwise Conv and pooling kernels against the NumPy path and
onnxruntime: strides, pads, dilations, ceil_mode, count_include_pad, 1-D, the N-d and
small-image fallbacks, float64/float16, thread limits and concurrent runs."""

from __future__ import annotations

import threading

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt.framework import hotpool
from onnxrt.framework.parallel import ThreadPool
from onnxrt.providers.cpu.nn import compiling, conv_jit, jit

HAVE = jit.available()
needs_numba = pytest.mark.skipif(not HAVE, reason="numba is not installed")
_TYPES = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE,
          np.float16: TensorProto.FLOAT16}


@pytest.fixture(autouse=True)
def _restore():
    yield
    jit.set_enabled(HAVE)


@pytest.fixture
def calls(monkeypatch):
    """How many times each compiled kernel ran."""
    seen: list[str] = []
    real = jit._call

    def spy(pool, key, total, spread, args, native=None):
        seen.append(key)
        return real(pool, key, total, spread, args, native)

    monkeypatch.setattr(jit, "_call", spy)
    return seen


def _model(op, xs, dt, attrs, ws=None, bias=True, opset=19):
    rng = np.random.default_rng(0)
    inits, ins = [], ["x"]
    if ws is not None:
        ins = ["x", "w"] + (["b"] if bias else [])
        inits = [numpy_helper.from_array(rng.standard_normal(ws).astype(dt), "w")]
        if bias:
            inits.append(numpy_helper.from_array(rng.standard_normal(ws[0]).astype(dt), "b"))
    node = helper.make_node(op, ins, ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", _TYPES[dt], xs)],
                          [helper.make_tensor_value_info("y", _TYPES[dt], None)], inits)
    m = helper.make_model(g, ir_version=9, opset_imports=[helper.make_opsetid("", opset)])
    return m.SerializeToString()


def _both(mb, x):
    """(compiled result, NumPy-path result)."""
    jit.set_enabled(True)
    yj = onnxrt.InferenceSession(mb).run(None, {"x": x})[0]
    jit.set_enabled(False)
    yn = onnxrt.InferenceSession(mb).run(None, {"x": x})[0]
    return yj, yn


def _ort(mb, x):
    return ort.InferenceSession(mb, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


CONVS = [  # input shape, weight shape, attributes
    ((1, 8, 20, 20), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),
    ((2, 6, 17, 23), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 4, 30, 31), (4, 1, 5, 5), {"group": 4, "pads": [2, 1, 0, 2], "strides": [3, 2]}),
    ((1, 4, 24, 25), (4, 1, 3, 3), {"group": 4, "pads": [2, 2, 2, 2], "dilations": [2, 2]}),
    ((1, 4, 26, 26), (12, 1, 3, 2), {"group": 4, "dilations": [1, 3], "strides": [1, 2]}),
    ((1, 5, 21, 27), (5, 1, 3, 3), {"group": 5, "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 5, 21, 19), (5, 1, 4, 4), {"group": 5, "auto_pad": "SAME_LOWER"}),
    ((1, 3, 16, 40), (3, 1, 1, 7), {"group": 3, "pads": [0, 3, 0, 3]}),
    ((2, 6, 50), (6, 1, 5), {"group": 6, "pads": [2, 2], "strides": [2]}),           # 1-D
    ((1, 8, 16, 16), (8, 1, 3, 3), {"group": 8}),                                      # no pads
    # 3x3 stride 1 padded by one, from 8 wide: the flat-plane kernel (_dw3_plane)
    ((2, 4, 8, 8), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    ((1, 3, 3, 13), (6, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),      # 2 per channel
    ((1, 6, 14, 14), (6, 1, 3, 3), {"group": 6, "auto_pad": "SAME_UPPER"}),
    ((1, 2, 28, 9), (2, 1, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    # narrow outputs: the channels-last loops
    ((1, 16, 7, 7), (16, 1, 3, 3), {"group": 16, "pads": [1, 1, 1, 1]}),
    ((2, 6, 17, 23), (12, 1, 3, 3), {"group": 6, "pads": [1, 0, 2, 1], "strides": [2, 2]}),
    ((1, 5, 15, 16), (5, 1, 3, 2), {"group": 5, "dilations": [2, 3], "pads": [2, 2, 2, 2]}),
    ((1, 5, 9, 9), (5, 1, 3, 3), {"group": 5, "auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    ((2, 6, 20), (6, 1, 3), {"group": 6, "pads": [1, 1]}),                            # 1-D
]


@needs_numba
@pytest.mark.parametrize("xs,ws,attrs", CONVS)
def test_depthwise_conv_matches_numpy_and_ort(xs, ws, attrs, calls):
    mb = _model("Conv", xs, np.float32, attrs, ws)
    x = np.random.default_rng(1).standard_normal(xs).astype(np.float32)
    yj, yn = _both(mb, x)
    assert calls == ["dwcl" if yj.shape[-1] < conv_jit._MIN_OUT_W else "conv"]
    np.testing.assert_array_equal(yj, yn)      # same products, same order
    np.testing.assert_allclose(yj, _ort(mb, x), rtol=1e-5, atol=1e-5)


@needs_numba
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_depthwise_3x3_planes_nan_inf_and_signed_zeros(dt, calls):
    """The flat-plane kernel keeps the padded path's sums exactly: NaN and infinities at
    the corners, edges and inside, zeros of both signs, no bias."""
    xs = (1, 3, 9, 11)
    x = np.random.default_rng(12).standard_normal(xs).astype(dt)
    x[0, 0, 0, 0] = np.nan
    x[0, 0, 4, 10] = np.inf
    x[0, 1, 8, 5] = -np.inf
    x[0, 1, 3, 3] = np.nan
    x[0, 2] = -0.0
    mb = _model("Conv", xs, dt, {"group": 3, "pads": [1, 1, 1, 1]}, (3, 1, 3, 3), bias=False)
    yj, yn = _both(mb, x)
    assert calls == ["conv"]
    np.testing.assert_array_equal(yj, yn)
    np.testing.assert_array_equal(np.signbit(yj[0, 2]), np.signbit(yn[0, 2]))


@needs_numba
def test_depthwise_conv_without_bias_float64_float16(calls):
    xs, ws, attrs = (2, 6, 19, 28), (6, 1, 3, 3), {"group": 6, "pads": [1, 0, 1, 2]}
    for dt in (np.float64, np.float16):
        mb = _model("Conv", xs, dt, attrs, ws, bias=False)
        x = np.random.default_rng(2).standard_normal(xs).astype(dt)
        yj, yn = _both(mb, x)
        assert yj.dtype == dt
        np.testing.assert_array_equal(yj, yn)
    assert calls == ["conv", "conv"]
    x = np.random.default_rng(2).standard_normal(xs).astype(np.float64)
    mb = _model("Conv", xs, np.float64, attrs, ws, bias=False)
    w = np.random.default_rng(0).standard_normal(ws)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (0, 2)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    expect = np.einsum("nchwij,cij->nchw", win, w[:, 0])
    jit.set_enabled(True)
    np.testing.assert_allclose(onnxrt.InferenceSession(mb).run(None, {"x": x})[0], expect,
                               rtol=1e-12)


@needs_numba
@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 8, 10, 10), (8, 2, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),   # 2 per group
    ((1, 4, 6, 7, 8), (4, 1, 3, 3, 3), {"group": 4, "pads": [1] * 6}),   # 3-D
])
def test_conv_fallbacks_to_numpy(xs, ws, attrs, calls):
    mb = _model("Conv", xs, np.float32, attrs, ws)
    x = np.random.default_rng(3).standard_normal(xs).astype(np.float32)
    yj, yn = _both(mb, x)
    assert calls == []
    # both sessions take the NumPy path, but through BLAS, whose sums depend on the library,
    # the CPU and the thread split (MKL on AMD differs by ~2e-6 between two calls)
    np.testing.assert_allclose(yj, yn, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(yj, _ort(mb, x), rtol=1e-5, atol=1e-5)


@needs_numba
def test_conv_channel_mismatch_is_an_error():
    mb = _model("Conv", ["N", "C", "H", "W"], np.float32, {"group": 8, "pads": [1, 1, 1, 1]},
                (8, 1, 3, 3))
    jit.set_enabled(True)
    s = onnxrt.InferenceSession(mb)
    with pytest.raises(Exception, match="channels|match"):
        s.run(None, {"x": np.zeros((1, 4, 20, 20), np.float32)})


POOLS = [  # op, input shape, attributes
    ("MaxPool", (1, 3, 20, 21), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ("MaxPool", (2, 3, 20, 21), {"kernel_shape": [3, 3], "strides": [2, 2]}),
    ("MaxPool", (1, 3, 20, 21), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("MaxPool", (1, 3, 19, 22), {"kernel_shape": [3, 2], "strides": [2, 1],
                                 "pads": [1, 0, 1, 1], "dilations": [2, 2]}),
    ("MaxPool", (1, 2, 17, 17), {"kernel_shape": [5, 5], "auto_pad": "SAME_UPPER",
                                 "strides": [3, 3]}),
    ("MaxPool", (1, 2, 30), {"kernel_shape": [4], "strides": [2], "pads": [1, 2]}),   # 1-D
    ("AveragePool", (1, 3, 20, 21), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ("AveragePool", (1, 3, 20, 21), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                     "count_include_pad": 1}),
    ("AveragePool", (2, 3, 23, 20), {"kernel_shape": [3, 3], "strides": [2, 2],
                                     "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    ("AveragePool", (1, 3, 23, 20), {"kernel_shape": [3, 3], "strides": [2, 2],
                                     "pads": [0, 1, 1, 0], "ceil_mode": 1,
                                     "count_include_pad": 1}),
    ("AveragePool", (1, 2, 20, 20), {"kernel_shape": [2, 3], "auto_pad": "SAME_LOWER"}),
    ("AveragePool", (1, 2, 20, 20), {"kernel_shape": [2, 3], "dilations": [2, 1],
                                     "pads": [1, 1, 0, 2], "strides": [1, 2]}),
    ("AveragePool", (1, 2, 31), {"kernel_shape": [3], "pads": [1, 1], "count_include_pad": 1}),
]


@needs_numba
@pytest.mark.parametrize("op,xs,attrs", POOLS)
def test_pool_matches_numpy_and_ort(op, xs, attrs, calls):
    mb = _model(op, xs, np.float32, attrs)
    x = np.random.default_rng(4).standard_normal(xs).astype(np.float32)
    yj, yn = _both(mb, x)
    strided = any(v != 1 for v in attrs.get("strides", [1]))
    # stride 1: all planes at once (spool); else row by row (pool)
    assert calls == (["pool"] if strided else ["spool"])
    if op == "MaxPool":
        np.testing.assert_array_equal(yj, yn)
    else:
        np.testing.assert_allclose(yj, yn, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(yj, _ort(mb, x), rtol=1e-5, atol=1e-6)


@needs_numba
@pytest.mark.parametrize("hw", [(1, 8), (8, 8), (1, 1), (7, 1), (3, 5), (13, 13)])
@pytest.mark.parametrize("op,include", [("MaxPool", 0), ("AveragePool", 0),
                                        ("AveragePool", 1)])
def test_pool_3x3_same_size_planes(hw, op, include, calls):
    """The 3x3 stride-1 pool padded by one pixel (_pool3_plane, from 8 wide: flat loops over
    each plane, the first and last row and column apart; narrower planes in blocks), down
    to one-pixel planes; NaN and infinities in max pooling as NumPy's path gives them."""
    xs = (2, 3) + hw
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    if op == "AveragePool":
        attrs["count_include_pad"] = include
    x = np.random.default_rng(9).standard_normal(xs).astype(np.float32)
    if op == "MaxPool":
        x[0, 0, 0, 0] = np.nan
        x[1, 2, -1, -1] = np.inf
        x[1, 1] = -np.inf
    mb = _model(op, xs, np.float32, attrs)
    yj, yn = _both(mb, x)
    assert calls == ["spool"]
    if op == "MaxPool":
        np.testing.assert_array_equal(yj, yn)
    else:
        np.testing.assert_allclose(yj, yn, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(yj, _ort(mb, x), rtol=1e-5, atol=1e-6)


@needs_numba
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_strided_maxpool_nan_inf_and_padding(dt, calls):
    """NaN wins like np.maximum, -inf and +inf pass through, windows at the padded edges."""
    xs = (2, 3, 13, 12)
    x = np.random.default_rng(6).standard_normal(xs).astype(dt)
    x[0, 0, 4, 4] = np.nan
    x[0, 1, 0, 0] = np.nan
    x[1, 2, 12, 11] = np.inf
    x[1, 1] = -np.inf
    for attrs in ({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
                  {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
                  {"kernel_shape": [4, 2], "strides": [3, 2], "pads": [2, 0, 1, 1]},
                  {"kernel_shape": [3, 3], "strides": [2, 2], "dilations": [2, 2]}):
        mb = _model("MaxPool", xs, dt, attrs)
        yj, yn = _both(mb, x)
        np.testing.assert_array_equal(yj, yn)
    assert calls == ["pool"] * 4


@needs_numba
def test_pool_float64_nan_and_fallbacks(calls):
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    x = np.random.default_rng(5).standard_normal((1, 2, 9, 9))
    x[0, 0, 4, 4] = np.nan
    for op in ("MaxPool", "AveragePool"):
        mb = _model(op, (1, 2, 9, 9), np.float64, attrs)
        yj, yn = _both(mb, x)
        np.testing.assert_allclose(yj, yn, rtol=1e-12, equal_nan=True)
        assert np.isnan(yj[0, 0, 3:6, 3:6]).all() and not np.isnan(yj[0, 1]).any()
    assert calls == ["spool", "spool"]
    calls.clear()
    x32 = x.astype(np.float32)
    for op, xs, at in [("MaxPool", (1, 2, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
                       ("MaxPool", (1, 2, 6, 6, 6), {"kernel_shape": [3, 3, 3]}),
                       ("AveragePool", (1, 2, 6, 6, 6), {"kernel_shape": [3, 3, 3]})]:
        xin = np.random.default_rng(6).standard_normal(xs).astype(np.float32)
        mb = _model(op, xs, np.float32, at)
        yj, yn = _both(mb, xin)
        np.testing.assert_array_equal(yj, yn)
        np.testing.assert_allclose(yj, _ort(mb, xin), rtol=1e-5, atol=1e-6)
    assert calls == []     # non-overlapping windows and 3-D take the NumPy path
    # the Indices output takes the NumPy path too
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, (1, 2, 9, 9))],
                          [helper.make_tensor_value_info("y", 1, None),
                           helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    mb = helper.make_model(g, ir_version=9, opset_imports=[helper.make_opsetid("", 12)])
    mb = mb.SerializeToString()
    jit.set_enabled(True)
    # without the NaN: onnxruntime's Indices path skips NaN while its plain 2-D path
    # propagates it; onnxrt propagates it on every path (tests/fuzz/test_regressions.py)
    xi = np.where(np.isnan(x32), np.float32(0.25), x32)
    y, i = onnxrt.InferenceSession(mb).run(None, {"x": xi})
    ye, ie = ort.InferenceSession(mb, providers=["CPUExecutionProvider"]).run(None, {"x": xi})
    assert calls == []
    np.testing.assert_array_equal(i, ie)
    # with it: the windows holding it give NaN and point at it (flat index 4 * 9 + 4)
    y, i = onnxrt.InferenceSession(mb).run(None, {"x": x32})
    assert np.isnan(y[0, 0, 2:5, 2:5]).all() and (i[0, 0, 2:5, 2:5] == 40).all()


@needs_numba
def test_split_over_threads_and_concurrent_runs(monkeypatch, calls):
    """Big enough calls split their planes over the session's threads (its ThreadPool):
    the same results as one thread, also with several threads running one session."""
    splits = []
    real_pf = ThreadPool.parallel_for

    def spy_pf(self, n, fn):
        splits.append((self.budget, n))
        return real_pf(self, n, fn)

    monkeypatch.setattr(ThreadPool, "parallel_for", spy_pf)
    real_native = hotpool.HotPool.run_native

    def spy_native(self, kind, parts, own):       # the depthwise planes' native items
        splits.append((self.n + 1, len(parts)))
        return real_native(self, kind, parts, own)

    monkeypatch.setattr(hotpool.HotPool, "run_native", spy_native)
    attrs = {"group": 32, "pads": [1, 1, 1, 1]}
    cases = [("Conv", (2, 32, 48, 48), attrs, (32, 1, 3, 3)),
             ("Conv", (64, 32, 9, 9), attrs, (32, 1, 3, 3)),         # channels-last, narrow
             ("MaxPool", (2, 32, 48, 48), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, None),
             ("AveragePool", (2, 32, 96, 96), {"kernel_shape": [3, 3], "strides": [2, 2]},
              None)]
    jit.set_enabled(True)
    for op, xs, at, ws in cases:
        mb = _model(op, xs, np.float32, at, ws)
        x = np.random.default_rng(7).standard_normal(xs).astype(np.float32)
        outs = {}
        for n in (1, 2):
            so = onnxrt.SessionOptions()
            so.intra_op_num_threads = n
            splits.clear()
            outs[n] = onnxrt.InferenceSession(mb, so).run(None, {"x": x})[0]
            assert [t for t, _ in splits] == ([2] if n == 2 else []), (op, xs, splits)
        np.testing.assert_array_equal(outs[1], outs[2])
        np.testing.assert_allclose(outs[2], _ort(mb, x), rtol=1e-5, atol=1e-5)
    op, xs, at, ws = cases[0]
    mb = _model(op, xs, np.float32, at, ws)
    x = np.random.default_rng(8).standard_normal(xs).astype(np.float32)
    s = onnxrt.InferenceSession(mb)
    want = s.run(None, {"x": x})[0]
    out: list[np.ndarray] = []

    def work():
        for _ in range(5):
            out.append(s.run(None, {"x": x})[0])

    ts = [threading.Thread(target=work) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(out) == 15
    for y in out:
        np.testing.assert_array_equal(y, want)


def test_numpy_path_without_numba(monkeypatch, calls):
    """Without numba (or with ONNXRT_JIT=0) nothing is compiled and results are right."""
    monkeypatch.setattr(compiling, "_HAVE", False)
    jit.set_enabled(True)
    assert not jit.enabled()
    xs, ws, attrs = CONVS[1]
    mb = _model("Conv", xs, np.float32, attrs, ws)
    x = np.random.default_rng(8).standard_normal(xs).astype(np.float32)
    np.testing.assert_allclose(onnxrt.InferenceSession(mb).run(None, {"x": x})[0],
                               _ort(mb, x), rtol=1e-5, atol=1e-5)
    op, xs, attrs = POOLS[8]
    mb = _model(op, xs, np.float32, attrs)
    x = np.random.default_rng(9).standard_normal(xs).astype(np.float32)
    np.testing.assert_allclose(onnxrt.InferenceSession(mb).run(None, {"x": x})[0],
                               _ort(mb, x), rtol=1e-5, atol=1e-6)
    assert calls == []


def test_no_writable_cache_compiles_without_it():
    class FakeNumba:
        def njit(self, cache=False, **kw):
            if cache:
                raise RuntimeError("cannot cache function: no locator available")
            return lambda f: ("compiled", f, kw)

    assert jit._njit(FakeNumba(), len, fastmath=False) == (
        "compiled", len, {"nogil": True, "fastmath": False, "error_model": "numpy"})


def test_a_run_compiles_nothing():
    """Every compiled kernel a run can take, the native serving loop's packing included, is
    compiled (or loaded from the cache) when the session is made: a dense and a depthwise
    conv, both pools and a weight product split over two threads add no signature."""
    rng = np.random.default_rng(12)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("w", (16, 16, 3, 3)), ("dw", (16, 1, 3, 3)), ("m", (16 * 100, 64)))]
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], strides=[2, 2]),
             helper.make_node("Conv", ["p", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["c", "dw"], ["d"], pads=[1, 1, 1, 1], group=16),
             helper.make_node("AveragePool", ["d"], ["q"], kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Flatten", ["q"], ["f"]),
             helper.make_node("MatMul", ["f", "m"], ["y"])]
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16, 21, 21])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    mb = helper.make_model(g, ir_version=8,
                           opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    jit.set_enabled(True)
    so = onnxrt.SessionOptions()
    so.intra_op_num_threads = 2
    s = onnxrt.InferenceSession(mb, so)

    def signatures():
        return {k: len(d.signatures) for k, d in jit._K.items() if hasattr(d, "signatures")}

    before = signatures()
    x = rng.standard_normal((8, 16, 21, 21)).astype(np.float32)
    with pytest.MonkeyPatch.context() as mp:     # every kernel big enough to be split
        mp.setattr(jit, "_PAR_MIN_WORK", 0)
        mp.setattr(conv_jit, "_GEMM_PAR_MIN", 0)
        mp.setattr(conv_jit, "_CHANNEL_SPLIT_MIN", 0)
        mp.setattr(jit, "_MM_SPLIT_MIN", 0)
        y = s.run(None, {"x": x})[0]
    np.testing.assert_allclose(y, _ort(mb, x), rtol=1e-4, atol=1e-3)
    assert signatures() == before
