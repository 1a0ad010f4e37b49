"""Dynamic batching: joined requests get exactly their own rows back; requests that
cannot be joined are not; a model whose outputs do not follow the batch is caught.
First the runner in process (deterministic timing), then the server under concurrent
tritonclient requests of different batch sizes."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import tritonclient.grpc as tg
import tritonclient.http as th

from onnxrt.serve.batching import ModelRunner
from onnxrt.serve.errors import ServeError
from onnxrt.serve.metrics import ServeMetrics
from onnxrt.serve.model import ServedModel, SessionConfig
from serve.conftest import assert_same
from serve.test_protocol import grpc_input, http_input, local
from serve_models import GATHER_TABLE, colsum_model, gather_model, mlp_model, seq_model

rng = np.random.default_rng(1)


def runner(model, max_batch=8, timeout_s=0.2, instances=1) -> ModelRunner:
    m = ServedModel("m", "1", model.SerializeToString(), SessionConfig(threads=1))
    m.load()
    assert m.ready, m.reason
    return ModelRunner(m, ServeMetrics(), max_batch=max_batch, timeout_s=timeout_s,
                       instances=instances)


def runs(r: ModelRunner) -> tuple[float, float]:
    """(session runs, rows) so far."""
    h = r._metrics.batch_size.labels("m", "1")
    samples = {s.name: s.value for s in h.collect()[0].samples}
    return samples["onnxrt_batch_size_count"], samples["onnxrt_batch_size_sum"]


def run_all(r: ModelRunner, feeds_list, outputs=None):
    async def go():
        return await asyncio.gather(*(r.run(f, outputs) for f in feeds_list),
                                    return_exceptions=True)
    try:
        return asyncio.run(go())
    finally:
        r.close()


def test_requests_are_joined_up_to_max_batch_and_split_back():
    r = runner(seq_model(), max_batch=8, timeout_s=10.0)
    feeds = [{"x": rng.standard_normal((n, 3)).astype(np.float32)} for n in (1, 3, 2, 2)]
    t = time.perf_counter()
    out = run_all(r, feeds)
    assert time.perf_counter() - t < 5     # full at 8 rows: no wait for the 10 s timeout
    assert runs(r) == (1, 8)
    for f, o in zip(feeds, out):
        np.testing.assert_array_equal(o["y"], f["x"] * 2)


def test_a_partial_batch_leaves_after_the_timeout():
    r = runner(seq_model(), max_batch=8, timeout_s=0.05)
    feeds = [{"x": np.full((1, 3), i, np.float32)} for i in range(3)]
    t = time.perf_counter()
    out = run_all(r, feeds)
    assert time.perf_counter() - t >= 0.05
    assert runs(r) == (1, 3)
    for i, o in enumerate(out):
        np.testing.assert_array_equal(o["y"], np.full((1, 3), 2 * i, np.float32))


def test_batches_never_pass_max_batch():
    r = runner(seq_model(), max_batch=4)
    feeds = [{"x": np.full((n, 2), n, np.float32)} for n in (3, 3, 1, 2, 2)]
    out = run_all(r, feeds)
    h = r._metrics.batch_size.labels("m", "1").collect()[0].samples
    assert {s.labels["le"]: s.value for s in h if s.name.endswith("_bucket")}["4.0"] == \
        runs(r)[0]
    assert runs(r)[1] == 11
    for f, o in zip(feeds, out):
        np.testing.assert_array_equal(o["y"], f["x"] * 2)


def test_different_inner_shapes_are_not_joined():
    r = runner(seq_model(), max_batch=8)
    feeds = [{"x": rng.standard_normal((1, t)).astype(np.float32)} for t in (3, 5, 3, 5, 5)]
    out = run_all(r, feeds)
    assert runs(r) == (2, 5)        # T=3 together, T=5 together
    for f, o in zip(feeds, out):
        np.testing.assert_array_equal(o["y"], f["x"] * 2)


def test_a_request_larger_than_max_batch_runs_alone():
    r = runner(seq_model(), max_batch=4, timeout_s=0.0)
    x = rng.standard_normal((9, 2)).astype(np.float32)
    (out,) = run_all(r, [{"x": x}])
    np.testing.assert_array_equal(out["y"], x * 2)
    assert runs(r) == (1, 9)


def test_outputs_that_do_not_follow_the_batch_are_never_joined_again():
    r = runner(colsum_model(), max_batch=8)
    assert r.batching
    feeds = [{"x": rng.standard_normal((n, 3)).astype(np.float32)} for n in (2, 3)]
    out = run_all(r, feeds)
    for f, o in zip(feeds, out):     # each request's own column sums, not the batch's
        np.testing.assert_allclose(o["y"], f["x"].sum(0, keepdims=True), rtol=1e-6)
    assert not r.batching
    assert runs(r) == (3, 10)       # the joined run (5 rows), then each alone


def test_a_failing_request_does_not_fail_the_requests_joined_with_it():
    r = runner(gather_model(), max_batch=8)
    feeds = [{"i": np.array([0, 1], np.int64)}, {"i": np.array([9], np.int64)},
             {"i": np.array([4], np.int64)}]
    ok1, bad, ok2 = run_all(r, feeds)
    np.testing.assert_array_equal(ok1["y"], GATHER_TABLE[[0, 1]])
    np.testing.assert_array_equal(ok2["y"], GATHER_TABLE[[4]])
    assert isinstance(bad, ServeError) and "index 9 is out of range" in str(bad)


def test_no_batching_runs_only_the_outputs_asked_for():
    r = runner(mlp_model(), max_batch=0)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    (out,) = run_all(r, [{"x": x}], outputs=["s"])
    assert set(out) == {"s"}
    np.testing.assert_allclose(out["s"], x.sum(1, keepdims=True), rtol=1e-6)


def test_two_instances_run_two_batches_at_once():
    """With instances=2 a second batch starts while the first still runs."""
    r = runner(seq_model(), max_batch=2, timeout_s=0.0, instances=2)
    inside = []
    lock = threading.Lock()
    both = threading.Barrier(2, timeout=10)
    real = r.model.run

    def slow_run(feeds, outputs=None):
        with lock:
            inside.append(1)
        both.wait()            # returns only when two runs are inside at once
        return real(feeds, outputs)

    r.model.run = slow_run
    feeds = [{"x": np.full((2, 2), i, np.float32)} for i in range(2)]
    out = run_all(r, feeds)
    assert len(inside) == 2
    for i, o in enumerate(out):
        np.testing.assert_array_equal(o["y"], np.full((2, 2), 2 * i, np.float32))


# -- the server, concurrent requests from tritonclient ----------------------------------

def test_concurrent_http_requests_of_different_batch_sizes(batching, repo):
    runs0 = batching.metric("onnxrt_batch_size_count", model="mlp", version="2")
    rows0 = batching.metric("onnxrt_batch_size_sum", model="mlp", version="2")
    within8 = batching.metric("onnxrt_batch_size_bucket", model="mlp", version="2", le="8.0")
    sizes = [1, 2, 3, 4, 5, 1, 2, 3, 1, 1, 2, 5]
    xs = [rng.standard_normal((n, 4)).astype(np.float32) for n in sizes]
    c = th.InferenceServerClient(batching.http, concurrency=len(xs))
    pending = [c.async_infer("mlp", [http_input("x", x, "FP32")]) for x in xs]
    results = [p.get_result() for p in pending]
    sess = local(repo, "mlp", 2)
    for x, r in zip(xs, results):
        y, s = sess.run(None, {"x": x})
        assert_same(r.as_numpy("y"), y)
        assert_same(r.as_numpy("s"), s)
    new_runs = batching.metric("onnxrt_batch_size_count", model="mlp", version="2") - runs0
    assert batching.metric("onnxrt_batch_size_sum", model="mlp", version="2") - rows0 == 30
    assert 4 <= new_runs < len(xs)          # 30 rows need at least 4 runs of <= 8
    assert batching.metric("onnxrt_batch_size_bucket", model="mlp", version="2",
                           le="8.0") - within8 == new_runs


def test_http_and_grpc_requests_are_joined_together(batching):
    runs0 = batching.metric("onnxrt_batch_size_count", model="seq", version="1")
    xs = [np.full((1, 6), i, np.float32) for i in range(6)]
    c = th.InferenceServerClient(batching.http, concurrency=3)
    g = tg.InferenceServerClient(batching.grpc)
    done: dict[int, object] = {}
    event = threading.Event()

    def callback(i):
        def cb(result, error):
            done[i] = error or result
            if len(done) == 3:
                event.set()
        return cb

    for i in (1, 3, 5):
        g.async_infer("seq", [grpc_input("x", xs[i], "FP32")], callback(i))
    http = {i: c.async_infer("seq", [http_input("x", xs[i], "FP32")]) for i in (0, 2, 4)}
    results = {i: p.get_result().as_numpy("y") for i, p in http.items()}
    assert event.wait(30)
    results.update({i: r.as_numpy("y") for i, r in done.items()})
    for i, x in enumerate(xs):
        np.testing.assert_array_equal(results[i], x * 2)
    assert batching.metric("onnxrt_batch_size_count", model="seq", version="1") - runs0 < 6


def test_concurrent_requests_with_different_inner_shapes(batching):
    xs = [rng.standard_normal((n, t)).astype(np.float32)
          for n, t in [(1, 2), (2, 7), (1, 7), (3, 2), (2, 4), (1, 4)]]
    c = th.InferenceServerClient(batching.http, concurrency=len(xs))
    pending = [c.async_infer("seq", [http_input("x", x, "FP32")]) for x in xs]
    for x, p in zip(xs, pending):
        np.testing.assert_array_equal(p.get_result().as_numpy("y"), x * 2)
