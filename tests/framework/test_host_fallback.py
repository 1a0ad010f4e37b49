"""A compile-based provider that cannot compile a group (at some input shapes, or at all):
the group runs on the host kernels there, and the placement report and stats say so.
Expected values from onnx.reference."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxrt as ort
from onnxrt.errors import CannotCompile

CPU = "CPUExecutionProvider"
FAKE = "RefusingExecutionProvider"
W = np.array([1.0, -2.0, 0.5, 3.0], np.float32)


class Refusing(ort.ExecutionProvider):
    """Claims everything in one group; compiles it with onnx.reference, except at the
    batch sizes in ``refuse``."""

    name = FAKE
    compile_per_shape = True
    options = {"refuse": 3}

    def __init__(self, **options):
        super().__init__(**options)
        self.compiles = []

    def get_capability(self, graph):
        return ort.group_nodes(graph, lambda n: True)

    def compile(self, fused):
        shapes = [tuple(s) for s in fused.input_shapes]
        self.compiles.append(shapes)
        if shapes[0][0] == int(self.provider_options["refuse"]):
            raise CannotCompile(f"no kernel for batch {shapes[0][0]}")
        ref = ReferenceEvaluator(fused.model)
        names = list(fused.inputs)
        return lambda *args: ref.run(None, dict(zip(names, args)))


def shape_model(custom: bool = False):
    """y = Reshape(Relu(x) * w, [N * 4]) with the new shape computed from Shape(x): one
    group of arithmetic and shape arithmetic. ``custom``: a node no host provider has."""
    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"),
             h.make_node("Mul", ["r", "w"], ["m"], name="mul"),
             h.make_node("Shape", ["x"], ["s"], name="shape"),
             h.make_node("ReduceProd", ["s"], ["n"], keepdims=1, name="prod"),
             h.make_node("Reshape", ["m", "n"], ["y"], name="reshape")]
    if custom:
        nodes.append(h.make_node("Twice", ["y"], ["z"], domain="test.custom", name="twice"))
    out = "z" if custom else "y"
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["N", 4])],
                     [h.make_tensor_value_info(out, T.FLOAT, ["M"])],
                     [numpy_helper.from_array(W, "w")])
    ops = [h.make_opsetid("", 17)] + ([h.make_opsetid("test.custom", 1)] if custom else [])
    return h.make_model(g, opset_imports=ops)


def assignment(sess):
    """(provider, node names) per subgraph of get_provider_graph_assignment_info."""
    return [(sg.ep_name, [n.name for n in sg.get_nodes()])
            for sg in sess.get_provider_graph_assignment_info()]


NODES = ["relu", "mul", "shape", "prod", "reshape"]


def reference(x):
    return ReferenceEvaluator(shape_model()).run(None, {"x": x})[0]


def x_of(n):
    return np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)


def test_a_refused_shape_runs_on_the_host_and_is_reported():
    ep = Refusing()
    sess = ort.InferenceSession(shape_model().SerializeToString(), providers=[ep, CPU])
    (y2,) = sess.run(None, {"x": x_of(2)})
    np.testing.assert_allclose(y2, reference(x_of(2)), rtol=1e-6)
    assert "run on the host" not in sess.placement_report()
    assert assignment(sess) == [(FAKE, NODES)]
    with pytest.warns(UserWarning, match=r"could not compile it at input shapes x\[3, 4\]"):
        (y3,) = sess.run(None, {"x": x_of(3)})
    np.testing.assert_allclose(y3, reference(x_of(3)), rtol=1e-6)
    report = sess.placement_report()
    group = f"{FAKE}_fused_0"
    assert (f"group {group} (5 nodes): {FAKE} could not compile it at input shapes x[3, 4]: "
            f"ran on {CPU}: no kernel for batch 3") in report
    assert f"relu          Relu-14                {FAKE} [{group}; on {CPU} at 1 input " \
        "shape(s)]" in report
    stats = sess.get_provider_stats()[FAKE]
    assert stats["host_fallback_shapes"] == 1 and stats["host_fallback_groups"] == 1
    # compiled at one shape, on the host at another: the group on both, its nodes one by
    # one under the CPU provider as onnxruntime lists kernel-based nodes
    assert assignment(sess) == [(FAKE, NODES)] + [(CPU, [n]) for n in NODES]
    # decided once per shape: no second compile, no second record, no second warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in (3, 2, 3, 5):
            (y,) = sess.run(None, {"x": x_of(n)})
            np.testing.assert_allclose(y, reference(x_of(n)), rtol=1e-6)
    assert ep.compiles == [[(2, 4)], [(3, 4)], [(5, 4)]]
    assert sess.get_provider_stats()[FAKE]["host_fallback_shapes"] == 1


def test_error_on_failure_fails_the_run_and_the_session_keeps_working():
    ep = Refusing(error_on_failure="1")
    sess = ort.InferenceSession(shape_model().SerializeToString(), providers=[ep, CPU])
    # without this, run() retries an EPFail on the CPU provider alone, as onnxruntime's does
    sess.disable_fallback()
    with pytest.raises(ort.EPFail, match=r"at input shapes \[\[3, 4\]\]: no kernel for batch"):
        sess.run(None, {"x": x_of(3)})
    (y,) = sess.run(None, {"x": x_of(4)})
    np.testing.assert_allclose(y, reference(x_of(4)), rtol=1e-6)
    assert sess.get_provider_stats()[FAKE]["host_fallback_shapes"] == 0
    assert "run on the host" not in sess.placement_report()


def test_no_host_fallback_when_the_cpu_provider_is_forbidden():
    so = ort.SessionOptions()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    sess = ort.InferenceSession(shape_model().SerializeToString(), so, providers=[Refusing()])
    sess.disable_fallback()
    with pytest.raises(ort.EPFail, match="disable_cpu_ep_fallback"):
        sess.run(None, {"x": x_of(3)})
    (y,) = sess.run(None, {"x": x_of(2)})
    np.testing.assert_allclose(y, reference(x_of(2)), rtol=1e-6)


def test_a_group_the_host_cannot_run_fails_naming_the_node():
    sess = ort.InferenceSession(shape_model(custom=True).SerializeToString(),
                                providers=[Refusing(), CPU])
    sess.disable_fallback()
    with pytest.raises(ort.EPFail, match=r"host cannot run it either: node 'twice' "
                                         r"\(test.custom::Twice\) has no kernel"):
        sess.run(None, {"x": x_of(3)})


class RefusingAtCreation(ort.ExecutionProvider):
    """Compiles at session creation (not per shape) and cannot compile anything."""

    name = "RefusingAtCreationExecutionProvider"

    def get_capability(self, graph):
        return ort.group_nodes(graph, lambda n: True)

    def compile(self, fused):
        raise CannotCompile("this engine takes no Reshape")


def test_a_group_refused_at_creation_runs_on_the_host_and_is_reported():
    ep = RefusingAtCreation()
    with pytest.warns(UserWarning, match="could not compile it at any input shape"):
        sess = ort.InferenceSession(shape_model().SerializeToString(), providers=[ep, CPU])
    for n in (2, 3):
        (y,) = sess.run(None, {"x": x_of(n)})
        np.testing.assert_allclose(y, reference(x_of(n)), rtol=1e-6)
    name = RefusingAtCreation.name
    assert (f"group {name}_fused_0 (5 nodes): {name} could not compile it at any input "
            f"shape: ran on {CPU}: this engine takes no Reshape") in sess.placement_report()
    stats = sess.get_provider_stats()[name]
    assert stats["host_fallback_groups"] == 1 and stats["host_fallback_shapes"] == 1
    # it never runs on the provider that declined it: listed under the CPU provider only
    assert assignment(sess) == [(CPU, [n]) for n in NODES]


def test_a_group_refused_at_its_only_shape_is_listed_under_the_host():
    sess = ort.InferenceSession(shape_model().SerializeToString(), providers=[Refusing(), CPU])
    with pytest.warns(UserWarning, match="could not compile"):
        sess.run(None, {"x": x_of(3)})
    assert assignment(sess) == [(CPU, [n]) for n in NODES]


def test_a_group_refused_at_creation_with_error_on_failure_fails_the_session():
    ep = RefusingAtCreation(error_on_failure="1")
    with pytest.raises(ort.EPFail, match="this engine takes no Reshape"):
        ort.InferenceSession(shape_model().SerializeToString(), providers=[ep, CPU])
