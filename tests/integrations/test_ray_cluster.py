"""The same batch-inference code on a Ray cluster of two nodes (two raylets joined to one
head, as `ray start --head` and `ray start --address=HEAD:6379` make them, here on one
machine): the driver only connects with ray.init(address=...), and the actors land on
both nodes. The model travels as bytes, so no node needs the file."""

from __future__ import annotations

import sys

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed")
pytest.importorskip("ray.data", reason="ray[data] is not installed")

from ray import cloudpickle  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

import onnxrt as ort  # noqa: E402
from onnxrt.integrations.ray import OnnxPredictor  # noqa: E402
from serve_models import mlp_model  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])


class NodePredictor(OnnxPredictor):
    """Adds the id of the node that ran each batch."""

    def __call__(self, batch):
        out = super().__call__(batch)
        out["node"] = np.array([ray.get_runtime_context().get_node_id()] * len(out["y"]))
        return out


def test_actors_spread_over_the_nodes_of_a_cluster():
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "object_store_memory": 100 << 20})
    cluster.add_node(num_cpus=1, object_store_memory=100 << 20)
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        assert len([n for n in ray.nodes() if n["Alive"]]) == 2
        model = mlp_model(2).SerializeToString()
        x = np.random.default_rng(5).standard_normal((64, 4)).astype(np.float32)
        ds = ray.data.from_numpy(np.array_split(x, 8))
        rows = ds.map_batches(NodePredictor, fn_constructor_kwargs={
            "model": model, "input_columns": {"x": "data"}, "threads": 1},
            concurrency=2, num_cpus=1, batch_size=8).take_all()
        got = np.stack([r["data"] for r in rows])
        np.testing.assert_allclose(np.stack([r["y"] for r in rows]),
                                   ort.InferenceSession(model).run(["y"], {"x": got})[0],
                                   rtol=1e-6, atol=1e-6)
        assert len({r["node"] for r in rows}) == 2     # one actor on each node
    finally:
        ray.shutdown()
        cluster.shutdown()
