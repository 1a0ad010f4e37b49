"""Each op the oneDNN provider claims, alone and in the chains it fuses, against
onnxruntime's CPU provider; every node must run on DNNL."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from dnnlhelpers import assert_close, dnnl_session, needs_dnnl, nodes_on, reference

pytestmark = needs_dnnl

F = TensorProto.FLOAT
RNG = np.random.default_rng(7)


def rand(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(
        nodes, "t",
        [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, F, None) for n in outputs],
        [numpy_helper.from_array(a, n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def check(m, feeds, rtol=1e-4, atol=1e-5, all_on_dnnl=True):
    sess = dnnl_session(m)
    n = len(m.graph.node)
    if all_on_dnnl:
        assert nodes_on(sess) == n, sess.placement_report()
    got = sess.run(None, feeds)
    assert_close(got, reference(m, feeds), rtol, atol)
    return sess


CONV_CASES = {
    "plain": dict(w=(8, 3, 3, 3), attrs={}),
    "pads_strides": dict(w=(8, 3, 3, 3), attrs=dict(pads=[1, 0, 2, 1], strides=[2, 1])),
    "dilated": dict(w=(4, 3, 3, 3), attrs=dict(dilations=[2, 2], pads=[2, 2, 2, 2])),
    "grouped": dict(w=(6, 1, 3, 3), attrs=dict(group=3, pads=[1, 1, 1, 1]), c=3),
    "same_upper": dict(w=(5, 3, 4, 4), attrs=dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    "same_lower": dict(w=(5, 3, 4, 4), attrs=dict(auto_pad="SAME_LOWER")),
    "no_bias": dict(w=(8, 3, 1, 1), attrs={}, bias=False),
}


@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv(case):
    c = CONV_CASES[case]
    w = rand(*c["w"])
    inits = [("W", w)]
    ins = ["X", "W"]
    if c.get("bias", True):
        inits.append(("B", rand(w.shape[0])))
        ins.append("B")
    m = model([helper.make_node("Conv", ins, ["Y"], **c["attrs"])],
              [("X", [2, c.get("c", 3), 11, 9])], ["Y"], inits)
    check(m, {"X": rand(2, c.get("c", 3), 11, 9)})


def test_conv_1d():
    m = model([helper.make_node("Conv", ["X", "W", "B"], ["Y"], pads=[1, 1])],
              [("X", [1, 4, 20])], ["Y"], [("W", rand(6, 4, 3)), ("B", rand(6))])
    check(m, {"X": rand(1, 4, 20)})


def _bn_inits(c, p="bn"):
    return [(f"{p}_s", rand(c, lo=0.5, hi=1.5)), (f"{p}_b", rand(c)),
            (f"{p}_m", rand(c)), (f"{p}_v", rand(c, lo=0.2, hi=2.0))]


def test_conv_batchnorm_relu_chain_folds():
    """Conv -> BN -> Relu: BN folded into the weights, Relu a post-op; same numbers."""
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "bn_s", "bn_b", "bn_m", "bn_v"],
                              ["b"], epsilon=1e-3),
             helper.make_node("Relu", ["b"], ["Y"])]
    m = model(nodes, [("X", [1, 16, 12, 12])], ["Y"],
              [("W", rand(16, 16, 3, 3)), ("B", rand(16))] + _bn_inits(16))
    check(m, {"X": rand(1, 16, 12, 12)})


def test_residual_add_relu_post_ops():
    """A residual block: conv -> conv -> Add(skip) -> Relu, the add and relu as post-ops of
    the second conv, the skip read in blocked layout."""
    nodes = [helper.make_node("Conv", ["X", "W1", "B1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Conv", ["r", "W2", "B2"], ["b"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["b", "r"], ["s"]),
             helper.make_node("Relu", ["s"], ["Y"])]
    m = model(nodes, [("X", [2, 8, 10, 10])], ["Y"],
              [("W1", rand(16, 8, 3, 3)), ("B1", rand(16)), ("W2", rand(16, 16, 3, 3)),
               ("B2", rand(16))])
    check(m, {"X": rand(2, 8, 10, 10)})


def test_intermediate_value_that_is_also_an_output():
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["c"]),
             helper.make_node("Relu", ["c"], ["Y"])]
    m = model(nodes, [("X", [1, 3, 8, 8])], ["c", "Y"], [("W", rand(8, 3, 3, 3)),
                                                        ("B", rand(8))])
    check(m, {"X": rand(1, 3, 8, 8)})


POOL_CASES = {
    "max_plain": ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2])),
    "max_pads": ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    "max_ceil": ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    "max_dilated": ("MaxPool", dict(kernel_shape=[2, 2], dilations=[2, 2])),
    "max_same": ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")),
    "avg_exclude": ("AveragePool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    "avg_include": ("AveragePool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                        count_include_pad=1)),
    "avg_ceil": ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
    "global_avg": ("GlobalAveragePool", {}),
    "global_max": ("GlobalMaxPool", {}),
}


@pytest.mark.parametrize("case", sorted(POOL_CASES))
def test_pooling_after_conv(case):
    op, attrs = POOL_CASES[case]
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["c"]),
             helper.make_node(op, ["c"], ["Y"], **attrs)]
    m = model(nodes, [("X", [2, 3, 13, 12])], ["Y"], [("W", rand(8, 3, 2, 2)),
                                                     ("B", rand(8))])
    check(m, {"X": rand(2, 3, 13, 12)})


def test_batchnorm_primitive_and_lrn():
    nodes = [helper.make_node("BatchNormalization", ["X", "bn_s", "bn_b", "bn_m", "bn_v"],
                              ["b"]),
             helper.make_node("LRN", ["b"], ["Y"], size=5, alpha=1e-3, beta=0.7, bias=2.0)]
    m = model(nodes, [("X", [2, 7, 5, 6])], ["Y"], _bn_inits(7))
    check(m, {"X": rand(2, 7, 5, 6)})


UNARY = {
    "Relu": {}, "LeakyRelu": dict(alpha=0.2), "Elu": dict(alpha=0.7), "Tanh": {},
    "Sigmoid": {}, "Exp": {}, "Abs": {}, "HardSigmoid": dict(alpha=0.3, beta=0.4),
    "HardSwish": {}, "Neg": {}, "Mish": {},
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_after_conv_as_post_op_and_alone(op):
    """Once as the conv's post-op, once as its own primitive on a graph input."""
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["c"]),
             helper.make_node(op, ["c"], ["Y"], **UNARY[op]),
             helper.make_node(op, ["X"], ["Z"], **UNARY[op])]
    m = model(nodes, [("X", [1, 3, 6, 6])], ["Y", "Z"],
              [("W", rand(4, 3, 1, 1)), ("B", rand(4))], opset=18)   # Mish is opset 18
    check(m, {"X": rand(1, 3, 6, 6, lo=-3, hi=3)})


def test_softplus_is_declined_and_its_negative_tail_is_exact():
    """oneDNN 3.2's soft_relu gave 0 for softplus(-15) and 1.9e-6 for softplus(-20): the
    node stays on the CPU provider, with the reason, and the tail matches log1p(exp(x))."""
    m = model([helper.make_node("Softplus", ["X"], ["Y"])], [("X", [7])], ["Y"])
    x = np.array([-30, -20, -15, -10, -1, 0, 5], np.float32)
    sess = dnnl_session(m)
    assert nodes_on(sess) == 0
    assert "soft_relu loses the negative tail" in sess.placement_report()
    want = np.log1p(np.exp(x.astype(np.float64)))
    np.testing.assert_allclose(sess.run(None, {"X": x})[0], want, rtol=1e-5, atol=0)


def test_positive_only_unary_and_pow_clip_gelu():
    nodes = [helper.make_node("Sqrt", ["X"], ["a"]),
             helper.make_node("Log", ["X"], ["b"]),
             helper.make_node("Pow", ["X", "e"], ["c"]),
             helper.make_node("Clip", ["X", "lo", "hi"], ["d"]),
             helper.make_node("Gelu", ["X"], ["g"]),
             helper.make_node("Gelu", ["X"], ["h"], approximate="tanh")]
    m = model(nodes, [("X", [3, 17])], ["a", "b", "c", "d", "g", "h"],
              [("e", np.array(1.7, np.float32)), ("lo", np.array(0.3, np.float32)),
               ("hi", np.array(0.6, np.float32))], opset=20)
    check(m, {"X": rand(3, 17, lo=0.05, hi=1.0)})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min", "Sum"])
def test_binary_same_shape_and_broadcast(op):
    nodes = [helper.make_node(op, ["X", "Z"], ["a"]),
             helper.make_node(op, ["X", "c"], ["b"])]
    m = model(nodes, [("X", [2, 4, 3, 5]), ("Z", [2, 4, 3, 5])], ["a", "b"],
              [("c", rand(4, 1, 1, lo=0.5, hi=1.5))])
    check(m, {"X": rand(2, 4, 3, 5), "Z": rand(2, 4, 3, 5, lo=0.5, hi=1.5)})


@pytest.mark.parametrize("shared", [False, True])
def test_per_channel_mul_add_relu_as_one_affine(shared):
    """Mul and Add by per-channel constants, then Relu (BN written out, as in densenet):
    one normalization primitive; with ``shared`` the Mul's result is read twice, so the
    chain must stop there."""
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["c"]),
             helper.make_node("Mul", ["c", "s"], ["m"]),
             helper.make_node("Add", ["b", "m"], ["a"]),
             helper.make_node("Relu", ["a"], ["Y"])]
    outs = ["Y"]
    if shared:
        nodes.append(helper.make_node("Neg", ["m"], ["Z"]))
        outs.append("Z")
    m = model(nodes, [("X", [2, 3, 9, 9])], outs,
              [("W", rand(16, 3, 3, 3)), ("B", rand(16)), ("s", rand(16, 1, 1)),
               ("b", rand(1, 16, 1, 1))])
    check(m, {"X": rand(2, 3, 9, 9)})


def test_concat_of_blocked_branches():
    nodes = [helper.make_node("Conv", ["X", "W1", "B1"], ["a"]),
             helper.make_node("Conv", ["X", "W2", "B2"], ["b"]),
             helper.make_node("Concat", ["a", "b", "X"], ["Y"], axis=1)]
    m = model(nodes, [("X", [1, 3, 7, 7])], ["Y"],
              [("W1", rand(8, 3, 1, 1)), ("B1", rand(8)), ("W2", rand(5, 3, 1, 1)),
               ("B2", rand(5))])
    check(m, {"X": rand(1, 3, 7, 7)})


@pytest.mark.parametrize("opset,axis", [(11, 1), (13, 1), (13, -1), (11, 2)])
def test_softmax_and_logsoftmax(opset, axis):
    nodes = [helper.make_node("Softmax", ["X"], ["a"], axis=axis),
             helper.make_node("LogSoftmax", ["X"], ["b"], axis=axis)]
    m = model(nodes, [("X", [2, 3, 4])], ["a", "b"], opset=opset)
    check(m, {"X": rand(2, 3, 4, lo=-4, hi=4)})


GEMM_CASES = {
    "plain": (dict(), (5, 7), (7,)),
    "transB_alpha_beta": (dict(transB=1, alpha=0.5, beta=2.0), (7, 5), (1, 7)),
    "scalar_c": (dict(), (5, 7), ()),
    "full_c": (dict(), (5, 7), (4, 7)),
    "no_c": (dict(), (5, 7), None),
}


@pytest.mark.parametrize("case", sorted(GEMM_CASES))
def test_gemm_then_relu(case):
    attrs, bshape, cshape = GEMM_CASES[case]
    inits = [("Bw", rand(*bshape))]
    ins = ["X", "Bw"]
    if cshape is not None:
        inits.append(("C", rand(*cshape)))
        ins.append("C")
    nodes = [helper.make_node("Gemm", ins, ["g"], **attrs),
             helper.make_node("Relu", ["g"], ["Y"])]
    m = model(nodes, [("X", [4, 5])], ["Y"], inits)
    check(m, {"X": rand(4, 5)})


def test_matmul_batched_constant_and_two_values():
    nodes = [helper.make_node("MatMul", ["X", "W"], ["a"]),
             helper.make_node("MatMul", ["a", "Z"], ["Y"])]
    m = model(nodes, [("X", [2, 3, 6]), ("Z", [2, 4, 5])], ["Y"], [("W", rand(6, 4))])
    check(m, {"X": rand(2, 3, 6), "Z": rand(2, 4, 5)})


def test_reshape_flatten_transpose_inside_a_group():
    """The channel shuffle of shufflenet and a classifier head: blocked activations are
    reordered to plain before every reshape."""
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["c"]),
             helper.make_node("Reshape", ["c", "s1"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3, 4]),
             helper.make_node("Reshape", ["t", "s2"], ["u"]),
             helper.make_node("Relu", ["u"], ["v"]),
             helper.make_node("Flatten", ["v"], ["f"]),
             helper.make_node("Gemm", ["f", "G"], ["Y"], transB=1)]
    m = model(nodes, [("X", [2, 3, 5, 5])], ["Y"],
              [("W", rand(8, 3, 1, 1)), ("B", rand(8)),
               ("s1", np.array([2, 2, 4, 5, 5], np.int64)),
               ("s2", np.array([2, 8, 5, 5], np.int64)), ("G", rand(10, 200))])
    check(m, {"X": rand(2, 3, 5, 5)})


def test_reshape_of_a_group_input():
    """A group input viewed under another shape: the view takes the input's pointer too."""
    nodes = [helper.make_node("Reshape", ["X", "s"], ["r"]),
             helper.make_node("Relu", ["r"], ["Y"])]
    m = model(nodes, [("X", [2, 12])], ["Y"], [("s", np.array([2, 3, 4], np.int64))])
    sess = check(m, {"X": rand(2, 12)})
    x2 = rand(2, 12)   # a second run with new data must read the new pointer
    assert_close(sess.run(None, {"X": x2}), reference(m, {"X": x2}))
