"""The nine zoo CNNs (onnx/backend/test/data/light) on the oneDNN provider: every node on
DNNL, logits equal to onnxruntime's on the same inputs, final outputs equal to the stored
ones within the backend suite's tolerances."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from dnnlhelpers import dnnl_session, needs_dnnl, nodes_on, reference, total_nodes
from zoo_data import LIGHT, light_expected, light_feeds, light_path

pytestmark = needs_dnnl

# squeezenet's constant weights make its 1000 logits equal in exact arithmetic; any
# reassociation of the sums splits the ties, and its softmax then differs by up to 0.1 from
# the stored output (onnxruntime's own differs too). Its logits are compared instead.
SOFTMAX_OF_TIES = {"squeezenet"}


def _logits(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with its final Softmax removed (what it reads becomes the output)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    if m.graph.node[-1].op_type == "Softmax":
        last = m.graph.node[-1]
        del m.graph.node[-1]
        del m.graph.output[:]
        m.graph.output.append(onnx.ValueInfoProto(name=last.input[0]))
    return m


@pytest.mark.parametrize("name", LIGHT)
def test_zoo_model_runs_on_dnnl_and_matches_onnxruntime(name):
    model = onnx.load(light_path(name))
    sess = dnnl_session(model)
    assert nodes_on(sess) == total_nodes(sess), sess.placement_report()
    feeds = light_feeds(model, sess)
    if name not in SOFTMAX_OF_TIES:
        got = sess.run(None, feeds)
        for g, w in zip(got, light_expected(name, model)):
            np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-7)
    logits = _logits(model)
    got = dnnl_session(logits).run(None, feeds)[0]
    want = reference(logits, feeds)[0]
    # the light models' constant weights give logits up to 1e21: compare relative to them
    scale = float(np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale)
