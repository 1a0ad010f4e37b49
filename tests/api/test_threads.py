"""intra_op_num_threads and ORT_PARALLEL."""

from __future__ import annotations

import threading

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h

import onnxrt as ort
from models import model, rand


def branches_model(n: int = 4):
    """n independent MatMul -> Relu branches joined by a Sum."""
    nodes, inits = [], []
    for k in range(n):
        inits.append(h.make_tensor(f"w{k}", T.FLOAT, [64, 64], rand(64, 64, seed=k).ravel()))
        nodes += [h.make_node("MatMul", ["x", f"w{k}"], [f"m{k}"], name=f"mm{k}"),
                  h.make_node("Relu", [f"m{k}"], [f"r{k}"], name=f"relu{k}")]
    nodes.append(h.make_node("Sum", [f"r{k}" for k in range(n)], ["y"], name="sum"))
    return model(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["N", 64])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["N", 64])], inits)


def expected(m, x):
    ws = [np.asarray(t.float_data, np.float32).reshape(64, 64) for t in m.graph.initializer]
    return sum(np.maximum(x @ w, 0) for w in ws)


def test_parallel_mode_matches_sequential_and_uses_several_threads():
    m = branches_model()
    so = ort.SessionOptions()
    so.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    so.inter_op_num_threads = 3
    seen = set()

    class Spy:
        def node_event(self, step, args, outs, t0, plan=None):
            seen.add(threading.get_ident())

    s = ort.InferenceSession(m.SerializeToString(), so)
    x = rand(32, 64)
    for _ in range(5):
        np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(m, x), rtol=1e-4)
    s._hook = Spy()  # node events name the thread that ran each step
    big = rand(512, 64)
    for _ in range(20):
        np.testing.assert_allclose(s.run(None, {"x": big})[0], expected(m, big), rtol=1e-4)
    assert len(seen) > 1


def test_parallel_mode_reports_kernel_failures_and_recovers():
    m = model([h.make_node("MatMul", ["x", "y"], ["a"], name="mm"),
               h.make_node("Relu", ["x"], ["b"], name="r"),
               h.make_node("Add", ["a", "b"], ["z"], name="add")],
              [h.make_tensor_value_info("x", T.FLOAT, None),
               h.make_tensor_value_info("y", T.FLOAT, None)],
              [h.make_tensor_value_info("z", T.FLOAT, None)])
    so = ort.SessionOptions()
    so.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    s = ort.InferenceSession(m.SerializeToString(), so)
    try:
        s.run(None, {"x": rand(2, 3), "y": rand(4, 2)})
        raise AssertionError("expected a failure")
    except ort.Fail as e:
        assert "mm" in str(e) and "MatMul" in str(e)
    x = rand(3, 3)
    y = rand(3, 3, seed=2)
    np.testing.assert_allclose(s.run(None, {"x": x, "y": y})[0], x @ y + np.maximum(x, 0),
                               rtol=1e-5)


def test_intra_op_threads_limit_blas_only_while_running():
    from threadpoolctl import threadpool_info

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    before = blas_threads()
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    m = branches_model(1)
    seen = []

    class Spy:
        def node_event(self, step, args, outs, t0, plan=None):
            seen.append(blas_threads())

    s = ort.InferenceSession(m.SerializeToString(), so)
    s._hook = Spy()
    x = rand(8, 64)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(m, x), rtol=1e-4)
    assert seen and all(t == [1] * len(t) for t in seen)
    assert blas_threads() == before
