"""Shared by the oneDNN provider tests: the skip when libdnnl is missing, sessions, and
onnxruntime as the oracle."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort_ref
import pytest

import onnxrt as ort
from onnxrt.providers.dnnl import DnnlExecutionProvider

DNNL = "DnnlExecutionProvider"
CPU = "CPUExecutionProvider"

# the library comes with the test extra (onednn-cpu-gomp); where it is absent (a platform
# with no wheel) the provider's own reason is the skip's reason
_WHY = DnnlExecutionProvider.unavailable_reason()
needs_dnnl = pytest.mark.skipif(bool(_WHY), reason=f"oneDNN is not usable here: {_WHY}")


def dnnl_session(model, options=None, sess_options=None):
    """DNNL first; a group oneDNN fails to build raises (no silent CPU fallback) unless the
    options say otherwise."""
    data = model if isinstance(model, (str, bytes)) else model.SerializeToString()
    opts = {"error_on_failure": "1", **(options or {})}
    return ort.InferenceSession(data, sess_options, providers=[(DNNL, opts), CPU])


def reference(model, feeds):
    data = model if isinstance(model, (str, bytes)) else model.SerializeToString()
    return ort_ref.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)


def nodes_on(sess, provider=DNNL):
    return sum(len(sg.get_nodes()) for sg in sess.get_provider_graph_assignment_info()
               if sg.ep_name == provider)


def total_nodes(sess):
    return sum(len(sg.get_nodes()) for sg in sess.get_provider_graph_assignment_info())


def assert_close(got, want, rtol=1e-4, atol=1e-5):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
