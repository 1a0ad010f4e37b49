"""Graph passes: each basic pass and each fusion on the patterns exporters write, results
against onnxruntime on the original model, the fused op present, and the optimized model
(saved through optimized_model_filepath) loading and agreeing in onnxruntime too."""

from __future__ import annotations

import collections
import math
import os
import sys

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto as TP
from onnx import helper

import onnxrt as ort
from onnxrt.framework.kernel_lookup import KernelLookup
from onnxrt.passes import optimize as _optimize
from onnxrt.providers.cpu import CPUExecutionProvider


def optimize(model, level, disabled=frozenset()):
    """The passes as a session runs them: constant folding on the CPU provider's kernels."""
    return _optimize(model, level, disabled, KernelLookup([CPUExecutionProvider()]))

sys.path.insert(0, os.path.dirname(__file__))
from builders import (Builder, attention, bert_feeds, gpt2_block_model,  # noqa: E402
                      bert_layer_model, gelu_erf, gelu_tanh, gpt2_mlp_model, layer_norm_decomposed)

LEVELS = [ort.GraphOptimizationLevel.ORT_DISABLE_ALL, ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
          ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED, ort.GraphOptimizationLevel.ORT_ENABLE_ALL]


def ops(model: onnx.ModelProto) -> collections.Counter:
    return collections.Counter(n.op_type for n in model.graph.node)


def reference(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    so = onnxruntime.SessionOptions()
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxruntime.InferenceSession(model.SerializeToString(), so,
                                        providers=["CPUExecutionProvider"]).run(None, feeds)


def check(model: onnx.ModelProto, feeds: dict, expect: dict[str, int] | None = None,
          absent: tuple[str, ...] = (), rtol: float = 1e-4, atol: float = 1e-5,
          tmp_path=None) -> onnx.ModelProto:
    """Runs ``model`` at every level against onnxruntime; at ALL the optimized model must
    hold ``expect`` ops (op -> count) and none of ``absent``; returns the optimized model."""
    refs = reference(model, feeds)
    optimized, _ = optimize(model, 99)
    counts = ops(optimized)
    for op, n in (expect or {}).items():
        assert counts[op] == n, f"{op}: {counts[op]} != {n}; ops {dict(counts)}"
    for op in absent:
        assert counts[op] == 0, f"{op} left: {dict(counts)}"
    for level in LEVELS:
        so = ort.SessionOptions()
        so.graph_optimization_level = level
        outs = ort.InferenceSession(model.SerializeToString(), so).run(None, feeds)
        for r, o in zip(refs, outs):
            assert o.dtype == r.dtype and o.shape == r.shape
            np.testing.assert_allclose(o, r, rtol=rtol, atol=atol, err_msg=str(level))
    # the optimized model means the same in onnxruntime (com.microsoft semantics)
    for r, o in zip(refs, reference(optimized, feeds)):
        np.testing.assert_allclose(o, r, rtol=rtol, atol=atol, err_msg="onnxruntime")
    return optimized


def vi(name, shape, et=TP.FLOAT):
    return helper.make_tensor_value_info(name, et, shape)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# -- basic -------------------------------------------------------------------------------
def test_identity_dropout_and_dead_nodes():
    b = Builder()
    t = b.op("Identity", "x")
    t = b.op("Dropout", t, b.const(np.float32(0.3)))
    b.op("Relu", t)                        # dead
    y = b.op("Sigmoid", b.op("Identity", t))
    b.nodes.append(helper.make_node("Identity", [y], ["y"]))
    m = b.model([vi("x", [2, 3])], [vi("y", [2, 3])], 13)
    opt = check(m, {"x": rand(2, 3)}, absent=("Dropout", "Relu"))
    assert ops(opt) == {"Sigmoid": 1}
    assert opt.graph.node[0].output[0] == "y"


def test_cast_chains():
    b = Builder()
    t = b.op("Cast", "x", to=TP.FLOAT)                       # no-op
    t = b.op("Cast", b.op("Cast", t, to=TP.DOUBLE), to=TP.FLOAT)   # lossless round trip
    t = b.op("Cast", b.op("Cast", t, to=TP.FLOAT16), to=TP.FLOAT)  # lossy: stays
    b.nodes[-1].output[0] = "y"
    m = b.model([vi("x", [4])], [vi("y", [4])], 13)
    opt = check(m, {"x": np.array([1.0001, 2.5, -3.3, 1e5], np.float32)})
    assert ops(opt)["Cast"] == 2


def test_transpose_reshape_squeeze_pairs():
    b = Builder()
    t = b.op("Transpose", b.op("Transpose", "x", perm=[0, 2, 1]), perm=[0, 2, 1])
    t = b.op("Transpose", b.op("Transpose", t, perm=[1, 0, 2]), perm=[0, 2, 1])
    t = b.op("Reshape", b.op("Reshape", t, b.const(np.array([6, 4], np.int64))),
             b.const(np.array([4, -1], np.int64)))
    t = b.op("Squeeze", b.op("Unsqueeze", t, b.const(np.array([0, -1], np.int64))),
             b.const(np.array([0, 3], np.int64)))
    b.nodes[-1].output[0] = "y"
    m = b.model([vi("x", [2, 3, 4])], [vi("y", [4, 6])], 13)
    opt = check(m, {"x": rand(2, 3, 4)})
    assert ops(opt) == {"Transpose": 1, "Reshape": 1}


def test_constant_folding_and_shape_subgraphs():
    b = Builder()
    w = b.op("Add", b.op("ConstantOfShape", b.const(np.array([3, 4], np.int64)),
                         value=helper.make_tensor("v", TP.FLOAT, [1], [0.5])),
             b.const(np.float32(1.0)))
    s = b.op("Shape", "x")                               # static: folds
    n = b.op("Gather", s, b.const(np.array(0, np.int64)), axis=0)
    shape = b.op("Concat", b.op("Unsqueeze", n, b.const(np.array([0], np.int64))),
                 b.const(np.array([-1], np.int64)), axis=0)
    b.op("MatMul", b.op("Reshape", "x", shape), w)
    b.nodes[-1].output[0] = "y"
    m = b.model([vi("x", [2, 3])], [vi("y", [2, 4])], 13)
    opt = check(m, {"x": rand(2, 3)})
    assert ops(opt) == {"MatMul": 1}   # the reshape to x's own shape goes too


def test_large_constants_fold_once_and_stay_arrays():
    """A large folded constant is folded once, by the passes, and kept as an array in the
    session's graph: no plan step computes it and no ModelProto is written for it."""
    b = Builder()
    w = b.op("ConstantOfShape", b.const(np.array([512, 256], np.int64)),
             value=helper.make_tensor("v", TP.FLOAT, [1], [0.01]))
    b.op("MatMul", "x", w)
    b.nodes[-1].output[0] = "y"
    m = b.model([vi("x", [2, 512])], [vi("y", [2, 256])], 13)
    check(m, {"x": rand(2, 512)})
    sess = ort.InferenceSession(m.SerializeToString())
    assert [n.op_type for n in sess._graph.nodes] == ["MatMul"]
    assert [st.node.op_type for st in sess._plan.steps] == ["MatMul"]
    assert any(isinstance(v, np.ndarray) and v.shape == (512, 256)
               for v in sess._graph.constant_values().values())
    assert sess._model_proto is None      # the graph is serialized only when asked


def test_overridable_initializers_are_not_folded():
    b = Builder()
    b.nodes.append(helper.make_node("Add", ["x", "c"], ["y"]))
    b.inits.append(onnx.numpy_helper.from_array(np.ones(3, np.float32), "c"))
    m = b.model([vi("x", [3]), vi("c", [3])], [vi("y", [3])], 13)
    sess = ort.InferenceSession(m.SerializeToString())
    x = rand(3)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], x + 1)
    np.testing.assert_allclose(sess.run(None, {"x": x, "c": x})[0], 2 * x)


def test_values_read_by_subgraphs_survive():
    """An If branch reads an Identity output and a folded constant from the outer scope."""
    b = Builder()
    t = b.op("Identity", "x")
    c = b.op("Add", b.const(np.ones(3, np.float32)), b.const(np.ones(3, np.float32)))
    then = helper.make_graph([helper.make_node("Mul", [t, c], ["o"])], "then", [],
                             [vi("o", [3])])
    other = helper.make_graph([helper.make_node("Sub", [t, c], ["o2"])], "else", [],
                              [vi("o2", [3])])
    b.nodes.append(helper.make_node("If", ["cond"], ["y"], then_branch=then,
                                    else_branch=other))
    m = b.model([vi("x", [3]), vi("cond", [], TP.BOOL)], [vi("y", [3])], 13)
    x = rand(3)
    for cond in (True, False):
        check(m, {"x": x, "cond": np.array(cond)})


# -- conv --------------------------------------------------------------------------------
def _bn(b, x, c, seed=1):
    rng = np.random.default_rng(seed)
    ps = [rng.uniform(0.5, 1.5, c), rng.standard_normal(c), rng.standard_normal(c),
          rng.uniform(0.5, 2.0, c)]
    return b.op("BatchNormalization", x, *(b.const(p.astype(np.float32)) for p in ps),
                epsilon=1e-5)


@pytest.mark.parametrize("act", ["Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh",
                                 "HardSigmoid", None])
def test_conv_bn_activation(act):
    b = Builder()
    t = _bn(b, b.op("Conv", "x", b.weight(8, 3, 3, 3), pads=[1, 1, 1, 1]), 8)
    if act == "Clip":
        t = b.op("Clip", t, b.const(np.float32(0.0)), b.const(np.float32(6.0)))
    elif act == "LeakyRelu":
        t = b.op("LeakyRelu", t, alpha=0.2)
    elif act:
        t = b.op(act, t)
    b.nodes[-1].output[0] = "y"
    m = b.model([vi("x", [2, 3, 6, 6])], [vi("y", [2, 8, 6, 6])], 13)
    opt = check(m, {"x": rand(2, 3, 6, 6)}, absent=("BatchNormalization",),
                expect={"FusedConv": 1} if act else {"Conv": 1})
    assert len(opt.graph.node) == 1


def test_conv_add_relu_residual_and_channel_affine():
    """ResNet's Conv -> BN -> Add(skip) -> Relu and Caffe2's BN -> Mul -> Add affine."""
    b = Builder()
    t = _bn(b, b.op("Conv", "x", b.weight(4, 4, 1, 1)), 4)
    t = b.op("Relu", b.op("Add", t, "x"))
    u = _bn(b, t, 4, seed=2)
    u = b.op("Mul", u, b.const(rand(4, 1, 1, seed=3)))
    u = b.op("Add", u, b.const(rand(4, 1, 1, seed=4)))
    u = b.op("Relu", u)
    v = b.op("Conv", u, b.weight(4, 4, 3, 3), pads=[1, 1, 1, 1])
    v = b.op("Add", b.op("Mul", v, b.const(rand(1, 4, 1, 1, seed=5))),
             b.const(rand(4, 1, 1, seed=6)))
    b.nodes[-1].output[0] = "y"
    m = b.model([vi("x", [1, 4, 5, 5])], [vi("y", [1, 4, 5, 5])], 13)
    # the BN with its affine folded in, then Relu: a per-channel (depthwise 1x1) FusedConv
    opt = check(m, {"x": rand(1, 4, 5, 5)}, expect={"FusedConv": 2, "Conv": 1},
                absent=("Mul", "Add", "BatchNormalization"))
    fc = [n for n in opt.graph.node if n.op_type == "FusedConv"]
    assert len(fc[0].input) == 4   # the residual is FusedConv's Z
    assert len(fc[1].input) == 3 and helper.get_attribute_value(
        next(a for a in fc[1].attribute if a.name == "group")) == 4


@pytest.mark.parametrize("skip_batch", ["n", "m"])
def test_residual_into_fused_conv_at_a_symbolic_batch(skip_batch):
    """Conv -> Add(skip) -> Relu fuses when the shapes are equal symbolically (the same
    batch symbol), not when the skip's batch is another symbol (it may broadcast)."""
    b = Builder()
    t = b.op("Conv", "x", b.weight(4, 4, 3, 3), b.weight(4), pads=[1, 1, 1, 1])
    b.op("Relu", b.op("Add", t, "skip"))
    b.nodes[-1].output[0] = "y"
    m = b.model([vi("x", ["n", 4, 5, 5]), vi("skip", [skip_batch, 4, 5, 5])],
                [vi("y", ["n", 4, 5, 5])], 13)
    feeds = {"x": rand(2, 4, 5, 5), "skip": rand(2, 4, 5, 5, seed=1)}
    if skip_batch == "n":
        opt = check(m, feeds, expect={"FusedConv": 1}, absent=("Add", "Relu", "Conv"))
        assert len(opt.graph.node[0].input) == 4
    else:
        check(m, feeds, expect={"Conv": 1, "Add": 1, "Relu": 1}, absent=("FusedConv",))
        check(m, {"x": rand(2, 4, 5, 5), "skip": rand(1, 4, 5, 5, seed=1)})


@pytest.mark.parametrize("act", ["Relu", "Clip", "Sigmoid"])
def test_bn_activation_without_conv(act):
    """densenet's Concat -> BatchNormalization -> Relu: a depthwise 1x1 FusedConv; a BN
    without an activation stays."""
    b = Builder()
    t = b.op("Concat", "x", b.op("Sigmoid", "x"), axis=1)
    t = _bn(b, t, 8)
    if act == "Clip":
        t = b.op("Clip", t, b.const(np.float32(0.0)), b.const(np.float32(6.0)))
    else:
        t = b.op(act, t)
    t = b.op("Conv", t, b.weight(4, 8, 1, 1))
    u = _bn(b, b.op("Concat", t, "x", axis=1), 8, seed=3)
    b.op("Add", u, b.op("Relu", _bn(b, u, 8, seed=4)))
    b.nodes[-1].output[0] = "y"
    m = b.model([vi("x", ["n", 4, 5, 5])], [vi("y", ["n", 8, 5, 5])], 13)
    opt = check(m, {"x": rand(2, 4, 5, 5)}, expect={"FusedConv": 2, "BatchNormalization": 1,
                                                    "Conv": 1})
    fc = [n for n in opt.graph.node if n.op_type == "FusedConv"]
    assert [helper.get_attribute_value(next(a for a in n.attribute if a.name == "group"))
            for n in fc] == [8, 8]


def test_gemm_activation_and_matmul_add():
    b = Builder()
    t = b.op("Relu", b.op("Gemm", "x", b.weight(6, 5), b.weight(5), transB=0))
    t = b.op("Add", b.op("MatMul", t, b.weight(5, 4)), b.weight(4))
    t = b.op("LeakyRelu", t, alpha=0.3)
    b.nodes[-1].output[0] = "y"
    m = b.model([vi("x", [3, 6])], [vi("y", [3, 4])], 13)
    check(m, {"x": rand(3, 6)}, expect={"FusedGemm": 2}, absent=("MatMul", "Add"))


def test_matmul_add_stays_for_3d():
    b = Builder()
    b.op("Add", b.op("MatMul", "x", b.weight(6, 5)), b.weight(5))
    b.nodes[-1].output[0] = "y"
    m = b.model([vi("x", [2, 3, 6])], [vi("y", [2, 3, 5])], 13)
    check(m, {"x": rand(2, 3, 6)}, expect={"MatMul": 1, "Gemm": 0})


# -- transformer pieces ------------------------------------------------------------------
def test_gelu_erf_and_tanh():
    b = Builder()
    y = gelu_tanh(b, gelu_erf(b, "x"))
    b.nodes[-1].output[0] = "y"
    m = b.model([vi("x", ["n", 7])], [vi("y", ["n", 7])], 13)
    check(m, {"x": rand(3, 7) * 3}, expect={"Gelu": 1, "FastGelu": 1},
          absent=("Erf", "Tanh", "Mul"))
    assert y


def test_quick_gelu_silu_and_scaled():
    """x * Sigmoid(x) (a Llama MLP's SiLU) and x * Sigmoid(1.702 * x) become QuickGelu;
    a Sigmoid whose output has another reader, and x * Sigmoid(y), stay."""
    b = Builder()
    s1 = b.op("Mul", "x", b.op("Sigmoid", "x"))
    t = b.op("Mul", s1, b.const(np.float32(1.702)))
    s2 = b.op("Mul", s1, b.op("Sigmoid", t))
    kept = b.op("Sigmoid", s2)
    s3 = b.op("Add", b.op("Mul", s2, kept), kept)           # kept read twice: no fusion
    y = b.op("Mul", s3, b.op("Sigmoid", "x"))                # Sigmoid of another value
    b.nodes[-1].output[0] = "y"
    m = b.model([vi("x", ["n", 9])], [vi("y", ["n", 9])], 13)
    opt = check(m, {"x": rand(4, 9) * 4}, expect={"QuickGelu": 2, "Sigmoid": 2})
    alphas = sorted(helper.get_attribute_value(a) for n in opt.graph.node
                    if n.op_type == "QuickGelu" for a in n.attribute if a.name == "alpha")
    assert alphas == pytest.approx([1.0, 1.702])
    assert y


@pytest.mark.parametrize("opset", [13, 18])
def test_layer_norm(opset):
    b = Builder()
    layer_norm_decomposed(b, "x", 16, opset)
    b.nodes[-1].output[0] = "y"
    m = b.model([vi("x", ["b", 5, 16])], [vi("y", ["b", 5, 16])], opset)
    check(m, {"x": rand(2, 5, 16)}, expect={"LayerNormalization": 1},
          absent=("ReduceMean", "Sqrt"))


@pytest.mark.parametrize("form", ["div", "rsqrt"])
def test_rms_norm(form):
    b = Builder()
    ms = b.op("ReduceMean", b.op("Pow", "x", b.const(np.float32(2.0))), axes=[-1])
    std = b.op("Sqrt", b.op("Add", ms, b.const(np.float32(1e-6))))
    y = b.op("Div", "x", std) if form == "div" else b.op("Mul", "x", b.op("Reciprocal", std))
    b.op("Mul", b.const((1 + 0.1 * b.rng.standard_normal(16)).astype(np.float32)), y)
    b.nodes[-1].output[0] = "y"
    m = b.model([vi("x", ["b", 5, 16])], [vi("y", ["b", 5, 16])], 14)
    check(m, {"x": rand(2, 5, 16)}, expect={"SimplifiedLayerNormalization": 1},
          absent=("ReduceMean", "Sqrt", "Mul"))


def test_gpt2_mlp():
    opt = check(gpt2_mlp_model(), {"x": rand(2, 8, 32)},
                expect={"FastGelu": 1, "LayerNormalization": 1})
    assert len(next(n for n in opt.graph.node if n.op_type == "FastGelu").input) == 2


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("torchscript", [True, False])
def test_bert_encoder(torchscript, static):
    m = bert_layer_model(torchscript=torchscript, static=static)
    check(m, bert_feeds(), expect={"Attention": 2, "SkipLayerNormalization": 4,
                                   "BiasGelu": 2}, absent=("Softmax", "Erf", "ReduceMean"))


@pytest.mark.parametrize("static,hf_slices", [(True, False), (False, False), (False, True)])
def test_gpt2_block(static, hf_slices):
    """Unidirectional attention from the causal slice of GPT-2's ``bias`` buffer: a constant
    at static shapes, Slice nodes with ends computed from shapes at dynamic ones."""
    m = gpt2_block_model(static=static, hf_slices=hf_slices)
    expect = {"FastGelu": 1, "LayerNormalization": 1, "SkipLayerNormalization": 1,
              "Attention": 1}
    opt = check(m, bert_feeds(), expect=expect, absent=("Where", "Slice", "Softmax"))
    att = next(n for n in opt.graph.node if n.op_type == "Attention")
    assert helper.get_attribute_value(
        next(a for a in att.attribute if a.name == "unidirectional")) == 1
    # other sequence lengths and batches through the same dynamic model
    if not static:
        check(m, bert_feeds(batch=3, seq=5), expect=expect)


@pytest.mark.parametrize("hf_slices", [False, True])
def test_gpt2_shifted_slice_is_not_causal(hf_slices):
    """Rows of the buffer starting past L - S are another mask: no unidirectional fusion."""
    m = gpt2_block_model(static=False, hf_slices=hf_slices, row_start=1)
    assert ops(optimize(m, 99)[0])["Attention"] == 0


def test_attention_without_mask():
    m = bert_layer_model(torchscript=False, layers=1, with_mask=False, static=True)
    check(m, bert_feeds(with_mask=False), expect={"Attention": 1})


@pytest.mark.parametrize("torchscript", [True, False])
def test_multi_head_attention_of_any_qkv(torchscript):
    """Q, K, V that are not projections of one input (cross attention, split QKV)."""
    b = Builder()
    opset = 14 if torchscript else 18
    n = 5 if torchscript else 7   # the TorchScript pattern reshapes keys by the query's shape
    k = b.op("Relu", "kv")
    attention(b, "q", "bias", 16, 2, opset, torchscript, qkv=("q", k, "kv"))
    b.nodes[-1].output[0] = "y"
    m = b.model([vi("q", ["b", 5, 16]), vi("kv", ["b", n, 16]), vi("bias", ["b", 1, 5, n])],
                [vi("y", ["b", 5, 16])], opset)
    check(m, {"q": rand(2, 5, 16), "kv": rand(2, n, 16, seed=1),
              "bias": rand(2, 1, 5, n, seed=2)}, expect={"MultiHeadAttention": 1},
          absent=("Softmax",))


def test_mha_kernel_options():
    """Past key/value, key padding lengths and causal masking against a NumPy formula."""
    rng = np.random.default_rng(0)
    b, s, p, n, h = 2, 3, 2, 2, 4
    q, k, v = (rng.standard_normal((b, s, n * h)).astype(np.float32) for _ in range(3))
    pk, pv = (rng.standard_normal((b, n, p, h)).astype(np.float32) for _ in range(2))
    node = helper.make_node("MultiHeadAttention", ["q", "k", "v", "", "", "", "pk", "pv"],
                            ["y", "present_k", "present_v"], domain="com.microsoft",
                            num_heads=n, unidirectional=1)
    g = helper.make_graph([node], "g", [vi(x, None) for x in ("q", "k", "v", "pk", "pv")],
                          [vi("y", None), vi("present_k", None), vi("present_v", None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.microsoft", 1)])
    y, kk, vv = ort.InferenceSession(m.SerializeToString()).run(
        None, dict(q=q, k=k, v=v, pk=pk, pv=pv))
    kh = np.concatenate([pk, k.reshape(b, s, n, h).transpose(0, 2, 1, 3)], 2)
    vh = np.concatenate([pv, v.reshape(b, s, n, h).transpose(0, 2, 1, 3)], 2)
    sc = q.reshape(b, s, n, h).transpose(0, 2, 1, 3) @ kh.transpose(0, 1, 3, 2) / math.sqrt(h)
    sc = sc + np.triu(np.full((s, s + p), -10000.0, np.float32), k=p + 1)
    e = np.exp(sc - sc.max(-1, keepdims=True))
    ref = (e / e.sum(-1, keepdims=True)) @ vh
    np.testing.assert_allclose(y, ref.transpose(0, 2, 1, 3).reshape(b, s, n * h), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_array_equal(kk, kh)
    np.testing.assert_array_equal(vv, vh)


# -- session options ---------------------------------------------------------------------
def test_optimized_model_filepath_and_disabled_optimizers(tmp_path):
    m = bert_layer_model(torchscript=True, layers=1)
    path = str(tmp_path / "opt.onnx")
    so = ort.SessionOptions()
    so.optimized_model_filepath = path
    ort.InferenceSession(m.SerializeToString(), so)
    saved = onnx.load(path)
    onnx.checker.check_model(saved)
    assert ops(saved)["Attention"] == 1
    feeds = bert_feeds()
    for r, o in zip(reference(m, feeds), reference(saved, feeds)):
        np.testing.assert_allclose(o, r, rtol=1e-4, atol=1e-5)
    # disabled by name: attention stays unfused, the rest still fuses
    path2 = str(tmp_path / "opt2.onnx")
    so.optimized_model_filepath = path2
    sess = ort.InferenceSession(m.SerializeToString(), so,
                                disabled_optimizers=["AttentionFusion", "GeluFusion"])
    saved2 = onnx.load(path2)
    assert ops(saved2)["Attention"] == 0 and ops(saved2)["BiasGelu"] == 0
    assert ops(saved2)["SkipLayerNormalization"] == 2
    np.testing.assert_allclose(sess.run(None, feeds)[0], reference(m, feeds)[0], rtol=1e-4,
                               atol=1e-5)


def test_levels_choose_passes():
    m = bert_layer_model(torchscript=True, layers=1, static=True)
    _, basic = optimize(m, 1)
    _, extended = optimize(m, 2)
    assert "ConstantFolding" in basic and not any("Fusion" in p for p in basic)
    assert "AttentionFusion" in extended
    assert optimize(m, 0) == (m, [])


def test_caller_model_untouched():
    m = bert_layer_model(torchscript=True, layers=1)
    before = m.SerializeToString()
    optimize(m, 99)
    assert m.SerializeToString() == before
