"""The oneDNN provider as a provider: availability and fallback, options, the placement
report's reasons, primitives per shape with weights reordered once, concurrent runs, and a
bad feed that leaves the session working."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt as ort
from onnxrt.providers.dnnl import DnnlExecutionProvider, library
from dnnlhelpers import (CPU, DNNL, assert_close, dnnl_session, needs_dnnl, nodes_on,
                         reference)

F = TensorProto.FLOAT
RNG = np.random.default_rng(3)


def _cnn(batch="N"):
    """Conv -> Relu -> MaxPool -> Flatten, then an integer side branch DNNL declines."""
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Shape", ["p"], ["s"]),
             helper.make_node("Flatten", ["p"], ["Y"])]
    g = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("X", F, [batch, 3, 8, 8])],
        [helper.make_tensor_value_info("Y", F, None),
         helper.make_tensor_value_info("s", TensorProto.INT64, None)],
        [numpy_helper.from_array(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), "W"),
         numpy_helper.from_array(RNG.standard_normal(4).astype(np.float32), "B")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_unavailable_reason_and_fallback(monkeypatch):
    """Without the library the provider says why, is not listed as available, and a
    session asking for it runs on the CPU provider."""
    monkeypatch.setattr(library, "_STATE", {"error": "no libdnnl.so.3 here"})
    why = DnnlExecutionProvider.unavailable_reason()
    assert "no libdnnl.so.3 here" in why and "onnxrt[dnnl]" in why
    assert DNNL not in ort.get_available_providers()
    assert DNNL in ort.get_all_providers()
    m = _cnn()
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sess = ort.InferenceSession(m.SerializeToString(), providers=[DNNL, CPU])
    assert nodes_on(sess) == 0
    assert sess.get_providers() == [CPU]
    assert_close(sess.run(["Y"], {"X": x}), reference(m, {"X": x})[:1])


@needs_dnnl
def test_listed_as_available():
    assert DNNL in ort.get_available_providers()


@needs_dnnl
def test_placement_report_shows_dnnl_nodes_and_reasons():
    sess = dnnl_session(_cnn())
    assert nodes_on(sess) == 4
    report = sess.placement_report()
    rows = {line.split()[1]: line for line in report.splitlines()
            if line.startswith("<")}
    for op in ("Conv-11", "Relu-14", "MaxPool-12", "Flatten-13"):
        assert rows[op].split()[2] == DNNL, report
    assert rows["Shape-15"].split()[2] == CPU
    assert "Shape is not among the ops it maps to oneDNN primitives" in rows["Shape-15"]


@needs_dnnl
def test_declines_non_float_and_runtime_weights_with_reasons():
    nodes = [helper.make_node("Conv", ["X", "Wv"], ["Y"]),
             helper.make_node("Relu", ["I"], ["J"])]
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("X", F, [1, 3, 5, 5]),
                     helper.make_tensor_value_info("Wv", F, [2, 3, 3, 3]),
                     helper.make_tensor_value_info("I", TensorProto.DOUBLE, [4])],
        [helper.make_tensor_value_info("Y", F, None),
         helper.make_tensor_value_info("J", TensorProto.DOUBLE, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    sess = dnnl_session(m)
    report = sess.placement_report()
    assert nodes_on(sess) == 0
    assert "its weights or bias are not constants" in report
    assert "oneDNN runs float32 here" in report


@needs_dnnl
def test_primitives_per_shape_weights_reordered_once():
    m = _cnn()
    sess = dnnl_session(m)
    ep = next(p for p in sess._providers if p.name == DNNL)
    for batch in (1, 3, 1, 3):
        x = RNG.standard_normal((batch, 3, 8, 8)).astype(np.float32)
        assert_close(sess.run(["Y"], {"X": x}), reference(m, {"X": x})[:1])
    stats = ep.allocation_stats()
    assert stats["compiled_groups"] == 1
    assert stats["compilations"] == 2          # one program per batch size, then reused


@needs_dnnl
def test_weight_cache_shared_between_shapes():
    from onnxrt.providers.dnnl.compiled import CompiledGroup

    seen = []
    orig = CompiledGroup._program

    def spy(self, *args):
        seen.append(self)
        return orig(self, *args)

    m = _cnn()
    sess = dnnl_session(m)
    CompiledGroup._program = spy
    try:
        for batch in (1, 2, 5):
            sess.run(["Y"], {"X": RNG.standard_normal((batch, 3, 8, 8)).astype(np.float32)})
    finally:
        CompiledGroup._program = orig
    group = seen[0]
    assert len(group.programs) == 3
    # the conv's weights and bias, each reordered once for all three shapes
    assert sorted(len(v) for v in group.weights.items.values()) == [1, 1]


@needs_dnnl
def test_concurrent_runs_match():
    m = _cnn()
    sess = dnnl_session(m)
    xs = [RNG.standard_normal((2, 3, 8, 8)).astype(np.float32) for _ in range(8)]
    want = [reference(m, {"X": x})[0] for x in xs]
    got = [None] * len(xs)

    def work(i):
        for _ in range(5):
            got[i] = sess.run(["Y"], {"X": xs[i]})[0]

    ts = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@needs_dnnl
def test_bad_feed_is_a_clear_error_and_the_session_keeps_working():
    m = _cnn()
    sess = dnnl_session(m)
    with pytest.raises(Exception, match="X"):
        sess.run(["Y"], {"X": np.zeros((1, 4, 8, 8), np.float32)})
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    assert_close(sess.run(["Y"], {"X": x}), reference(m, {"X": x})[:1])


@needs_dnnl
@pytest.mark.parametrize("opts,match", [
    ({"use_arena": "0"}, "use_arena=0 is not supported"),
    ({"num_of_threads": "-2"}, "num_of_threads must be an integer"),
    ({"no_such": "1"}, "unknown provider option"),
])
def test_bad_options_are_refused(opts, match):
    with pytest.raises(Exception, match=match):
        DnnlExecutionProvider(**opts)


def _openmp() -> bool:
    return library.load().cpu_runtime == "OpenMP"


@needs_dnnl
def test_num_of_threads_is_applied():
    """The option reaches OpenMP: one thread gives the same numbers, and the provider
    reports it. oneDNN's SYCL build (threads owned by the OpenCL CPU runtime) refuses it."""
    m = _cnn()
    if not _openmp():
        with pytest.raises(ort.InvalidArgument, match="num_of_threads needs oneDNN's OpenMP"):
            dnnl_session(m, {"num_of_threads": "1"})
        return
    sess = dnnl_session(m, {"num_of_threads": "1"})
    assert sess.get_provider_options()[DNNL]["num_of_threads"] == "1"
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    assert_close(sess.run(["Y"], {"X": x}), reference(m, {"X": x})[:1])


@needs_dnnl
def test_a_group_onednn_cannot_build_is_listed_under_the_cpu_provider(monkeypatch):
    """A group whose program fails to build runs on the host kernels; the assignment info
    lists its nodes under the CPU provider, as the placement report and the stats say."""
    from onnxrt.providers.dnnl import compiled

    def refuse(*args, **kwargs):
        raise NotImplementedError("no mapping here")

    monkeypatch.setattr(compiled, "Program", refuse)
    m = _cnn()
    sess = ort.InferenceSession(m.SerializeToString(), providers=[DNNL, CPU])
    assert nodes_on(sess) == 4                  # claimed, not built yet
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    with pytest.warns(UserWarning, match="no mapping here"):
        got = sess.run(["Y"], {"X": x})
    assert_close(got, reference(m, {"X": x})[:1])
    assert nodes_on(sess) == 0
    assert nodes_on(sess, CPU) == 5
    assert sess.get_provider_stats()[DNNL]["host_fallback_groups"] == 1
    assert "on CPUExecutionProvider at 1 input shape(s)" in sess.placement_report()


@needs_dnnl
def test_declares_the_cpu_device_and_runs_when_chosen_by_device():
    """get_ep_devices lists DNNL on the CPU; a session built with add_provider_for_devices
    on that device runs on DNNL."""
    devs = [d for d in ort.get_ep_devices() if d.ep_name == DNNL]
    assert devs and {d.device.type for d in devs} == {ort.OrtHardwareDeviceType.CPU}
    so = ort.SessionOptions()
    so.add_provider_for_devices(devs, {"num_of_threads": "1"} if _openmp() else {})
    m = _cnn()
    sess = ort.InferenceSession(m.SerializeToString(), sess_options=so)
    assert sess.get_providers()[0] == DNNL
    assert nodes_on(sess) == 4
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    assert_close(sess.run(["Y"], {"X": x}), reference(m, {"X": x})[:1])
