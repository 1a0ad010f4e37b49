"""One session run from several threads at once gives the results of sequential runs, on
models whose kernels prepare state at session creation (conv, pooling, resize, loops)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import onnxrt as ort
from models import model
from onnxrt.zoo import zoo_models


def _loop_resize_model():
    body = h.make_graph(
        [h.make_node("Add", ["acc_in", "one"], ["acc_out"]),
         h.make_node("Identity", ["cond_in"], ["cond_out"]),
         h.make_node("Identity", ["acc_out"], ["scan_out"])], "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
         h.make_tensor_value_info("acc_in", T.FLOAT, None)],
        [h.make_tensor_value_info("cond_out", T.BOOL, []),
         h.make_tensor_value_info("acc_out", T.FLOAT, None),
         h.make_tensor_value_info("scan_out", T.FLOAT, None)])
    return model(
        [h.make_node("Resize", ["x", "", "scales"], ["r"], mode="linear"),
         h.make_node("Loop", ["n", "", "r"], ["final", "all"], body=body)],
        [h.make_tensor_value_info("x", T.FLOAT, [1, 2, "H", "W"]),
         h.make_tensor_value_info("n", T.INT64, [])],
        [h.make_tensor_value_info("final", T.FLOAT, None),
         h.make_tensor_value_info("all", T.FLOAT, None)],
        [h.make_tensor("scales", T.FLOAT, [4], [1, 1, 2, 1.5]),
         h.make_tensor("one", T.FLOAT, [], [1.0])])


def _feeds_zoo(sess, k):
    a = sess.get_inputs()[0]
    return {a.name: np.random.default_rng(k).random(a.shape, np.float32)}


def _feeds_loop(sess, k):
    rng = np.random.default_rng(k)
    return {"x": rng.random((1, 2, 4 + k % 3, 6), np.float32), "n": np.array(k % 4 + 1)}


@pytest.mark.parametrize("which", ["shufflenet", "inception_v1", "loop_resize"])
def test_concurrent_runs_match_sequential(which):
    if which == "loop_resize":
        sess = ort.InferenceSession(_loop_resize_model().SerializeToString())
        feeds = _feeds_loop
    else:
        sess = ort.InferenceSession(zoo_models()[which])
        feeds = _feeds_zoo
    jobs = [feeds(sess, k) for k in range(8)]
    expected = [sess.run(None, f) for f in jobs]
    results: dict[int, list] = {}
    errors = []

    def work(t):
        try:
            for k in range(t, len(jobs), 4):
                results[k] = sess.run(None, jobs[k])
        except Exception as e:  # collected; the assertion below reports it
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k, want in enumerate(expected):
        for a, b in zip(results[k], want):
            np.testing.assert_array_equal(a, b)
