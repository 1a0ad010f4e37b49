"""The capi-level compatibility functions of the EP-device API, against onnxruntime."""

from __future__ import annotations

import onnxruntime as ort_ref
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnxruntime.capi import onnxruntime_pybind11_state as ref_capi

import onnxrt as ort
from models import model
from onnxrt.capi import onnxruntime_pybind11_state as capi

NAMES = ("OrtCompiledModelCompatibility", "OrtDeviceEpIncompatibilityReason",
         "get_model_compatibility_for_ep_devices", "get_compatibility_info_from_model",
         "get_compatibility_info_from_model_bytes",
         "get_hardware_device_ep_incompatibility_details", "get_ep_devices",
         "register_execution_provider_library", "unregister_execution_provider_library",
         "OrtExecutionProviderDevicePolicy", "OrtEpDevice", "OrtHardwareDevice",
         "OrtHardwareDeviceType")


def test_names_where_onnxruntime_has_them():
    for n in NAMES:
        assert hasattr(ref_capi, n) and hasattr(capi, n), n
    for n in ("get_ep_devices", "register_execution_provider_library",
              "unregister_execution_provider_library", "OrtExecutionProviderDevicePolicy",
              "OrtEpDevice", "OrtHardwareDevice", "OrtHardwareDeviceType"):
        assert hasattr(ort_ref, n) and hasattr(ort, n), n
    for n in ("OrtCompiledModelCompatibility", "OrtDeviceEpIncompatibilityReason"):
        assert {k: int(v) for k, v in getattr(capi, n).__members__.items()} == {
            k: int(v) for k, v in getattr(ref_capi, n).__members__.items()}


def test_model_compatibility_for_ep_devices():
    for c in (ref_capi, capi):
        cpu = [d for d in c.get_ep_devices() if d.ep_name == "CPUExecutionProvider"]
        with pytest.raises(RuntimeError):
            c.get_model_compatibility_for_ep_devices([], "info")
        with pytest.raises(TypeError):
            c.get_model_compatibility_for_ep_devices(cpu, None)
        assert c.get_model_compatibility_for_ep_devices(cpu, "arbitrary-compat-string") == \
            c.OrtCompiledModelCompatibility.EP_NOT_APPLICABLE
    devs = ort.get_ep_devices()
    if len({d.ep_name for d in devs}) > 1:
        with pytest.raises(ort.Fail, match="one execution provider"):
            capi.get_model_compatibility_for_ep_devices(devs, "x")


def test_a_provider_answers_for_its_compiled_models(monkeypatch):
    from onnxrt.framework.ep_devices import OrtEpDevice
    from onnxrt.framework.devices import DeviceSupport

    seen = []

    class Compiling(ort.ExecutionProvider):
        name = "CompilingExecutionProvider"

        @classmethod
        def compiled_model_compatibility(cls, info, devices):
            seen.append((info, list(devices)))
            return 2 if info == "engine-v1" else 3

    cpu = ort.get_ep_devices()[-1].device
    dev = OrtEpDevice(Compiling, DeviceSupport(cpu))
    C = capi.OrtCompiledModelCompatibility
    assert capi.get_model_compatibility_for_ep_devices([dev], "engine-v1") == \
        C.EP_SUPPORTED_PREFER_RECOMPILATION
    assert capi.get_model_compatibility_for_ep_devices([dev], "engine-v0") == C.EP_UNSUPPORTED
    assert seen[0] == ("engine-v1", [cpu])


def test_compatibility_info_from_models(tmp_path):
    m = model([h.make_node("Relu", ["x"], ["y"])],
              [h.make_tensor_value_info("x", T.FLOAT, [2])],
              [h.make_tensor_value_info("y", T.FLOAT, [2])])
    m.metadata_props.add(key="ep_compatibility_info.CPUExecutionProvider", value="cpu-v1")
    m.metadata_props.add(key="ep.compatibility_info.CPUExecutionProvider", value="not this")
    data = m.SerializeToString()
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    for c in (ref_capi, capi):
        assert c.get_compatibility_info_from_model(str(path), "CPUExecutionProvider") == "cpu-v1"
        assert c.get_compatibility_info_from_model_bytes(data, "CPUExecutionProvider") == "cpu-v1"
        assert c.get_compatibility_info_from_model_bytes(bytearray(data), "Other") is None
        with pytest.raises(RuntimeError):
            c.get_compatibility_info_from_model(str(tmp_path / "absent.onnx"), "X")
        with pytest.raises(RuntimeError):
            c.get_compatibility_info_from_model_bytes(b"\xff\xff garbage", "X")


def test_hardware_device_incompatibility_details():
    for eng, c in ((ort_ref, ref_capi), (ort, capi)):
        cpu = [d for d in eng.get_ep_devices() if d.ep_name == "CPUExecutionProvider"][0]
        assert c.get_hardware_device_ep_incompatibility_details(
            "CPUExecutionProvider", cpu.device) == {"reasons_bitmask": 0, "notes": None,
                                                    "error_code": 0}
        with pytest.raises(ref_capi.InvalidArgument if c is ref_capi else ort.InvalidArgument,
                           match="No valid factory found"):
            c.get_hardware_device_ep_incompatibility_details("NoSuchExecutionProvider",
                                                             cpu.device)
    gpu = ort.OrtHardwareDevice(ort.OrtHardwareDeviceType.GPU, "Contoso", 0xBE57, 1, {})
    got = capi.get_hardware_device_ep_incompatibility_details("CPUExecutionProvider", gpu)
    assert got["reasons_bitmask"] == capi.OrtDeviceEpIncompatibilityReason.DEVICE_INCOMPATIBLE
    assert "does not run on GPU" in got["notes"]
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        # onnxrt knows the provider but cannot use it here: it says why
        got = capi.get_hardware_device_ep_incompatibility_details("CUDAExecutionProvider", gpu)
        assert got["reasons_bitmask"] == \
            capi.OrtDeviceEpIncompatibilityReason.MISSING_DEPENDENCY
        assert got["notes"]
