"""OpenVINO's compiled groups as EPContext nodes: a compiled model loads without compiling
(OpenVINO's ``import_model``) and matches onnxruntime on the original model; a blob from
another OpenVINO version, another device or another precision is refused."""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import onnxrt as ort
from models import model
from ovhelpers import CPU, OV, needs_openvino

pytestmark = needs_openvino


def conv_mlp():
    """Conv -> Relu -> Flatten -> MatMul -> Softmax, fixed shapes."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    m = numpy_helper.from_array(rng.standard_normal((8 * 6 * 6, 10)).astype(np.float32), "m")
    return model([h.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                  h.make_node("Relu", ["c"], ["r"], name="relu"),
                  h.make_node("Flatten", ["r"], ["f"], name="flat"),
                  h.make_node("MatMul", ["f", "m"], ["g"], name="mm"),
                  h.make_node("Softmax", ["g"], ["y"], name="sm")],
                 [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 8, 8])],
                 [h.make_tensor_value_info("y", T.FLOAT, [2, 10])], [w, m])


@pytest.fixture
def src(tmp_path):
    p = tmp_path / "m.onnx"
    onnx.save(conv_mlp(), p)
    return str(p)


def ov_options():
    so = ort.SessionOptions()
    so.add_provider(OV, {})
    return so


def stats(sess):
    return sess.get_provider_stats()[OV]


@pytest.mark.parametrize("embed", [True, False])
def test_compiled_model_loads_without_compiling_and_matches(src, tmp_path, embed):
    out = str(tmp_path / "m_ctx.onnx")
    ort.ModelCompiler(ov_options(), src, embed_compiled_data_into_model=embed,
                      flags=ort.OrtCompileApiFlags.ERROR_IF_NO_NODES_COMPILED
                      ).compile_to_file(out)
    m = onnx.load(out)
    assert [n.op_type for n in m.graph.node] == ["EPContext"]
    assert (len([f for f in os.listdir(tmp_path) if f.endswith(".bin")]) == 0) == embed
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    want = onnxruntime.InferenceSession(src, providers=[CPU]).run(None, {"x": x})[0]
    again = ort.InferenceSession(src, providers=[OV, CPU])
    loaded = ort.InferenceSession(out, providers=[OV, CPU])
    np.testing.assert_allclose(loaded.run(None, {"x": x})[0], want, rtol=1e-4, atol=1e-5)
    assert stats(again)["compilations"] == 1 and stats(again)["loaded_contexts"] == 0
    assert stats(loaded)["compilations"] == 0 and stats(loaded)["loaded_contexts"] == 1


def _set(path, **attrs):
    m = onnx.load(path)
    n = m.graph.node[0]
    for a in n.attribute:
        if a.name in attrs:
            a.s = attrs[a.name].encode()
    onnx.save(m, path)


@pytest.mark.parametrize("attr,value,match", [
    ("ep_sdk_version", "2023.0.0-0000", "OpenVINO 2023.0.0"),
    ("hardware_architecture", "CPU:Some Other CPU", "compiled for CPU:Some Other CPU"),
    ("source", "TensorrtExecutionProvider", "TensorrtExecutionProvider"),
])
def test_stale_or_foreign_blob_is_refused(src, tmp_path, attr, value, match):
    out = str(tmp_path / "m_ctx.onnx")
    ort.ModelCompiler(ov_options(), src, embed_compiled_data_into_model=True
                      ).compile_to_file(out)
    _set(out, **{attr: value})
    with pytest.raises(ort.EPFail, match=match):
        ort.InferenceSession(out, providers=[OV, CPU])


def test_other_precision_is_refused(src, tmp_path):
    out = str(tmp_path / "m_ctx.onnx")
    ort.ModelCompiler(ov_options(), src, embed_compiled_data_into_model=True
                      ).compile_to_file(out)
    so = ort.SessionOptions()
    with pytest.raises(ort.EPFail, match="precision"):
        ort.InferenceSession(out, so, providers=[(OV, {"precision": "ACCURACY"}), CPU])


def test_compatibility_of_the_written_model(src, tmp_path):
    from onnxrt.capi.onnxruntime_pybind11_state import (
        OrtCompiledModelCompatibility as C, get_compatibility_info_from_model,
        get_model_compatibility_for_ep_devices)

    out = str(tmp_path / "m_ctx.onnx")
    ort.ModelCompiler(ov_options(), src, embed_compiled_data_into_model=True
                      ).compile_to_file(out)
    info = get_compatibility_info_from_model(out, OV)
    devs = [d for d in ort.get_ep_devices() if d.ep_name == OV and d.device.type ==
            ort.OrtHardwareDeviceType.CPU]
    assert get_model_compatibility_for_ep_devices(devs, info) == C.EP_SUPPORTED_OPTIMAL
    old = info.replace('"openvino": "', '"openvino": "1999.')
    assert get_model_compatibility_for_ep_devices(devs, old) == C.EP_UNSUPPORTED
