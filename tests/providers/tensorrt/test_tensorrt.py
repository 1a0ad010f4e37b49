"""TensorrtExecutionProvider without a GPU: a fake TensorRT backend claims chosen ops, and
the provider's partitioning, options, profiles, engine cache keys and files run for real."""

from __future__ import annotations

import json
import logging
import os
import struct
import threading
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import onnxrt as ort
from fake_trt import FakeBackend, FakeTensor
from onnxrt.framework import registry
from onnxrt.providers.tensorrt import GpuInfo, TensorrtExecutionProvider
from onnxrt.providers.tensorrt.engine import EngineCache, cache_key
from onnxrt.providers.tensorrt.options import parse_options, DEFAULTS, read_calibration_table

CPU = "CPUExecutionProvider"
TRT = "TensorrtExecutionProvider"
W = np.array([1.0, 2.0, 3.0], np.float32)


def vi(name, shape=(2, 3), elem=T.FLOAT):
    return h.make_tensor_value_info(name, elem, None if shape is None else list(shape))


def mk(nodes, inputs, outputs, inits=()):
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=10)


def cycle_model(shape=(2, 3)):
    """a = Relu(x); b = Sigmoid(a) [TensorRT says no]; c = Add(a, b); y = Exp(c) * w.
    Fusing Relu with Add would make a cycle through Sigmoid."""
    return mk([h.make_node("Relu", ["x"], ["a"], name="relu"),
               h.make_node("Sigmoid", ["a"], ["b"], name="sigmoid"),
               h.make_node("Add", ["a", "b"], ["c"], name="add"),
               h.make_node("Exp", ["c"], ["d"], name="exp"),
               h.make_node("Mul", ["d", "w"], ["y"], name="mul")],
              [vi("x", shape)], [vi("y", shape)], [numpy_helper.from_array(W, "w")])


def expected(x):
    a = np.maximum(x, 0)
    return np.exp(a + 1 / (1 + np.exp(-a))) * W


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def session(m, backend=None, **opts):
    backend = backend or FakeBackend()
    ep = TensorrtExecutionProvider(backend=backend, **opts)
    s = ort.InferenceSession(m.SerializeToString(), providers=[ep, CPU])
    return s, ep, backend


def placed(s):
    return sorted(sorted(n.op_type for n in sg.get_nodes())
                  for sg in s.get_provider_graph_assignment_info() if sg.ep_name == TRT)


def groups_built(backend):
    return sorted(sorted(n.op_type for n in onnx.load_from_string(b.model).graph.node)
                  for b in backend.builds)


# -- partitioning -----------------------------------------------------------------------------

def test_claims_what_the_parser_supports_cycle_free_and_matches():
    s, ep, be = session(cycle_model())
    assert placed(s) == [["Add", "Exp", "Mul"], ["Relu"]]
    assert groups_built(be) == [["Add", "Exp", "Mul"], ["Relu"]]
    x = rand(2, 3)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-5)
    # values went to the fake GPU and back through the provider's data transfer
    stats = ep.allocation_stats()
    assert stats["copies_to_device"] >= 2 and stats["copies_to_host"] >= 2
    assert stats["engines_built"] == 2
    report = s.placement_report()
    assert "sigmoid" in report and "does not support" in report


def test_a_lumped_parser_answer_is_split_cycle_free_and_rechecked():
    be = FakeBackend(lump=True)
    s, _, _ = session(cycle_model(), be)
    assert placed(s) == [["Add", "Exp", "Mul"], ["Relu"]]
    # the whole view once, then each group on its own
    assert sorted(be.queries) == sorted([["Relu", "Sigmoid", "Add", "Exp", "Mul"],
                                         ["Relu"], ["Add", "Exp", "Mul"]])
    x = rand(2, 3, seed=1)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-5)


def test_context_dependent_support_is_rechecked_per_group():
    # Mul parses inside the whole model (5 nodes) but not in a group of three
    be = FakeBackend(min_nodes={"Mul": 4})
    s, _, _ = session(cycle_model(), be)
    assert placed(s) == [["Add", "Exp"], ["Relu"]]
    assert "parser does not support it here" in s.placement_report()
    x = rand(2, 3, seed=2)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-5)


def test_max_partition_iterations_bounds_the_rechecks():
    be = FakeBackend()
    s, _, _ = session(cycle_model(), be, trt_max_partition_iterations=1)
    assert placed(s) == []                       # groups still unconfirmed after one round
    assert len(be.queries) == 1
    assert "trt_max_partition_iterations=1" in s.placement_report()
    x = rand(2, 3)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-5)


def test_whole_model_supported_is_one_engine_and_asked_once():
    be = FakeBackend(ops={"Relu", "Sigmoid", "Add", "Exp", "Mul"})
    s, _, _ = session(cycle_model(), be)
    assert placed(s) == [["Add", "Exp", "Mul", "Relu", "Sigmoid"]]
    assert len(be.queries) == 1 and len(be.builds) == 1


def test_min_subgraph_size():
    s, _, be = session(cycle_model(), trt_min_subgraph_size=2)
    assert placed(s) == [["Add", "Exp", "Mul"]]
    assert "smaller than trt_min_subgraph_size=2" in s.placement_report()
    x = rand(2, 3)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-5)


def test_query_model_is_valid_and_non_tensors_are_declined():
    m = mk([h.make_node("Relu", ["x"], ["a"]),
            h.make_node("SequenceConstruct", ["a", "a"], ["s"]),
            h.make_node("ConcatFromSequence", ["s"], ["c"], axis=0),
            h.make_node("Exp", ["c"], ["y"])],
           [vi("x")], [vi("y", (4, 3))])
    be = FakeBackend(ops={"Relu", "Exp", "SequenceConstruct", "ConcatFromSequence"})
    s, _, _ = session(m, be)
    assert placed(s) == [["Exp"], ["Relu"]]
    assert "TensorRT takes only tensors" in s.placement_report()
    x = rand(2, 3)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], np.exp(np.concatenate(
        [np.maximum(x, 0)] * 2)), rtol=1e-6)


# -- engine cache -----------------------------------------------------------------------------

def _key(**over):
    base = dict(trt_version="10.3.0", gpu=GpuInfo("NVIDIA H100", (9, 0)),
                model_hash="ab" * 32, settings=parse_options(dict(DEFAULTS)),
                profiles=())
    base.update(over)
    return cache_key(**base)[0]


def test_cache_key_covers_version_gpu_subgraph_and_build_options():
    same = _key()
    assert same == _key()
    variants = [
        _key(trt_version="10.4.0"),
        _key(gpu=GpuInfo("NVIDIA A100", (9, 0))),
        _key(gpu=GpuInfo("NVIDIA H100", (8, 0))),
        _key(model_hash="cd" * 32),
        _key(settings=parse_options({**DEFAULTS, "trt_fp16_enable": "1"})),
        _key(settings=parse_options({**DEFAULTS, "trt_int8_enable": True})),
        _key(settings=parse_options({**DEFAULTS, "trt_max_workspace_size": 1 << 30})),
        _key(settings=parse_options({**DEFAULTS, "trt_builder_optimization_level": 5})),
        _key(profiles=({"x": ((1, 3), (4, 3), (8, 3))},)),
        _key(profiles=({"x": ((1, 3), (4, 3), (9, 3))},)),
    ]
    assert len({same, *variants}) == len(variants) + 1


def test_engine_cache_hit_reads_the_file_and_does_not_build(tmp_path):
    opts = dict(trt_engine_cache_enable=True, trt_engine_cache_path=str(tmp_path))
    s, ep, be = session(cycle_model(), **opts)
    assert len(be.builds) == 2
    engines = sorted(p for p in os.listdir(tmp_path) if p.endswith(".engine"))
    assert len(engines) == 2 and all(p.startswith("TensorrtExecutionProvider_sm90_")
                                     for p in engines)
    note = json.loads((tmp_path / engines[0].replace(".engine", ".json")).read_text())
    assert note["tensorrt"] == "10.3.0" and note["gpu"] == "NVIDIA Fake H100"
    # a new session (new process, same machine): loaded from the files, nothing built
    be2 = FakeBackend()
    s2, ep2, _ = session(cycle_model(), be2, **opts)
    assert be2.builds == [] and be2.loads == 2
    assert ep2.allocation_stats()["engine_cache_hits"] == 2
    x = rand(2, 3)
    np.testing.assert_allclose(s2.run(None, {"x": x})[0], expected(x), rtol=1e-5)
    # the subgraph's name in the session does not matter, its content does
    m = cycle_model()
    m.graph.name = "another"
    be3 = FakeBackend()
    session(m, be3, **opts)
    assert be3.builds == []


@pytest.mark.parametrize("change", [
    dict(backend=dict(version="10.4.1")),
    dict(backend=dict(gpu=GpuInfo("NVIDIA Fake L4", (9, 0)))),
    dict(backend=dict(gpu=GpuInfo("NVIDIA Fake H100", (10, 0)))),
    dict(opts=dict(trt_fp16_enable=1)),
    dict(opts=dict(trt_max_workspace_size=2 ** 28)),
    dict(opts=dict(trt_builder_optimization_level=1)),
    dict(model="weights"),
])
def test_any_change_rebuilds(tmp_path, change):
    opts = dict(trt_engine_cache_enable=True, trt_engine_cache_path=str(tmp_path))
    session(cycle_model(), FakeBackend(), **opts)
    m = cycle_model()
    if change.get("model"):
        m.graph.initializer[0].CopyFrom(numpy_helper.from_array(W + 1, "w"))
    be = FakeBackend(**change.get("backend", {}))
    s, _, _ = session(m, be, **opts, **change.get("opts", {}))
    rebuilt = groups_built(be)
    assert rebuilt == ([["Add", "Exp", "Mul"]] if change.get("model") else
                       [["Add", "Exp", "Mul"], ["Relu"]])
    assert len([p for p in os.listdir(tmp_path) if p.endswith(".engine")]) == 2 + len(rebuilt)


def test_unloadable_cache_file_is_rebuilt(tmp_path, caplog):
    opts = dict(trt_engine_cache_enable=True, trt_engine_cache_path=str(tmp_path))
    session(cycle_model(), FakeBackend(), **opts)
    for p in tmp_path.glob("*.engine"):
        p.write_bytes(b"garbage")
    be = FakeBackend()
    with caplog.at_level(logging.WARNING, logger="onnxrt.tensorrt"):
        s, _, _ = session(cycle_model(), be, **opts)
    assert len(be.builds) == 2 and "cannot be loaded" in caplog.text
    x = rand(2, 3)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-5)


def test_cache_disabled_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    session(cycle_model())
    assert list(tmp_path.iterdir()) == []


def test_engine_cache_direct(tmp_path):
    c = EngineCache(str(tmp_path / "sub"))
    gpu = GpuInfo("g", (8, 6))
    assert c.read("k" * 64, gpu) is None
    path = c.write("k" * 64, gpu, b"data", {"a": 1})
    assert path.endswith("TensorrtExecutionProvider_sm86_" + "k" * 40 + ".engine")
    assert c.read("k" * 64, gpu) == b"data"


def test_timing_cache_is_read_and_updated(tmp_path):
    opts = dict(trt_timing_cache_enable=1, trt_timing_cache_path=str(tmp_path))
    _, _, be = session(cycle_model(), **opts)
    assert [b.timing_cache for b in be.builds] == [b"", b"t"]
    files = list(tmp_path.glob("*.timing"))
    assert [f.name for f in files] == ["TensorrtExecutionProvider_trt10.3.0_sm90.timing"]
    assert files[0].read_bytes() == b"tt"
    _, _, be2 = session(cycle_model(), **opts)
    assert be2.builds[0].timing_cache == b"tt"


def test_progress_message_while_building(caplog):
    with caplog.at_level(logging.INFO, logger="onnxrt.tensorrt"):
        session(cycle_model(), trt_fp16_enable=True)
    assert "building an engine for" in caplog.text and "fp16" in caplog.text
    assert "built in" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_build_options_reach_the_builder(tmp_path):
    be = FakeBackend(gpu=GpuInfo("NVIDIA Fake Orin", (8, 7), dla_cores=2))
    session(cycle_model(), be, trt_fp16_enable="true", trt_max_workspace_size="1073741824",
            trt_builder_optimization_level=5, trt_dla_enable=1, trt_dla_core=1,
            trt_detailed_build_log=1)
    b = be.builds[0]
    assert (b.fp16, b.int8, b.workspace, b.opt_level, b.dla_core, b.detailed_log) == \
        (True, False, 1 << 30, 5, 1, True)
    assert b.timing_cache is None and b.profiles == ()


def test_dump_subgraphs(tmp_path):
    session(cycle_model(), trt_dump_subgraphs=1, trt_engine_cache_path=str(tmp_path))
    dumped = sorted(tmp_path.glob("*.onnx"))
    assert len(dumped) == 2
    for p in dumped:
        onnx.checker.check_model(onnx.load(str(p)))


def test_force_sequential_engine_build():
    be = FakeBackend(build_delay=0.05)
    errors = []

    def make():
        try:
            session(cycle_model(), be, trt_force_sequential_engine_build=1)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=make) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(be.builds) == 6 and be.max_active == 1


# -- dynamic shapes and optimization profiles -------------------------------------------------

def test_dynamic_shapes_build_at_first_run_and_widen():
    be = FakeBackend(ops={"Relu", "Sigmoid", "Add", "Exp", "Mul"})
    s, _, _ = session(cycle_model(("N", 3)), be)
    assert be.builds == []
    for n, builds in ((2, 1), (2, 1), (5, 2), (3, 2), (1, 3)):
        x = rand(n, 3, seed=n)
        np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-5)
        assert len(be.builds) == builds
    profiles = [b.profiles for b in be.builds]
    assert profiles == [({"x": ((2, 3), (2, 3), (2, 3))},),
                        ({"x": ((2, 3), (5, 3), (5, 3))},),
                        ({"x": ((1, 3), (5, 3), (5, 3))},)]


def test_explicit_profiles_build_at_session_creation():
    be = FakeBackend(ops={"Relu", "Sigmoid", "Add", "Exp", "Mul"})
    s, _, _ = session(cycle_model(("N", 3)), be, trt_profile_min_shapes="x:1x3,x:9x3",
                      trt_profile_opt_shapes="x:4x3,x:12x3",
                      trt_profile_max_shapes="x:8x3,x:16x3")
    assert len(be.builds) == 1
    assert be.builds[0].profiles == ({"x": ((1, 3), (4, 3), (8, 3))},
                                     {"x": ((9, 3), (12, 3), (16, 3))})
    for n, k in ((5, 0), (12, 1), (8, 0)):
        x = rand(n, 3)
        np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-5)
        assert be.runs[-1] == ([(n, 3)], k)
    with pytest.raises(Exception, match="fit none of the TensorRT optimization profiles"):
        s.run(None, {"x": rand(17, 3)})
    assert len(be.builds) == 1


def test_profile_for_an_unknown_input_is_an_error():
    with pytest.raises(ort.EPFail, match="'y0', which is not an input"):
        session(cycle_model(("N", 3)), trt_profile_min_shapes="y0:1x3",
                trt_profile_opt_shapes="y0:1x3", trt_profile_max_shapes="y0:1x3")


def test_profile_rank_must_match_the_model():
    be = FakeBackend(ops={"Relu", "Sigmoid", "Add", "Exp", "Mul"})
    with pytest.raises(ort.EPFail, match="rank"):
        session(cycle_model(("N", 3)), be, trt_profile_min_shapes="x:1",
                trt_profile_opt_shapes="x:2", trt_profile_max_shapes="x:3")


def test_unknown_rank_builds_one_static_engine_per_shape():
    m = mk([h.make_node("Relu", ["x"], ["y"])], [vi("x", None)], [vi("y", None)])
    be = FakeBackend()
    s, _, _ = session(m, be)
    for shape in ((2, 3), (4,), (2, 3)):
        x = rand(*shape)
        np.testing.assert_allclose(s.run(None, {"x": x})[0], np.maximum(x, 0))
    assert len(be.builds) == 2
    dims = [[d.dim_value for d in onnx.load_from_string(b.model).graph.input[0].type
             .tensor_type.shape.dim] for b in be.builds]
    assert dims == [[2, 3], [4]]


# -- options ----------------------------------------------------------------------------------

@pytest.mark.parametrize("opts, match", [
    (dict(trt_fp16=1), "unknown provider option"),
    (dict(trt_fp16_enable="maybe"), "trt_fp16_enable must be 0/1"),
    (dict(trt_max_workspace_size="lots"), "must be an integer"),
    (dict(trt_max_workspace_size=-1), "must be >= 0"),
    (dict(trt_builder_optimization_level=6), "between 0 and 5"),
    (dict(trt_max_partition_iterations=0), ">= 1"),
    (dict(trt_min_subgraph_size=0), ">= 1"),
    (dict(device_id=-1), ">= 0"),
    (dict(trt_profile_min_shapes="x:1x3"), "go together"),
    (dict(trt_profile_min_shapes="x:1x3", trt_profile_opt_shapes="x:1x3",
          trt_profile_max_shapes="x"), "is not 'name:dim1xdim2"),
    (dict(trt_profile_min_shapes="x:1xa", trt_profile_opt_shapes="x:1x3",
          trt_profile_max_shapes="x:1x3"), "is not 'name:dim1xdim2"),
    (dict(trt_profile_min_shapes="x:2x3", trt_profile_opt_shapes="x:1x3",
          trt_profile_max_shapes="x:4x3"), "min <= opt <= max"),
    (dict(trt_profile_min_shapes="x:1x3", trt_profile_opt_shapes="x:1x3x1",
          trt_profile_max_shapes="x:4x3"), "different ranks"),
    (dict(trt_profile_min_shapes="x:1x3", trt_profile_opt_shapes="z:1x3",
          trt_profile_max_shapes="x:4x3"), "name different inputs"),
    (dict(trt_profile_min_shapes="x:1x3,x:2x3", trt_profile_opt_shapes="x:1x3",
          trt_profile_max_shapes="x:4x3"), "same number"),
    (dict(trt_int8_calibration_table_name="cal.flatbuffers"), "needs trt_int8_enable"),
    (dict(trt_int8_enable=1, trt_int8_use_native_calibration_table=1),
     "needs trt_int8_calibration_table_name"),
    (dict(trt_int8_enable=1, trt_int8_calibration_table_name="/nonexistent/cal"),
     "cannot read the INT8 calibration table"),
    (dict(trt_timing_cache_path="/tmp"), "trt_timing_cache_path needs trt_timing_cache_en"),
    (dict(trt_dla_core=1), "trt_dla_core needs trt_dla_enable"),
    (dict(trt_engine_cache_path="/tmp"), "trt_engine_cache_path is read with"),
    (dict(device_id=1), "device_id 1 does not exist"),
    (dict(trt_dla_enable=1), "has no DLA cores"),
])
def test_invalid_options_are_rejected(opts, match):
    with pytest.raises(ort.InvalidArgument, match=match):
        TensorrtExecutionProvider(backend=FakeBackend(), **opts)


def test_dla_core_must_exist():
    be = FakeBackend(gpu=GpuInfo("Orin", (8, 7), dla_cores=2))
    with pytest.raises(ort.InvalidArgument, match="trt_dla_core 2 does not exist"):
        TensorrtExecutionProvider(backend=be, trt_dla_enable=1, trt_dla_core=2)


def test_provider_options_are_reported_as_strings():
    ep = TensorrtExecutionProvider(backend=FakeBackend(), trt_fp16_enable=True,
                                   trt_max_workspace_size=123, device_id="0")
    opts = ep.get_provider_options()
    assert opts["trt_fp16_enable"] == "1" and opts["trt_max_workspace_size"] == "123"
    assert opts["trt_int8_enable"] == "0" and set(opts) == set(DEFAULTS)
    assert str(ep.device) == "cuda:0"


# -- INT8 calibration tables ------------------------------------------------------------------

def test_native_calibration_table(tmp_path):
    scale = 0.0125
    hexval = struct.pack(">f", scale).hex()
    (tmp_path / "cal.cache").write_text(f"TRT-8601-EntropyCalibration2\nx: {hexval}\n"
                                        f"a: 3c010a14\n")
    r = read_calibration_table(str(tmp_path / "cal.cache"), native=True)
    assert r["x"] == pytest.approx(scale * 127)
    assert r["a"] == pytest.approx(struct.unpack(">f", bytes.fromhex("3c010a14"))[0] * 127)


def test_onnxruntime_calibration_tables_and_int8_build(tmp_path):
    quant = pytest.importorskip("onnxruntime.quantization.quant_utils")
    from onnxruntime.quantization.calibrate import TensorData

    cache = {"x": TensorData(lowest=np.float32(-2.5), highest=np.float32(3.25)),
             "a": TensorData(lowest=np.float32(-1.0), highest=np.float32(0.5))}
    quant.write_calibration_table(cache, dir=str(tmp_path))
    fb = read_calibration_table(str(tmp_path / "calibration.flatbuffers"), native=False)
    assert fb == {"x": 3.25, "a": 0.5}     # onnxruntime stores max(highest, lowest)
    # a relative name is looked up in the engine cache folder, as onnxruntime does
    be = FakeBackend()
    session(cycle_model(), be, trt_int8_enable=1, trt_engine_cache_path=str(tmp_path),
            trt_int8_calibration_table_name="calibration.flatbuffers")
    assert be.builds[0].int8 and dict(be.builds[0].dynamic_ranges) == fb
    (tmp_path / "t.json").write_text(json.dumps({"x": [-4.0, 2.0], "a": 1.5}))
    assert read_calibration_table(str(tmp_path / "t.json"), native=False) == \
        {"x": 2.0, "a": 1.5}
    (tmp_path / "bad").write_bytes(b"\x01\x02")
    with pytest.raises(ort.InvalidArgument, match="not a valid onnxruntime calibration"):
        read_calibration_table(str(tmp_path / "bad"), native=False)


def test_calibration_table_content_is_in_the_cache_key(tmp_path):
    a, b = tmp_path / "a.cache", tmp_path / "b.cache"
    a.write_text("TRT-8601-EntropyCalibration2\nx: 3c010a14\n")
    b.write_text("TRT-8601-EntropyCalibration2\nx: 3c010a15\n")
    keys = {_key(settings=parse_options({**DEFAULTS, "trt_int8_enable": 1,
                                         "trt_int8_calibration_table_name": str(p),
                                         "trt_int8_use_native_calibration_table": 1}))
            for p in (a, b)}
    assert len(keys) == 2


# -- availability and fallback ----------------------------------------------------------------

def test_unavailable_here_and_sessions_fall_back(monkeypatch):
    reason = TensorrtExecutionProvider.unavailable_reason()
    if not reason:
        pytest.skip("TensorRT and a CUDA GPU are present")
    assert "tensorrt" in reason or "GPU" in reason
    assert not TensorrtExecutionProvider.is_available()
    monkeypatch.setitem(registry._REGISTERED, TRT, TensorrtExecutionProvider)
    assert TRT not in ort.get_available_providers()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = ort.InferenceSession(cycle_model().SerializeToString(),
                                 providers=[(TRT, {"trt_fp16_enable": "1"}), CPU])
    assert any(TRT in str(x.message) and reason in str(x.message) for x in w)
    assert s.get_providers() == [CPU]
    x = rand(2, 3)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-5)
    with pytest.raises(ort.EPFail, match="not available"):
        ort.InferenceSession(cycle_model().SerializeToString(),
                             providers=[(TRT, {"error_on_failure": "1"}), CPU])
    with pytest.raises(RuntimeError, match="tensorrt"):
        TensorrtExecutionProvider()


def test_device_values_stay_on_the_device_between_engines():
    """Two TensorRT groups separated by a CPU node: values cross only where needed."""
    s, ep, be = session(cycle_model())
    s.run(None, {"x": rand(2, 3)})
    st = ep.allocation_stats()
    # x in; a out (to Sigmoid on CPU); b in; y out. 'a' also feeds Add on the GPU without
    # a round trip.
    assert st["copies_to_device"] == 2 and st["copies_to_host"] == 2
    assert all(isinstance(r, FakeTensor) is False for r in s.run(None, {"x": rand(2, 3)}))


# -- a zoo model ------------------------------------------------------------------------------

@pytest.mark.parametrize("unsupported", [(), ("Concat",)])
def test_zoo_squeezenet_through_the_fake_parser(unsupported):
    from onnxrt.cli.inputs import generate
    from onnxrt.zoo import zoo_models

    # the zoo file's constant weights make its 1000 logits equal in exact arithmetic
    # (~1.4e10), and its final softmax turns rounding differences of 1e-7 between the
    # engines' conv orders into 0.03: compare the logits, the softmax dropped
    model = onnx.load(zoo_models()["squeezenet"])
    last = model.graph.node[-1]
    assert last.op_type == "Softmax"
    del model.graph.node[-1]
    del model.graph.output[:]
    model.graph.output.append(onnx.ValueInfoProto(name=last.input[0]))
    path = model.SerializeToString()
    ops = {n.op_type for n in model.graph.node} - set(unsupported)
    be = FakeBackend(ops=ops)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    s = ort.InferenceSession(path, so, providers=[TensorrtExecutionProvider(backend=be), CPU])
    cpu = ort.InferenceSession(path, providers=[CPU])
    feeds = {a.name: generate(a, {}, None) for a in cpu.get_inputs()}
    for a, b in zip(s.run(None, feeds), cpu.run(None, feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    info = s.get_provider_graph_assignment_info()
    on_cpu = {n.op_type for sg in info if sg.ep_name == CPU for n in sg.get_nodes()}
    assert on_cpu == set(unsupported)
    assert len(be.builds) == len([sg for sg in info if sg.ep_name == TRT])
    assert (len(be.builds) == 1) == (not unsupported)
