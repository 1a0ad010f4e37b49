"""onnxruntime's API where programs written for onnxruntime reach it: module paths, devices
and memory infos, sparse tensors, LoRA adapters, SessionOptions that change the model,
lenient feeds, raw-pointer bindings. Expected values come from onnxruntime itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import onnx
import onnxruntime as ort_ref
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import onnxrt as ort
from models import add_model, model


def _identity_model(shape, elem=T.FLOAT, ir_version=8):
    return model([h.make_node("Identity", ["x"], ["y"])],
                 [h.make_tensor_value_info("x", elem, shape)],
                 [h.make_tensor_value_info("y", elem, None)])


def both(m, so_factory=None, **kw):
    b = m.SerializeToString() if isinstance(m, onnx.ModelProto) else m
    so_o = so_factory(ort) if so_factory else None
    so_r = so_factory(ort_ref) if so_factory else None
    return (ort.InferenceSession(b, so_o, **kw),
            ort_ref.InferenceSession(b, so_r, providers=["CPUExecutionProvider"], **kw))


# -- module paths and running unmodified programs ---------------------------------------------
@pytest.fixture
def aliased():
    ort.install_as_onnxruntime()
    try:
        yield
    finally:
        ort.uninstall_as_onnxruntime()


def test_install_as_onnxruntime_maps_module_paths(aliased):
    import onnxruntime
    from onnxruntime.capi import _pybind_state as C
    from onnxruntime.capi.onnxruntime_inference_collection import (
        check_and_normalize_provider_args)
    from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument, OrtValueVector

    assert onnxruntime is ort
    assert C.OrtValue is ort.OrtValue and Fail is ort.Fail
    assert InvalidArgument is ort.InvalidArgument
    assert OrtValueVector is ort.OrtValueVector and callable(check_and_normalize_provider_args)
    with pytest.raises(ModuleNotFoundError, match="no counterpart"):
        import onnxruntime.transformers_that_do_not_exist  # noqa: F401


def test_uninstall_gives_back_the_real_package(aliased):
    ort.uninstall_as_onnxruntime()
    import onnxruntime

    assert onnxruntime is ort_ref
    ort.install_as_onnxruntime()  # the fixture uninstalls again


PROGRAM = """
import sys
import numpy as np
import onnxruntime
from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument
sess = onnxruntime.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
x = np.arange(6, dtype=np.float32).reshape(2, 3)
print(onnxruntime.__name__, sess.run(None, {"x": x, "y": x})[0].sum(), sys.argv[2])
"""


@pytest.mark.parametrize("form", ["path", "module"])
def test_run_as_onnxruntime_runs_an_unmodified_program(tmp_path, form):
    path = tmp_path / "m.onnx"
    onnx.save(add_model(), path)
    (tmp_path / "prog.py").write_text(PROGRAM)
    target = [str(tmp_path / "prog.py")] if form == "path" else ["-m", "prog"]
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get(
        "PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-m", "onnxrt.run_as_onnxruntime", *target,
                          str(path), "extra-arg"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    # onnxruntime's own module name would be "onnxruntime": the program ran on onnxrt
    assert out.stdout.split() == ["onnxrt", "30.0", "extra-arg"]


def test_run_as_onnxruntime_usage():
    out = subprocess.run([sys.executable, "-m", "onnxrt.run_as_onnxruntime"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "usage" in out.stderr


# -- build info, telemetry, errors ----------------------------------------------------------
def test_build_info_and_telemetry_switches():
    assert "Build Info" in ort.get_build_info() and "Build Info" in ort_ref.get_build_info()
    for fn in (ort.enable_telemetry_events, ort.disable_telemetry_events, ort.preload_dlls):
        assert fn() is None and "no-op" in fn.__doc__
    assert ort.has_collective_ops() is ort_ref.has_collective_ops() is False
    info = ort.InferenceSession(add_model().SerializeToString()
                                ).get_provider_graph_assignment_info()
    assert isinstance(info[0], ort.OrtEpAssignedSubgraph)
    assert isinstance(info[0].get_nodes()[0], ort.OrtEpAssignedNode)


def test_errors_catchable_as_runtime_error_where_onnxruntime_raises_one():
    for eng in (ort, ort_ref):
        with pytest.raises(RuntimeError, match="does not have configuration with key"):
            eng.SessionOptions().get_session_config_entry("nope")
        sess = eng.InferenceSession(add_model().SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        with pytest.raises(RuntimeError, match="Unknown Provider Type: InvalidProvider"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sess.set_providers(["InvalidProvider"])
    # still the ValueError-style InvalidArgument too
    with pytest.raises(ValueError):
        ort.SessionOptions().get_session_config_entry("nope")


# -- devices, memory infos, arena -----------------------------------------------------------
def test_ort_device_numbers_match_onnxruntime():
    from onnxruntime.capi import _pybind_state as C_ref

    from onnxrt.capi import _pybind_state as C

    for name in ("cpu", "gpu", "cuda", "npu", "fpga", "dml", "cann", "webgpu"):
        assert getattr(C.OrtDevice, name)() == getattr(C_ref.OrtDevice, name)(), name
    for name, dev_id in (("cpu", 0), ("cuda", 1), ("dml", 0)):
        a, b = ort.OrtDevice.make(name, dev_id), ort_ref.OrtDevice.make(name, dev_id)
        assert (a.device_type(), a.device_id(), a.device_vendor_id(), a.device_mem_type()) == (
            b.device_type(), b.device_id(), b.device_vendor_id(), b.device_mem_type()), name
    d = C.OrtDevice(C.OrtDevice.cpu(), C.OrtDevice.default_memory(), 0)
    assert d.to_device().is_host and ort.OrtDevice.make("cuda", 1).to_device().type == "cuda"


def _meminfo(m):
    return (m.name, m.device_id, int(m.mem_type), int(m.allocator_type), int(m.device_mem_type),
            m.device_vendor_id)


def test_memory_infos_match_onnxruntime():
    for eng in (ort, ort_ref):
        info = eng.OrtMemoryInfo("Cpu", eng.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0,
                                 eng.OrtMemType.DEFAULT)
        assert _meminfo(info) == ("Cpu", 0, 0, 1, 0, 0)
        v2 = eng.OrtMemoryInfo.create_v2("Test", eng.OrtMemoryInfoDeviceType.CPU, 0, 0,
                                         eng.OrtDeviceMemoryType.DEFAULT, 128,
                                         eng.OrtAllocatorType.ORT_ARENA_ALLOCATOR)
        assert _meminfo(v2) == ("Test", 0, 0, 1, 0, 0)
    ours, ref = both(add_model())
    for fn in ("get_input_memory_infos", "get_output_memory_infos"):
        assert [_meminfo(m) for m in getattr(ours, fn)()] == [
            _meminfo(m) for m in getattr(ref, fn)()], fn
    eo, er = ours.get_input_epdevices(), ref.get_input_epdevices()
    assert len(eo) == len(er) and [e.ep_name for e in eo] == [e.ep_name for e in er]
    assert [e.ep_name for e in ort.get_ep_devices()][-1] == "CPUExecutionProvider"


def test_arena_cfg_fields_and_shared_allocator():
    from onnxrt.framework.allocators import _REGISTERED
    from onnxrt.execute.memory import arena_in_use

    fields = ("max_mem", "arena_extend_strategy", "initial_chunk_size_bytes",
              "max_dead_bytes_per_chunk", "initial_growth_chunk_size_bytes")
    cfg = {"max_mem": 16, "arena_extend_strategy": 1, "initial_chunk_size_bytes": 8,
           "max_dead_bytes_per_chunk": 4, "initial_growth_chunk_size_bytes": 2}
    for a, b in ((ort.OrtArenaCfg(8, 0, 4, 2), ort_ref.OrtArenaCfg(8, 0, 4, 2)),
                 (ort.OrtArenaCfg(cfg), ort_ref.OrtArenaCfg(cfg))):
        assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields]
    info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0,
                             ort.OrtMemType.DEFAULT)
    saved = dict(_REGISTERED)
    try:
        # limits the process heap cannot keep are refused, not ignored
        with pytest.raises(ort.NotImplemented, match="max_mem"):
            ort.create_and_register_allocator(info, ort.OrtArenaCfg(1 << 20, 0, -1, -1))
        ort.create_and_register_allocator(info, ort.OrtArenaCfg(0, 1, -1, -1))
        so = ort.SessionOptions()
        so.enable_cpu_mem_arena = False  # the shared allocator still gives the arena
        so.add_session_config_entry("session.use_env_allocators", "1")
        ort.InferenceSession(add_model().SerializeToString(), so)
        assert arena_in_use()
    finally:
        _REGISTERED.clear()
        _REGISTERED.update(saved)


def test_cpu_provider_takes_onnxruntimes_options():
    m = add_model().SerializeToString()
    for strategy in ("kSameAsRequested", "kNextPowerOfTwo"):
        s = ort.InferenceSession(m, providers=[("CPUExecutionProvider",
                                                {"arena_extend_strategy": strategy})])
        assert s.get_provider_options()["CPUExecutionProvider"] == {
            "arena_extend_strategy": strategy}
    with pytest.raises(ort.InvalidArgument, match="arena_extend_strategy"):
        ort.InferenceSession(m, providers=[("CPUExecutionProvider",
                                            {"arena_extend_strategy": "bogus"})])
    s = ort.InferenceSession(m, providers=[("CPUExecutionProvider", {"use_arena": "0"})])
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(s.run(None, {"x": x, "y": x})[0], 2 * x)


def test_memory_arena_shrinkage_run_option():
    s = ort.InferenceSession(add_model().SerializeToString())
    x = np.ones((2, 3), np.float32)
    ro = ort.RunOptions()
    ro.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    np.testing.assert_array_equal(s.run(None, {"x": x, "y": x}, ro)[0], 2 * x)
    ro.add_run_config_entry("memory.enable_memory_arena_shrinkage", "gpu:0")
    with pytest.raises(ort.InvalidArgument, match="CPU arena only"):
        s.run(None, {"x": x, "y": x}, ro)


# -- OrtValue, OrtValueVector ----------------------------------------------------------------
def test_ortvalue_size_array_protocol_and_c_level_run():
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    for eng in (ort, ort_ref):
        v = eng.OrtValue.ortvalue_from_numpy(x)
        assert v.tensor_size_in_bytes() == 24
        np.testing.assert_array_equal(np.asarray(v), x)
    ours = ort.InferenceSession(add_model().SerializeToString())
    a = ort.OrtValue.ortvalue_from_numpy(np.ones((2, 3), np.float32))
    vec = ours._sess.run_with_ort_values({"x": a._get_c_value(), "y": a._ortvalue}, ["z"],
                                         ort.RunOptions())
    assert isinstance(vec, ort.OrtValueVector) and len(vec) == 1
    np.testing.assert_array_equal(vec[0].numpy(), 2 * np.ones((2, 3)))


def test_profiling_start_time():
    so = ort.SessionOptions()
    so.enable_profiling = True
    before = time.time_ns()
    s = ort.InferenceSession(add_model().SerializeToString(), so)
    start = s.get_profiling_start_time_ns()
    os.remove(s.end_profiling())
    assert before - 10**9 < start <= time.time_ns()
    assert ort.InferenceSession(add_model().SerializeToString()).get_profiling_start_time_ns() \
        == 0


# -- sparse tensors --------------------------------------------------------------------------
def test_sparse_tensors_match_onnxruntime():
    shape, values, idx = [9, 9], np.array([1.0, 2.0, 3.0], np.float32), np.array([3, 5, 15])
    for eng in (ort, ort_ref):
        st = eng.SparseTensor.sparse_coo_from_numpy(shape, values, idx,
                                                    eng.OrtDevice.make("cpu", 0))
        assert st.format() == eng.OrtSparseFormat.ORT_SPARSE_COO
        assert st.dense_shape() == shape and st.data_type() == "sparse_tensor(float)"
        assert not st.values().flags.writeable
        np.testing.assert_array_equal(st.as_coo_view().indices(), idx)
        ov = eng.OrtValue.ort_value_from_sparse_tensor(st)
        np.testing.assert_array_equal(ov.as_sparse_tensor().values(), values)
        csr = eng.SparseTensor.sparse_csr_from_numpy(
            shape, values, np.array([1, 1, 1]), np.array([0, 1, 2, 3, 3, 3, 3, 3, 3, 3]),
            eng.OrtDevice.make("cpu", 0))
        assert csr.format() == eng.OrtSparseFormat.ORT_SPARSE_CSRC
        np.testing.assert_array_equal(csr.as_csrc_view().outer(),
                                      [0, 1, 2, 3, 3, 3, 3, 3, 3, 3])
        strs = eng.SparseTensor.sparse_coo_from_numpy(shape, np.array(["a", "bc", "d"]), idx,
                                                      eng.OrtDevice.make("cpu", 0))
        assert strs.data_type() == "sparse_tensor(string)"
        assert list(strs.values()) == ["a", "bc", "d"]
    dense = ort.SparseTensor.sparse_coo_from_numpy(shape, values, idx).to_dense()
    want = np.zeros(81, np.float32)
    want[idx] = values
    np.testing.assert_array_equal(dense, want.reshape(9, 9))
    with pytest.raises(ort.InvalidArgument, match="out of range"):
        ort.SparseTensor.sparse_coo_from_numpy(shape, values, np.array([3, 5, 81]))


def test_sparse_output_matches_onnxruntime():
    sp = numpy_helper.from_array(np.array([1.5, -2.0], np.float32), "v")
    sparse = h.make_sparse_tensor(sp, numpy_helper.from_array(np.array([1, 6], np.int64),
                                                              "i"), [2, 4])
    m = model([h.make_node("Constant", [], ["values"], sparse_value=sparse)], [],
              [h.make_sparse_tensor_value_info("values", T.FLOAT, [2, 4])])
    ours, ref = both(m)
    got, want = ours.run_with_ort_values(["values"], {})[0], ref.run_with_ort_values(
        ["values"], {})[0]
    a, b = got.as_sparse_tensor(), want.as_sparse_tensor()
    assert a.dense_shape() == b.dense_shape() == [2, 4]
    np.testing.assert_array_equal(a.values(), b.values())
    np.testing.assert_array_equal(a.as_coo_view().indices(), b.as_coo_view().indices())


# -- LoRA adapters ---------------------------------------------------------------------------
def _lora_model():
    """y = x @ W + (x @ A) @ B with A, B overridable initializers (empty by default)."""
    w = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "W")
    a = numpy_helper.from_array(np.zeros((4, 0), np.float32), "A")
    b = numpy_helper.from_array(np.zeros((0, 4), np.float32), "B")
    return model([h.make_node("MatMul", ["x", "W"], ["xw"]),
                  h.make_node("MatMul", ["x", "A"], ["xa"]),
                  h.make_node("MatMul", ["xa", "B"], ["xab"]),
                  h.make_node("Add", ["xw", "xab"], ["y"])],
                 [h.make_tensor_value_info("x", T.FLOAT, [2, 4]),
                  h.make_tensor_value_info("A", T.FLOAT, [4, "r"]),
                  h.make_tensor_value_info("B", T.FLOAT, ["r", 4])],
                 [h.make_tensor_value_info("y", T.FLOAT, [2, 4])], [w, a, b])


@pytest.mark.parametrize("writer,reader", [("ort", "ort_ref"), ("ort_ref", "ort")])
def test_lora_adapter_files_interoperate_and_replace_weights(tmp_path, writer, reader):
    engines = {"ort": ort, "ort_ref": ort_ref}
    w_eng, r_eng = engines[writer], engines[reader]
    rng = np.random.default_rng(0)
    params = {"A": rng.standard_normal((4, 2)).astype(np.float32),
              "B": rng.standard_normal((2, 4)).astype(np.float32)}
    fmt = w_eng.AdapterFormat()
    fmt.set_adapter_version(3)
    fmt.set_model_version(7)
    fmt.set_parameters({k: w_eng.OrtValue.ortvalue_from_numpy(v) for k, v in params.items()})
    path = str(tmp_path / "a.onnx_adapter")
    fmt.export_adapter(path)
    back = r_eng.AdapterFormat.read_adapter(path)
    assert (back.get_adapter_version(), back.get_model_version()) == (3, 7)
    for k, v in back.get_parameters().items():
        np.testing.assert_array_equal(v.numpy(), params[k])
    x = rng.standard_normal((2, 4)).astype(np.float32)
    results = {}
    for name, eng in engines.items():
        ad = eng.LoraAdapter()
        ad.Load(path)
        ro = eng.RunOptions()
        ro.add_active_adapter(ad)
        s = eng.InferenceSession(_lora_model().SerializeToString(),
                                 providers=["CPUExecutionProvider"])
        results[name] = (s.run(None, {"x": x}, ro)[0], s.run(None, {"x": x})[0])
    base = x @ np.arange(16, dtype=np.float32).reshape(4, 4)
    np.testing.assert_allclose(results["ort"][0], results["ort_ref"][0], rtol=1e-5)
    np.testing.assert_allclose(results["ort"][0], base + x @ params["A"] @ params["B"],
                               rtol=1e-5)
    np.testing.assert_allclose(results["ort"][1], base, rtol=1e-6)  # the next run: the model's


def test_lora_adapter_refusals(tmp_path):
    with pytest.raises(ort.InvalidArgument, match="not loaded"):
        ort.RunOptions().add_active_adapter(ort.LoraAdapter())
    (tmp_path / "bad").write_bytes(b"not an adapter at all")
    with pytest.raises(ort.InvalidArgument, match="TORT"):
        ort.LoraAdapter().Load(tmp_path / "bad")


# -- SessionOptions that change the model ----------------------------------------------------
def test_add_initializer_replaces_the_models_weight():
    w = np.array([[2.0, 1.0], [4.0, 3.0]], np.float32)
    keep = []  # onnxruntime reads the OrtValue's memory later: keep it alive

    def so(eng):
        o = eng.SessionOptions()
        keep.append(eng.OrtValue.ortvalue_from_numpy(w))
        o.add_initializer("W", keep[-1])
        return o

    m = model([h.make_node("MatMul", ["x", "W"], ["y"])],
              [h.make_tensor_value_info("x", T.FLOAT, [2, 2])],
              [h.make_tensor_value_info("y", T.FLOAT, [2, 2])],
              [numpy_helper.from_array(np.eye(2, dtype=np.float32), "W")])
    ours, ref = both(m, so)
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    np.testing.assert_array_equal(ours.run(None, {"x": x})[0], ref.run(None, {"x": x})[0])
    np.testing.assert_array_equal(ours.run(None, {"x": x})[0], x @ w)
    bad = ort.SessionOptions()
    bad.add_initializer("nope", np.ones(2, np.float32))
    with pytest.raises(ort.InvalidArgument, match="'nope'"):
        ort.InferenceSession(m.SerializeToString(), bad)
    bad = ort.SessionOptions()
    bad.add_initializer("W", np.ones((2, 2), np.float64))
    with pytest.raises(ort.InvalidArgument, match="element type"):
        ort.InferenceSession(m.SerializeToString(), bad)


def test_add_external_initializers_supplies_data_never_on_disk(tmp_path):
    pads = numpy_helper.from_array(np.zeros(4, np.int64), "pads")
    pads.ClearField("raw_data")
    pads.data_location = T.EXTERNAL
    pads.external_data.add(key="location", value="not_on_disk.bin")
    m = model([h.make_node("Pad", ["x", "pads"], ["y"])],
              [h.make_tensor_value_info("x", T.FLOAT, [1, 2]),
               h.make_tensor_value_info("pads", T.INT64, [4])],
              [h.make_tensor_value_info("y", T.FLOAT, None)], [pads])
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)

    keep = [np.array([0, 0, 1, 1], np.int64)]  # onnxruntime reads it later: keep it alive

    def so(eng):
        o = eng.SessionOptions()
        keep.append(eng.OrtValue.ortvalue_from_numpy(keep[0]))
        o.add_external_initializers(["pads"], [keep[-1]])
        return o

    ours, ref = both(path, so)
    x = np.array([[1.0, 2.0]], np.float32)
    np.testing.assert_array_equal(ours.run(None, {"x": x})[0], ref.run(None, {"x": x})[0])
    assert ours.run(None, {"x": x})[0].shape == (2, 3)
    with pytest.raises(ort.NoSuchFile):
        ort.InferenceSession(path)


def _free_dims_model():
    x = h.make_tensor_value_info("x", T.FLOAT, ["Dim1", "Dim2", 5])
    x.type.tensor_type.shape.dim[0].denotation = "DATA_BATCH"
    x.type.tensor_type.shape.dim[1].denotation = "DATA_CHANNEL"
    return model([h.make_node("Abs", ["x"], ["y"])], [x],
                 [h.make_tensor_value_info("y", T.FLOAT, ["Dim1", "Dim2", 5])])


@pytest.mark.parametrize("how", ["name", "denotation"])
def test_free_dimension_overrides_fix_the_inputs(how):
    def so(eng):
        o = eng.SessionOptions()
        if how == "name":
            o.add_free_dimension_override_by_name("Dim1", 4)
            o.add_free_dimension_override_by_name("Dim2", 6)
        else:
            o.add_free_dimension_override_by_denotation("DATA_BATCH", 4)
            o.add_free_dimension_override_by_denotation("DATA_CHANNEL", 6)
        return o

    ours, ref = both(_free_dims_model(), so)
    assert ours.get_inputs()[0].shape == ref.get_inputs()[0].shape == [4, 6, 5]
    np.testing.assert_array_equal(ours.run(None, {"x": -np.ones((4, 6, 5), np.float32)})[0],
                                  np.ones((4, 6, 5)))
    for s in (ours, ref):
        with pytest.raises(Exception, match="dimensions"):
            s.run(None, {"x": np.ones((3, 6, 5), np.float32)})


def test_config_embedded_in_the_model(monkeypatch):
    m = add_model()
    m.metadata_props.add(key="ort_config", value=json.dumps({"session_options": {
        "inter_op_num_threads": 5, "intra_op_num_threads": 2, "graph_optimization_level": 1,
        "enable_profiling": 0}}))
    b = m.SerializeToString()
    assert ort.InferenceSession(b).get_session_options().intra_op_num_threads == 0
    monkeypatch.setenv("ORT_LOAD_CONFIG_FROM_MODEL", "1")
    ours, ref = both(m)
    for attr in ("inter_op_num_threads", "intra_op_num_threads", "graph_optimization_level",
                 "enable_profiling", "execution_mode"):
        assert int(getattr(ours.get_session_options(), attr)) == int(
            getattr(ref.get_session_options(), attr)), attr
    assert ours.get_session_options().intra_op_num_threads == 2
    monkeypatch.delenv("ORT_LOAD_CONFIG_FROM_MODEL")
    so = ort.SessionOptions()
    so.add_session_config_entry("session.load_config_from_model", "1")
    assert ort.InferenceSession(b, so).get_session_options().inter_op_num_threads == 5
    assert so.inter_op_num_threads == 0  # the caller's options are not changed
    m.metadata_props[0].value = json.dumps({"session_options": {"no_such_option": 1}})
    with pytest.raises(ort.InvalidArgument, match="no_such_option"):
        ort.InferenceSession(m.SerializeToString(), so)


def test_optimized_model_saved_with_external_initializers(tmp_path):
    big = numpy_helper.from_array(np.arange(64, dtype=np.float32).reshape(8, 8), "big")
    small = numpy_helper.from_array(np.full(1, 2.0, np.float32), "small")
    m = model([h.make_node("MatMul", ["x", "big"], ["t"]),
               h.make_node("Mul", ["t", "small_b"], ["y"]),
               h.make_node("Expand", ["small", "shape"], ["small_b"])],
              [h.make_tensor_value_info("x", T.FLOAT, [2, 8])],
              [h.make_tensor_value_info("y", T.FLOAT, None)],
              [big, small, numpy_helper.from_array(np.array([8], np.int64), "shape")])
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    so.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                                "weights.bin")
    so.add_session_config_entry(
        "session.optimized_model_external_initializers_min_size_in_bytes", "100")
    ort.InferenceSession(m.SerializeToString(), so)
    assert (tmp_path / "weights.bin").stat().st_size == 64 * 4
    saved = onnx.load(str(tmp_path / "opt.onnx"), load_external_data=False)
    where = {t.name: t.data_location for t in saved.graph.initializer}
    assert where["big"] == T.EXTERNAL and where["small"] == T.DEFAULT
    x = np.ones((2, 8), np.float32)
    ref = ort_ref.InferenceSession(str(tmp_path / "opt.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(ref.run(None, {"x": x})[0],
                               2 * x @ np.arange(64, dtype=np.float32).reshape(8, 8))


# -- lenient feeds, strings, aliasing ---------------------------------------------------------
def test_rank0_inputs_accept_any_shape_and_minus_one_dims_are_dynamic():
    ours, ref = both(_identity_model([]))
    x = np.ones((1,), np.float32)
    np.testing.assert_array_equal(ours.run(None, {"x": x})[0], ref.run(None, {"x": x})[0])
    ours, ref = both(_identity_model([-1, 3]))
    assert ours.get_inputs()[0].shape == ref.get_inputs()[0].shape == [None, 3]
    x = np.ones((5, 3), np.float32)
    np.testing.assert_array_equal(ours.run(None, {"x": x})[0], ref.run(None, {"x": x})[0])
    with pytest.raises(ort.InvalidArgument, match="index: 1 Got: 4 Expected: 3"):
        ours.run(None, {"x": np.ones((5, 4), np.float32)})


@pytest.mark.parametrize("x", [
    np.array([b"must", b"have", b"same", b"size"], dtype=np.void).reshape(2, 2),
    np.array(["Olá", "你好", "a", "b"]).reshape(2, 2),
])
def test_string_inputs_as_bytes_void_and_unicode(x):
    ours, ref = both(_identity_model([2, 2], T.STRING))
    got, want = ours.run(None, {"x": x})[0], ref.run(None, {"x": x})[0]
    assert got.dtype == want.dtype == object
    assert got.tolist() == want.tolist()


def test_bytes_inputs_are_decoded_as_utf8():
    s = ort.InferenceSession(_identity_model([2], T.STRING).SerializeToString())
    # onnxruntime 1.32 reads a bytes (S) array as C strings and runs one item into the next
    # when an item fills its width: ["caféx", "x"], ["musthave", "have"]; onnxrt does not
    got = s.run(None, {"x": np.array([b"caf\xc3\xa9", b"x"])})[0]
    assert got.tolist() == ["café", "x"]
    got = s.run(None, {"x": np.array([b"must", b"have"])})[0]
    assert got.tolist() == ["must", "have"]
    with pytest.raises(ort.InvalidArgument, match="UTF-8"):
        s.run(None, {"x": np.array([b"\xff", b"x"])})


def test_outputs_never_alias_feeds_or_initializers():
    ours = ort.InferenceSession(_identity_model([2, 2]).SerializeToString())
    x = np.ones((2, 2), np.float32)
    y = ours.run(None, {"x": x})[0]
    assert not np.shares_memory(x, y)
    v = ort.OrtValue.ortvalue_from_numpy(x)
    assert not np.shares_memory(ours.run_with_ort_values(None, {"x": v})[0].numpy(), x)
    b = ours.io_binding()
    b.bind_cpu_input("x", x)
    b.bind_output("y")
    ours.run_with_iobinding(b)
    assert not np.shares_memory(b.copy_outputs_to_cpu()[0], x)
    w = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
    m = model([h.make_node("Identity", ["w"], ["y"])], [],
              [h.make_tensor_value_info("y", T.FLOAT, [4])], [w])
    s = ort.InferenceSession(m.SerializeToString())
    first = s.run(None, {})[0]
    first[:] = -1
    np.testing.assert_array_equal(s.run(None, {})[0], np.arange(4))


# -- providers given as objects --------------------------------------------------------------
def test_unavailable_provider_objects_warn_and_fall_back_or_raise():
    from onnxrt.framework.provider import ExecutionProvider

    class Absent(ExecutionProvider):
        name = "AbsentTestExecutionProvider"

        @classmethod
        def unavailable_reason(cls):
            return "its test device is not plugged in"

    m = add_model().SerializeToString()
    with pytest.warns(UserWarning, match="not plugged in"):
        s = ort.InferenceSession(m, providers=[Absent()])
    assert s.get_providers() == ["CPUExecutionProvider"]
    with pytest.raises(ort.EPFail, match="not plugged in"):
        ort.InferenceSession(m, providers=[Absent(error_on_failure=True)])


# -- raw-pointer bindings, C-level binding ---------------------------------------------------
@pytest.mark.parametrize("elem", [T.FLOAT, T.INT64, T.BOOL, T.FLOAT16, T.BFLOAT16])
def test_iobinding_raw_pointers(elem):
    from onnxrt.capi._pybind_state import OrtDevice, SessionIOBinding

    m = _identity_model([None, 2], elem)
    dt = ort.capi._pybind_state.OrtValue.ortvalue_from_shape_and_type([1], elem).numpy().dtype
    x = np.arange(8).reshape(4, 2).astype(dt)
    xv = ort.OrtValue.ortvalue_from_numpy(x)
    yv = ort.OrtValue.ortvalue_from_shape_and_type(x.shape, elem)
    s = ort.InferenceSession(m.SerializeToString())
    b = s.io_binding()
    b.bind_input("x", "cpu", 0, elem, x.shape, xv.data_ptr())
    b.bind_output("y", "cpu", 0, elem, x.shape, yv.data_ptr())
    s.run_with_iobinding(b)
    np.testing.assert_array_equal(yv.numpy(), x)  # written into the bound buffer
    cpu = OrtDevice(OrtDevice.cpu(), OrtDevice.default_memory(), 0)
    cb = SessionIOBinding(s._sess)
    cb.bind_input("x", cpu, elem, x.shape, xv.data_ptr())
    cb.bind_output("y", cpu)
    s._sess.run_with_iobinding(cb, None)
    outs = cb.get_outputs()
    assert isinstance(outs, ort.OrtValueVector)
    np.testing.assert_array_equal(outs[0].numpy(), x)


def test_check_and_normalize_provider_args_matches_onnxruntime():
    from onnxruntime.capi.onnxruntime_inference_collection import (
        check_and_normalize_provider_args as ref_fn)

    from onnxrt.capi.onnxruntime_inference_collection import check_and_normalize_provider_args

    valid = ["a", "b", "c"]
    for args in ((None, None), (["a"], None), ([("a", {1: 2}), "b"], None),
                 (["a", "b"], [{1: 2}, {}])):
        assert check_and_normalize_provider_args(*args, valid) == ref_fn(*args, valid)
    with pytest.warns(UserWarning, match="Duplicate"):
        assert check_and_normalize_provider_args(["a", "b", "a"], [{"x": 1}, {}, {"y": 2}],
                                                 valid) == (["a", "b"], [{"x": "1"}, {}])
    for bad in ((3, None), ([3], None), (["a"], 3), (["a"], ["not dict"]),
                (["a", "b"], [{1: 2}]), ([("a", {1: 2})], [{3: 4}])):
        with pytest.raises(ValueError):
            check_and_normalize_provider_args(*bad, valid)
