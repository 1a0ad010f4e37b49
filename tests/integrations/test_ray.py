"""onnxrt on a local Ray cluster started here: batch inference over a Dataset with
one session per actor, and the Open Inference Protocol server as a Ray Serve deployment
called with tritonclient; results against a local session."""

from __future__ import annotations

import os
import socket
import sys

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed")
pytest.importorskip("ray.data", reason="ray[data] is not installed")

from ray import cloudpickle  # noqa: E402

import onnxrt as ort  # noqa: E402
from onnxrt.integrations.ray import OnnxPredictor  # noqa: E402
from serve_models import fixed_model, mlp_model, seq_model  # noqa: E402

# the actors unpickle this module's classes by value: the workers do not see tests/
cloudpickle.register_pickle_by_value(sys.modules[__name__])

rng = np.random.default_rng(3)


@pytest.fixture(scope="module")
def cluster():
    # 4 logical CPUs on the 2 cores: two 1-CPU actors leave room for the read tasks
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False,
             object_store_memory=200 << 20, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


class PidPredictor(OnnxPredictor):
    """Adds the actor's process id to each row: which actor ran it."""

    def __call__(self, batch):
        out = super().__call__(batch)
        out["pid"] = np.full(len(out["y"]), os.getpid())
        return out


@pytest.mark.parametrize("actors", [1, 2])
def test_batch_inference_equals_a_local_session(cluster, actors):
    model = mlp_model(1).SerializeToString()
    x = rng.standard_normal((96, 4)).astype(np.float32)
    ds = ray.data.from_numpy(x).repartition(6)
    rows = ds.map_batches(PidPredictor, fn_constructor_kwargs={
        "model": model, "input_columns": {"x": "data"}, "threads": 1,
        "providers": ["CPUExecutionProvider"]},
        concurrency=actors, num_cpus=1, batch_size=16).take_all()
    assert len(rows) == len(x)
    sess = ort.InferenceSession(model)
    got = np.stack([r["data"] for r in rows])
    y, s = sess.run(None, {"x": got})
    np.testing.assert_allclose(np.stack([r["y"] for r in rows]), y, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.stack([r["s"] for r in rows]), s, rtol=1e-6, atol=1e-6)
    # every input row came back once; one session per actor
    np.testing.assert_array_equal(np.sort(got, axis=0), np.sort(x, axis=0))
    assert len({r["pid"] for r in rows}) == actors


def test_column_mapping_and_a_fixed_batch_dimension(cluster):
    """fixed_model takes exactly 2 rows: a batch of 6 runs as three parts."""
    x = rng.standard_normal((12, 3)).astype(np.float32)
    ds = ray.data.from_items([{"features": row} for row in x])
    rows = ds.map_batches(OnnxPredictor, fn_constructor_kwargs={
        "model": fixed_model().SerializeToString(), "input_columns": {"x": "features"},
        "output_columns": {"y": "plus_one"}, "keep_columns": False},
        concurrency=1, batch_size=6).take_all()
    assert set(rows[0]) == {"plus_one"}
    np.testing.assert_array_equal(np.sort(np.stack([r["plus_one"] for r in rows]), axis=0),
                                  np.sort(x + 1, axis=0))


def test_predictor_errors_name_the_problem(tmp_path):
    with pytest.raises(ValueError, match="not inputs of the model"):
        OnnxPredictor(seq_model().SerializeToString(), input_columns={"nope": "a"})
    p = OnnxPredictor(fixed_model().SerializeToString())
    with pytest.raises(ValueError, match="fixed to 2; a batch of 3 rows"):
        p({"x": np.zeros((3, 3), np.float32)})
    with pytest.raises(KeyError, match="no column 'x'"):
        p({"other": np.zeros((2, 3), np.float32)})
    path = tmp_path / "seq.onnx"
    path.write_bytes(seq_model().SerializeToString())
    out = OnnxPredictor(str(path))({"x": np.ones((2, 5), np.float32)})
    np.testing.assert_array_equal(out["y"], np.full((2, 5), 2, np.float32))


def test_serve_deployment_speaks_the_protocol(cluster):
    tritonclient_http = pytest.importorskip("tritonclient.http")
    from ray import serve

    from onnxrt.integrations.ray import OnnxrtDeployment

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    models = {"mlp": {"1": mlp_model(1).SerializeToString(),
                      "2": mlp_model(2).SerializeToString()},
              "seq": seq_model().SerializeToString()}
    app = OnnxrtDeployment.options(num_replicas=2, ray_actor_options={"num_cpus": 0.5}).bind(
        models, max_batch=8, batch_timeout_ms=20, threads=1)
    try:
        serve.run(app, name="onnxrt", route_prefix="/")
        c = tritonclient_http.InferenceServerClient(f"127.0.0.1:{port}", concurrency=8)
        assert c.is_server_live() and c.is_server_ready() and c.is_model_ready("mlp", "2")
        assert c.get_model_metadata("mlp")["versions"] == ["1", "2"]
        assert c.get_model_config("mlp")["max_batch_size"] == 8
        xs = [rng.standard_normal((n, 4)).astype(np.float32) for n in (1, 2, 3, 4, 5, 1, 2, 3)]
        pending = []
        for i, x in enumerate(xs):
            t = tritonclient_http.InferInput("x", list(x.shape), "FP32")
            t.set_data_from_numpy(x, binary_data=bool(i % 2))
            pending.append(c.async_infer("mlp", [t], model_version=str(1 + i % 2)))
        for i, (x, p) in enumerate(zip(xs, pending)):
            sess = ort.InferenceSession(models["mlp"][str(1 + i % 2)])
            np.testing.assert_allclose(p.get_result().as_numpy("y"),
                                       sess.run(["y"], {"x": x})[0], rtol=1e-6, atol=1e-6)
        with pytest.raises(Exception, match="unknown model 'nope'"):
            c.get_model_metadata("nope")
    finally:
        serve.shutdown()
