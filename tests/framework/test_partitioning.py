"""The execution provider framework: claims, priority, fallback, devices, copies, reports."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import onnxrt as ort
from framework.fake_device import (CALLS, FakeDeviceExecutionProvider, FakeTensor,
                                   MissingDeviceExecutionProvider)
from models import model, rand

FAKE = "FakeDeviceExecutionProvider"
CPU = "CPUExecutionProvider"


def vi(name, shape=(2, 3), t=T.FLOAT):
    return h.make_tensor_value_info(name, t, list(shape) if shape is not None else None)


def mixed_model():
    """x -> Relu (fake) -> Sigmoid (cpu only) -> Add with y (fake) -> Mul with w (fake)."""
    w = h.make_tensor("w", T.FLOAT, [3], [1.0, 2.0, 3.0])
    return model([h.make_node("Relu", ["x"], ["a"], name="relu"),
                  h.make_node("Sigmoid", ["a"], ["b"], name="sigmoid"),
                  h.make_node("Add", ["b", "y"], ["c"], name="add"),
                  h.make_node("Mul", ["c", "w"], ["z"], name="mul")],
                 [vi("x"), vi("y")], [vi("z")], [w])


def expected_mixed(x, y):
    return (1 / (1 + np.exp(-np.maximum(x, 0))) + y) * np.array([1, 2, 3], np.float32)


def sess(m, providers, so=None):
    return ort.InferenceSession(m.SerializeToString(), so, providers=providers)


def test_copies_inserted_exactly_at_crossings_and_results_match_cpu():
    m = mixed_model()
    s = sess(m, [FAKE, CPU])
    x, y = rand(2, 3), rand(2, 3, seed=1)
    np.testing.assert_allclose(s.run(None, {"x": x, "y": y})[0], expected_mixed(x, y),
                               rtol=1e-6)
    where = {sg.get_nodes()[0].name: sg.ep_name for sg in s.get_provider_graph_assignment_info()}
    assert where == {"relu": FAKE, "sigmoid": CPU, "add": FAKE, "mul": FAKE}
    copies = [(c.value, c.src, c.dst) for c in s._partition.copies]
    # x to the device, a back to the host, b and y to the device, w (a constant) once at
    # session creation, and z home as a graph output (done by run)
    assert sorted(copies) == sorted([("x", "cpu", "fake:0"), ("a", "fake:0", "cpu"),
                                     ("b", "cpu", "fake:0"), ("y", "cpu", "fake:0"),
                                     ("w", "cpu", "fake:0")])
    stats = s.get_provider_stats()[FAKE]
    assert stats["copies_to_device"] >= 4 and stats["copies_to_host"] >= 2


def test_copies_are_nodes_of_the_graph_and_the_plan_runs_them():
    """Partitioning writes the copies into the session's graph as MemcpyFromHost and
    MemcpyToHost nodes read by the nodes that need them (as onnxruntime does); the plan has
    a step for each, except the copy of the constant w, done once at session creation."""
    s = sess(mixed_model(), [FAKE, CPU])
    g = s._graph
    ops = [(n.op_type, list(n.input), list(n.output)) for n in g.nodes]
    assert ops == [("MemcpyFromHost", ["x"], ["x@fake:0"]),
                   ("Relu", ["x@fake:0"], ["a"]),
                   ("MemcpyToHost", ["a"], ["a@cpu"]),
                   ("Sigmoid", ["a@cpu"], ["b"]),
                   ("MemcpyFromHost", ["b"], ["b@fake:0"]),
                   ("MemcpyFromHost", ["y"], ["y@fake:0"]),
                   ("Add", ["b@fake:0", "y@fake:0"], ["c"]),
                   ("MemcpyFromHost", ["w"], ["w@fake:0"]),
                   ("Mul", ["c", "w@fake:0"], ["z"])]
    assert [g.meta(n).provider.name for n in g.nodes if not n.op_type.startswith("Memcpy")] \
        == [FAKE, CPU, FAKE, FAKE]
    steps = [st.node.op_type for st in s._plan.steps]
    assert steps == ["MemcpyFromHost", "Relu", "MemcpyToHost", "Sigmoid", "MemcpyFromHost",
                     "MemcpyFromHost", "Add", "Mul"]


def test_cpu_only_session_matches():
    m = mixed_model()
    x, y = rand(2, 3), rand(2, 3, seed=1)
    a = sess(m, [CPU]).run(None, {"x": x, "y": y})[0]
    b = sess(m, [FAKE, CPU]).run(None, {"x": x, "y": y})[0]
    np.testing.assert_allclose(a, b, rtol=1e-6)


def test_priority_order_decides():
    from onnxrt_test_plugin import CALLS as PLUGIN_CALLS

    m = model([h.make_node("Relu", ["x"], ["y"], name="r")], [vi("x")], [vi("y")])
    s = sess(m, ["TestPluginExecutionProvider", FAKE, CPU])
    before = PLUGIN_CALLS["Relu"]
    s.run(None, {"x": rand(2, 3)})
    assert PLUGIN_CALLS["Relu"] == before + 1
    assert s.get_provider_graph_assignment_info()[0].ep_name == "TestPluginExecutionProvider"
    s2 = sess(m, [FAKE, "TestPluginExecutionProvider", CPU])
    assert s2.get_provider_graph_assignment_info()[0].ep_name == FAKE


def test_entry_point_plugin_is_found_by_name():
    assert "TestPluginExecutionProvider" in ort.get_all_providers()
    assert "TestPluginExecutionProvider" in ort.get_available_providers()
    m = model([h.make_node("Neg", ["x"], ["y"])], [vi("x")], [vi("y")])
    s = sess(m, [("TestPluginExecutionProvider", {"scale": "2"}), CPU])
    assert s.get_providers() == ["TestPluginExecutionProvider", CPU]
    assert s.get_provider_options()["TestPluginExecutionProvider"] == {"scale": "2"}
    x = rand(2, 3)
    np.testing.assert_array_equal(s.run(None, {"x": x})[0], -x)


def test_unclaimed_ops_fall_back_to_cpu_with_reasons():
    s = sess(mixed_model(), [FAKE, CPU])
    rep = s.placement_report()
    assert "sigmoid" in rep and "no kernel for ai.onnx::Sigmoid-13" in rep
    line = next(ln for ln in rep.splitlines() if ln.startswith("sigmoid"))
    assert CPU in line and FAKE in line


def test_placement_report_contents():
    s = sess(mixed_model(), [FAKE, CPU])
    rep = s.placement_report()
    assert "providers in priority order: FakeDeviceExecutionProvider, CPUExecutionProvider" in rep
    assert "nodes per provider: FakeDeviceExecutionProvider 3, CPUExecutionProvider 1" in rep
    assert "partitions" in rep
    assert "device copies: 5" in rep
    assert "a: fake:0 -> cpu" in rep


def test_verbose_logging_prints_the_report(caplog):
    import logging

    so = ort.SessionOptions()
    so.log_severity_level = 0
    with caplog.at_level(logging.INFO, logger="onnxrt"):
        sess(mixed_model(), [FAKE, CPU], so)
    assert any("device copies" in r.getMessage() for r in caplog.records)


def test_host_inputs_stay_on_host():
    """Reshape on the device reads its shape, computed by Shape -> Concat, from the host.
    (x has a free dimension, so the shape is not a constant the passes could fold.)"""
    m = model([h.make_node("Relu", ["x"], ["a"], name="relu"),
               h.make_node("Shape", ["a"], ["s"], name="shape"),
               h.make_node("Concat", ["s", "one"], ["s2"], axis=0, name="concat"),
               h.make_node("Reshape", ["a", "s2"], ["y"], name="reshape")],
              [vi("x", ("N", 3))], [vi("y", ("N", 3, 1))],
              [h.make_tensor("one", T.INT64, [1], [1])])
    s = sess(m, [FAKE, CPU])
    x = rand(2, 3)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], np.maximum(x, 0).reshape(2, 3, 1))
    where = {sg.get_nodes()[0].name: sg.ep_name for sg in s.get_provider_graph_assignment_info()}
    assert where["reshape"] == FAKE and where["concat"] == CPU
    assert "host-only" in s.placement_report() or where["shape"] == CPU


def test_iobinding_keeps_outputs_on_the_device():
    m = model([h.make_node("Relu", ["x"], ["y"]), h.make_node("Add", ["y", "y"], ["z"])],
              [vi("x")], [vi("z")])
    s = sess(m, [FAKE, CPU])
    x = rand(2, 3)
    b = s.io_binding()
    b.bind_ortvalue_input("x", ort.OrtValue.ortvalue_from_numpy(x, "fake", 0))
    b.bind_output("z", "fake", 0)
    s.run_with_iobinding(b)
    out = b.get_outputs()[0]
    assert out.device_name() == "fake" and isinstance(out.value(), FakeTensor)
    np.testing.assert_allclose(b.copy_outputs_to_cpu()[0], 2 * np.maximum(x, 0))
    # an output bound on the host comes back as numpy
    b2 = s.io_binding()
    b2.bind_cpu_input("x", x)
    b2.bind_output("z")
    s.run_with_iobinding(b2)
    assert isinstance(b2.get_outputs()[0].value(), np.ndarray)


def test_ortvalue_on_a_device():
    x = rand(3)
    v = ort.OrtValue.ortvalue_from_numpy(x, "fake", 0)
    assert v.device_name() == "fake" and isinstance(v.value(), FakeTensor)
    np.testing.assert_array_equal(v.numpy(), x)
    m = model([h.make_node("Neg", ["x"], ["y"])], [vi("x", (3,))], [vi("y", (3,))])
    out = sess(m, [CPU]).run(None, {"x": v})[0]  # a device input reaches a host session
    np.testing.assert_array_equal(out, -x)


def test_hooks_and_stats():
    s = sess(mixed_model(), [FakeDeviceExecutionProvider(), CPU])
    ep = s._providers[0]
    for _ in range(3):
        s.run(None, {"x": rand(2, 3), "y": rand(2, 3)})
    assert ep.started == ep.ended == 3
    assert s.get_provider_stats()[FAKE]["runs"] == 3
    with pytest.raises(ort.InvalidArgument):
        s.run(None, {"x": rand(2, 3)})  # fails before the run starts: no hook
    assert ep.started == ep.ended == 3


def test_unknown_provider_name_and_invalid_option():
    m = mixed_model()
    with pytest.raises(ort.InvalidArgument, match="Unknown Provider Type: NopeExecutionProvider"):
        sess(m, ["NopeExecutionProvider"])
    with pytest.raises(ort.InvalidArgument) as ei:
        sess(m, [(FAKE, {"colour": "red"})])
    assert "colour" in str(ei.value) and "flavour" in str(ei.value)
    assert "error_on_failure" in str(ei.value)


def test_provider_options_forms_and_get_provider_options():
    m = mixed_model()
    s1 = sess(m, [(FAKE, {"flavour": "spicy"}), CPU])
    s2 = ort.InferenceSession(m.SerializeToString(), providers=[FAKE, CPU],
                              provider_options=[{"flavour": "spicy"}, {}])
    s3 = sess(m, [FakeDeviceExecutionProvider(flavour="spicy"), CPU])
    for s in (s1, s2, s3):
        assert s.get_provider_options()[FAKE] == {"flavour": "spicy"}
        assert s.get_providers() == [FAKE, CPU]


def test_unavailable_provider_warns_once_and_runs_on_the_rest():
    m = mixed_model()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = sess(m, ["MissingDeviceExecutionProvider", CPU])
    msgs = [str(x.message) for x in w if issubclass(x.category, UserWarning)]
    assert len(msgs) == 1 and "no missing-device hardware" in msgs[0]
    assert s.get_providers() == [CPU]
    assert not MissingDeviceExecutionProvider.is_available()


def test_strict_fallback_modes():
    m = mixed_model()
    so = ort.SessionOptions()
    so.add_session_config_entry("session.provider_fallback", "error")
    with pytest.raises(ort.EPFail, match="no missing-device hardware"):
        sess(m, ["MissingDeviceExecutionProvider", CPU], so)
    with pytest.raises(ort.EPFail):
        sess(m, [("MissingDeviceExecutionProvider", {"error_on_failure": "1"}), CPU])
    so = ort.SessionOptions()
    so.add_session_config_entry("session.provider_fallback", "silent")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = sess(m, ["MissingDeviceExecutionProvider", CPU], so)
    assert s.get_providers() == [CPU]


def test_disable_cpu_ep_fallback_lists_the_nodes():
    so = ort.SessionOptions()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    with pytest.raises(ort.EPFail, match="sigmoid"):
        sess(mixed_model(), [FAKE], so)
    m = model([h.make_node("Relu", ["x"], ["y"])], [vi("x")], [vi("y")])
    s = sess(m, [FAKE], so)  # everything on the device: fine
    assert s.get_provider_graph_assignment_info()[0].ep_name == FAKE


def test_init_defaults_and_opt_out():
    m = model([h.make_node("Relu", ["x"], ["y"])], [vi("x")], [vi("y")])
    try:
        ort.init(providers=[FAKE])
        s = sess(m, None)
        assert s.get_providers() == [FAKE, CPU]
        s = sess(m, [CPU])  # defaults come after the session's own providers
        assert s.get_providers() == [CPU, FAKE]
        so = ort.SessionOptions()
        so.add_session_config_entry("session.use_default_providers", "0")
        assert sess(m, None, so).get_providers() == [CPU]
    finally:
        ort.init(providers=[])


def test_set_providers_failure_keeps_old_session():
    m = mixed_model()
    s = sess(m, [FAKE, CPU])
    with pytest.raises(ort.InvalidArgument):
        s.set_providers([(FAKE, {"bad": 1})])
    x, y = rand(2, 3), rand(2, 3, seed=1)
    np.testing.assert_allclose(s.run(None, {"x": x, "y": y})[0], expected_mixed(x, y),
                               rtol=1e-6)
    s.set_providers([CPU])
    assert s.get_providers() == [CPU]


def test_nested_graph_nodes_are_partitioned():
    then_g = h.make_graph([h.make_node("Relu", ["x"], ["t"], name="then_relu")], "then", [],
                          [vi("t")])
    else_g = h.make_graph([h.make_node("Neg", ["x"], ["e"], name="else_neg")], "else", [],
                          [vi("e")])
    m = model([h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g,
                           name="if")],
              [vi("c", (), T.BOOL), vi("x")], [vi("y")])
    s = sess(m, [FAKE, CPU])
    info = {sg.get_nodes()[0].name: sg.ep_name for sg in s.get_provider_graph_assignment_info()}
    assert info["then_relu"] == FAKE and info["else_neg"] == CPU and info["if"] == CPU
    x = rand(2, 3)
    np.testing.assert_allclose(s.run(None, {"c": np.array(True), "x": x})[0], np.maximum(x, 0))
    np.testing.assert_allclose(s.run(None, {"c": np.array(False), "x": x})[0], -x)


def test_kernel_failure_on_a_provider_names_it():
    # shapes not declared: declared ones that cannot multiply are refused at session
    # creation (onnxrt/validate), and this is about a failure while running
    m = model([h.make_node("MatMul", ["x", "y"], ["z"], name="mm")],
              [vi("x", None), vi("y", None)], [vi("z", None)])
    s = sess(m, [FAKE, CPU])
    with pytest.raises(ort.Fail) as ei:
        s.run(None, {"x": rand(2, 3), "y": rand(4, 5)})
    assert "mm" in str(ei.value) and FAKE in str(ei.value)
