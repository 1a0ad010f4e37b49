"""The com.microsoft kernels the fusions produce, node by node against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxrt as ort

RNG = np.random.default_rng(7)


def _run_both(op, inputs: dict, n_out: int = 1, opset: int = 17, domain="com.microsoft",
              **attrs):
    names = list(inputs)
    node = helper.make_node(op, [n if inputs[n] is not None else "" for n in names],
                            [f"y{i}" for i in range(n_out)], domain=domain, **attrs)
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(
                              v.dtype), v.shape) for n, v in inputs.items() if v is not None],
                          [helper.make_tensor_value_info(f"y{i}", TP.FLOAT, None)
                           for i in range(n_out)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset),
                                            helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    feeds = {n: v for n, v in inputs.items() if v is not None}
    ours = ort.InferenceSession(m.SerializeToString()).run(None, feeds)
    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    ref = onnxruntime.InferenceSession(m.SerializeToString(), so,
                                       providers=["CPUExecutionProvider"]).run(None, feeds)
    return ours, ref


def _close(ours, ref, rtol=1e-5, atol=1e-5):
    for o, r in zip(ours, ref):
        assert o.shape == r.shape and o.dtype == r.dtype
        np.testing.assert_allclose(o, r, rtol=rtol, atol=atol)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("act,params", [("Relu", None), ("Sigmoid", None), ("Tanh", None),
                                        ("LeakyRelu", [0.1]), ("Clip", [-0.5, 0.7]),
                                        ("HardSigmoid", [0.3, 0.4]), (None, None)])
def test_fused_conv(act, params):
    x, w, b = f32(2, 4, 7, 7), f32(6, 2, 3, 3), f32(6)
    z = f32(2, 6, 4, 4)
    kw = {"activation_params": params} if params else {}
    if act:
        kw["activation"] = act
    ours, ref = _run_both("FusedConv", {"x": x, "w": w, "b": b, "z": z},
                          group=2, strides=[2, 2], pads=[1, 1, 1, 1], **kw)
    _close(ours, ref, 1e-4, 1e-4)


@pytest.mark.parametrize("act", ["Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid",
                                 "Elu"])
def test_fused_gemm(act):
    kw = {}
    if act in ("LeakyRelu", "Elu", "HardSigmoid"):
        kw["activation_alpha"] = 0.3
    if act == "HardSigmoid":
        kw["activation_beta"] = 0.6
    ours, ref = _run_both("FusedGemm", {"a": f32(5, 3), "b": f32(4, 3), "c": f32(4)},
                          activation=act, transB=1, alpha=0.7, beta=1.3, **kw)
    _close(ours, ref, 1e-5, 1e-5)


@pytest.mark.parametrize("jit_on", [True, False])
def test_gelus(jit_on, monkeypatch):
    """The erf GELUs compiled (numba) and in NumPy; inputs across both erf pieces, the
    saturated range and specials."""
    from onnxrt.providers.cpu.nn import compiling
    monkeypatch.setattr(compiling, "_ENABLED", [jit_on and compiling.available()])
    x, bias = f32(3, 5, 8) * 3, f32(8)
    x[0, 0] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 12.0, -12.0, 1.4142135]
    for op, ins in (("Gelu", {"x": x}), ("FastGelu", {"x": x}), ("FastGelu", {"x": x, "b": bias}),
                    ("BiasGelu", {"x": x, "b": bias}), ("QuickGelu", {"x": x})):
        ours, ref = _run_both(op, ins)
        _close(ours, ref, 1e-4, 1e-5)


@pytest.mark.parametrize("with_bias", [False, True])
def test_skip_layer_norm(with_bias):
    x, skip, g, b = f32(2, 5, 16), f32(2, 5, 16), f32(16), f32(16)
    ins = {"x": x, "skip": skip, "gamma": g, "beta": b}
    if with_bias:
        ins["bias"] = f32(16)
    ours, ref = _run_both("SkipLayerNormalization", ins, n_out=4, epsilon=1e-6)
    _close([ours[0], ours[3]], [ref[0], ref[3]], 1e-4, 1e-5)
    ours, ref = _run_both("SkipSimplifiedLayerNormalization",
                          {"x": x, "skip": skip, "gamma": g}, epsilon=1e-6)
    _close(ours, ref, 1e-4, 1e-5)


@pytest.mark.parametrize("axis", [-1, -2])
@pytest.mark.parametrize("simplified", [False, True])
def test_compiled_norm_against_numpy_formula(axis, simplified):
    """The compiled row norm (skip, bias, beta, the kept sum, mean and 1/std per row) against
    the formula in float64, on rows far from zero (a one-pass variance would lose them)."""
    from onnxrt.providers.cpu.contrib import layer_norm as ln
    from onnxrt.providers.cpu.nn import jit
    if not jit.available():
        pytest.skip("numba is not installed: the NumPy path is covered above")
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3, 4, 6, 40)) * 0.01 + 300).astype(np.float32)
    skip = rng.standard_normal(x.shape).astype(np.float32)
    tail = x.shape[axis:]
    g, b, bias = (rng.standard_normal(tail).astype(np.float32) for _ in range(3))
    r = ln.compiled_norm(x, g, None if simplified else b, 1e-5, axis, skip, bias,
                         simplified=simplified, keep_sum=True)
    assert r is not None
    y, mean, inv, s = r
    axes = tuple(range(x.ndim + axis, x.ndim))
    s64 = x.astype(np.float64) + skip + bias
    mu = np.zeros_like(s64[..., :1]) if simplified else s64.mean(axis=axes, keepdims=True)
    var = ((s64 - mu) ** 2).mean(axis=axes, keepdims=True)
    want = (s64 - mu) / np.sqrt(var + 1e-5) * g + (0 if simplified else b)
    np.testing.assert_allclose(s, s64, rtol=1e-6)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(inv, 1 / np.sqrt(var + 1e-5), rtol=1e-4)
    if not simplified:
        np.testing.assert_allclose(mean, mu, rtol=1e-6)
    # what it does not take: another dtype, a broadcast skip, a per-axis gamma of other size
    assert ln.compiled_norm(x.astype(np.float64), g, b, 1e-5, axis) is None
    assert ln.compiled_norm(x, g, b, 1e-5, axis, skip[:1], None) is None
    assert ln.compiled_norm(x, g.reshape(-1)[:3], None, 1e-5, axis) is None


def test_layer_norm_17_compiled_matches_onnxruntime():
    """LayerNormalization-17 over the last two axes, float32, through the compiled rows."""
    x, g, b = f32(2, 3, 5, 16) * 3 + 7, f32(5, 16), f32(5, 16)
    ours, ref = _run_both("LayerNormalization", {"x": x, "g": g, "b": b}, n_out=3,
                          opset=17, domain="", axis=-2, epsilon=1e-5)
    _close(ours, ref, 1e-4, 1e-5)


def test_layer_norm_before_opset_17():
    x, g, b = f32(2, 5, 16), f32(16), f32(16)
    ours, ref = _run_both("LayerNormalization", {"x": x, "g": g, "b": b}, opset=14, domain="",
                          axis=-1, epsilon=1e-5)
    _close(ours, ref, 1e-4, 1e-5)
    ours, ref = _run_both("SimplifiedLayerNormalization", {"x": x, "g": g}, opset=14,
                          domain="", axis=-1, epsilon=1e-5)
    _close(ours, ref, 1e-4, 1e-5)


@pytest.mark.parametrize("unidirectional", [0, 1])
def test_attention_packed(unidirectional):
    b, s, h, n = 2, 6, 16, 4
    mask = np.ones((b, s), np.int32)
    mask[1, 4:] = 0
    ins = {"x": f32(b, s, h), "w": f32(h, 3 * h) * 0.3, "bias": f32(3 * h), "mask": mask}
    ours, ref = _run_both("Attention", ins, num_heads=n, unidirectional=unidirectional)
    _close(ours, ref, 1e-4, 1e-5)


@pytest.mark.parametrize("unidirectional", [0, 1])
@pytest.mark.parametrize("bias_shape", [None, (2, 1, 7, 7), (1, 3, 7, 7)])
def test_attention_compiled_heads(unidirectional, bias_shape, monkeypatch):
    """No past, no mask_index: the compiled path (heads read from the packed projection,
    split over threads), with attention_bias broadcast and causal masking; unequal
    qkv_hidden_sizes."""
    from onnxrt.providers.cpu.contrib import attention as att
    from onnxrt.providers.cpu.nn import jit
    if not jit.available():
        pytest.skip("numba is not installed: the NumPy path is covered above")
    hits = []
    real = att.Attention._compiled

    def spy(self, *a):
        hits.append(1)
        return real(self, *a)

    monkeypatch.setattr(att.Attention, "_compiled", spy)
    b, s, h, n = 2, 7, 12, 3
    ins = {"x": f32(b, s, h), "w": f32(h, 12 + 12 + 6) * 0.3, "bias": f32(30),
           "mask": None, "past": None,
           "ab": f32(*bias_shape) if bias_shape else None}
    ours, ref = _run_both("Attention", ins, num_heads=n, unidirectional=unidirectional,
                          qkv_hidden_sizes=[12, 12, 6])
    _close(ours, ref, 1e-4, 1e-5)
    assert hits


def test_attention_row_softmax_against_numpy():
    """The compiled heads' branch-free row softmax (its own exp) against NumPy's formula in
    float64: rows wide and narrow in range, -inf and far-below-the-max entries (exactly 0),
    a NaN (the whole row NaN, as the formula gives)."""
    from onnxrt.providers.cpu.contrib import attention as att
    from onnxrt.providers.cpu.nn import jit
    if not jit.available() or att._heads_kernel() is None:
        pytest.skip("numba or a cblas gemm is missing: the NumPy path is covered above")
    rng = np.random.default_rng(7)
    rows = [rng.standard_normal(128) * s for s in (0.01, 1, 10, 40)]
    rows.append(np.array([0, -np.inf, -1e4, 3, -86.9, -87.1, 88, -200], np.float64))
    rows.append(rng.uniform(-150, 0, 77))
    for r in rows:
        row = r.astype(np.float32)
        bits = np.empty(row.size, np.int32)
        att._softmax_row(row, bits, bits.view(np.float32))
        x = r.astype(np.float32)
        e = np.exp((x - x.max()).astype(np.float64))     # the float32 difference, as kept
        want = e / e.sum()
        np.testing.assert_allclose(row, want, rtol=2e-6, atol=1e-37)
        assert np.all(row[want == 0] == 0)
    row = np.array([1, np.nan, 2], np.float32)
    bits = np.empty(3, np.int32)
    att._softmax_row(row, bits, bits.view(np.float32))
    assert np.isnan(row).all()


def test_multi_head_attention_bias_and_padding():
    b, s, l, d, n = 2, 4, 6, 8, 2
    lengths = np.array([6, 3], np.int32)
    ins = {"q": f32(b, s, d), "k": f32(b, l, d), "v": f32(b, l, d), "bias": f32(3 * d),
           "kpm": lengths, "ab": f32(1, n, s, l)}
    ours, ref = _run_both("MultiHeadAttention", ins, num_heads=n)
    _close(ours, ref, 1e-4, 1e-5)


@pytest.mark.parametrize("jit_on", [True, False])
@pytest.mark.parametrize("act,params", [("Relu", None), ("LeakyRelu", [0.1]),
                                        ("Clip", [-0.5, 0.7]), ("Sigmoid", None),
                                        ("HardSigmoid", [0.3, 0.4]), (None, None)])
def test_fused_conv_channel_affine(act, params, jit_on, monkeypatch):
    """A depthwise 1x1 FusedConv with constant weights (BatchNormalization -> activation
    fused) runs as a per-channel scale and shift; with Z, the convolution path."""
    from onnx import numpy_helper

    from onnxrt.providers.cpu.nn import compiling
    monkeypatch.setattr(compiling, "_ENABLED", [jit_on and compiling.available()])
    c = 5
    x, z = f32(3, c, 6, 7), f32(3, c, 6, 7)
    x[0, 0, 0, :3] = [np.nan, -0.0, np.inf]
    kw = {"activation_params": params} if params else {}
    if act:
        kw["activation"] = act
    inits = [numpy_helper.from_array(f32(c, 1, 1, 1), "w"), numpy_helper.from_array(f32(c), "b")]
    for with_z in (False, True):
        node = helper.make_node("FusedConv", ["x", "w", "b"] + (["z"] if with_z else []),
                                ["y"], domain="com.microsoft", group=c, kernel_shape=[1, 1],
                                **kw)
        ins = [helper.make_tensor_value_info("x", TP.FLOAT, ["n", c, 6, 7])]
        if with_z:
            ins.append(helper.make_tensor_value_info("z", TP.FLOAT, ["n", c, 6, 7]))
        g = helper.make_graph([node], "g", ins,
                              [helper.make_tensor_value_info("y", TP.FLOAT, None)], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("com.microsoft", 1)])
        m.ir_version = 8
        feeds = {"x": x, "z": z} if with_z else {"x": x}
        so = onnxruntime.SessionOptions()
        so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        ref = onnxruntime.InferenceSession(m.SerializeToString(), so,
                                           providers=["CPUExecutionProvider"]).run(None, feeds)
        sess = ort.InferenceSession(m.SerializeToString())
        kernel = sess._plan.steps[0].fn
        assert kernel.affine is not None
        assert (kernel.affine.loop is not None) == (jit_on and compiling.available()
                                                    and act not in ("Sigmoid", "HardSigmoid"))
        for _ in range(2):   # the kernel leaves its input alone
            ours = sess.run(None, feeds)
            np.testing.assert_allclose(ours[0], ref[0], rtol=1e-5, atol=1e-6)
            assert ours[0].dtype == np.float32 and ours[0].shape == x.shape


@pytest.mark.parametrize("alpha", [1.0, 1.702, -0.8])
@pytest.mark.parametrize("shape", [(1, 1, 1408), (3, 37), (520, 2048)])
def test_quick_gelu_against_formula(alpha, shape):
    """QuickGelu (a Llama MLP's SiLU at alpha 1) against x * sigmoid(alpha x) in float64
    and onnxruntime: values far into both tails (no overflow), specials, a negative alpha,
    and an input past the split threshold (rows over two threads)."""
    x = RNG.standard_normal(shape).astype(np.float32) * 8
    flat = x.reshape(-1)
    flat[:8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 95.0, -95.0, 1e-30]
    ours, ref = _run_both("QuickGelu", {"x": x}, alpha=alpha)
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        want = x64 / (1 + np.exp(-alpha * x64))
    np.testing.assert_allclose(ours[0], want, rtol=4e-6, atol=1e-30)
    # onnxruntime's logistic is itself ~2e-6 off the formula in the far tails
    _close(ours, ref, 1e-4, 1e-5)
