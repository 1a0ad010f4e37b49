"""The same user code against onnxrt and onnxruntime: results, NodeArgs, metadata, errors."""

from __future__ import annotations

import threading

import numpy as np
import onnxruntime as ort_ref
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import onnxrt as ort
from models import add_model, chain_model, initializer_model, model, rand

ENGINES = {"onnxrt": ort, "onnxruntime": ort_ref}


def both(m, **kw):
    b = m.SerializeToString()
    return (ort.InferenceSession(b, **kw),
            ort_ref.InferenceSession(b, providers=["CPUExecutionProvider"], **kw))


def nodeargs(args):
    return [(a.name, a.type, a.shape) for a in args]


def test_nodeargs_and_metadata_match_onnxruntime():
    ours, ref = both(add_model())
    assert nodeargs(ours.get_inputs()) == nodeargs(ref.get_inputs())
    assert nodeargs(ours.get_outputs()) == nodeargs(ref.get_outputs())
    assert str(ours.get_inputs()[0]) == str(ref.get_inputs()[0])
    mo, mr = ours.get_modelmeta(), ref.get_modelmeta()
    for attr in ("producer_name", "graph_name", "domain", "description", "graph_description",
                 "version", "custom_metadata_map"):
        assert getattr(mo, attr) == getattr(mr, attr), attr


def test_metadata_version_unset_matches_onnxruntime():
    m = add_model()
    m.ClearField("model_version")
    ours, ref = both(m)
    assert ours.get_modelmeta().version == ref.get_modelmeta().version


def test_sequence_nodearg_type_string():
    m = model([h.make_node("SequenceConstruct", ["x", "x"], ["s"])],
              [h.make_tensor_value_info("x", T.FLOAT, [2])],
              [h.make_tensor_sequence_value_info("s", T.FLOAT, None)])
    ours, ref = both(m)
    assert nodeargs(ours.get_outputs()) == nodeargs(ref.get_outputs())
    x = np.arange(2, dtype=np.float32)
    got, want = ours.run(None, {"x": x}), ref.run(None, {"x": x})
    assert isinstance(got[0], list) and len(got[0]) == len(want[0])
    for a, b in zip(got[0], want[0]):
        np.testing.assert_array_equal(a, b)


def test_overridable_initializers():
    ours, ref = both(initializer_model())
    assert nodeargs(ours.get_overridable_initializers()) == nodeargs(
        ref.get_overridable_initializers())
    assert nodeargs(ours.get_inputs()) == nodeargs(ref.get_inputs())
    x = rand(2, 3)
    np.testing.assert_allclose(ours.run(None, {"x": x})[0], ref.run(None, {"x": x})[0])
    w = np.array([3.0, 2.0, 1.0], np.float32)
    np.testing.assert_allclose(ours.run(None, {"x": x, "w": w})[0],
                               ref.run(None, {"x": x, "w": w})[0])
    # the override does not stick
    np.testing.assert_allclose(ours.run(None, {"x": x})[0], ref.run(None, {"x": x})[0])


def test_run_results_and_output_selection():
    ours, ref = both(add_model())
    x, y = rand(4, 3), rand(4, 3, seed=1)
    for names in (None, [], ["w"], ["w", "z"]):
        got = ours.run(names, {"x": x, "y": y})
        want = ref.run(names, {"x": x, "y": y})
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_allclose(a, b)


def test_inputs_as_lists_scalars_noncontiguous_and_ortvalues():
    ours, ref = both(add_model())
    x = rand(4, 6)[:, ::2]          # non-contiguous
    y = [[1.0, 2.0, 3.0]] * 4       # a Python list
    assert not x.flags.c_contiguous
    np.testing.assert_allclose(ours.run(["z"], {"x": x, "y": y})[0],
                               ref.run(["z"], {"x": x, "y": y})[0])
    xv = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x))
    yv = ort.OrtValue.ortvalue_from_numpy(np.asarray(y, np.float32))
    res = ours.run_with_ort_values(["z"], {"x": xv, "y": yv})
    assert isinstance(res[0], ort.OrtValue)
    assert res[0].data_type() == "tensor(float)" and res[0].shape() == [4, 3]
    assert res[0].device_name() == "cpu" and res[0].is_tensor()
    np.testing.assert_allclose(res[0].numpy(), np.asarray(x) + np.asarray(y, np.float32))
    scal = model([h.make_node("Neg", ["a"], ["b"])], [h.make_tensor_value_info("a", T.FLOAT, [])],
                 [h.make_tensor_value_info("b", T.FLOAT, [])])
    s = ort.InferenceSession(scal.SerializeToString())
    out = s.run(None, {"a": np.float32(2.5)})[0]
    assert isinstance(out, np.ndarray) and out.shape == () and out == -2.5


def test_outputs_never_alias_session_state():
    w = h.make_tensor("w", T.FLOAT, [3], [1.0, 2.0, 3.0])
    m = model([h.make_node("Identity", ["w"], ["y"]), h.make_node("Identity", ["x"], ["z"])],
              [h.make_tensor_value_info("x", T.FLOAT, [3])],
              [h.make_tensor_value_info("y", T.FLOAT, [3]),
               h.make_tensor_value_info("z", T.FLOAT, [3])], [w])
    s = ort.InferenceSession(m.SerializeToString())
    y, _ = s.run(None, {"x": np.zeros(3, np.float32)})
    y[:] = 100.0
    y2, _ = s.run(None, {"x": np.zeros(3, np.float32)})
    np.testing.assert_array_equal(y2, [1.0, 2.0, 3.0])


def _error(engine, fn):
    with pytest.raises(Exception) as ei:
        fn()
    return ei.value


@pytest.mark.parametrize("case", ["missing", "unknown", "dtype", "rank", "dim", "bad_output"])
def test_input_errors_match_onnxruntime_and_name_the_problem(case):
    m = model([h.make_node("Add", ["x", "y"], ["z"])],
              [h.make_tensor_value_info("x", T.FLOAT, ["N", 3]),
               h.make_tensor_value_info("y", T.FLOAT, ["N", 3])],
              [h.make_tensor_value_info("z", T.FLOAT, ["N", 3])])
    ours, ref = both(m)
    good = {"x": rand(2, 3), "y": rand(2, 3)}
    feeds, outs, must_mention = {
        "missing": ({"x": good["x"]}, None, ["y"]),
        "unknown": ({**good, "q": good["x"]}, None, ["q"]),
        "dtype": ({"x": good["x"].astype(np.float64), "y": good["y"]}, None,
                  ["x", "tensor(double)", "tensor(float)"]),
        "rank": ({"x": good["x"][None], "y": good["y"]}, None, ["x", "Got: 3", "Expected: 2"]),
        "dim": ({"x": rand(2, 4), "y": good["y"]}, None, ["x", "Got: 4", "Expected: 3"]),
        "bad_output": (good, ["nope"], ["nope"]),
    }[case]
    e_ours = _error(ort, lambda: ours.run(outs, feeds))
    e_ref = _error(ort_ref, lambda: ref.run(outs, feeds))
    # the same class name as onnxruntime's, or the built-in type onnxruntime raises
    ref_cls = type(e_ref).__name__
    if hasattr(ort, ref_cls):
        assert isinstance(e_ours, getattr(ort, ref_cls)), (type(e_ours), ref_cls)
    else:
        assert isinstance(e_ours, type(e_ref)), (type(e_ours), type(e_ref))
    for word in must_mention:
        assert word in str(e_ours), (word, str(e_ours))
    # the session keeps working after the failure
    np.testing.assert_allclose(ours.run(None, good)[0], good["x"] + good["y"])


def test_kernel_failure_names_node_op_and_provider_and_session_recovers():
    m = model([h.make_node("Add", ["x", "y"], ["z"], name="the_add")],
              [h.make_tensor_value_info("x", T.FLOAT, ["N", 3]),
               h.make_tensor_value_info("y", T.FLOAT, ["M", 3])],
              [h.make_tensor_value_info("z", T.FLOAT, None)])
    ours, ref = both(m)
    bad = {"x": rand(2, 3), "y": rand(3, 3)}
    e_ref = _error(ort_ref, lambda: ref.run(None, bad))
    e = _error(ort, lambda: ours.run(None, bad))
    assert isinstance(e, getattr(ort, type(e_ref).__name__))
    for word in ("the_add", "Add", "CPUExecutionProvider"):
        assert word in str(e)
    ok = {"x": rand(2, 3), "y": rand(2, 3)}
    np.testing.assert_allclose(ours.run(None, ok)[0], ok["x"] + ok["y"])


def test_terminate_cancels_a_run_in_progress():
    s = ort.InferenceSession(chain_model(3000, "Sin", (512, 512)).SerializeToString())
    ro = ort.RunOptions()
    x = rand(512, 512)
    timer = threading.Timer(0.1, lambda: setattr(ro, "terminate", True))
    timer.start()
    with pytest.raises(ort.Fail, match="terminate"):
        s.run(None, {"v0": x}, ro)
    timer.join()
    ro.terminate = False
    small = ort.InferenceSession(chain_model(3, "Sin", (2, 2)).SerializeToString())
    np.testing.assert_allclose(small.run(None, {"v0": np.ones((2, 2), np.float32)}, ro)[0],
                               np.sin(np.sin(np.sin(np.ones((2, 2), np.float32)))), rtol=1e-6)


def test_concurrent_runs_from_four_threads():
    m = add_model()
    s = ort.InferenceSession(m.SerializeToString())
    errors, results = [], {}

    def work(k):
        try:
            for j in range(50):
                x, y = rand(8, 3, seed=k * 100 + j), rand(8, 3, seed=k * 100 + j + 1)
                z, w = s.run(None, {"x": x, "y": y})
                np.testing.assert_allclose(z, x + y)
                np.testing.assert_allclose(w, np.maximum(x + y, 0))
            results[k] = True
        except Exception as e:  # collected, the assertion below reports it
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 4


def test_run_async_calls_back():
    s = ort.InferenceSession(add_model().SerializeToString())
    done = threading.Event()
    got = {}

    def cb(res, user_data, err):
        got.update(res=res, data=user_data, err=err)
        done.set()

    x = rand(2, 3)
    s.run_async(["z"], {"x": x, "y": x}, cb, "token")
    assert done.wait(30)
    assert got["err"] == "" and got["data"] == "token"
    np.testing.assert_allclose(got["res"][0], 2 * x)
    done.clear()
    s.run_async(["z"], {"x": x}, cb, "token2")
    assert done.wait(30)
    assert got["res"] is None and "y" in got["err"]


def test_io_binding_on_cpu():
    ours, ref = both(add_model())
    x, y = rand(2, 3), rand(2, 3, seed=3)
    out = np.empty((2, 3), np.float32)
    for s, mod in ((ours, ort), (ref, ort_ref)):
        b = s.io_binding()
        b.bind_cpu_input("x", x)
        b.bind_ortvalue_input("y", mod.OrtValue.ortvalue_from_numpy(y))
        b.bind_output("w")
        s.run_with_iobinding(b)
        res = b.copy_outputs_to_cpu()[0]
        np.testing.assert_allclose(res, np.maximum(x + y, 0))
    b = ours.io_binding()
    b.bind_cpu_input("x", x)
    b.bind_cpu_input("y", y)
    b.bind_output("z", "cpu", 0, np.float32, [2, 3], out)
    ours.run_with_iobinding(b)
    np.testing.assert_allclose(out, x + y)
    assert b.get_outputs()[0].numpy() is out or np.array_equal(b.get_outputs()[0].numpy(), out)


def test_ortvalue_api():
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    for mod in (ort, ort_ref):
        v = mod.OrtValue.ortvalue_from_numpy(a)
        assert v.shape() == [2, 3] and v.data_type() == "tensor(int64)"
        assert v.element_type() == T.INT64 and v.device_name() == "cpu"
        assert v.is_tensor() and v.has_value() and not v.is_tensor_sequence()
        np.testing.assert_array_equal(v.numpy(), a)
        z = mod.OrtValue.ortvalue_from_shape_and_type([4], np.float32)
        assert z.shape() == [4] and z.data_type() == "tensor(float)"
        doubled = a * 2
        v.update_inplace(doubled)
        np.testing.assert_array_equal(v.numpy(), doubled)


def test_session_options_have_onnxruntimes_attributes_and_defaults():
    ours, ref = ort.SessionOptions(), ort_ref.SessionOptions()
    for name in dir(ref):
        if name.startswith("_"):
            continue
        assert hasattr(ours, name), name
        rv = getattr(ref, name)
        if callable(rv):
            continue
        ov = getattr(ours, name)
        if hasattr(rv, "value"):  # a pybind11 enum
            assert int(ov) == int(rv.value), name
        else:
            assert ov == rv, name
    for name in dir(ort_ref.RunOptions()):
        if not name.startswith("_"):
            assert hasattr(ort.RunOptions(), name), name
    so = ort.SessionOptions()
    so.add_session_config_entry("session.foo", "1")
    assert so.get_session_config_entry("session.foo") == "1"


def test_memory_efficient_order_refused_as_onnxruntimes_inference_build_refuses_it():
    """onnxruntime's inference build fails at creation with MEMORY_EFFICIENT; the other
    orders build and give the same results."""
    data = add_model().SerializeToString()
    for order in ("MEMORY_EFFICIENT", "PRIORITY_BASED"):
        so, so_ref = ort.SessionOptions(), ort_ref.SessionOptions()
        so.execution_order = getattr(ort.ExecutionOrder, order)
        so_ref.execution_order = getattr(ort_ref.ExecutionOrder, order)
        try:
            ort_ref.InferenceSession(data, so_ref, providers=["CPUExecutionProvider"])
            ref_fails = False
        except Exception:
            ref_fails = True
        if ref_fails:
            with pytest.raises(ort.Fail, match="Memory efficient topological order"):
                ort.InferenceSession(data, so)
        else:
            ort.InferenceSession(data, so)
        assert ref_fails == (order == "MEMORY_EFFICIENT")


def test_lenient_options_are_onnxruntime_attributes_with_a_reason():
    """Each option accepted without effect is one of onnxruntime's and says why; the
    options onnxrt acts on are not in that list."""
    ref = ort_ref.SessionOptions()
    for name, why in ort.SessionOptions.LENIENT.items():
        assert hasattr(ref, name) and len(why) > 20, name
    for acted in ("execution_order", "use_per_session_threads", "enable_mem_reuse",
                  "intra_op_num_threads", "enable_cpu_mem_arena"):
        assert acted not in ort.SessionOptions.LENIENT


def test_enums_match_onnxruntime():
    for enum_name in ("GraphOptimizationLevel", "ExecutionMode", "ExecutionOrder"):
        ref_enum = getattr(ort_ref, enum_name)
        ours = getattr(ort, enum_name)
        for name, member in ref_enum.__members__.items():
            assert int(getattr(ours, name)) == int(member), (enum_name, name)


def test_provider_queries():
    assert set(ort_ref.get_all_providers()) <= set(ort.get_all_providers())
    assert "CPUExecutionProvider" in ort.get_available_providers()
    assert ort.get_available_providers()[-1] == "CPUExecutionProvider"
    assert ort.get_device() == ort_ref.get_device() == "CPU"
    assert isinstance(ort.get_version_string(), str)
    ours, ref = both(add_model())
    assert ours.get_providers() == ref.get_providers() == ["CPUExecutionProvider"]
    assert ours.get_provider_options() == ref.get_provider_options()


def test_set_providers_rebuilds_and_failure_keeps_old_session():
    s = ort.InferenceSession(add_model().SerializeToString())
    s.set_providers(["CPUExecutionProvider"])
    with pytest.raises(ort.InvalidArgument):
        s.set_providers([("CPUExecutionProvider", {"no_such_option": "1"})])
    x = rand(2, 3)
    np.testing.assert_allclose(s.run(["z"], {"x": x, "y": x})[0], 2 * x)
    assert s.get_providers() == ["CPUExecutionProvider"]


def test_exception_classes_subclass_natural_python_types():
    assert issubclass(ort.InvalidArgument, ValueError)
    assert issubclass(ort.NoSuchFile, FileNotFoundError)
    assert issubclass(ort.Fail, RuntimeError)
    assert issubclass(ort.RuntimeException, RuntimeError)
    assert issubclass(ort.NotImplemented, NotImplementedError)
    assert issubclass(ort.InvalidProtobuf, ValueError)
    assert issubclass(ort.EPFail, RuntimeError)
    from onnxruntime.capi import onnxruntime_pybind11_state as C
    for name in ("Fail", "InvalidArgument", "NoSuchFile", "NoModel", "EngineError",
                 "RuntimeException", "InvalidProtobuf", "ModelLoaded", "NotImplemented",
                 "InvalidGraph", "EPFail"):
        assert hasattr(C, name) and hasattr(ort, name), name
