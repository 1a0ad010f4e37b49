"""The OpenVINO provider's options, cache, fallback, shapes and threads."""

from __future__ import annotations

import json
import os
import threading
import time

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import onnxrt as ort
from models import model
from ovhelpers import CPU, OV, needs_openvino, nodes_on, ov_session

pytestmark = needs_openvino


@pytest.fixture(scope="module")
def OVEP():
    from onnxrt.providers.openvino import OpenVINOExecutionProvider

    ort.register_execution_provider(OpenVINOExecutionProvider)
    return OpenVINOExecutionProvider


def vi(name, shape, t=T.FLOAT):
    return h.make_tensor_value_info(name, t, shape)


def conv_model(batch="N"):
    """Conv -> Relu -> ReduceMean -> Det -> Neg: Det is an op OpenVINO cannot convert."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((2, 3, 3, 3))
                                .astype(np.float32), "w")
    return model([h.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
                  h.make_node("Relu", ["c"], ["r"], name="relu"),
                  h.make_node("ReduceMean", ["r"], ["s"], axes=[1], keepdims=0, name="mean"),
                  h.make_node("Det", ["s"], ["d"], name="det"),
                  h.make_node("Neg", ["d"], ["y"], name="neg")],
                 [vi("x", [batch, 3, 4, 4])], [vi("y", [batch])],
                 [w], opset=17)


def chain_model(shape=("N", 3)):
    return model([h.make_node("Relu", ["x"], ["a"], name="relu"),
                  h.make_node("Exp", ["a"], ["y"], name="exp")],
                 [vi("x", list(shape))], [vi("y", list(shape))])


def conv_expected(x, m):
    return ort.InferenceSession(m.SerializeToString(), providers=[CPU]).run(None, {"x": x})[0]


# -- availability and names ------------------------------------------------------------------

def test_available_here_and_found_by_name(OVEP):
    assert OVEP.unavailable_reason() == ""
    assert OV in ort.get_available_providers()
    s = ort.InferenceSession(chain_model().SerializeToString(), providers=[OV, CPU])
    assert s.get_providers()[0] == OV
    x = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], np.exp(np.maximum(x, 0)), rtol=1e-6)


def test_missing_package_is_reported(monkeypatch):
    from onnxrt.providers.openvino import OpenVINOExecutionProvider, runtime

    monkeypatch.setattr(runtime, "_STATE", {"error": "ModuleNotFoundError: No module named "
                                                     "'openvino'"})
    why = OpenVINOExecutionProvider.unavailable_reason()
    assert "openvino" in why and "pip install" in why
    with pytest.raises(RuntimeError, match="cannot be imported"):
        OpenVINOExecutionProvider()


def test_absent_device_falls_back_with_a_warning(OVEP):
    with pytest.warns(UserWarning, match="GPU"):
        s = ort.InferenceSession(chain_model().SerializeToString(),
                                 providers=[(OV, {"device_type": "GPU"}), CPU])
    assert s.get_providers() == [CPU]
    with pytest.raises(ort.EPFail, match="GPU"):
        ort.InferenceSession(chain_model().SerializeToString(),
                             providers=[(OV, {"device_type": "GPU", "error_on_failure": "1"}),
                                        CPU])


# -- options ---------------------------------------------------------------------------------

@pytest.mark.parametrize("opts, match", [
    ({"device_type": "TPU"}, "device_type"),
    ({"device_type": "HETERO:"}, "list of devices"),
    ({"device_type": "AUTO:CPU,XPU"}, "XPU"),
    ({"precision": "FP8"}, "precision"),
    ({"device_type": "CPU_FP32", "precision": "FP16"}, "implies"),
    ({"num_of_threads": -1}, "num_of_threads"),
    ({"num_of_threads": "many"}, "num_of_threads"),
    ({"num_streams": 0}, "num_streams"),
    ({"enable_dynamic_shapes": "maybe"}, "enable_dynamic_shapes"),
    ({"enable_dynamic_shapes": True, "disable_dynamic_shapes": True}, "contradicts"),
    ({"load_config": "{not json"}, "JSON"),
    ({"load_config": "/no/such/file.json"}, "neither"),
    ({"load_config": '{"CPU": 3}'}, "map device names"),
    ({"load_config": '{"GPU": {"NUM_STREAMS": "2"}}'}, "does not use"),
    ({"load_config": '{"CPU": {"NO_SUCH_PROPERTY": "1"}}'}, "no property"),
    ({"load_config": '{"CPU": {"FULL_DEVICE_NAME": "x"}}'}, "read-only"),
    ({"load_config": '{"CPU": {"NUM_STREAMS": "2"}}', "num_streams": 3}, "keep one"),
    ({"no_such_option": 1}, "valid options"),
])
def test_bad_options_are_rejected(OVEP, opts, match):
    with pytest.raises(ort.InvalidArgument, match=match):
        OVEP(**opts)


def test_options_reported_as_onnxruntime_does(OVEP):
    ep = OVEP(num_of_threads=1, disable_dynamic_shapes=True)
    opts = ep.get_provider_options()
    assert opts["device_type"] == "CPU" and opts["precision"] == "FP32"
    assert opts["num_of_threads"] == "1" and opts["num_streams"] == "1"
    assert opts["enable_dynamic_shapes"] == "0" and opts["disable_dynamic_shapes"] == "1"
    s = ort.InferenceSession(chain_model().SerializeToString(), providers=[ep, CPU])
    assert s.get_provider_options()[OV]["num_of_threads"] == "1"


def test_legacy_device_names_and_meta_devices(OVEP):
    assert OVEP(device_type="CPU_FP32").settings.precision == {"CPU": "FP32"}
    for dev in ("AUTO", "AUTO:CPU", "HETERO:CPU", "MULTI:CPU"):
        ep = OVEP(device_type=dev)
        s = ort.InferenceSession(chain_model().SerializeToString(), providers=[ep, CPU])
        assert nodes_on(s) == 2, dev
        x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
        np.testing.assert_allclose(s.run(None, {"x": x})[0], np.exp(np.maximum(x, 0)),
                                   rtol=1e-6)


def _compiled(sess):
    """The OpenVINO compiled model behind a session's first fused node."""
    from onnxrt.providers.openvino.compiled import _Runner

    for st in sess._plan.steps:
        fn = getattr(st.fn, "fn", None)
        if isinstance(fn, _Runner):
            return fn.compiled
    raise AssertionError("no compiled OpenVINO model in the plan")


def test_options_reach_openvino(OVEP):
    m = chain_model((2, 3))
    s, _ = ov_session(m, {"num_of_threads": 1})
    cm = _compiled(s)
    assert int(cm.get_property("INFERENCE_NUM_THREADS")) == 1
    assert str(cm.get_property("INFERENCE_PRECISION_HINT")) in ("f32", "<Type: 'float32'>")
    if (os.cpu_count() or 1) >= 2:  # OpenVINO caps the streams at the cores
        s, _ = ov_session(m, {"num_streams": 2})
        assert int(_compiled(s).get_property("NUM_STREAMS")) == 2
        cfg = json.dumps({"CPU": {"NUM_STREAMS": "2", "PERFORMANCE_HINT": "THROUGHPUT"}})
        s, _ = ov_session(m, {"load_config": cfg})
        assert int(_compiled(s).get_property("NUM_STREAMS")) == 2
        assert "THROUGHPUT" in str(_compiled(s).get_property("PERFORMANCE_HINT"))
    s, _ = ov_session(m, {"precision": "ACCURACY"})
    assert "ACCURACY" in str(_compiled(s).get_property("EXECUTION_MODE_HINT"))


def test_load_config_from_a_file(OVEP, tmp_path):
    p = tmp_path / "ov.json"
    p.write_text(json.dumps({"CPU": {"INFERENCE_NUM_THREADS": "1"}}))
    s, ep = ov_session(chain_model((2, 3)), {"load_config": str(p)})
    assert int(_compiled(s).get_property("INFERENCE_NUM_THREADS")) == 1
    assert ep.get_provider_options()["load_config"] == str(p)


def test_lower_precision_is_a_choice(OVEP):
    """FP32 by default (results as the CPU provider's); bf16/fp16 only when asked."""
    from onnxrt.providers.openvino import runtime

    caps = runtime.core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    if "FP16" not in caps:
        with pytest.raises(ort.InvalidArgument, match="not supported"):
            OVEP(precision="FP16")
        return
    x = np.random.default_rng(2).standard_normal((1, 3, 4, 4)).astype(np.float32)
    m = conv_model(1)
    ref = conv_expected(x, m)
    s32, _ = ov_session(m)
    np.testing.assert_allclose(s32.run(None, {"x": x})[0], ref, rtol=1e-5, atol=1e-6)
    s16, _ = ov_session(m, {"precision": "FP16"})
    np.testing.assert_allclose(s16.run(None, {"x": x})[0], ref, rtol=5e-2, atol=5e-2)


# -- dynamic shapes --------------------------------------------------------------------------

@pytest.mark.parametrize("opts, compilations", [
    ({}, 1), ({"enable_dynamic_shapes": False}, 3), ({"disable_dynamic_shapes": True}, 3)])
def test_dynamic_shapes_compile_once_or_per_shape(OVEP, opts, compilations):
    s, ep = ov_session(chain_model(), opts)
    for n in (2, 2, 5, 2, 7, 5):
        x = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
        np.testing.assert_allclose(s.run(None, {"x": x})[0], np.exp(np.maximum(x, 0)),
                                   rtol=1e-6)
    assert ep.compilations == compilations
    assert ep.allocation_stats()["compiled_groups"] == 1


def test_static_shapes_compile_once(OVEP):
    s, ep = ov_session(chain_model((4, 3)), {"disable_dynamic_shapes": True})
    assert ep.compilations == 1
    for _ in range(3):
        s.run(None, {"x": np.ones((4, 3), np.float32)})
    assert ep.compilations == 1


# -- fallback --------------------------------------------------------------------------------

def test_unsupported_op_falls_back_to_cpu(OVEP):
    m = conv_model()
    s, _ = ov_session(m)
    report = s.placement_report()
    det = next(line for line in report.splitlines() if line.startswith("det "))
    assert CPU in det and "OpenVINO cannot convert ai.onnx::Det" in det
    for name in ("conv", "relu", "mean", "neg"):
        line = next(ln for ln in report.splitlines() if ln.startswith(name + " "))
        assert OV in line, line
    assert nodes_on(s) == 4 and nodes_on(s, CPU) == 1
    x = np.random.default_rng(3).standard_normal((2, 3, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], conv_expected(x, m), rtol=1e-4,
                               atol=1e-5)


def test_known_difference_keeps_the_node_on_cpu(OVEP):
    m = model([h.make_node("Relu", ["x"], ["a"], name="relu"),
               h.make_node("TopK", ["a", "k"], ["v", "i"], name="topk"),
               h.make_node("Neg", ["v"], ["y"], name="neg")],
              [vi("x", [2, 4])], [vi("y", [2, 2]), vi("i", [2, 2], T.INT64)],
              [numpy_helper.from_array(np.array([2], np.int64), "k")])
    s, _ = ov_session(m)
    line = next(ln for ln in s.placement_report().splitlines() if ln.startswith("topk "))
    assert CPU in line and "lower index first" in line
    x = np.array([[1, 1, 1, 0], [3, 2, 3, 1]], np.float32)
    y, i = s.run(None, {"x": x})
    np.testing.assert_array_equal(i, [[0, 1], [0, 2]])
    np.testing.assert_array_equal(y, [[-1, -1], [-3, -3]])


def test_compile_failure_falls_back_or_raises(OVEP, monkeypatch):
    from onnxrt.providers.openvino import compiled

    def broken(*a, **k):
        raise RuntimeError("Exception from src/x.cpp:1:\nno kernel for this")

    monkeypatch.setattr(compiled, "build_runner", broken)
    with pytest.warns(UserWarning, match="no kernel for this"):
        s = ort.InferenceSession(chain_model().SerializeToString(), providers=[OVEP(), CPU])
    x = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], np.exp(x), rtol=1e-6)
    with pytest.raises(ort.EPFail, match="no kernel for this"):
        ort.InferenceSession(chain_model().SerializeToString(),
                             providers=[OVEP(error_on_failure=True), CPU])


# -- cache -----------------------------------------------------------------------------------

def test_cache_dir_makes_the_second_session_fast(OVEP, tmp_path):
    import onnx

    from onnxrt.zoo import zoo_models

    path = zoo_models()["squeezenet"]
    m = onnx.load(path)
    cache = tmp_path / "cache"
    t = time.perf_counter()
    s1, ep1 = ov_session(path, {"cache_dir": str(cache)})
    first = time.perf_counter() - t
    files = os.listdir(cache)
    assert any(f.endswith(".blob") for f in files), files          # OpenVINO's compiled model
    assert any(f.startswith("onnxrt-ov-query-") for f in files), files  # the query answer
    t = time.perf_counter()
    s2, ep2 = ov_session(path, {"cache_dir": str(cache)})
    second = time.perf_counter() - t
    assert second < first, (first, second)
    assert sorted(os.listdir(cache)) == sorted(files)
    feeds = {a.name: np.random.default_rng(4).random(
        [d if isinstance(d, int) else 1 for d in a.shape]).astype(np.float32)
        for a in s1.get_inputs()}
    np.testing.assert_array_equal(s1.run(None, feeds)[0], s2.run(None, feeds)[0])
    assert len(m.graph.node) and nodes_on(s2) == nodes_on(s1) > 0


# -- values and threads ----------------------------------------------------------------------

def test_many_threads_share_one_session(OVEP):
    m = conv_model()
    s, _ = ov_session(m)
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((n % 3 + 1, 3, 4, 4)).astype(np.float32) for n in range(24)]
    want = [conv_expected(x, m) for x in xs]
    got = [None] * len(xs)

    def work(k):
        for j in range(k, len(xs), 4):
            got[j] = s.run(None, {"x": xs[j]})[0]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype, onnx_type", [
    (np.float16, T.FLOAT16), (np.int32, T.INT32), (np.int64, T.INT64), (np.uint8, T.UINT8),
    (np.float64, T.DOUBLE), ("bfloat16", T.BFLOAT16)])
def test_element_types_round_trip(OVEP, dtype, onnx_type):
    import ml_dtypes

    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    m = model([h.make_node("Add", ["x", "x"], ["a"], name="add"),
               h.make_node("Mul", ["a", "x"], ["y"], name="mul")],
              [vi("x", [2, 3], onnx_type)], [vi("y", [2, 3], onnx_type)])
    s, _ = ov_session(m)
    assert nodes_on(s) == 2
    x = np.arange(6).reshape(2, 3).astype(dt)
    y = s.run(None, {"x": x})[0]
    assert y.dtype == dt
    np.testing.assert_array_equal(y.astype(np.float64),
                                  (2 * x.astype(np.float64)) * x.astype(np.float64))
    # a scalar and a non-contiguous view
    xt = np.arange(12).reshape(3, 4).astype(dt).T[:2, :3]
    np.testing.assert_array_equal(s.run(None, {"x": xt})[0].astype(np.float64),
                                  2 * xt.astype(np.float64) ** 2)


def test_outputs_do_not_alias_between_runs(OVEP):
    s, _ = ov_session(chain_model((2, 3)))
    a = s.run(None, {"x": np.zeros((2, 3), np.float32)})[0]
    b = s.run(None, {"x": np.ones((2, 3), np.float32)})[0]
    np.testing.assert_array_equal(a, np.ones((2, 3)))
    np.testing.assert_allclose(b, np.full((2, 3), np.e), rtol=1e-6)


def test_group_reading_an_untyped_value_is_typed_at_run_time(OVEP):
    """A value whose type shape inference could not find reaches a group: OpenVINO compiles
    it from the arrays of the first run, once per element type."""
    from onnxrt.providers.openvino.compiled import build_runner

    import onnx

    g = h.make_graph([h.make_node("Neg", ["x"], ["y"])], "g",
                     [onnx.ValueInfoProto(name="x")], [onnx.ValueInfoProto(name="y")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    ep = OVEP()
    fn = build_runner(m, ["x"], ["y"], ep.settings, ep._counted)
    assert ep.compilations == 0
    for dt in (np.float32, np.int32, np.float32):
        x = np.arange(6, dtype=dt).reshape(2, 3)
        (y,) = fn(x)
        assert y.dtype == dt
        np.testing.assert_array_equal(y, -x)
    assert ep.compilations == 2
