"""The two providers of docs/writing-an-execution-provider.md, run as written."""

from __future__ import annotations

import os
import re

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h

import onnxrt as ort
from models import model, rand

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs",
                   "writing-an-execution-provider.md")


def blocks():
    with open(DOC) as f:
        text = f.read()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def define(index):
    ns = {}
    exec(compile(blocks()[index], f"{DOC}#block{index}", "exec"), ns)
    return ns


def test_each_provider_is_under_60_lines():
    code = blocks()
    assert len(code[0].strip().splitlines()) < 60
    assert len(code[2].strip().splitlines()) < 60


def test_kernel_based_toy_provider(tmp_path):
    ns = define(0)
    m = model([h.make_node("MatMul", ["x", "w"], ["a"]), h.make_node("Relu", ["a"], ["b"]),
               h.make_node("Sigmoid", ["b"], ["c"]), h.make_node("Add", ["c", "b"], ["y"])],
              [h.make_tensor_value_info("x", T.FLOAT, [2, 4])],
              [h.make_tensor_value_info("y", T.FLOAT, [2, 3])],
              [h.make_tensor("w", T.FLOAT, [4, 3], rand(4, 3).ravel())])
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    model_path = str(path)
    exec(compile(blocks()[1], "doc-usage", "exec"), {**ns, "model_path": model_path})
    sess = ort.InferenceSession(model_path, providers=["ToyExecutionProvider",
                                                       "CPUExecutionProvider"])
    x = rand(2, 4)
    w = np.asarray(m.graph.initializer[0].float_data, np.float32).reshape(4, 3)
    b = np.maximum(x @ w, 0)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], 1 / (1 + np.exp(-b)) + b,
                               rtol=1e-5)
    where = {sg.get_nodes()[0].op_type: sg.ep_name
             for sg in sess.get_provider_graph_assignment_info()}
    assert where == {"MatMul": "ToyExecutionProvider", "Relu": "ToyExecutionProvider",
                     "Sigmoid": "CPUExecutionProvider", "Add": "ToyExecutionProvider"}


def test_compile_based_chain_provider(tmp_path):
    ns = define(2)
    m = model([h.make_node("Mul", ["x", "k"], ["a"]), h.make_node("Relu", ["a"], ["b"]),
               h.make_node("Sigmoid", ["b"], ["c"]), h.make_node("Exp", ["c"], ["d"]),
               h.make_node("Neg", ["d"], ["y"])],
              [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
              [h.make_tensor_value_info("y", T.FLOAT, [2, 3])],
              [h.make_tensor("k", T.FLOAT, [3], [1.0, -2.0, 3.0])])
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    ep = ns["ChainCompilerExecutionProvider"]()
    ns["model_path"] = str(path)
    exec(compile(blocks()[3], "doc-usage", "exec"), ns)
    sess = ns["sess"]
    x = rand(2, 3)
    b = np.maximum(x * np.array([1, -2, 3], np.float32), 0)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], -np.exp(1 / (1 + np.exp(-b))),
                               rtol=1e-5)
    groups = [sg for sg in sess.get_provider_graph_assignment_info()
              if sg.ep_name == "ChainCompilerExecutionProvider"]
    assert sorted(len(g.get_nodes()) for g in groups) == [2, 2]
    assert ep.get_provider_options() == {"min_group": "2"}


def test_device_selection_provider(tmp_path, monkeypatch):
    from onnxrt.framework import registry

    # the block registers its provider: keep that to this test
    monkeypatch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))
    ns = define(4)
    m = model([h.make_node("Relu", ["x"], ["r"]), h.make_node("Sigmoid", ["r"], ["y"])],
              [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
              [h.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    ns["model_path"] = str(path)
    exec(compile(blocks()[5], "doc-usage", "exec"), ns)
    sess = ns["sess"]
    assert sess.get_providers()[0] == "ToyNpuExecutionProvider"
    assert sess.get_providers()[-1] == "CPUExecutionProvider"
    assert sess.get_provider_options()["ToyNpuExecutionProvider"] == {"npu_index": "0"}
    assert "ToyNpuExecutionProvider: chosen by the provider selection policy PREFER_NPU" in \
        sess.placement_report()
    (dev,) = [d for d in ort.get_ep_devices() if d.ep_name == "ToyNpuExecutionProvider"]
    assert (dev.ep_vendor, dev.device.type) == ("Toy Inc.", ort.OrtHardwareDeviceType.NPU)
    x = rand(2, 3)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0],
                               1 / (1 + np.exp(-np.maximum(x, 0))), rtol=1e-5)
