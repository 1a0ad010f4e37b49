"""EP libraries registered at run time: a provider written in a temporary module file is
registered, listed with its device, chosen by a policy and unregistered while a session
still uses it; the error cases are onnxruntime's (Fail) with onnxrt's reasons."""

from __future__ import annotations

import sys

import numpy as np
import onnxruntime as ort_ref
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnxruntime.capi import onnxruntime_pybind11_state as ref_capi

import onnxrt as ort
from models import model
from onnxrt.framework import libraries

LIBRARY = '''
import numpy as np
import onnxrt as ort

kernels = ort.KernelRegistry("LibGpuExecutionProvider")
CALLS = []


@kernels.kernel("Mul", since=7)
def mul(a, b):
    CALLS.append("Mul")
    return a * b


# hardware onnxrt does not discover: the provider finds it itself
CRACK_GRIFFIN = ort.OrtHardwareDevice(ort.OrtHardwareDeviceType.GPU, "Contoso", 0xBE57, 0x7,
                                      {"name": "CrackGriffin 7", "Discrete": "1"},
                                      key="contoso:crackgriffin:0")


class LibGpuExecutionProvider(ort.ExecutionProvider):
    name = "LibGpuExecutionProvider"
    kernels = kernels
    ep_vendor = "Contoso"
    options = {"run_really_fast": "false"}

    @classmethod
    def supported_devices(cls, devices):
        return [ort.DeviceSupport(CRACK_GRIFFIN, {"run_really_fast": "true"},
                                  metadata={"supported_devices": "CrackGriffin 7+"})]


class _NotAProvider:
    pass
'''


@pytest.fixture
def library(tmp_path):
    path = tmp_path / "contoso_eps.py"
    path.write_text(LIBRARY)
    yield path
    for name in list(libraries.registered_libraries()):
        ort.unregister_execution_provider_library(name)


def mul_relu():
    return model([h.make_node("Mul", ["x", "x"], ["y"], name="mul"),
                  h.make_node("Relu", ["y"], ["z"], name="relu")],
                 [h.make_tensor_value_info("x", T.FLOAT, [3, 2])],
                 [h.make_tensor_value_info("z", T.FLOAT, [3, 2])], opset=13
                 ).SerializeToString()


def test_registered_chosen_by_policy_and_unregistered(library):
    assert "LibGpuExecutionProvider" not in [d.ep_name for d in ort.get_ep_devices()]
    ort.register_execution_provider_library("contoso", str(library))
    assert "LibGpuExecutionProvider" in ort.get_available_providers()
    assert "LibGpuExecutionProvider" in ort.get_all_providers()
    (dev,) = [d for d in ort.get_ep_devices() if d.ep_name == "LibGpuExecutionProvider"]
    assert dev.ep_vendor == "Contoso" and dev.ep_options == {"run_really_fast": "true"}
    assert dev.ep_metadata["library"] == "contoso"
    assert dev.ep_metadata["supported_devices"] == "CrackGriffin 7+"
    assert (dev.device.type, dev.device.vendor, dev.device.vendor_id, dev.device.device_id) == (
        ort.OrtHardwareDeviceType.GPU, "Contoso", 0xBE57, 7)
    assert dev.memory_info(ort.OrtDeviceMemoryType.DEFAULT) is not None

    so = ort.SessionOptions()
    so.set_provider_selection_policy(ort.OrtExecutionProviderDevicePolicy.PREFER_GPU)
    sess = ort.InferenceSession(mul_relu(), sess_options=so)
    names = sess.get_providers()
    assert names[0] == "LibGpuExecutionProvider" and names[-1] == "CPUExecutionProvider"
    assert sess.get_provider_options()["LibGpuExecutionProvider"] == {"run_really_fast": "true"}
    report = sess.placement_report()
    assert ("LibGpuExecutionProvider: chosen by the provider selection policy PREFER_GPU for "
            "GPU 'CrackGriffin 7'") in report
    where = {sg.get_nodes()[0].name: sg.ep_name
             for sg in sess.get_provider_graph_assignment_info()}
    assert where["mul"] == "LibGpuExecutionProvider"
    calls = sys.modules[type(sess._providers[0]).__module__].CALLS

    ort.unregister_execution_provider_library("contoso")
    # the session keeps its provider objects and runs on
    x = np.array([[1, -2], [3, -4], [5, -6]], np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x * x)
    assert calls == ["Mul"]
    # new sessions know nothing of it
    assert "LibGpuExecutionProvider" not in [d.ep_name for d in ort.get_ep_devices()]
    assert "LibGpuExecutionProvider" not in ort.get_available_providers()
    with pytest.raises(ort.InvalidArgument, match="Unknown Provider Type"):
        ort.InferenceSession(mul_relu(), providers=["LibGpuExecutionProvider"])
    so = ort.SessionOptions()
    so.add_provider_for_devices([dev], {})
    with pytest.raises(ort.Fail, match="library 'contoso' was unregistered"):
        ort.InferenceSession(mul_relu(), sess_options=so)
    # and it can be registered again
    ort.register_execution_provider_library("contoso", str(library))
    assert ort.InferenceSession(mul_relu(), providers=["LibGpuExecutionProvider"]
                                ).get_providers()[0] == "LibGpuExecutionProvider"


CPU_LIBRARY = '''
import onnxrt as ort

kernels = ort.KernelRegistry("LibCpuExecutionProvider")


@kernels.kernel("Mul", since=7)
def mul(a, b):
    return a * b


class LibCpuExecutionProvider(ort.ExecutionProvider):
    name = "LibCpuExecutionProvider"
    kernels = kernels

    @classmethod
    def supported_devices(cls, devices):
        return [ort.DeviceSupport(d) for d in devices
                if d.type == ort.OrtHardwareDeviceType.CPU]
'''


def test_default_policy_takes_a_registered_cpu_library(tmp_path):
    path = tmp_path / "cpu_eps.py"
    path.write_text(CPU_LIBRARY)

    def default_session():
        so = ort.SessionOptions()
        so.set_provider_selection_policy(ort.OrtExecutionProviderDevicePolicy.DEFAULT)
        return ort.InferenceSession(mul_relu(), sess_options=so)

    assert default_session().get_providers() == ["CPUExecutionProvider"]
    ort.register_execution_provider_library("cpu_eps", str(path))
    try:
        sess = default_session()
        assert sess.get_providers() == ["LibCpuExecutionProvider", "CPUExecutionProvider"]
        assert "chosen by the provider selection policy DEFAULT" in sess.placement_report()
    finally:
        ort.unregister_execution_provider_library("cpu_eps")
    assert default_session().get_providers() == ["CPUExecutionProvider"]


def test_registering_twice_and_unregistering_an_unknown_name_fail(library):
    ort.register_execution_provider_library("contoso", str(library))
    with pytest.raises(ort.Fail, match="contoso already registered"):
        ort.register_execution_provider_library("contoso", str(library))
    with pytest.raises(ort.Fail, match="already has"):   # the same provider by another name
        ort.register_execution_provider_library("contoso2", str(library))
    ort.unregister_execution_provider_library("contoso")
    with pytest.raises(ref_capi.Fail) as ref:
        ort_ref.unregister_execution_provider_library("contoso")
    with pytest.raises(ort.Fail) as ours:
        ort.unregister_execution_provider_library("contoso")
    assert str(ref.value).endswith(str(ours.value))   # "... contoso was not registered."


def test_wrong_paths_and_modules_without_providers(tmp_path):
    for bad in (tmp_path / "missing.py", "no_such_module_anywhere.eps"):
        with pytest.raises(ref_capi.Fail):
            ort_ref.register_execution_provider_library("x", str(bad))
        with pytest.raises(ort.Fail, match="no such file"):
            ort.register_execution_provider_library("x", str(bad))
    native = tmp_path / "libexample_plugin_ep.so"
    native.write_bytes(b"\x7fELF")
    with pytest.raises(ort.Fail, match="not a Python module"):
        ort.register_execution_provider_library("x", str(native))
    empty = tmp_path / "nothing_here.py"
    empty.write_text("import numpy as np\nclass Helper:\n    pass\n")
    with pytest.raises(ort.Fail, match="defines no provider"):
        ort.register_execution_provider_library("x", str(empty))
    with pytest.raises(ort.Fail, match="defines no provider"):
        ort.register_execution_provider_library("x", "json")
    broken = tmp_path / "broken_eps.py"
    broken.write_text("raise ImportError('needs the contoso SDK')\n")
    with pytest.raises(ort.Fail, match="ImportError: needs the contoso SDK"):
        ort.register_execution_provider_library("x", str(broken))
    clash = tmp_path / "clash_eps.py"
    clash.write_text("import onnxrt as ort\nclass Mine(ort.ExecutionProvider):\n"
                     "    name = 'CPUExecutionProvider'\n")
    with pytest.raises(ort.Fail, match="CPUExecutionProvider, which onnxrt already has"):
        ort.register_execution_provider_library("x", str(clash))
    folder = tmp_path / "not_a_package"
    folder.mkdir()
    with pytest.raises(ort.Fail, match="no __init__.py"):
        ort.register_execution_provider_library("x", str(folder))
    plain = tmp_path / "plain_eps.py"
    plain.write_text(LIBRARY.replace('    ep_vendor = "Contoso"\n', ""))
    ort.register_execution_provider_library("plain", str(plain))
    try:   # no ep_vendor: the registration name, not the generated module's
        (dev,) = [d for d in ort.get_ep_devices() if d.ep_name == "LibGpuExecutionProvider"]
        assert dev.ep_vendor == "plain"
    finally:
        ort.unregister_execution_provider_library("plain")
    assert libraries.registered_libraries() == {}
    assert not [m for m in sys.modules if m.startswith("_onnxrt_ep_library_x")]


def test_package_folders_and_importable_modules(tmp_path, monkeypatch):
    pkg = tmp_path / "contoso_pkg"
    pkg.mkdir()
    (pkg / "impl.py").write_text(LIBRARY)
    (pkg / "__init__.py").write_text("from .impl import LibGpuExecutionProvider\n"
                                     "__all__ = ['LibGpuExecutionProvider']\n")
    try:
        ort.register_execution_provider_library("folder", str(pkg))
        assert libraries.registered_libraries() == {"folder": ("LibGpuExecutionProvider",)}
    finally:
        ort.unregister_execution_provider_library("folder")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        ort.register_execution_provider_library("by-name", "contoso_pkg.impl")
        assert libraries.registered_libraries() == {"by-name": ("LibGpuExecutionProvider",)}
        # a module named by import stays imported: it is the caller's module
        assert "contoso_pkg.impl" in sys.modules
    finally:
        ort.unregister_execution_provider_library("by-name")
        sys.modules.pop("contoso_pkg.impl", None)
        sys.modules.pop("contoso_pkg", None)
