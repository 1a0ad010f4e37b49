"""com.microsoft image ops (GridSample, CropAndResize, MaxpoolWithMask,
ConvTransposeWithDynamicPads) and float products (FusedMatMul, TransposeMatMul,
SparseToDenseMatMul, MatMulFpQ4) against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper as oh

import onnxruntime
import onnxrt

from kernels.contrib_oracle import assert_close, both, feeds_of, ms_model, run_ort, run_ours
from onnxrt.providers.cpu.contrib.matmul_ops import sparse_to_dense_matmul

RNG = np.random.default_rng(33)


def _f(*shape):
    return RNG.normal(size=shape).astype(np.float32)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample(mode, padding_mode, align_corners):
    x, g = _f(2, 3, 5, 6), RNG.uniform(-1.2, 1.2, size=(2, 4, 3, 2)).astype(np.float32)
    assert_close(*both("GridSample", [("x", x), ("g", g)], mode=mode,
                       padding_mode=padding_mode, align_corners=align_corners),
                 rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("crop", [(3, 4), (1, 1), (1, 5)])
def test_crop_and_resize(mode, crop):
    x = _f(2, 3, 8, 7)
    rois = np.array([[0.1, 0.2, 0.8, 0.9], [0.0, 0.0, 1.0, 1.0], [-0.2, 0.3, 0.5, 1.3],
                     [0.6, 0.5, 0.2, 0.1]], np.float32)
    ins = [("x", x), ("r", rois), ("b", np.array([0, 1, 1, 0], np.int32)),
           ("c", np.array(crop, np.int32))]
    assert_close(*both("CropAndResize", ins, consts=("c",), mode=mode,
                       extrapolation_value=-2.0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs", [{"kernel_shape": [2, 2], "strides": [2, 2]},
                                   {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}])
@pytest.mark.parametrize("mshape", [(1, 1, 6, 6), (2, 3, 6, 6)])
def test_maxpool_with_mask(attrs, mshape):
    x = _f(2, 3, 6, 6)
    m = (RNG.random(mshape) > 0.3).astype(np.int32)
    assert_close(*both("MaxpoolWithMask", [("x", x), ("m", m)], **attrs))


@pytest.mark.parametrize("pads", [[0, 0, 0, 0], [1, 0, 0, 1], [0, 2, 1, 0]])
def test_conv_transpose_with_dynamic_pads(pads):
    x, w, b = _f(1, 2, 5, 4), _f(2, 3, 3, 3), _f(3)
    ins = [("x", x), ("w", w), ("p", np.array(pads, np.int64)), ("b", b)]
    assert_close(*both("ConvTransposeWithDynamicPads", ins, strides=[2, 1]),
                 rtol=1e-5, atol=1e-5)


def test_conv_transpose_without_pads_is_refused_like_onnxruntime():
    ins = [("x", _f(1, 2, 5, 4)), ("w", _f(2, 3, 3, 3))]
    m = ms_model("ConvTransposeWithDynamicPads", ins)
    with pytest.raises(Exception, match="Pads"):
        run_ours(m, feeds_of(ins))
    with pytest.raises(Exception, match="pads"):
        run_ort(m, feeds_of(ins))


@pytest.mark.parametrize("ta,tb,bta,btb", [(0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, 0),
                                           (1, 1, 0, 0), (0, 0, 1, 0), (0, 1, 0, 1),
                                           (1, 0, 1, 1)])
def test_fused_matmul(ta, tb, bta, btb):
    # logical A (2, 3, 4, 5) @ B (2, 3, 5, 6), stored as each flag implies
    a, b = _f(2, 3, 4, 5), _f(2, 3, 5, 6)
    if ta:
        a = np.swapaxes(a, -1, -2)
    if bta:
        a = np.moveaxis(a, -2, 0)
    if tb:
        b = np.swapaxes(b, -1, -2)
    if btb:
        b = np.moveaxis(b, -2, 0)
    ins = [("a", np.ascontiguousarray(a)), ("b", np.ascontiguousarray(b))]
    assert_close(*both("FusedMatMul", ins, alpha=0.5, transA=ta, transB=tb, transBatchA=bta,
                       transBatchB=btb), rtol=1e-5, atol=1e-5)


def test_transpose_matmul():
    assert_close(*both("TransposeMatMul", [("a", _f(3, 5, 4)), ("b", _f(5, 6))], transA=1),
                 rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 1), (1, 0)])
def test_sparse_to_dense_matmul(ta, tb):
    # A is a sparse graph input fed as a COO SparseTensor, through both runtimes' own API.
    # onnxruntime's shape inference ignores transA/transB: the transposed case is square
    k = 4 if ta or tb else 6
    dense = np.zeros((4, k), np.float32)
    dense[[0, 1, 3, 3], [2, 3, 0, 1]] = [1.5, -2.0, 3.0, 0.5]
    a = np.ascontiguousarray(dense.T) if ta else dense
    b = _f(k, 3) if not tb else _f(k, k)
    node = oh.make_node("SparseToDenseMatMul", ["a", "b"], ["y"], domain="com.microsoft",
                        alpha=2.0, transA=ta, transB=tb)
    a_type = oh.make_sparse_tensor_value_info("a", onnx.TensorProto.FLOAT, list(a.shape))
    g = oh.make_graph([node], "g", [a_type, oh.make_tensor_value_info("b", 1, b.shape)],
                      [onnx.ValueInfoProto(name="y")])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17),
                                        oh.make_opsetid("com.microsoft", 1)], ir_version=9)
    idx = np.argwhere(a != 0).reshape(-1).astype(np.int64)
    cpu = onnxruntime.OrtDevice.make("cpu", 0)
    sp = onnxruntime.SparseTensor.sparse_coo_from_numpy(list(a.shape), a[a != 0], idx, cpu)
    s = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {"a": onnxruntime.OrtValue.ort_value_from_sparse_tensor(sp),
             "b": onnxruntime.OrtValue.ortvalue_from_numpy(b)}
    ref = s.run_with_ort_values(None, feeds)[0].numpy()
    sp2 = onnxrt.SparseTensor.sparse_coo_from_numpy(list(a.shape), a[a != 0], idx,
                                                    onnxrt.OrtDevice.make("cpu", 0))
    mine = onnxrt.InferenceSession(m.SerializeToString())
    got = mine.run_with_ort_values(None, {
        "a": onnxrt.OrtValue.ort_value_from_sparse_tensor(sp2),
        "b": onnxrt.OrtValue.ortvalue_from_numpy(b)})[0].numpy()
    assert_close([ref], [got], rtol=1e-5, atol=1e-5)
    # a sparse initializer reaches the kernel dense
    assert_close([ref], [sparse_to_dense_matmul(a, b, alpha=2.0, transA=ta, transB=tb)],
                 rtol=1e-5, atol=1e-5)


def _fpq4_blob(w, qtype):
    """Pack a (K, N) float weight the way onnxruntime's MlasQ4GemmPackB lays it out."""
    blk, has_zp = {0: (32, False), 1: (32, True), 2: (64, False), 4: (128, False)}[qtype]
    k, n = w.shape
    out = bytearray()
    deq = np.zeros((k, n), np.float32)
    for j in range(n):
        for k0 in range(0, k, blk):
            col = np.zeros(blk, np.float32)
            col[:min(blk, k - k0)] = w[k0:k0 + blk, j]
            if has_zp:
                lo, hi = min(col.min(), 0), max(col.max(), 0)
                s = (hi - lo) / 15 or 1.0
                z = int(np.clip(np.rint(-lo / s), 0, 15))
            else:
                s = (np.abs(col).max() / 8) or 1.0
                z = 8
            q = np.clip(np.rint(col / s) + z, 0, 15).astype(np.uint8)
            out += np.float32(s).tobytes() + (bytes([z]) if has_zp else b"")
            m = min(blk, k - k0)
            deq[k0:k0 + m, j] = (q[:m].astype(np.float32) - z) * np.float32(s)
            for r in range(0, blk, 32):
                out += bytes((q[r:r + 16] | (q[r + 16:r + 32] << 4)).tolist())
    return np.frombuffer(bytes(out), np.uint8), deq


@pytest.mark.parametrize("qtype", [0, 1, 2, 4])
def test_matmul_fpq4(qtype):
    # onnxruntime's MatMulFpQ4 kernel refuses to run on CPUs without its int4 kernels (this
    # machine: "4b quantization not yet supported on this hardware platform"), so the blob is
    # built here in MLAS's layout and the product checked against the dequantized weight
    k, n = 70, 5
    blob, w = _fpq4_blob(_f(k, n), qtype)
    a = _f(3, k)
    ins = [("a", a), ("b", blob), ("s", np.array([k, n], np.int64))]
    m = ms_model("MatMulFpQ4", ins, consts=("b", "s"), blk_quant_type=qtype)
    got = run_ours(m, {"a": a})[0]
    np.testing.assert_allclose(got, a @ w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("act,params", [(None, None), ("Relu", None),
                                        ("LeakyRelu", [0.2]), ("Clip", [-0.5, 0.5])])
@pytest.mark.parametrize("with_z", [False, True])
def test_nhwc_fused_conv(act, params, with_z):
    """onnxruntime registers NhwcFusedConv on ARM64 only: its float32 FusedConv on the
    same tensors transposed to NCHW is the oracle."""
    x, w, b = _f(2, 3, 7, 6), _f(4, 3, 3, 3), _f(4)
    z = _f(2, 4, 7, 6) if with_z else None
    attrs = {"pads": [1, 1, 1, 1]}
    if act:
        attrs["activation"] = act
    if params:
        attrs["activation_params"] = params
    ref = both("FusedConv", [("x", x), ("w", w), ("b", b), ("z", z)], **attrs)[0]
    nhwc = lambda a: None if a is None else np.ascontiguousarray(a.transpose(0, 2, 3, 1))  # noqa
    m = ms_model("NhwcFusedConv", [("x", nhwc(x)), ("w", w), ("b", b), ("z", nhwc(z))],
                 **attrs)
    got = run_ours(m, {"x": nhwc(x), "w": w, "b": b, **({"z": nhwc(z)} if with_z else {})})
    np.testing.assert_allclose(got[0], nhwc(ref[0]), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("AveragePool", {"kernel_shape": [2, 3], "count_include_pad": 1, "pads": [0, 1, 0, 1]}),
    ("GlobalAveragePool", {})])
@pytest.mark.parametrize("dt", [np.float32, np.float16])
def test_internal_nhwc_pools(op, attrs, dt):
    """com.ms.internal.nhwc pools (onnxruntime runs them on ARM64 only): its ONNX pool on
    the NCHW transpose is the oracle."""
    x = _f(2, 5, 7, 6).astype(dt)
    ref = both(op, [("x", x)], domain="", **attrs)[0][0]
    xt = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    m = ms_model(op, [("x", xt)], domain="com.ms.internal.nhwc", **attrs)
    for imp in m.opset_import:
        if imp.domain == "com.ms.internal.nhwc":
            imp.version = 12
    got = run_ours(m, {"x": xt})[0]
    tol = 2e-3 if dt == np.float16 else 1e-6
    np.testing.assert_allclose(got.astype(np.float32),
                               ref.transpose(0, 2, 3, 1).astype(np.float32), rtol=tol,
                               atol=tol)
