"""Shared by the OpenVINO provider tests: the skip when openvino is missing, and sessions."""

from __future__ import annotations

import warnings

import pytest

import onnxrt as ort

try:
    import openvino  # noqa: F401

    HAVE_OPENVINO = True
except Exception:  # the package is an optional extra: pip install onnxrt[openvino]
    HAVE_OPENVINO = False

needs_openvino = pytest.mark.skipif(
    not HAVE_OPENVINO, reason="the openvino package is not installed (pip install openvino)")

OV = "OpenVINOExecutionProvider"
CPU = "CPUExecutionProvider"


def ov_session(model, options=None, sess_options=None, **kw):
    """A session with the OpenVINO provider first and the CPU provider as the fallback."""
    from onnxrt.providers.openvino import OpenVINOExecutionProvider

    ep = OpenVINOExecutionProvider(**(options or {}))
    data = model if isinstance(model, (str, bytes)) else model.SerializeToString()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return ort.InferenceSession(data, sess_options, providers=[ep, CPU], **kw), ep


def nodes_on(sess, provider=OV):
    return sum(len(sg.get_nodes()) for sg in sess.get_provider_graph_assignment_info()
               if sg.ep_name == provider)
