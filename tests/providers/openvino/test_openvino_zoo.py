"""The nine zoo CNNs through the OpenVINO provider: every node on OpenVINO, outputs equal to
the stored ones and to onnxrt's CPU provider within the backend suite's tolerances."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest

import onnxrt as ort
from zoo_data import LIGHT, LIGHT_DIR, light_expected, light_feeds
from oracle import assert_all_similar
from ovhelpers import CPU, needs_openvino, nodes_on, ov_session

pytestmark = needs_openvino

RTOL, ATOL = 1e-3, 1e-7  # the suite's tolerances for these models

# squeezenet's constant weights make its 1000 logits equal in exact arithmetic (~1.4e10);
# OpenVINO's channel-blocked f32 convolutions may round them apart by a relative 6e-7 (it
# depends on the CPU's vector width), and the final softmax of logits that large turns that
# into differences of 0.12. So its logits are compared, not its softmax.
SOFTMAX_OF_TIES = {"squeezenet"}


def _feeds(model, sess):
    return light_feeds(model, sess)


def _stored(name, n):
    return light_expected(name, onnx.load(os.path.join(LIGHT_DIR, f"light_{name}.onnx")))[:n]


def _logits_model(model):
    """The model with its final Softmax removed: what the softmax reads becomes the output."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    last = m.graph.node[-1]
    assert last.op_type == "Softmax"
    del m.graph.node[-1]
    del m.graph.output[:]
    m.graph.output.append(onnx.ValueInfoProto(name=last.input[0]))
    return m


@pytest.mark.parametrize("name", LIGHT)
def test_zoo_model_runs_on_openvino_and_matches(name):
    path = os.path.join(LIGHT_DIR, f"light_{name}.onnx")
    model = onnx.load(path)
    sess, _ = ov_session(path)
    total = sum(len(sg.get_nodes()) for sg in sess.get_provider_graph_assignment_info())
    assert nodes_on(sess) == total, sess.placement_report()
    feeds = _feeds(model, sess)
    outs = sess.run(None, feeds)
    cpu = ort.InferenceSession(path, providers=[CPU]).run(None, feeds)
    names = [o.name for o in model.graph.output]
    if name in SOFTMAX_OF_TIES:
        m = _logits_model(model)
        ov_logits = ov_session(m)[0].run(None, feeds)
        cpu_logits = ort.InferenceSession(m.SerializeToString(), providers=[CPU]).run(None,
                                                                                      feeds)
        np.testing.assert_allclose(ov_logits[0], cpu_logits[0], rtol=1e-5)
        return
    assert_all_similar(_stored(name, len(names)), outs, RTOL, ATOL, names)
    assert_all_similar(cpu, outs, RTOL, ATOL, names)
