"""The PyTorch-backed providers: the conformance subset and the zoo through
TorchExecutionProvider on torch's CPU device, mixed sessions, IOBinding with outputs left on
the device, DLPack, options, and the CUDA/ROCm fallback on a machine without a GPU."""

from __future__ import annotations

import glob
import os
import re
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the torch-backed "
                                            "providers cannot run (pip install onnxrt[torch])")

import onnxrt as ort  # noqa: E402
from onnxrt.providers.torch import (CUDAExecutionProvider, ROCMExecutionProvider,  # noqa: E402
                                    TorchExecutionProvider, ortvalue_from_dlpack,
                                    ortvalue_from_torch, ortvalue_to_dlpack)
from onnxrt.providers.torch.registry import load_kernels  # noqa: E402
from models import model  # noqa: E402
from oracle import assert_all_similar, normalize  # noqa: E402

TORCH_EP = "TorchExecutionProvider"
CPU = "CPUExecutionProvider"
for _cls in (TorchExecutionProvider, CUDAExecutionProvider, ROCMExecutionProvider):
    ort.register_execution_provider(_cls)

KERNEL_OPS = {kd.op_type for kd in load_kernels()}

# why the torch provider may leave every node of a case to the CPU: element types torch has
# no kernels for, and attribute combinations it declines on purpose (each with its reason)
KNOWN_DECLINES = re.compile(
    r"no kernel for type (uint16|uint32|uint64|string|int4|uint4|int2|uint2|float4e2m1|"
    r"float8\w*|complex\w*)|torch has no exact cast to element type|training-mode|"
    r"tf_crop_and_resize|antialiased Resize|no kernel for ai\.onnx::")
# random ops: their values depend on the process-wide generator's history, not on torch
RANDOM_OPS = {"Bernoulli", "RandomUniformLike", "RandomNormalLike", "RandomUniform",
              "RandomNormal", "Multinomial"}


def _cases():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.loader import load_node_model_tests

        cases = load_node_model_tests()
    # an "_expanded" case repeats its op's case as a function body of primitive ops: kept
    # only where torch has no kernel for the op itself (Attention, ...), to stay fast
    own = {c.name for c in cases if {n.op_type for n in c.model.graph.node} <= KERNEL_OPS}
    for case in cases:
        ops = {n.op_type for n in case.model.graph.node}
        if "_expanded" in case.name and case.name.split("_expanded")[0] in own:
            continue
        if ops & KERNEL_OPS and not ops & RANDOM_OPS:
            yield pytest.param(case, id=case.name)


def torch_session(m, **opts):
    data = m.SerializeToString() if isinstance(m, onnx.ModelProto) else m
    return ort.InferenceSession(data, providers=[TorchExecutionProvider(**opts), CPU])


def placement(sess):
    return {(sg.get_nodes()[0].name, sg.get_nodes()[0].op_type, i): sg.ep_name
            for i, sg in enumerate(sess.get_provider_graph_assignment_info())}


@pytest.mark.parametrize("case", list(_cases()))
def test_conformance_case_on_torch(case):
    sess = torch_session(case.model)
    info = sess.get_provider_graph_assignment_info()
    on_torch = [sg for sg in info if sg.ep_name == TORCH_EP]
    # every node torch has a kernel for ran on torch, or torch said why it declined it
    declines = sess._partition.declines
    for nid, pl in sess._partition.placement.items():
        node = sess._partition.nodes[nid]
        if pl.provider.name != TORCH_EP and node.op_type in KERNEL_OPS:
            why = [r for p, r in declines.get(nid, []) if p == TORCH_EP]
            assert why, f"{node.op_type} left torch without a reason"
            if not on_torch:
                assert KNOWN_DECLINES.search(why[0]) or "host-only" in why[0], why[0]
    names = [i.name for i in case.model.graph.input]
    outs = [o.name for o in case.model.graph.output]
    for inputs, refs in case.data_sets:
        feeds = {n: normalize(v) for n, v in zip(names, inputs)}
        assert_all_similar(refs, sess.run(None, feeds), case.rtol, case.atol, outs)


# -- the zoo --------------------------------------------------------------------------------

from zoo_data import LIGHT, LIGHT_DIR, light_expected, light_feeds  # noqa: E402


@pytest.mark.parametrize("name,nhwc", [(n, "0") for n in LIGHT] +
                         [(n, "1") for n in ("resnet50", "squeezenet") if n in LIGHT])
def test_zoo_model_on_torch(name, nhwc):
    """Every CNN of the zoo runs its convolutions, pools and matrix products on torch and
    gives the outputs onnxrt's CPU provider gives (stored beside the model); two of them
    also with channels-last values (prefer_nhwc)."""
    path = os.path.join(LIGHT_DIR, f"light_{name}.onnx")
    m = onnx.load(path)
    sess = torch_session(path, prefer_nhwc=nhwc)
    where = placement(sess)
    for (node, op, _), ep in where.items():
        if op in ("Conv", "MaxPool", "AveragePool", "Gemm", "MatMul", "Relu", "Softmax"):
            assert ep == TORCH_EP, f"{op} {node} ran on {ep}"
    feeds = light_feeds(m, sess)
    refs = light_expected(name, m)
    last = sess._model.graph.node[-1]
    if last.op_type == "Softmax" and all(np.ptp(r) == 0 for r in refs):
        # the light models' synthetic weights tie every logit (the stored output is exactly
        # uniform): a softmax of ~1e12 logits then turns float32 rounding into the answer,
        # so compare the logits' tie itself
        values = sess.record_values(feeds)
        logits = values[last.input[0]]
        assert np.ptp(logits) <= 1e-4 * np.abs(logits).max(), "logits are not tied"
        return
    assert_all_similar(refs, sess.run(None, feeds), 1e-3, 1e-7,
                       [o.name for o in m.graph.output])


def _model_sets():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.loader import load_model_tests

        for kind in ("simple", "pytorch-converted", "pytorch-operator"):
            for case in load_model_tests(kind=kind):
                yield pytest.param(case, id=f"{kind}/{case.name}")


@pytest.mark.parametrize("case", list(_model_sets()))
def test_model_set_on_torch(case):
    """The backend suite's small models (older opsets: MaxPool-1, Upsample...) on torch."""
    from conformance.exclusions import EXCLUDED
    from conformance.test_model_sets import _read

    if case.name in EXCLUDED:
        pytest.skip(f"excluded for every provider: {EXCLUDED[case.name]}")
    path = os.path.join(case.model_dir, "model.onnx")
    m = onnx.load(path)
    sess = torch_session(path)
    init = {t.name for t in m.graph.initializer}
    inputs = [i for i in m.graph.input if i.name not in init]
    sets = sorted(glob.glob(os.path.join(case.model_dir, "test_data_set_*")))
    assert sets
    for d in sets:
        feeds = {vi.name: _read(os.path.join(d, f"input_{i}.pb"), vi.type)
                 for i, vi in enumerate(inputs)
                 if os.path.exists(os.path.join(d, f"input_{i}.pb"))}
        refs = [_read(os.path.join(d, f"output_{i}.pb"), vi.type)
                for i, vi in enumerate(m.graph.output)]
        assert_all_similar(refs, sess.run(None, feeds), case.rtol, case.atol,
                           [o.name for o in m.graph.output])


# -- mixed sessions, devices, IOBinding, DLPack -----------------------------------------------

def vi(name, shape, t=T.FLOAT):
    return h.make_tensor_value_info(name, t, list(shape))


def mixed_model():
    """MatMul (torch) -> Shrink (no torch kernel: CPU) -> Add (torch) -> a Reshape whose
    shape a Shape/Gather/Concat chain computes on the host -> Softmax (torch)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 6)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b")
    minus1 = numpy_helper.from_array(np.array([-1], np.int64), "minus1")
    zero = numpy_helper.from_array(np.array([0], np.int64), "zero")
    return model([h.make_node("MatMul", ["x", "w"], ["mm"], name="matmul"),
                  h.make_node("Shrink", ["mm"], ["sh"], lambd=0.3, bias=0.1, name="shrink"),
                  h.make_node("Add", ["sh", "b"], ["ad"], name="add"),
                  h.make_node("Shape", ["x"], ["s"], name="shape"),
                  h.make_node("Gather", ["s", "zero"], ["n"], axis=0, name="gather"),
                  h.make_node("Concat", ["n", "minus1"], ["s2"], axis=0, name="concat"),
                  h.make_node("Reshape", ["ad", "s2"], ["r"], name="reshape"),
                  h.make_node("Softmax", ["r"], ["y"], axis=-1, name="softmax")],
                 [vi("x", ("N", 4))], [vi("y", ("N", 6))], [w, b, minus1, zero])


def test_mixed_session_matches_cpu():
    m = mixed_model()
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    sess = torch_session(m)
    where = {k[0]: v for k, v in placement(sess).items()}
    assert where["shrink"] == CPU
    assert where["matmul"] == where["add"] == where["softmax"] == where["reshape"] == TORCH_EP
    ref = ort.InferenceSession(m.SerializeToString(), providers=[CPU]).run(None, {"x": x})[0]
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], ref, rtol=1e-5, atol=1e-6)
    # the reshape's shape reached it as a host value, and the report says what was copied
    rep = sess.placement_report()
    assert "mm: torch:0 -> cpu" in rep and "sh: cpu -> torch:0" in rep
    # onnxruntime's oracle agrees too
    ort_rt = pytest.importorskip("onnxruntime")
    want = ort_rt.InferenceSession(m.SerializeToString(),
                                   providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-5, atol=1e-6)


def relu_add_model():
    return model([h.make_node("Relu", ["x"], ["a"]), h.make_node("Add", ["a", "a"], ["y"])],
                 [vi("x", (2, 3))], [vi("y", (2, 3))])


def test_iobinding_keeps_outputs_on_the_torch_device():
    sess = torch_session(relu_add_model())
    x = np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32)
    b = sess.io_binding()
    b.bind_ortvalue_input("x", ort.OrtValue.ortvalue_from_numpy(x, "torch", 0))
    b.bind_output("y", "torch", 0)
    sess.run_with_iobinding(b)
    out = b.get_outputs()[0]
    assert out.device_name() == "torch" and isinstance(out.value(), torch.Tensor)
    assert out.shape() == [2, 3] and out.data_type() == "tensor(float)"
    np.testing.assert_allclose(b.copy_outputs_to_cpu()[0], 2 * np.maximum(x, 0))
    # an input that already is a torch tensor, wrapped without a copy
    t = torch.from_numpy(x.copy())
    v = ortvalue_from_torch(t)
    assert v.device_name() == "torch" and v.value() is t
    b2 = sess.io_binding()
    b2.bind_ortvalue_input("x", v)
    b2.bind_output("y", "torch", 0)
    sess.run_with_iobinding(b2)
    assert torch.equal(b2.get_outputs()[0].value(), 2 * torch.relu(t))


def test_dlpack_round_trip():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = torch.from_numpy(x.copy())
    v = ortvalue_from_dlpack(t, device="torch")         # a torch producer, kept on torch
    assert v.device_name() == "torch" and v.value().data_ptr() == t.data_ptr()
    back = torch.from_dlpack(ortvalue_to_dlpack(v))      # and out again, no copy
    assert back.data_ptr() == t.data_ptr()
    host = ortvalue_from_dlpack(x)                       # numpy producer -> a host value
    assert host.device_name() == "cpu"
    np.testing.assert_array_equal(host.numpy(), x)
    np.testing.assert_array_equal(torch.from_dlpack(ortvalue_to_dlpack(host)).numpy(), x)
    out = torch_session(relu_add_model()).run(None, {"x": v.numpy()[:2, :3]})[0]
    np.testing.assert_allclose(out, 2 * np.maximum(x[:2, :3], 0))


def test_transfer_dtypes_round_trip():
    import ml_dtypes

    from onnxrt.framework.device import Device
    from onnxrt.providers.torch.convert import TorchTransfer

    tr = TorchTransfer()
    for dt in (np.float16, ml_dtypes.bfloat16, np.int8, np.uint8, np.bool_, np.int64,
               ml_dtypes.float8_e4m3fn, np.float64):
        a = np.arange(6).reshape(2, 3).astype(dt)
        back = tr.to_host(tr.to_device(a, Device("torch", 0)))
        assert back.dtype == np.dtype(dt)
        np.testing.assert_array_equal(back.astype(np.float32), a.astype(np.float32))
    ro = np.arange(4, dtype=np.float32)
    ro.flags.writeable = False                           # a session constant, say
    assert tr.to_device(ro, Device("torch", 0)).tolist() == [0, 1, 2, 3]
    with pytest.raises(TypeError, match="object"):
        tr.to_device(np.array(["a"], dtype=object), Device("torch", 0))


def test_prefer_nhwc_keeps_convolutions_channels_last():
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    m = model([h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
               h.make_node("Relu", ["c"], ["y"])],
              [vi("x", (1, 3, 8, 8))], [vi("y", (1, 8, 8, 8))], [w])
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    ref = ort.InferenceSession(m.SerializeToString(), providers=[CPU]).run(None, {"x": x})[0]
    sess = torch_session(m, prefer_nhwc="1")
    b = sess.io_binding()
    b.bind_cpu_input("x", x)
    b.bind_output("y", "torch", 0)
    sess.run_with_iobinding(b)
    y = b.get_outputs()[0].value()
    assert y.is_contiguous(memory_format=torch.channels_last)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-4, atol=1e-5)
    assert sess.get_provider_options()[TORCH_EP] == {"device": "cpu", "prefer_nhwc": "1",
                                                     "pin_memory": "0"}


# -- options and availability ---------------------------------------------------------------

def test_cuda_and_rocm_fall_back_with_a_warning_here():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the fallback is not what happens here")
    m = relu_add_model().SerializeToString()
    for name in ("CUDAExecutionProvider", "ROCMExecutionProvider"):
        assert name not in ort.get_available_providers()
        with pytest.warns(UserWarning, match=name):
            sess = ort.InferenceSession(m, providers=[name, CPU])
        assert sess.get_providers() == [CPU]
        x = np.ones((2, 3), np.float32)
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], 2 * x)
    why = CUDAExecutionProvider.unavailable_reason()
    assert "no CUDA support" in why or "torch.cuda.is_available() is False" in why
    assert "not a ROCm build" in ROCMExecutionProvider.unavailable_reason()
    with pytest.raises(ort.EPFail, match="CUDAExecutionProvider is not available"):
        ort.InferenceSession(m, providers=[("CUDAExecutionProvider",
                                            {"error_on_failure": "1"}), CPU])
    assert TORCH_EP in ort.get_available_providers()


@pytest.mark.parametrize("opt,value", [("enable_cuda_graph", "1"),
                                       ("arena_extend_strategy", "kSameAsRequested"),
                                       ("do_copy_in_default_stream", "0"),
                                       ("cudnn_conv_use_max_workspace", "0"),
                                       ("cudnn_conv_algo_search", "FASTEST"),
                                       ("use_tf32", "maybe"), ("device_id", "first")])
def test_cuda_options_are_refused_with_their_name(opt, value):
    with pytest.raises(ort.InvalidArgument, match=opt):
        CUDAExecutionProvider(**{opt: value})


def test_cuda_options_valid_then_device_checked():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(ort.InvalidArgument, match="torch sees 0 GPU"):
        CUDAExecutionProvider(device_id="0", cudnn_conv_algo_search="HEURISTIC",
                              use_tf32="0", prefer_nhwc="1", gpu_mem_limit=str(1 << 30))
    with pytest.raises(ort.InvalidArgument, match="valid options"):
        CUDAExecutionProvider(trt_fp16_enable="1")


def test_torch_device_option():
    with pytest.raises(ort.InvalidArgument, match="device"):
        TorchExecutionProvider(device="not-a-device")
    with pytest.raises(ort.InvalidArgument, match="pin_memory"):
        TorchExecutionProvider(pin_memory="1")
    ep = TorchExecutionProvider()
    assert str(ep.device) == "torch:0" and ep.torch_device.type == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA device"):
            TorchExecutionProvider(device="cuda:0")


# -- kernels beyond the suite ---------------------------------------------------------------

def _both(m, feeds, rtol=1e-5, atol=1e-6, oracle="onnxruntime"):
    if oracle == "onnxruntime":
        import onnxruntime as ort_rt

        want = ort_rt.InferenceSession(m.SerializeToString(),
                                       providers=["CPUExecutionProvider"]).run(None, feeds)
    else:
        from onnx.reference import ReferenceEvaluator

        want = ReferenceEvaluator(m).run(None, feeds)
    sess = torch_session(m)
    got = sess.run(None, feeds)
    assert all(ep == TORCH_EP for ep in placement(sess).values()), sess.placement_report()
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                                   atol=atol)


def test_gemm_constant_b_transposed_once_and_c_broadcast():
    rng = np.random.default_rng(4)
    b = numpy_helper.from_array(rng.standard_normal((5, 4)).astype(np.float32), "b")
    c = numpy_helper.from_array(rng.standard_normal((1, 5)).astype(np.float32), "c")
    m = model([h.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1, alpha=0.5, beta=2.0)],
              [vi("a", (3, 4))], [vi("y", (3, 5))], [b, c])
    _both(m, {"a": rng.standard_normal((3, 4)).astype(np.float32)})


def test_conv_asymmetric_pads_groups_dilations_and_maxpool_indices():
    rng = np.random.default_rng(5)
    w = numpy_helper.from_array(rng.standard_normal((4, 2, 3, 3)).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "bias")
    m = model([h.make_node("Conv", ["x", "w", "bias"], ["c"], group=2, pads=[0, 1, 2, 1],
                           dilations=[1, 2], strides=[2, 1]),
               h.make_node("MaxPool", ["c"], ["p", "i"], kernel_shape=[2, 2],
                           pads=[0, 0, 1, 1], strides=[1, 2])],
              [vi("x", (2, 4, 9, 9))], [vi("p", (2, 4, 5, 4)), vi("i", (2, 4, 5, 4), T.INT64)],
              [w, bias])
    _both(m, {"x": rng.standard_normal((2, 4, 9, 9)).astype(np.float32)}, rtol=1e-4, atol=1e-5)


def test_conv_transpose_asymmetric_pads_and_output_padding():
    rng = np.random.default_rng(6)
    w = numpy_helper.from_array(rng.standard_normal((3, 2, 3, 3)).astype(np.float32), "w")
    m = model([h.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2],
                           pads=[1, 0, 0, 1], output_padding=[1, 1])],
              [vi("x", (1, 3, 4, 5))], [vi("y", (1, 2, 9, 11))], [w])
    _both(m, {"x": rng.standard_normal((1, 3, 4, 5)).astype(np.float32)}, rtol=1e-4,
          atol=1e-5)


def test_average_pool_asymmetric_pads_exclude_pad_and_half_layer_norm():
    rng = np.random.default_rng(7)
    m = model([h.make_node("AveragePool", ["x"], ["p"], kernel_shape=[3, 3],
                           pads=[0, 2, 1, 0], ceil_mode=1, strides=[2, 2]),
               h.make_node("Cast", ["p"], ["ph"], to=T.FLOAT16),
               h.make_node("LayerNormalization", ["ph", "s", "bb"], ["y"], axis=-1)],
              [vi("x", (1, 2, 7, 6)), vi("s", (4,), T.FLOAT16), vi("bb", (4,), T.FLOAT16)],
              [vi("y", (1, 2, 4, 4), T.FLOAT16)])
    _both(m, {"x": rng.standard_normal((1, 2, 7, 6)).astype(np.float32),
              "s": rng.standard_normal(4).astype(np.float16),
              "bb": rng.standard_normal(4).astype(np.float16)}, rtol=2e-3, atol=2e-3)


def test_int_ops_topk_ties_cumsum_and_gather_negative_indices():
    x = np.array([[3, 1, 3, 2, 1], [0, 5, 5, 5, 0]], np.int64)
    k = numpy_helper.from_array(np.array([3], np.int64), "k")
    idx = numpy_helper.from_array(np.array([-1, 0, -2], np.int64), "idx")
    ax = numpy_helper.from_array(np.array(1, np.int64), "ax")
    m = model([h.make_node("TopK", ["x", "k"], ["v", "i"], axis=1),
               h.make_node("CumSum", ["x", "ax"], ["c"], exclusive=1, reverse=1),
               h.make_node("Gather", ["x", "idx"], ["g"], axis=1),
               h.make_node("Div", ["x", "x2"], ["d"])],
              [vi("x", (2, 5), T.INT64), vi("x2", (2, 5), T.INT64)],
              [vi("v", (2, 3), T.INT64), vi("i", (2, 3), T.INT64), vi("c", (2, 5), T.INT64),
               vi("g", (2, 3), T.INT64), vi("d", (2, 5), T.INT64)], [k, idx, ax])
    _both(m, {"x": x, "x2": np.array([[2, -2, 2, 3, 1], [1, 2, -3, 4, 1]], np.int64)})


def test_resize_modes_beyond_the_suite():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    scales = numpy_helper.from_array(np.array([1, 1, 1.7, 0.6], np.float32), "scales")
    sizes = numpy_helper.from_array(np.array([4, 3, 9, 4], np.int64), "sizes")
    m = model([h.make_node("Resize", ["x", "", "scales"], ["a"], mode="cubic",
                           exclude_outside=1, cubic_coeff_a=-0.5,
                           coordinate_transformation_mode="asymmetric"),
               h.make_node("Resize", ["x", "", "", "sizes"], ["b"], mode="nearest",
                           coordinate_transformation_mode="tf_half_pixel_for_nn",
                           nearest_mode="ceil"),
               ],
              [vi("x", (2, 3, 5, 7))], [vi("a", (2, 3, 8, 4)), vi("b", (4, 3, 9, 4))],
              [scales, sizes], opset=19)
    _both(m, {"x": x}, rtol=1e-4, atol=1e-5)
    # align_corners with a fractional scaled length: onnxruntime maps with the floored
    # length, the spec (and its reference, and the backend suite) with the exact one
    m2 = model([h.make_node("Resize", ["x", "", "scales"], ["c"], mode="linear",
                            coordinate_transformation_mode="align_corners")],
               [vi("x", (2, 3, 5, 7))], [vi("c", (2, 3, 8, 4))], [scales], opset=19)
    _both(m2, {"x": x}, rtol=1e-4, atol=1e-5, oracle="reference")


def test_lrn_even_window_matches_the_spec_formula():
    x = np.random.default_rng(9).standard_normal((2, 6, 3, 3)).astype(np.float32) * 3
    size, alpha, beta, bias = 4, 0.3, 0.6, 2.0
    m = model([h.make_node("LRN", ["x"], ["y"], size=size, alpha=alpha, beta=beta, bias=bias)],
              [vi("x", x.shape)], [vi("y", x.shape)])
    c = x.shape[1]
    sq = np.zeros_like(x)
    for i in range(c):   # the spec: channels i - floor((size-1)/2) .. i + ceil((size-1)/2)
        lo, hi = max(0, i - (size - 1) // 2), min(c - 1, i + -(-(size - 1) // 2))
        sq[:, i] = (x[:, lo:hi + 1] ** 2).sum(axis=1)
    want = x / (bias + alpha / size * sq) ** beta
    np.testing.assert_allclose(torch_session(m).run(None, {"x": x})[0], want, rtol=1e-5,
                               atol=1e-6)
