"""Loading: paths, bytes, protos; external data confined to the model's folder; bad bytes."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import onnxrt as ort
from models import add_model, model, rand


def ext_model(location: str) -> onnx.ModelProto:
    w = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
    w.data_location = T.EXTERNAL
    w.ClearField("raw_data")
    for k, v in (("location", location), ("offset", "0"), ("length", "16")):
        e = w.external_data.add()
        e.key, e.value = k, v
    return model([h.make_node("Add", ["x", "w"], ["y"])],
                 [h.make_tensor_value_info("x", T.FLOAT, [4])],
                 [h.make_tensor_value_info("y", T.FLOAT, [4])], [w])


def write(path, m):
    with open(path, "wb") as f:
        f.write(m.SerializeToString())


def test_path_bytes_and_proto(tmp_path):
    m = add_model()
    p = tmp_path / "m.onnx"
    write(p, m)
    x = rand(2, 3)
    for src in (str(p), p, m.SerializeToString(), m):
        s = ort.InferenceSession(src)
        np.testing.assert_allclose(s.run(["z"], {"x": x, "y": x})[0], 2 * x)


def test_external_data_inside_folder(tmp_path):
    (tmp_path / "weights.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    write(tmp_path / "m.onnx", ext_model("weights.bin"))
    s = ort.InferenceSession(str(tmp_path / "m.onnx"))
    np.testing.assert_allclose(s.run(None, {"x": np.ones(4, np.float32)})[0], [1, 2, 3, 4])


@pytest.mark.parametrize("location", ["../secret.bin", "sub/../../secret.bin"])
def test_external_data_escaping_the_folder_is_refused(tmp_path, location):
    (tmp_path / "secret.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    d = tmp_path / "model"
    d.mkdir()
    write(d / "m.onnx", ext_model(location))
    with pytest.raises(ort.InvalidGraph, match="escapes"):
        ort.InferenceSession(str(d / "m.onnx"))


def test_external_data_absolute_path_is_refused(tmp_path):
    target = tmp_path / "abs.bin"
    target.write_bytes(np.arange(4, dtype=np.float32).tobytes())
    write(tmp_path / "m.onnx", ext_model(str(target)))
    with pytest.raises(ort.InvalidGraph, match="absolute"):
        ort.InferenceSession(str(tmp_path / "m.onnx"))


def test_external_data_symlink_escape_is_refused(tmp_path):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(np.arange(4, dtype=np.float32).tobytes())
    d = tmp_path / "model"
    d.mkdir()
    os.symlink(outside, d / "link.bin")
    write(d / "m.onnx", ext_model("link.bin"))
    with pytest.raises(ort.InvalidGraph, match="escapes"):
        ort.InferenceSession(str(d / "m.onnx"))


def test_external_data_out_of_file_bounds(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"\0" * 8)  # 8 bytes, the tensor wants 16
    write(tmp_path / "m.onnx", ext_model("w.bin"))
    with pytest.raises(ort.InvalidGraph, match="outside"):
        ort.InferenceSession(str(tmp_path / "m.onnx"))


def test_missing_file():
    with pytest.raises(ort.NoSuchFile):
        ort.InferenceSession("/no/such/model.onnx")
    with pytest.raises(FileNotFoundError):
        ort.InferenceSession("/no/such/model.onnx")


@pytest.mark.parametrize("junk", [b"garbage bytes here", bytes(range(256)) * 4,
                                  b"\x08\x07" * 100, b"\xff" * 64])
def test_garbage_bytes(junk, tmp_path):
    with pytest.raises(ort.InvalidProtobuf):
        ort.InferenceSession(junk)
    p = tmp_path / "junk.onnx"
    p.write_bytes(junk)
    with pytest.raises(ort.InvalidProtobuf):
        ort.InferenceSession(str(p))


def test_every_truncation_is_invalid_protobuf():
    data = add_model().SerializeToString()
    for n in range(1, len(data)):
        with pytest.raises(ort.InvalidProtobuf):
            ort.InferenceSession(data[:n])
    with pytest.raises(ort.InvalidArgument, match="No graph"):
        ort.InferenceSession(b"")


def test_ir_and_opset_versions():
    m = add_model()
    m.ir_version = 2
    with pytest.raises(ort.InvalidGraph, match="IR version 2"):
        ort.InferenceSession(m.SerializeToString())
    m = add_model()
    m.opset_import[0].version = onnx.defs.onnx_opset_version() + 5
    with pytest.raises(ort.Fail, match="opset"):
        ort.InferenceSession(m.SerializeToString())


def test_old_opsets_and_old_ir_version_load():
    m = model([h.make_node("Relu", ["x"], ["y"])], [h.make_tensor_value_info("x", T.FLOAT, [3])],
              [h.make_tensor_value_info("y", T.FLOAT, [3])], opset=1, ir_version=3)
    s = ort.InferenceSession(m.SerializeToString())
    np.testing.assert_array_equal(s.run(None, {"x": np.array([-1, 0, 2], np.float32)})[0],
                                  [0, 0, 2])


def test_unknown_op_names_op_domain_and_version():
    m = model([h.make_node("FooBar", ["x"], ["y"])], [h.make_tensor_value_info("x", T.FLOAT, [3])],
              [h.make_tensor_value_info("y", T.FLOAT, [3])])
    with pytest.raises(ort.InvalidGraph) as ei:
        ort.InferenceSession(m.SerializeToString())
    msg = str(ei.value)
    assert "FooBar" in msg and "ai.onnx" in msg and "17" in msg
    m = model([h.make_node("Baz", ["x"], ["y"], domain="my.domain")],
              [h.make_tensor_value_info("x", T.FLOAT, [3])],
              [h.make_tensor_value_info("y", T.FLOAT, [3])], extra_opsets=[("my.domain", 3)])
    with pytest.raises(ort.InvalidGraph) as ei:
        ort.InferenceSession(m.SerializeToString())
    assert "Baz" in str(ei.value) and "my.domain" in str(ei.value) and "3" in str(ei.value)


def test_model_local_function():
    """f(a, b) = (a + b) * alpha, alpha an attribute of the calling node."""
    alpha = onnx.AttributeProto()
    alpha.name, alpha.ref_attr_name, alpha.type = "value_float", "alpha", onnx.AttributeProto.FLOAT
    const = h.make_node("Constant", [], ["alpha_t"])
    const.attribute.append(alpha)
    f = h.make_function(
        "my.funcs", "ScaledAdd", ["a", "b"], ["c"],
        [const, h.make_node("Add", ["a", "b"], ["s"]), h.make_node("Mul", ["s", "alpha_t"], ["c"])],
        [h.make_opsetid("", 17)], attributes=["alpha"])
    m = model([h.make_node("ScaledAdd", ["x", "y"], ["z"], domain="my.funcs", alpha=3.0)],
              [h.make_tensor_value_info("x", T.FLOAT, [3]),
               h.make_tensor_value_info("y", T.FLOAT, [3])],
              [h.make_tensor_value_info("z", T.FLOAT, [3])],
              functions=[f], extra_opsets=[("my.funcs", 1)])
    s = ort.InferenceSession(m.SerializeToString())
    x, y = rand(3), rand(3, seed=1)
    np.testing.assert_allclose(s.run(None, {"x": x, "y": y})[0], (x + y) * 3.0, rtol=1e-6)


def test_spec_function_body_runs_when_no_kernel_exists():
    """An op the spec defines as a function runs through its body on a provider without a
    kernel for it (Softsign = x / (1 + |x|))."""
    from onnxrt.framework.kernel import KernelRegistry
    from onnxrt.framework.kernel_lookup import KernelLookup
    from onnxrt.plan.planner import Planner
    from onnxrt.execute.executor import RunContext, execute_plan
    from onnxrt.providers.cpu import CPU, CPUExecutionProvider

    reg = KernelRegistry("no-softsign")
    for kd in CPU:
        if kd.op_type != "Softsign":
            reg.register(kd.op_type, kd.impl, since=kd.since, until=kd.until, domain=kd.domain,
                         needs_node=kd.needs_node, context=kd.context)

    class NoSoftsign(CPUExecutionProvider):
        name = "NoSoftsignExecutionProvider"
        kernels = reg

    m = model([h.make_node("Softsign", ["x"], ["y"])],
              [h.make_tensor_value_info("x", T.FLOAT, [5])],
              [h.make_tensor_value_info("y", T.FLOAT, [5])], opset=22)
    planner = Planner({"": 22}, {}, KernelLookup([NoSoftsign()]), execute=execute_plan)
    plan = planner.plan_graph(m.graph, is_main=True)
    assert plan.steps[0].provider == "CPUExecutionProvider"  # the function call step
    x = np.linspace(-3, 3, 5).astype(np.float32)
    (y,) = execute_plan(plan, [x], None, RunContext())
    np.testing.assert_allclose(y, x / (1 + np.abs(x)), rtol=1e-6)
