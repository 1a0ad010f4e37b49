"""The transformer ops of the oneDNN provider and ConvTranspose, against onnxruntime's CPU
provider: LayerNormalization, GELU written out with Erf (one gelu_erf), a linear layer's
bias and scalar Mul/Div/Add after MatMul (bias and post-ops), batched MatMul with
broadcasting batch dims, Split as sub-memory reorders, and deconvolution with strides, pads,
output_padding, groups and dilations. Every node must run on DNNL unless the case says."""

from __future__ import annotations

import math
import os
import sys

import numpy as np
import pytest
from onnx import helper

from dnnlhelpers import (DNNL, assert_close, dnnl_session, needs_dnnl, nodes_on, reference,
                         total_nodes)
from test_dnnl_ops import check, model, rand

pytestmark = needs_dnnl

SQRT2 = np.float32(math.sqrt(2))


@pytest.mark.parametrize("axis,shape,bias", [(-1, [2, 5, 16], True), (1, [2, 3, 4], True),
                                             (-1, [7, 32], False)])
def test_layer_normalization(axis, shape, bias):
    feat = shape[axis:] if axis >= 0 else shape[axis:]
    ins = ["X", "s"] + (["b"] if bias else [])
    inits = [("s", rand(*feat, lo=0.5, hi=1.5))] + ([("b", rand(*feat))] if bias else [])
    m = model([helper.make_node("LayerNormalization", ins, ["Y"], axis=axis, epsilon=1e-3)],
              [("X", shape)], ["Y"], inits)
    check(m, {"X": rand(*shape, lo=-3, hi=3)})


def test_layer_normalization_with_statistics_output_is_declined():
    m = model([helper.make_node("LayerNormalization", ["X", "s", "b"], ["Y", "mean"])],
              [("X", [2, 8])], ["Y", "mean"], [("s", rand(8)), ("b", rand(8))])
    sess = check(m, {"X": rand(2, 8)}, all_on_dnnl=False)
    assert nodes_on(sess) == 0
    assert "its Mean or InvStdDev output" in sess.placement_report()


def _gelu_nodes(x, y, tail):
    """x * 0.5 * (1 + erf(x / sqrt(2))) in the three tail orders exporters write."""
    nodes = [helper.make_node("Div", [x, "sqrt2"], ["d"]),
             helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"])]
    if tail == "x_a_half":
        nodes += [helper.make_node("Mul", [x, "a"], ["m"]),
                  helper.make_node("Mul", ["m", "half"], [y])]
    elif tail == "half_a_x":
        nodes += [helper.make_node("Mul", ["half", "a"], ["m"]),
                  helper.make_node("Mul", ["m", x], [y])]
    else:
        nodes += [helper.make_node("Mul", [x, "half"], ["m"]),
                  helper.make_node("Mul", ["a", "m"], [y])]
    return nodes


GELU_INITS = [("sqrt2", np.array(SQRT2)), ("one", np.array(1.0, np.float32)),
              ("half", np.array(0.5, np.float32))]


@pytest.mark.parametrize("tail", ["x_a_half", "half_a_x", "x_half_times_a"])
def test_gelu_written_out_alone(tail):
    m = model(_gelu_nodes("X", "Y", tail), [("X", [3, 40])], ["Y"], GELU_INITS)
    check(m, {"X": rand(3, 40, lo=-4, hi=4)})


def test_linear_then_gelu_fuses_bias_and_gelu():
    """MatMul -> Add(bias) -> GELU: one matmul primitive with a bias and a gelu_erf
    post-op."""
    nodes = [helper.make_node("MatMul", ["X", "W"], ["mm"]),
             helper.make_node("Add", ["mm", "B"], ["h"])] + _gelu_nodes("h", "Y", "x_a_half")
    m = model(nodes, [("X", [2, 6, 16])], ["Y"],
              [("W", rand(16, 24)), ("B", rand(24))] + GELU_INITS)
    sess = check(m, {"X": rand(2, 6, 16)})
    prog = next(iter(_programs(sess)))
    assert len(prog.steps) == 2        # the matmul, then the reorder into the output


def test_erf_outside_the_pattern_is_declined_with_a_reason():
    m = model([helper.make_node("Erf", ["X"], ["Y"])], [("X", [4])], ["Y"])
    sess = check(m, {"X": rand(4)}, all_on_dnnl=False)
    assert nodes_on(sess) == 0
    assert "an Erf outside the GELU pattern" in sess.placement_report()


def test_attention_scores_with_scalar_post_ops_and_softmax():
    """softmax(q @ k^T / sqrt(d) + mask) @ v, heads as batch dims, the mask broadcast."""
    nodes = [helper.make_node("Transpose", ["K"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["Q", "kt"], ["s"]),
             helper.make_node("Div", ["s", "scale"], ["sd"]),
             helper.make_node("Add", ["sd", "mask"], ["sm"]),
             helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "V"], ["Y"])]
    shp = [2, 3, 5, 8]
    m = model(nodes, [("Q", shp), ("K", shp), ("V", shp), ("mask", [2, 1, 1, 5])], ["Y"],
              [("scale", np.array(np.sqrt(8), np.float32))])
    mask = np.where(RNG_MASK.random((2, 1, 1, 5)) < 0.3, -1e4, 0).astype(np.float32)
    check(m, {"Q": rand(*shp), "K": rand(*shp), "V": rand(*shp), "mask": mask})


RNG_MASK = np.random.default_rng(11)


@pytest.mark.parametrize("a,b", [([2, 1, 4, 5], [3, 5, 6]), ([4, 5], [2, 3, 5, 6]),
                                 ([2, 3, 4, 5], [5, 6])])
def test_matmul_broadcasts_batch_dims(a, b):
    m = model([helper.make_node("MatMul", ["A", "B"], ["Y"])], [("A", a), ("B", b)], ["Y"])
    check(m, {"A": rand(*a), "B": rand(*b)})


@pytest.mark.parametrize("sub,op", [("Sub", "first"), ("Sub", "second"), ("Mul", "first"),
                                    ("Add", "second")])
def test_scalar_after_matmul_becomes_a_linear_post_op(sub, op):
    ins = ["mm", "k"] if op == "first" else ["k", "mm"]
    nodes = [helper.make_node("MatMul", ["X", "W"], ["mm"]),
             helper.make_node(sub, ins, ["Y"])]
    m = model(nodes, [("X", [3, 8])], ["Y"], [("W", rand(8, 4)),
                                              ("k", np.array(1.75, np.float32))])
    check(m, {"X": rand(3, 8)})


def test_split_then_matmuls():
    """A fused QKV projection split three ways along the last axis, each part used."""
    nodes = [helper.make_node("MatMul", ["X", "W"], ["qkv"]),
             helper.make_node("Split", ["qkv", "parts"], ["q", "k", "v"], axis=2),
             helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("MatMul", ["s", "v"], ["Y"])]
    m = model(nodes, [("X", [2, 4, 8])], ["Y"], [("W", rand(8, 18)),
                                                 ("parts", np.array([6, 6, 6], np.int64))])
    check(m, {"X": rand(2, 4, 8)})


def test_split_of_a_group_input_along_a_middle_axis():
    nodes = [helper.make_node("Split", ["X"], ["a", "b"], axis=1, num_outputs=2),
             helper.make_node("Relu", ["a"], ["Y"]),
             helper.make_node("Sigmoid", ["b"], ["Z"])]
    m = model(nodes, [("X", [2, 6, 3])], ["Y", "Z"], opset=18)
    check(m, {"X": rand(2, 6, 3)})


DECONV_CASES = {
    "plain": dict(w=(3, 4, 3, 3), attrs={}),
    "strides_pads": dict(w=(3, 4, 3, 3), attrs=dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    "output_padding": dict(w=(3, 4, 3, 3), attrs=dict(strides=[2, 2], pads=[1, 1, 1, 1],
                                                       output_padding=[1, 1])),
    "output_padding_beyond_pad": dict(w=(3, 2, 4, 4), attrs=dict(strides=[3, 2],
                                                                  output_padding=[2, 1])),
    "asym_pads": dict(w=(3, 4, 2, 3), attrs=dict(strides=[2, 1], pads=[0, 1, 1, 2])),
    "grouped": dict(w=(6, 2, 3, 3), attrs=dict(group=3, strides=[2, 2]), c=6),
    "dilated": dict(w=(3, 4, 3, 3), attrs=dict(dilations=[2, 2], pads=[1, 1, 1, 1])),
    "no_bias": dict(w=(3, 5, 2, 2), attrs=dict(strides=[2, 2]), bias=False),
}


@pytest.mark.parametrize("case", sorted(DECONV_CASES))
def test_conv_transpose(case):
    c = DECONV_CASES[case]
    w = rand(*c["w"])
    g = c["attrs"].get("group", 1)
    inits = [("W", w)]
    ins = ["X", "W"]
    if c.get("bias", True):
        inits.append(("B", rand(w.shape[1] * g)))
        ins.append("B")
    cin = c.get("c", 3)
    m = model([helper.make_node("ConvTranspose", ins, ["Y"], **c["attrs"])],
              [("X", [2, cin, 7, 6])], ["Y"], inits)
    check(m, {"X": rand(2, cin, 7, 6)})


def test_conv_transpose_1d_then_relu():
    nodes = [helper.make_node("ConvTranspose", ["X", "W", "B"], ["c"], strides=[2]),
             helper.make_node("Relu", ["c"], ["Y"])]
    m = model(nodes, [("X", [1, 4, 9])], ["Y"], [("W", rand(4, 3, 3)), ("B", rand(3))])
    check(m, {"X": rand(1, 4, 9)})


def test_conv_transpose_with_same_padding_is_declined():
    m = model([helper.make_node("ConvTranspose", ["X", "W"], ["Y"], auto_pad="SAME_UPPER",
                                strides=[2, 2])],
              [("X", [1, 3, 5, 5])], ["Y"], [("W", rand(3, 2, 3, 3))])
    sess = check(m, {"X": rand(1, 3, 5, 5)}, all_on_dnnl=False)
    assert "auto_pad SAME_*" in sess.placement_report()


def _programs(sess):
    for grp in sess._partition.groups:
        yield from grp.compiled.programs.values()


def _bert():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                    "benchmarks"))
    import transformer_models as tm

    return tm


def test_two_layer_bert_matches_onnxruntime():
    """benchmarks/transformer_models.py's BERT with 2 layers: LayerNormalization, the GELU
    and the attention on DNNL; what stays on the CPU is the embedding Gathers and the
    shape arithmetic feeding the computed Reshapes."""
    tm = _bert()
    m, feeds = tm.bert(layers=2), tm.bert_inputs(1)
    sess = dnnl_session(m)
    assert_close(sess.run(None, feeds), reference(m, feeds), rtol=1e-4, atol=1e-4)
    ops = {}
    for sg in sess.get_provider_graph_assignment_info():
        for n in sg.get_nodes():
            ops.setdefault(n.op_type, set()).add(sg.ep_name)
    for op in ("LayerNormalization", "Erf", "MatMul", "Softmax"):
        assert ops[op] == {DNNL}, (op, sess.placement_report())
    assert nodes_on(sess) >= total_nodes(sess) // 2


def test_two_layer_gpt2_matches_onnxruntime():
    """GPT-2's block (benchmarks/transformer_models.py, 2 layers): the fused QKV Split, tanh
    GELU and LayerNormalization on DNNL; the causal mask's Where stays on the CPU (oneDNN
    3.2 has no select)."""
    tm = _bert()
    m, feeds = tm.gpt2(layers=2), tm.gpt2_inputs()
    sess = dnnl_session(m)
    assert_close(sess.run(None, feeds), reference(m, feeds), rtol=1e-4, atol=1e-4)
    report = sess.placement_report()
    assert "Where is not among the ops" in report
    on_cpu = {n.op_type for sg in sess.get_provider_graph_assignment_info()
              if sg.ep_name != DNNL for n in sg.get_nodes()}
    assert on_cpu == {"Gather", "Where"}, report


@pytest.mark.parametrize("after_linear", [False, True])
def test_gelu_tanh_written_out(after_linear):
    """GPT-2's 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))): one gelu_tanh (a
    post-op after a linear layer)."""
    x = "h" if after_linear else "X"
    nodes = [helper.make_node("Pow", [x, "three"], ["p"]),
             helper.make_node("Mul", ["p", "c"], ["m"]),
             helper.make_node("Add", [x, "m"], ["a"]),
             helper.make_node("Mul", ["a", "k"], ["s"]),
             helper.make_node("Tanh", ["s"], ["t"]),
             helper.make_node("Add", ["t", "one"], ["o"]),
             helper.make_node("Mul", [x, "half"], ["hx"]),
             helper.make_node("Mul", ["hx", "o"], ["Y"])]
    inits = [("three", np.array(3.0, np.float32)), ("c", np.array(0.044715, np.float32)),
             ("k", np.array(0.7978845608, np.float32)), ("one", np.array(1.0, np.float32)),
             ("half", np.array(0.5, np.float32))]
    if after_linear:
        nodes = [helper.make_node("MatMul", ["X", "W"], ["mm"]),
                 helper.make_node("Add", ["mm", "B"], ["h"])] + nodes
        inits += [("W", rand(16, 24)), ("B", rand(24))]
    m = model(nodes, [("X", [5, 16] if after_linear else [5, 24])], ["Y"], inits)
    sess = check(m, {"X": rand(5, 16 if after_linear else 24, lo=-3, hi=3)})
    steps = sum(len(p.steps) for p in _programs(sess))
    assert steps == 2      # one primitive (the eltwise, or the product with its post-op)


def test_reshape_to_a_target_computed_at_run_time():
    """MatMul -> Reshape(target from Shape/Gather/Concat on the CPU) -> Transpose: the
    Reshape runs on DNNL, one program per combination of input shapes and target values."""
    from onnx import TensorProto

    nodes = [helper.make_node("MatMul", ["X", "W"], ["mm"]),
             helper.make_node("Shape", ["X"], ["shp"]),
             helper.make_node("Gather", ["shp", "i01"], ["bs"], axis=0),
             helper.make_node("Concat", ["bs", "tail"], ["target"], axis=0),
             helper.make_node("Reshape", ["mm", "target"], ["r"]),
             helper.make_node("Transpose", ["r"], ["Y"], perm=[0, 2, 1, 3])]
    g = helper.make_graph(
        nodes, "t", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["B", "S", 8])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [_init(rand(8, 12), "W"), _init(np.array([0, 1], np.int64), "i01"),
         _init(np.array([3, 4], np.int64), "tail")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    sess = dnnl_session(m)
    report = sess.placement_report()
    rows = {line.split()[1]: line for line in report.splitlines() if line.startswith("<")}
    for op in ("MatMul-13", "Reshape-14", "Transpose-13"):
        assert rows[op].split()[2] == DNNL, report
    for shape in ((2, 5, 8), (1, 3, 8), (2, 5, 8)):
        x = rand(*shape)
        assert_close(sess.run(None, {"X": x}), reference(m, {"X": x}))
    groups = [grp.compiled for grp in sess._partition.groups]
    assert [len(c.programs) for c in groups] == [2]
    assert [len(c.fused.nodes) for c in groups] == [3]


def _init(arr, name):
    from onnx import numpy_helper

    return numpy_helper.from_array(arr, name)
