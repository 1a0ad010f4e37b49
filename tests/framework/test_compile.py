"""Compile-based providers: cycle-free grouping, fused nodes, compile once / per shape."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import onnxrt as ort
from models import model, rand

CPU = "CPUExecutionProvider"


def vi(name, shape=(2, 3)):
    return h.make_tensor_value_info(name, T.FLOAT, list(shape))


def run_model_with_reference(fused_model, args):
    """Interpret a fused model with onnxrt's CPU provider (what a real compiler would run)."""
    s = ort.InferenceSession(fused_model.SerializeToString(), providers=[CPU])
    names = [i.name for i in fused_model.graph.input]
    return s.run(None, dict(zip(names, args)))


class Recorder(ort.ExecutionProvider):
    """Fuses Add/Mul/Relu/Exp; records what it compiles."""

    name = "RecorderExecutionProvider"
    SUPPORTED = {"Add", "Mul", "Relu", "Exp"}

    def __init__(self, **options):
        super().__init__(**options)
        self.compiled = []
        self.calls = 0

    def get_capability(self, graph):
        return ort.group_nodes(graph, lambda n: n.op_type in self.SUPPORTED)

    def compile(self, fused):
        self.compiled.append(fused)
        model = fused.model

        def run(*args):
            self.calls += 1
            return run_model_with_reference(model, args)

        return run


class PerShape(Recorder):
    name = "PerShapeExecutionProvider"
    compile_per_shape = True


def cycle_model():
    """a = Relu(x) [supported]; b = Sigmoid(a) [not]; c = Add(a, b) [supported].
    Fusing {Relu, Add} naively would make a cycle through Sigmoid."""
    return model([h.make_node("Relu", ["x"], ["a"], name="relu"),
                  h.make_node("Sigmoid", ["a"], ["b"], name="sigmoid"),
                  h.make_node("Add", ["a", "b"], ["c"], name="add"),
                  h.make_node("Exp", ["c"], ["d"], name="exp"),
                  h.make_node("Mul", ["d", "w"], ["y"], name="mul")],
                 [vi("x")], [vi("y")], [numpy_helper.from_array(
                     np.array([1.0, 2.0, 3.0], np.float32), "w")])


def expected(x):
    a = np.maximum(x, 0)
    return np.exp(a + 1 / (1 + np.exp(-a))) * np.array([1, 2, 3], np.float32)


def test_group_nodes_avoids_the_cycle_and_results_match():
    ep = Recorder()
    s = ort.InferenceSession(cycle_model().SerializeToString(), providers=[ep, CPU])
    groups = [[n.op_type for n in f.nodes] for f in ep.compiled]
    assert sorted(groups) == [["Add", "Exp", "Mul"], ["Relu"]]
    x = rand(2, 3)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-5)
    fused = next(f for f in ep.compiled if len(f.nodes) == 3)
    assert fused.inputs == ["a", "b"] and fused.outputs == ["y"]
    assert [t.name for t in fused.model.graph.initializer] == ["w"]
    info = s.get_provider_graph_assignment_info()
    rec = [sg for sg in info if sg.ep_name == ep.name]
    assert sorted(len(sg.get_nodes()) for sg in rec) == [1, 3]


def test_compiled_once_per_session():
    ep = Recorder()
    s = ort.InferenceSession(cycle_model().SerializeToString(), providers=[ep, CPU])
    for k in range(3):
        s.run(None, {"x": rand(2, 3, seed=k)})
    assert len(ep.compiled) == 2 and ep.calls == 6


def test_compile_per_shape_recompiles_only_for_new_shapes():
    m = model([h.make_node("Relu", ["x"], ["a"]), h.make_node("Exp", ["a"], ["y"])],
              [vi("x", ["N", 3])], [vi("y", ["N", 3])])
    ep = PerShape()
    s = ort.InferenceSession(m.SerializeToString(), providers=[ep, CPU])
    assert len(ep.compiled) == 0
    for n in (2, 2, 5, 2, 5):
        x = rand(n, 3)
        np.testing.assert_allclose(s.run(None, {"x": x})[0], np.exp(np.maximum(x, 0)),
                                   rtol=1e-6)
    assert len(ep.compiled) == 2
    dims = sorted(f.model.graph.input[0].type.tensor_type.shape.dim[0].dim_value
                  for f in ep.compiled)
    assert dims == [2, 5]


def test_claims_are_validated():
    class Greedy(ort.ExecutionProvider):
        name = "GreedyExecutionProvider"

        def get_capability(self, graph):
            nodes = list(graph)
            return [ort.Capability(nodes, fuse=True)]

        def compile(self, fused):
            return lambda *a: None

    with pytest.raises(ort.EPFail, match="cycle"):
        class Picky(Greedy):
            name = "PickyExecutionProvider"

            def get_capability(self, graph):
                keep = [n for n in graph if n.op_type in ("Relu", "Add")]
                return [ort.Capability(keep, fuse=True)]

        ort.InferenceSession(cycle_model().SerializeToString(), providers=[Picky(), CPU])

    class NoKernels(ort.ExecutionProvider):
        name = "NoKernelsExecutionProvider"

        def get_capability(self, graph):
            return [ort.Capability(list(graph))]

    with pytest.raises(ort.EPFail, match="no kernel"):
        ort.InferenceSession(cycle_model().SerializeToString(), providers=[NoKernels(), CPU])


def test_node_view_exposes_what_providers_need():
    seen = {}

    class Looker(ort.ExecutionProvider):
        name = "LookerExecutionProvider"

        def get_capability(self, graph):
            for n in graph:
                seen[n.name] = n
            return []

    m = model([h.make_node("Relu", ["x"], ["a"], name="relu"),
               h.make_node("Transpose", ["a"], ["y"], perm=[1, 0], name="tr")],
              [vi("x", ["N", 3])], [h.make_tensor_value_info("y", T.FLOAT, [3, "N"])])
    ort.InferenceSession(m.SerializeToString(), providers=[Looker(), CPU])
    tr = seen["tr"]
    assert tr.op_type == "Transpose" and tr.domain == "" and tr.opset == 17
    assert tr.inputs == ("a",) and tr.outputs == ("y",)
    assert tr.attributes == {"perm": [1, 0]}
    assert tr.input_types == ["tensor(float)"] and tr.input_shapes == [["N", 3]]
    assert tr.output_shapes == [[3, "N"]]
    assert seen["relu"].since_version == 14


def test_group_nodes_sees_paths_through_nodes_claimed_by_others():
    """a = Exp(x) and c = Add(a, b) are both supported by the compiler, but b = Neg(a) runs on
    a higher-priority provider: fusing {Exp, Add} would cycle through it."""
    m = model([h.make_node("Exp", ["x"], ["a"], name="exp"),
               h.make_node("Neg", ["a"], ["b"], name="neg"),
               h.make_node("Add", ["a", "b"], ["y"], name="add")], [vi("x")], [vi("y")])
    ep = Recorder()
    s = ort.InferenceSession(m.SerializeToString(),
                             providers=["TestPluginExecutionProvider", ep, CPU])
    assert sorted([n.op_type for n in f.nodes] for f in ep.compiled) == [["Add"], ["Exp"]]
    x = rand(2, 3)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], np.zeros_like(x))


def test_group_nodes_respects_outer_reads_of_subgraphs():
    """An If on the CPU whose branch reads the Relu output: Relu and the Add after the If must
    not fuse across it."""
    then_g = h.make_graph([h.make_node("Neg", ["a"], ["t"], name="then_neg")], "then", [],
                          [vi("t")])
    else_g = h.make_graph([h.make_node("Identity", ["a"], ["e"], name="else_id")], "else", [],
                          [vi("e")])
    m = model([h.make_node("Relu", ["x"], ["a"], name="relu"),
               h.make_node("If", ["c"], ["b"], then_branch=then_g, else_branch=else_g,
                           name="if"),
               h.make_node("Add", ["a", "b"], ["y"], name="add")],
              [h.make_tensor_value_info("c", T.BOOL, []), vi("x")], [vi("y")])
    ep = Recorder()
    s = ort.InferenceSession(m.SerializeToString(), providers=[ep, CPU])
    assert sorted([n.op_type for n in f.nodes] for f in ep.compiled) == [["Add"], ["Relu"]]
    x = rand(2, 3)
    np.testing.assert_allclose(s.run(None, {"c": np.array(True), "x": x})[0], np.zeros_like(x))
    np.testing.assert_allclose(s.run(None, {"c": np.array(False), "x": x})[0],
                               2 * np.maximum(x, 0))


def test_each_group_is_one_fused_node_of_the_graph():
    """Partitioning replaces each compiled group by one node of the session's graph, which
    reads the group's inputs and writes the outputs others read; the plan runs it as one
    step of the provider's."""
    ep = Recorder()
    s = ort.InferenceSession(cycle_model().SerializeToString(), providers=[ep, CPU])
    g = s._graph
    ops = [(n.op_type, list(n.input), list(n.output)) for n in g.nodes]
    fused = "RecorderExecutionProvider_fused"
    assert ops == [(fused, ["x"], ["a"]), ("Sigmoid", ["a"], ["b"]),
                   (fused, ["a", "b"], ["y"])]
    metas = [g.meta(n) for n in g.nodes]
    assert [m.provider.name for m in metas] == [ep.name, CPU, ep.name]
    assert [[n.op_type for n in m.fused.nodes] for m in metas if m.fused is not None] == \
        [["Relu"], ["Add", "Exp", "Mul"]]
    assert [st.provider for st in s._plan.steps] == [ep.name, CPU, ep.name]
    x = rand(2, 3)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-5)
