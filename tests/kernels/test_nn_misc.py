"""Gemm, MatMul, Einsum, normalizations and Dropout beyond the ONNX suite.

Oracles: onnxruntime where it implements the case, else a NumPy formula.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import onnxrt
from oracle import assert_outputs_close

ort = pytest.importorskip("onnxruntime")

F32 = onnx.TensorProto.FLOAT
F16 = onnx.TensorProto.FLOAT16
RNG = np.random.default_rng(1)


def _model(node, feeds, consts=None, opset=17, out_elems=(F32,)):
    consts = consts or {}
    ins = [helper.make_tensor_value_info(
        k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)) for k, v in feeds.items()]
    outs = [helper.make_tensor_value_info(o, e, None) for o, e in zip(node.output, out_elems)]
    g = helper.make_graph([node], "g", ins, outs,
                          [numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(g, ir_version=9, opset_imports=[helper.make_opsetid("", opset)])


def _both(node, feeds, consts=None, opset=17, out_elems=(F32,)):
    data = _model(node, feeds, consts, opset, out_elems).SerializeToString()
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = onnxrt.InferenceSession(data).run(None, feeds)
    return ref, got


def _ours(node, feeds, consts=None, opset=17, out_elems=(F32,)):
    data = _model(node, feeds, consts, opset, out_elems).SerializeToString()
    return onnxrt.InferenceSession(data).run(None, feeds)


def _check(ref, got, rtol=1e-5, atol=1e-5):
    assert_outputs_close(ref, got, rtol, atol)


@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("const_b", [False, True])
def test_gemm(ta, tb, const_b):
    a = RNG.standard_normal((5, 4) if ta else (4, 5)).astype(np.float32)
    b = RNG.standard_normal((3, 5) if tb else (5, 3)).astype(np.float32)
    c = RNG.standard_normal((3,)).astype(np.float32)
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=ta, transB=tb, alpha=0.5,
                            beta=2.0)
    if const_b:
        _check(*_both(node, {"a": a}, {"b": b, "c": c}))
    else:
        _check(*_both(node, {"a": a, "b": b, "c": c}))


@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("ta,tb", [(0, 1), (1, 0)])
def test_gemm_few_rows_direct(rows, ta, tb, monkeypatch):
    """A product of fewer than 4 rows on a small weight is one np.matmul, without
    matmul()'s split decisions (a detector's output layer at batch 1); same values as
    onnxruntime, and a 4-row product still goes through matmul()."""
    from onnxrt.providers.cpu.nn import matmul as mm
    from onnxrt.framework.blas_threads import blas_threads_unused

    if not blas_threads_unused(1):
        pytest.skip("numpy's BLAS is not OpenBLAS: every product takes matmul()")
    seen = []
    orig = mm.matmul

    def spy(a, b, *rest):
        seen.append(a.shape)
        return orig(a, b, *rest)

    monkeypatch.setattr(mm, "matmul", spy)
    for m in (rows, 4):
        a = RNG.standard_normal((6, m) if ta else (m, 6)).astype(np.float32)
        b = RNG.standard_normal((2, 6) if tb else (6, 2)).astype(np.float32)
        c = RNG.standard_normal((1, 2)).astype(np.float32)
        node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=ta, transB=tb,
                                alpha=0.5, beta=2.0)
        _check(*_both(node, {"a": a}, {"b": b, "c": c}))
    assert seen == [(4, 6)]


def test_gemm_fp16_and_int():
    a = RNG.standard_normal((4, 6)).astype(np.float16)
    b = RNG.standard_normal((6, 3)).astype(np.float16)
    node = helper.make_node("Gemm", ["a", "b"], ["y"])
    _check(*_both(node, {"a": a, "b": b}, out_elems=(F16,)), rtol=2e-3, atol=2e-3)
    a = RNG.integers(-5, 5, (4, 6)).astype(np.int64)
    b = RNG.integers(-5, 5, (6, 3)).astype(np.int64)
    c = RNG.integers(-5, 5, (4, 1)).astype(np.int64)
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], beta=3.0)
    (y,) = _ours(node, {"a": a, "b": b, "c": c}, out_elems=(onnx.TensorProto.INT64,))
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, a @ b + 3 * c)


@pytest.mark.parametrize("sa,sb", [((3, 4), (4,)), ((4,), (4, 2)), ((2, 1, 3, 4), (5, 4, 2)),
                                   ((3, 4), (4, 5))])
def test_matmul_shapes(sa, sb):
    a = RNG.standard_normal(sa).astype(np.float32)
    b = RNG.standard_normal(sb).astype(np.float32)
    _check(*_both(helper.make_node("MatMul", ["a", "b"], ["y"]), {"a": a, "b": b}))
    a16, b16 = a.astype(np.float16), b.astype(np.float16)
    _check(*_both(helper.make_node("MatMul", ["a", "b"], ["y"]), {"a": a16, "b": b16},
                  out_elems=(F16,)), rtol=3e-3, atol=3e-3)


@pytest.mark.parametrize("eq,shapes", [("ij,jk->ik", [(3, 4), (4, 5)]),
                                       ("bij, bjk -> bik", [(2, 3, 4), (2, 4, 5)]),
                                       ("...ii->...i", [(2, 3, 3)]),
                                       ("ij,jk,kl", [(2, 3), (3, 4), (4, 2)]),
                                       ("i,i", [(5,), (5,)])])
def test_einsum(eq, shapes):
    xs = {f"x{i}": RNG.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
    node = helper.make_node("Einsum", list(xs), ["y"], equation=eq)
    _check(*_both(node, xs), rtol=1e-4, atol=1e-4)


def test_batchnorm_inference_folded_and_not():
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    p = {k: RNG.random(3).astype(np.float32) + 0.5 for k in ("s", "b", "m", "v")}
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                            epsilon=1e-3)
    _check(*_both(node, {"x": x}, p))
    _check(*_both(node, {"x": x, **p}))


def test_batchnorm_training_outputs():
    x = RNG.standard_normal((4, 3, 5)).astype(np.float32)
    s, b, m, v = (RNG.random(3).astype(np.float32) + 0.5 for _ in range(4))
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"],
                            ["y", "rm", "rv"], training_mode=1, momentum=0.8)
    y, rm, rv = _ours(node, {"x": x, "s": s, "b": b, "m": m, "v": v}, opset=15,
                      out_elems=(F32, F32, F32))
    mean = x.mean(axis=(0, 2))
    var = x.var(axis=(0, 2))
    ref = (x - mean[:, None]) / np.sqrt(var[:, None] + 1e-5) * s[:, None] + b[:, None]
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rm, m * 0.8 + mean * 0.2, rtol=1e-5)
    np.testing.assert_allclose(rv, v * 0.8 + var * 0.2, rtol=1e-5)


def test_batchnorm_old_spatial0():
    x = RNG.standard_normal((2, 3, 2)).astype(np.float32)
    s, b, m = (RNG.random((3, 2)).astype(np.float32) for _ in range(3))
    v = RNG.random((3, 2)).astype(np.float32) + 0.5
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], spatial=0,
                            is_test=1)
    (y,) = _ours(node, {"x": x, "s": s, "b": b, "m": m, "v": v}, opset=6)
    np.testing.assert_allclose(y, (x - m) / np.sqrt(v + 1e-5) * s + b, rtol=1e-5, atol=1e-5)


def test_instance_and_layer_norm_fp16():
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float16)
    s, b = RNG.random(3).astype(np.float16), RNG.random(3).astype(np.float16)
    node = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"])
    _check(*_both(node, {"x": x, "s": s, "b": b}, out_elems=(F16,)), rtol=3e-3, atol=3e-3)
    x = RNG.standard_normal((2, 3, 8)).astype(np.float32)
    s, b = RNG.random((3, 8)).astype(np.float32), RNG.random((3, 8)).astype(np.float32)
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y", "m", "i"], axis=1)
    _check(*_both(node, {"x": x, "s": s, "b": b}, out_elems=(F32, F32, F32)), rtol=1e-4,
           atol=1e-4)


@pytest.mark.parametrize("opset,per", [(18, "group"), (21, "channel")])
def test_group_norm(opset, per):
    x = RNG.standard_normal((2, 6, 3, 2)).astype(np.float32)
    n = 2 if per == "group" else 6
    s, b = RNG.random(n).astype(np.float32), RNG.random(n).astype(np.float32)
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2,
                            epsilon=1e-3)
    (y,) = _ours(node, {"x": x, "s": s, "b": b}, opset=opset)
    xg = x.reshape(2, 2, -1)
    ref = ((xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + 1e-3))
    ref = ref.reshape(x.shape)
    if per == "group":
        s, b = np.repeat(s, 3), np.repeat(b, 3)
    ref = ref * s[:, None, None] + b[:, None, None]
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_rms_lp_mvn_lrn():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    s = RNG.random(4).astype(np.float32)
    (y,) = _ours(helper.make_node("RMSNormalization", ["x", "s"], ["y"]), {"x": x, "s": s},
                 opset=23)
    np.testing.assert_allclose(y, x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * s,
                               rtol=1e-5)
    x0 = x.copy()
    x0[0, 0] = 0
    node = helper.make_node("LpNormalization", ["x"], ["y"], axis=-1, p=1)
    _check(*_both(node, {"x": x0}))
    x4 = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"], axes=[0, 2, 3])
    _check(*_both(node, {"x": x4}), rtol=1e-4, atol=1e-4)
    for size, beta in [(3, 0.75), (5, 0.5)]:
        node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=1e-2, beta=beta, bias=2.0)
        _check(*_both(node, {"x": x4}), rtol=1e-5, atol=1e-5)


def test_dropout_inference_and_training():
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    node = helper.make_node("Dropout", ["x"], ["y", "m"])
    y, m = _ours(node, {"x": x}, opset=13, out_elems=(F32, onnx.TensorProto.BOOL))
    assert y is not None and np.array_equal(y, x) and m.dtype == bool and m.all()
    r = np.array(0.25, dtype=np.float32)
    t = np.array(True)
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "m"], seed=3)
    y, m = _ours(node, {"x": x, "r": r, "t": t}, opset=13,
                 out_elems=(F32, onnx.TensorProto.BOOL))
    keep = np.random.RandomState(3).uniform(0, 1, x.shape) >= 0.25
    np.testing.assert_array_equal(m, keep)
    np.testing.assert_allclose(y, x * keep / 0.75, rtol=1e-6)
    node = helper.make_node("Dropout", ["x"], ["y", "m"], ratio=0.3)
    y, m = _ours(node, {"x": x}, opset=7, out_elems=(F32, F32))
    assert np.array_equal(y, x) and m.dtype == np.float32 and (m == 1).all()


def test_matmul_constant_fp16_weight():
    a = RNG.standard_normal((2, 3, 8)).astype(np.float16)
    b = RNG.standard_normal((8, 5)).astype(np.float16)
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    _check(*_both(node, {"a": a}, {"b": b}, out_elems=(F16,)), rtol=3e-3, atol=3e-3)
