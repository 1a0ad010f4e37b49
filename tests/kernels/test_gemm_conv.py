"""The compiled dense and grouped Conv (im2col, BLAS product and epilogue in one numba call
per thread, nn/jit.py GemmConv) against onnxruntime: strides, pads, dilations, auto_pad,
1-D, 1x1 direct, groups, bias, FusedConv's Z and activations, float64/float16, im2col and
the tap-by-tap products, every way of spreading the work (one thread; images, bands of rows
or blocks of channels over threads, natively or as Python items; BLAS's own threads), and
the NumPy path it falls back to."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt.framework.parallel import ThreadPool
from onnxrt.providers.cpu import blas
from onnxrt.providers.cpu.nn import conv_jit, jit
from onnxrt.providers.cpu.nn.native import Kind

needs_numba = pytest.mark.skipif(not jit.available(), reason="numba is not installed")
_TYPES = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE,
          np.float16: TensorProto.FLOAT16}


def _conv_model(xs, ws, attrs, dt=np.float32, bias=True, act=None, params=None, z=False):
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal(ws) * 0.3).astype(dt), "w")]
    ins = ["x", "w"]
    if bias or z:
        inits.append(numpy_helper.from_array(rng.standard_normal(ws[0]).astype(dt), "b"))
        ins.append("b")
    vis = [helper.make_tensor_value_info("x", _TYPES[dt], xs)]
    opsets = [helper.make_opsetid("", 17)]
    if act or z:
        kw = dict(attrs, activation=act) if act else dict(attrs)
        if params:
            kw["activation_params"] = params
        if z:
            ins.append("z")
            vis.append(helper.make_tensor_value_info("z", _TYPES[dt], None))
        node = helper.make_node("FusedConv", ins, ["y"], domain="com.microsoft", **kw)
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    else:
        node = helper.make_node("Conv", ins, ["y"], **attrs)
    g = helper.make_graph([node], "g", vis, [helper.make_tensor_value_info("y", _TYPES[dt],
                                                                          None)], inits)
    return helper.make_model(g, ir_version=8, opset_imports=opsets).SerializeToString()


def _ort(mb, feeds):
    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxruntime.InferenceSession(mb, so, providers=["CPUExecutionProvider"]).run(
        None, feeds)[0]


def _ours(mb, feeds, threads=0):
    so = onnxrt.SessionOptions()
    so.intra_op_num_threads = threads
    s = onnxrt.InferenceSession(mb, so)
    conv = s._plan.steps[0].fn
    conv = getattr(conv, "conv", conv)          # FusedConv wraps a Conv
    return s.run(None, feeds)[0], conv


CASES = [  # input shape, weight shape, attributes
    ((1, 8, 20, 20), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 6, 17, 23), (5, 6, 3, 3), {"pads": [1, 0, 2, 1], "strides": [2, 2]}),
    ((1, 4, 30, 31), (7, 4, 5, 5), {"pads": [2, 1, 0, 2], "strides": [3, 2]}),
    ((3, 4, 24, 25), (8, 4, 3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2]}),
    ((1, 4, 26, 26), (12, 4, 3, 2), {"dilations": [1, 3], "strides": [1, 2]}),
    ((1, 5, 21, 27), (6, 5, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 5, 21, 19), (6, 5, 4, 4), {"auto_pad": "SAME_LOWER"}),
    ((2, 16, 9, 9), (32, 16, 1, 1), {}),                                  # 1x1: direct
    ((2, 16, 9, 10), (32, 16, 1, 1), {"strides": [2, 2]}),                # 1x1 strided
    ((1, 8, 9, 9), (4, 8, 1, 1), {"pads": [1, 1, 1, 1]}),                 # 1x1 padded
    ((1, 3, 40, 40), (8, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    ((2, 6, 50), (4, 6, 5), {"pads": [2, 2], "strides": [2]}),            # 1-D
    ((1, 8, 2, 2), (4, 8, 3, 3), {"pads": [2, 2, 2, 2]}),                 # pad > input
    ((2, 6, 9, 9), (9, 2, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),     # grouped
    ((1, 12, 8, 8), (24, 4, 1, 1), {"group": 3}),                         # grouped 1x1
    ((3, 8, 11, 10), (8, 4, 3, 2), {"group": 2, "strides": [2, 1], "dilations": [1, 2]}),
]


@needs_numba
@pytest.mark.parametrize("xs,ws,attrs", CASES)
@pytest.mark.parametrize("spread", ["one", "split"])
@pytest.mark.parametrize("form", ["im2col", "taps"])
def test_dense_conv_matches_onnxruntime(xs, ws, attrs, spread, form, monkeypatch):
    if spread != "one":         # small shapes: spread them anyway
        monkeypatch.setattr(conv_jit, "_GEMM_PAR_MIN", 0)
        monkeypatch.setattr(conv_jit, "_CHANNEL_SPLIT_MIN", 0)
    # the compiled conv even for the small 1x1 convs that take one matmul (conv._tiny_1x1)
    from onnxrt.providers.cpu.nn import conv as conv_mod
    monkeypatch.setattr(conv_mod, "_TINY_MACS", 0)
    monkeypatch.setattr(conv_mod, "_TINY_COLS_MACS", 0)
    # the tap-by-tap products (stride 1, dense) for every channel count, or never
    monkeypatch.setattr(conv_jit, "_TAPS_MIN_C", 1 if form == "taps" else 1 << 30)
    monkeypatch.setattr(conv_jit, "_TAPS_MAX_M", 1 << 30)
    used = []
    real = jit._K["taps_conv"] if jit._load() else None
    if real is not None:
        # calls on real outputs (the warm-up call at session creation has one pixel)
        monkeypatch.setitem(jit._K, "taps_conv",
                            lambda *a: (used.append(a[3].shape[2] > 1), real(*a)))
    x = np.random.default_rng(1).standard_normal(xs).astype(np.float32)
    for bias in (True, False):
        mb = _conv_model(xs, ws, attrs, bias=bias)
        y, conv = _ours(mb, {"x": x}, 1 if spread == "one" else 2)
        assert conv._gemm is not None
        np.testing.assert_allclose(y, _ort(mb, {"x": x}), rtol=1e-4, atol=1e-5)
        modes = {mode for _, mode in conv._gemm._plans.values()}
        # one thread, or the session's: images, bands of rows or blocks of channels over
        # them, never BLAS's own threads
        assert modes == ({"one"} if spread == "one" else {"split"})
    stride1 = all(v == 1 for v in attrs.get("strides", [1])) and attrs.get("group", 1) == 1
    one_tap = all(k == 1 for k in ws[2:])
    assert any(used) == (form == "taps" and stride1 and not one_tap), used


@needs_numba
@pytest.mark.parametrize("act,params", [(None, None), ("Relu", None), ("LeakyRelu", [0.2]),
                                        ("Clip", [-0.3, 0.4])])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("taps", [False, True])
def test_fused_conv_epilogue_with_z(act, params, threads, taps, monkeypatch):
    monkeypatch.setattr(conv_jit, "_GEMM_PAR_MIN", 0)
    monkeypatch.setattr(conv_jit, "_CHANNEL_SPLIT_MIN", 0)
    monkeypatch.setattr(conv_jit, "_TAPS_MIN_C", 1 if taps else 1 << 30)
    from onnxrt.providers.cpu.nn import conv as conv_mod
    monkeypatch.setattr(conv_mod, "_TINY_COLS_MACS", 0)     # the compiled conv, small as it is
    xs, ws, attrs = (2, 6, 11, 12), (10, 6, 3, 3), {"pads": [1, 1, 1, 1]}
    rng = np.random.default_rng(3)
    x = rng.standard_normal(xs).astype(np.float32)
    z = rng.standard_normal((2, 10, 11, 12)).astype(np.float32)
    for with_z in (False, True):
        mb = _conv_model(xs, ws, attrs, act=act, params=params, z=with_z)
        feeds = {"x": x, "z": z} if with_z else {"x": x}
        if act is None and not with_z:
            continue
        y, conv = _ours(mb, feeds, threads)
        assert conv._gemm is not None and conv._gemm._plans
        assert (conv._gemm.wt is not None) == taps
        np.testing.assert_allclose(y, _ort(mb, feeds), rtol=1e-4, atol=1e-5)


def _numpy_conv(mb, x):
    """The reference: the model's Conv (pads [1, 1, 1, 1], stride 1) as a NumPy formula over
    a window view, in float64."""
    import onnx

    m = onnx.load_from_string(mb)
    w, b = (numpy_helper.to_array(t).astype(np.float64) for t in m.graph.initializer)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], axis=(2, 3))
    return np.einsum("nchwij,mcij->nmhw", win, w) + b.reshape(1, -1, 1, 1)


@needs_numba
def test_float64_float16_and_broadcast_z_fall_back_right():
    xs, ws, attrs = (2, 4, 9, 9), (6, 4, 3, 3), {"pads": [1, 1, 1, 1]}
    x = np.random.default_rng(4).standard_normal(xs)
    for dt, tol in ((np.float64, 1e-12), (np.float16, 2e-2)):
        mb = _conv_model(xs, ws, attrs, dt=dt)
        xd = x.astype(dt)
        y, conv = _ours(mb, {"x": xd})
        assert y.dtype == dt and conv._gemm is not None
        np.testing.assert_allclose(y, _numpy_conv(mb, xd), rtol=tol, atol=tol)
    # a Z that broadcasts is not the output's shape: the NumPy path adds it
    mb = _conv_model(xs, ws, attrs, act="Relu", z=True)
    x = np.random.default_rng(5).standard_normal(xs).astype(np.float32)
    zb = np.random.default_rng(6).standard_normal((1, 6, 1, 1)).astype(np.float32)
    y, conv = _ours(mb, {"x": x, "z": zb})
    assert not conv._gemm._plans
    np.testing.assert_allclose(y, np.maximum(_ort(_conv_model(xs, ws, attrs), {"x": x}) + zb,
                                             0), rtol=1e-4, atol=1e-5)


@needs_numba
def test_wrong_channels_fail_cleanly_and_session_keeps_working():
    mb = _conv_model(["N", "C", "H", "W"], (6, 4, 3, 3), {"pads": [1, 1, 1, 1]})
    s = onnxrt.InferenceSession(mb)
    with pytest.raises(Exception, match="channels"):
        s.run(None, {"x": np.zeros((1, 5, 8, 8), np.float32)})
    x = np.random.default_rng(7).standard_normal((1, 4, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], _ort(mb, {"x": x}), rtol=1e-4,
                               atol=1e-5)


def test_without_blas_symbols_the_numpy_path_runs(monkeypatch):
    monkeypatch.setattr(blas, "gemm", lambda dt: None)
    xs, ws, attrs = CASES[1]
    mb = _conv_model(xs, ws, attrs)
    x = np.random.default_rng(8).standard_normal(xs).astype(np.float32)
    y, conv = _ours(mb, {"x": x})
    assert conv._gemm is None
    np.testing.assert_allclose(y, _ort(mb, {"x": x}), rtol=1e-4, atol=1e-5)


@needs_numba
@pytest.mark.parametrize("native", [True, False])
def test_split_runs_on_several_threads(native, monkeypatch):
    """The images of a batch go to different threads: posted to the hot pool's native
    serving loop (no Python on the worker), or as Python items where it has none."""
    import threading

    from onnxrt.framework import hotpool

    probe = ThreadPool(2)
    pool = probe.hot_pool()
    probe.close()
    if pool is None or not pool.native:
        pytest.skip("no hot pool with a native serving loop here (numba or BLAS missing)")
    monkeypatch.setattr(conv_jit, "_GEMM_PAR_MIN", 0)
    monkeypatch.setattr(conv_jit, "_CHANNEL_SPLIT_MIN", 0)
    if not native:      # the sessions' own pools: no native serving loop
        monkeypatch.setattr(hotpool, "_NATIVE", [])
    seen: set[int] = set()
    posted = []
    real, real_native = ThreadPool.parallel_for, hotpool.HotPool.run_native

    def spy(self, n, fn):
        started = threading.Barrier(n, timeout=5)

        def item(k):
            seen.add(threading.get_ident())
            try:    # the caller's item waits for the worker's to start: a worker that is
                started.wait()      # there claims its item before the caller takes it back
            except threading.BrokenBarrierError:
                pass
            fn(k)
        real(self, n, item)

    def spy_native(self, kind, parts, own):
        before = int(self.ctl[0, hotpool.DONE])
        taken = []
        real_take = self._take_back
        self._take_back = lambda posted_n: taken.extend(real_take(posted_n)) or taken
        try:
            real_native(self, kind, parts, own)
        finally:
            del self._take_back
        posted.append((kind, parts, int(self.ctl[0, hotpool.DONE]) - before, bool(taken)))

    monkeypatch.setattr(ThreadPool, "parallel_for", spy)
    monkeypatch.setattr(hotpool.HotPool, "run_native", spy_native)
    xs, ws, attrs = (8, 8, 30, 30), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}
    mb = _conv_model(xs, ws, attrs)
    x = np.random.default_rng(9).standard_normal(xs).astype(np.float32)
    so = onnxrt.SessionOptions()
    so.intra_op_num_threads = 2
    sess = onnxrt.InferenceSession(mb, so)
    # the session's first split starts its workers, which may not run in time for it; a
    # loaded machine may not run a worker in time either: then its part is taken back by
    # the caller (framework/hotpool.py); again
    for _ in range(6):
        posted.clear()
        seen.clear()
        y = sess.run(None, {"x": x})[0]
        np.testing.assert_allclose(y, _ort(mb, {"x": x}), rtol=1e-4, atol=1e-5)
        if not native or not posted[0][3]:
            break
    if native:      # the second half of the images ran on worker 0, which marked it done
        assert posted == [(Kind.GEMM_CONV, [(0, 4), (4, 8)], 1, False)] and not seen
    else:
        assert len(seen) == 2 and not posted


@needs_numba
@pytest.mark.parametrize("xs,ws,attrs,split", [
    ((1, 8, 40, 40), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}, "rows"),
    ((1, 64, 7, 7), (48, 64, 3, 3), {"pads": [1, 1, 1, 1]}, "channels"),     # taps
    ((1, 24, 9, 9), (40, 24, 3, 3), {"strides": [2, 2]}, "channels"),
    ((1, 32, 6, 6), (72, 32, 1, 1), {}, "channels"),                         # 1x1 direct
    ((1, 16, 30, 30), (8, 16, 1, 1), {}, "rows"),
    ((3, 16, 8, 8), (40, 16, 3, 3), {"pads": [1, 1, 1, 1]}, "channels"),     # 3 images
])
def test_one_image_splits_in_bands_or_channel_blocks(xs, ws, attrs, split, monkeypatch):
    """Fewer images than threads: bands of rows while each thread keeps _MIN_SPLIT_COLS
    output columns, else blocks of output channels; either way every output once."""
    monkeypatch.setattr(conv_jit, "_GEMM_PAR_MIN", 0)
    monkeypatch.setattr(conv_jit, "_CHANNEL_SPLIT_MIN", 0)
    monkeypatch.setattr(conv_jit, "_TAPS_MIN_C", 64)
    from onnxrt.providers.cpu.nn import conv as conv_mod
    monkeypatch.setattr(conv_mod, "_TINY_MACS", 0)      # the compiled conv for 1x1 too
    monkeypatch.setattr(conv_mod, "_TINY_COLS_MACS", 0)
    x = np.random.default_rng(10).standard_normal(xs).astype(np.float32)
    mb = _conv_model(xs, ws, attrs, act="Relu")
    y, conv = _ours(mb, {"x": x}, 2)
    np.testing.assert_allclose(y, np.maximum(_ort(_conv_model(xs, ws, attrs), {"x": x}), 0),
                               rtol=1e-4, atol=1e-5)
    (items, mode), = conv._gemm._plans.values()
    assert mode == "split"
    if split == "rows":
        assert len({(r0, r1) for _, r0, r1, _, _ in items}) >= 2
        assert {(m0, m1) for *_, m0, m1 in items} == {(0, ws[0])}
    else:
        assert len({(m0, m1) for *_, m0, m1 in items}) == 2
    # the items tile the output: every (image, row, channel) exactly once
    cover = np.zeros((xs[0], y.shape[2], ws[0]), int)
    for i, r0, r1, m0, m1 in items:
        cover[i, r0:r1, m0:m1] += 1
    assert (cover == 1).all()


TINY = [  # small dense convs: a streaming detector's over one chunk, and odd geometries
    ((1, 1, 640), (258, 1, 256), {"strides": [128]}),                     # an STFT as a conv
    ((1, 129, 4), (128, 129, 3), {"pads": [1, 1]}),
    ((1, 128, 4), (64, 128, 3), {"pads": [1, 1], "strides": [2]}),
    ((2, 6, 11), (5, 6, 3), {"pads": [2, 1], "dilations": [2]}),
    ((1, 4, 9), (3, 4, 4), {"auto_pad": "SAME_UPPER", "strides": [2]}),
    ((1, 4, 6, 7), (5, 4, 3, 2), {"pads": [1, 0, 2, 1], "strides": [2, 1]}),     # 2-D
    ((2, 3, 5, 5), (4, 3, 3, 3), {"dilations": [2, 1]}),
]


@needs_numba
@pytest.mark.parametrize("xs,ws,attrs", TINY)
@pytest.mark.parametrize("epi", ["none", "bias", "relu", "z"])
def test_tiny_dense_conv_matches_onnxruntime(xs, ws, attrs, epi, monkeypatch):
    """Small convs take one gathered column block and one matmul (conv._tiny_cols), with
    the bias, the residual and the activation after; the compiled kernels never run."""
    from onnxrt.providers.cpu.nn import conv as conv_mod
    calls = []
    real = conv_mod.Conv._tiny_cols

    def spy(self, *a):
        y = real(self, *a)
        calls.append(y is not None)
        return y

    monkeypatch.setattr(conv_mod.Conv, "_tiny_cols", spy)
    x = np.random.default_rng(3).standard_normal(xs).astype(np.float32)
    plain = _conv_model(xs, ws, attrs, bias=epi != "none")
    want = _ort(plain, {"x": x})
    feeds = {"x": x}
    if epi == "relu":
        mb = _conv_model(xs, ws, attrs, act="Relu")
        want = np.maximum(want, 0)
    elif epi == "z":
        z = np.random.default_rng(4).standard_normal(want.shape).astype(np.float32)
        mb = _conv_model(xs, ws, attrs, z=True)
        feeds["z"] = z
        want = want + z
    else:
        mb = plain
    y, conv = _ours(mb, feeds, 2)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    assert calls and all(calls)


@needs_numba
@pytest.mark.parametrize("xs,ws,mode", [
    ((1, 64, 49, 10), (64, 64, 1, 1), "one"),     # a keyword spotter's 1x1: 4.0M flops
    ((1, 96, 7, 7), (576, 96, 1, 1), "one"),      # MobileNetV3's expansion on 7x7: 5.4M
    ((1, 256, 14, 14), (256, 256, 1, 1), "channels"),     # 25.7M: worth two threads
    ((1, 16, 56, 56), (72, 16, 1, 1), "rows"),    # 7.2M, bands keep >= 256 columns each
])
def test_channel_block_split_only_for_large_convs(xs, ws, mode, monkeypatch):
    """One image whose rows cannot be shared in bands of _MIN_SPLIT_COLS columns is split
    in blocks of output channels only from _CHANNEL_SPLIT_MIN flops; below, one thread runs
    it (its threads' thin products over the same few columns ran slower than one). The
    output matches onnxruntime either way."""
    from onnxrt.providers.cpu.nn import conv as conv_mod
    monkeypatch.setattr(conv_mod, "_TINY_MACS", 0)      # the compiled conv for 1x1 too
    monkeypatch.setattr(conv_mod, "_TINY_COLS_MACS", 0)
    x = np.random.default_rng(11).standard_normal(xs).astype(np.float32)
    mb = _conv_model(xs, ws, {}, act="Relu")
    y, conv = _ours(mb, {"x": x}, 2)
    np.testing.assert_allclose(y, np.maximum(_ort(_conv_model(xs, ws, {}), {"x": x}), 0),
                               rtol=1e-4, atol=1e-4)
    (items, got), = conv._gemm._plans.values()
    if mode == "one":
        assert got == "one"
    else:
        assert got == "split"
        blocks = {(m0, m1) for *_, m0, m1 in items}
        bands = {(r0, r1) for _, r0, r1, _, _ in items}
        assert (len(blocks), len(bands) >= 2) == ((2, False) if mode == "channels" else
                                                  (1, True))
