"""Hardware discovery, the providers' device declarations and the OrtEpDevice objects, with
onnxruntime as the oracle for names, enum values and the CPU device it reports here."""

from __future__ import annotations

import platform
import sys
import types

import onnxruntime as ort_ref
import pytest

import onnxrt as ort
from onnxrt.framework import devices as devmod
from onnxrt.framework.devices import (DeviceSupport, OrtHardwareDevice, OrtHardwareDeviceType,
                                      cpu_from_cpuinfo, discover_devices)

X86 = platform.machine().lower() in ("x86_64", "amd64", "i686", "x86")


def test_enums_match_onnxruntime():
    for ours, ref in ((ort.OrtHardwareDeviceType, ort_ref.OrtHardwareDeviceType),
                      (ort.OrtExecutionProviderDevicePolicy,
                       ort_ref.OrtExecutionProviderDevicePolicy),
                      (ort.OrtDeviceMemoryType, ort_ref.OrtDeviceMemoryType)):
        assert {k: int(v) for k, v in ours.__members__.items()} == {
            k: int(v) for k, v in ref.__members__.items()}, ours


def test_ep_device_and_hardware_device_have_onnxruntimes_attributes():
    ref = ort_ref.get_ep_devices()[0]
    ours = ort.get_ep_devices()[-1]
    public = {a for a in dir(ref) if not a.startswith("_")}
    assert public <= {a for a in dir(ours) if not a.startswith("_")}
    hw_public = {a for a in dir(ref.device) if not a.startswith("_")}
    assert hw_public <= {a for a in dir(ours.device) if not a.startswith("_")}
    for a in ("ep_metadata", "ep_options"):
        assert type(getattr(ours, a)) is type(getattr(ref, a)) is dict
    assert type(ours.device.metadata) is dict


@pytest.mark.skipif(not X86, reason="onnxruntime reads the CPU vendor with cpuid on x86; on "
                    "other architectures its vendor ids are not PCI ids")
def test_cpu_device_is_the_one_onnxruntime_reports():
    ref = next(d for d in ort_ref.get_ep_devices() if d.ep_name == "CPUExecutionProvider")
    ours = next(d for d in ort.get_ep_devices() if d.ep_name == "CPUExecutionProvider")
    r, o = ref.device, ours.device
    assert (int(o.type), o.vendor, o.vendor_id, o.device_id) == (
        int(r.type), r.vendor, r.vendor_id, r.device_id)


def test_cpu_is_always_discovered_first_with_real_metadata():
    devs = discover_devices()
    cpu = devs[0]
    assert cpu.type == OrtHardwareDeviceType.CPU
    md = cpu.metadata
    assert md["architecture"] == platform.machine()
    assert int(md["logical_processors"]) >= 1 and md["name"]
    if sys.platform.startswith("linux"):
        assert md["source"] == "/proc/cpuinfo"
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        if names:  # x86 (ARM kernels name no model)
            assert md["name"] == names[0]


@pytest.mark.parametrize("info,vendor,vendor_id", [
    ({"vendor_id": "GenuineIntel", "model name": "Intel(R) Xeon(R) Platinum 8480+",
      "flags": "fpu avx2 avx512f avx512_vnni amx_tile", "cpu family": "6", "model": "143"},
     "Intel", 0x8086),
    ({"vendor_id": "AuthenticAMD", "model name": "AMD EPYC 7B13", "flags": "avx2 fma"},
     "AMD", 0x1022),
    ({"CPU implementer": "0x41", "Features": "fp asimd asimddp sve i8mm"}, "ARM", 0x13B5),
    ({"CPU implementer": "0x51", "Features": "fp asimd"}, "Qualcomm", 0x5143),
])
def test_cpuinfo_vendors_map_to_pci_vendor_ids(info, vendor, vendor_id):
    d = cpu_from_cpuinfo(info, "x86_64")
    assert (d.vendor, d.vendor_id, d.device_id, d.type) == (vendor, vendor_id, 0,
                                                            OrtHardwareDeviceType.CPU)
    flags = set((info.get("flags") or info.get("Features")).split())
    assert set(d.metadata["features"].split(",")) == flags & set(devmod._FEATURES)


def _fake_torch(monkeypatch, n=2, hip=None):
    import torch

    props = [types.SimpleNamespace(name=f"NVIDIA H100 80GB HBM3 #{i}", total_memory=85 << 30,
                                   major=9, minor=0, is_integrated=0, pci_bus_id=0x3b + i,
                                   pci_domain_id=0, pci_device_id=0, uuid=f"GPU-{i}",
                                   gcnArchName="gfx942")
             for i in range(n)]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props[i])
    monkeypatch.setattr(torch.version, "hip", hip)
    monkeypatch.setattr(torch.version, "cuda", None if hip else "12.8")


def test_torch_gpus_are_discovered_through_torch(monkeypatch, tmp_path):
    pytest.importorskip("torch")
    _fake_torch(monkeypatch)
    # the PCI ids come from sysfs, found by the bus id torch reports
    sysfs = tmp_path / "0000:3b:00.0"
    sysfs.mkdir()
    (sysfs / "vendor").write_text("0x10de\n")
    (sysfs / "device").write_text("0x2330\n")
    real = devmod._pci_ids
    monkeypatch.setattr(devmod, "_pci_ids", lambda bus: real(bus, str(tmp_path)))
    gpus = devmod.torch_gpus()
    assert [g.metadata["torch_device"] for g in gpus] == ["cuda:0", "cuda:1"]
    g0, g1 = gpus
    assert (g0.type, g0.vendor, g0.vendor_id, g0.device_id) == (
        OrtHardwareDeviceType.GPU, "NVIDIA", 0x10DE, 0x2330)
    assert g0.metadata["pci_bus_id"] == "0000:3b:00.0" and g0.metadata["Discrete"] == "1"
    assert g0.metadata["compute_capability"] == "9.0"
    assert (g1.vendor_id, g1.device_id) == (0x10DE, 0)   # no sysfs entry: the vendor's id
    assert g0 != g1 and len({g0, g1, g0}) == 2


def test_rocm_gpus_are_amd(monkeypatch):
    pytest.importorskip("torch")
    _fake_torch(monkeypatch, n=1, hip="6.4")
    (g,) = devmod.torch_gpus()
    assert (g.vendor, g.vendor_id) == ("AMD", 0x1002) and g.metadata["arch"] == "gfx942"


def test_no_gpu_without_a_gpu_build_of_torch():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU torch can use")
    assert devmod.torch_gpus() == []


class _FakeCore:
    available_devices = ["CPU", "GPU.0", "GPU.1", "NPU"]
    props = {"GPU.0": {"FULL_DEVICE_NAME": "Intel(R) Arc(TM) A770", "DEVICE_TYPE":
                       "Type.DISCRETE"},
             "GPU.1": {"FULL_DEVICE_NAME": "Intel(R) UHD Graphics 770", "DEVICE_TYPE":
                       "Type.INTEGRATED"},
             "NPU": {"FULL_DEVICE_NAME": "Intel(R) AI Boost"}}

    def get_property(self, device, name):
        return self.props[device][name]


def test_openvino_gpus_and_npus_are_discovered_through_openvino(monkeypatch):
    ov = pytest.importorskip("openvino")
    monkeypatch.setattr(ov, "Core", _FakeCore)
    got = devmod.openvino_devices()
    assert [(d.type, d.metadata["openvino_device"], d.metadata.get("Discrete")) for d in got] == [
        (OrtHardwareDeviceType.GPU, "GPU.0", "1"), (OrtHardwareDeviceType.GPU, "GPU.1", "0"),
        (OrtHardwareDeviceType.NPU, "NPU", None)]
    assert all((d.vendor, d.vendor_id) == ("Intel", 0x8086) for d in got)
    assert got[0].metadata["name"] == "Intel(R) Arc(TM) A770"


def test_a_failing_source_hides_only_its_own_devices(monkeypatch, caplog):
    def broken():
        raise RuntimeError("driver exploded")

    monkeypatch.setattr(devmod, "SOURCES", [broken, devmod.host_cpu])
    got = discover_devices(refresh=True)
    try:
        assert [d.type for d in got] == [OrtHardwareDeviceType.CPU]
        assert "driver exploded" in caplog.text
    finally:
        monkeypatch.undo()
        discover_devices(refresh=True)


# -- what each provider declares ------------------------------------------------------------
CPU_HW = OrtHardwareDevice(OrtHardwareDeviceType.CPU, "Intel", 0x8086, 0, {}, key="cpu")


def _gpu(i, vendor="NVIDIA"):
    return OrtHardwareDevice(OrtHardwareDeviceType.GPU, vendor,
                             0x10DE if vendor == "NVIDIA" else 0x1002, 0x2330,
                             {"torch_device": f"cuda:{i}", "Discrete": "1"},
                             key=f"{vendor}{i}")


def test_builtin_providers_declare_the_devices_they_run_on(monkeypatch):
    from onnxrt.providers.cpu import CPUExecutionProvider
    from onnxrt.providers.openvino import OpenVINOExecutionProvider, runtime
    from onnxrt.providers.tensorrt import TensorrtExecutionProvider
    from onnxrt.providers.torch import (CUDAExecutionProvider, ROCMExecutionProvider,
                                        TorchExecutionProvider)

    npu = OrtHardwareDevice(OrtHardwareDeviceType.NPU, "Intel", 0x8086, 0,
                            {"openvino_device": "NPU"}, key="npu")
    hw = (CPU_HW, _gpu(0), _gpu(1), _gpu(0, "AMD"), npu)

    def decl(cls):
        return [(s.device.key, dict(s.options), str(s.memory)) for s in cls.supported_devices(hw)]

    assert decl(CPUExecutionProvider) == [("cpu", {}, "cpu")]
    assert decl(CUDAExecutionProvider) == [("NVIDIA0", {"device_id": "0"}, "cuda:0"),
                                           ("NVIDIA1", {"device_id": "1"}, "cuda:1")]
    assert decl(ROCMExecutionProvider) == [("AMD0", {"device_id": "0"}, "cuda:0")]
    assert decl(TensorrtExecutionProvider) == decl(CUDAExecutionProvider)
    assert decl(TorchExecutionProvider)[0] == ("cpu", {"device": "cpu"}, "torch:0")
    assert [o for _, o, _ in decl(TorchExecutionProvider)[1:]] == [
        {"device": "cuda:0"}, {"device": "cuda:1"}, {"device": "cuda:0"}]
    monkeypatch.setattr(runtime, "available_devices", lambda: ["CPU", "NPU"])
    assert decl(OpenVINOExecutionProvider) == [("cpu", {"device_type": "CPU"}, "cpu"),
                                               ("npu", {"device_type": "NPU"}, "cpu")]
    s = OpenVINOExecutionProvider.supported_devices(hw)
    assert OpenVINOExecutionProvider.options_for_devices(s[::-1]) == {
        "device_type": "HETERO:NPU,CPU"}
    with pytest.raises(ort.InvalidArgument, match="one device at a time"):
        CUDAExecutionProvider.options_for_devices(CUDAExecutionProvider.supported_devices(hw))


def test_get_ep_devices_pairs_available_providers_with_their_devices():
    devs = ort.get_ep_devices()
    names = [d.ep_name for d in devs]
    assert names[-1] == "CPUExecutionProvider"
    # every listed provider is available, and every available provider that declares the
    # CPU is listed on it
    assert set(names) <= set(ort.get_available_providers())
    assert "TestPluginExecutionProvider" in names        # entry point, declares the CPU
    assert "WrongReluExecutionProvider" not in names     # declares no device
    if "OpenVINOExecutionProvider" in ort.get_available_providers():
        ov = next(d for d in devs if d.ep_name == "OpenVINOExecutionProvider")
        assert ov.ep_options == {"device_type": "CPU"}
    assert ort.get_ep_devices()[-1] is devs[-1]           # the same objects every call


def test_cpu_ep_device_fields_and_memory_info():
    d = ort.get_ep_devices()[-1]
    assert d.ep_name == "CPUExecutionProvider" and d.ep_vendor == "onnxrt"
    assert d.ep_metadata["version"] == ort.__version__ and d.ep_options == {}
    assert d.device.type == ort.OrtHardwareDeviceType.CPU
    assert d.device.vendor_id >= 0 and d.device.device_id >= 0 and d.device.vendor
    mi = d.memory_info(ort.OrtDeviceMemoryType.DEFAULT)
    assert (mi.name, mi.device_id, int(mi.device_type)) == ("Cpu", 0, 0)
    assert d.memory_info(ort.OrtDeviceMemoryType.HOST_ACCESSIBLE) is None
    with pytest.raises(ort.InvalidArgument, match="OrtDeviceMemoryType"):
        d.memory_info(7)
    # copies: changing what was returned changes nothing
    d.ep_metadata["x"] = "1"
    d.device.metadata["y"] = "1"
    assert "x" not in d.ep_metadata and "y" not in d.device.metadata
    with pytest.raises(ort.NotImplemented, match="sync stream"):
        d.create_sync_stream()


def test_gpu_ep_device_memory_info_is_the_device(monkeypatch):
    from onnxrt.framework.ep_devices import OrtEpDevice
    from onnxrt.providers.torch import CUDAExecutionProvider

    (s,) = CUDAExecutionProvider.supported_devices([_gpu(0)])
    mi = OrtEpDevice(CUDAExecutionProvider, s).memory_info(ort.OrtDeviceMemoryType.DEFAULT)
    assert (mi.name, mi.device_id, int(mi.device_type), mi.device_vendor_id) == (
        "Cuda", 0, int(ort.OrtMemoryInfoDeviceType.GPU), 0x10DE)


def test_input_epdevices_are_the_listed_objects():
    from models import add_model

    sess = ort.InferenceSession(add_model().SerializeToString(),
                                providers=["CPUExecutionProvider"])
    cpu = ort.get_ep_devices()[-1]
    assert all(d is cpu for d in sess.get_input_epdevices())


def test_device_support_accepts_plain_devices_and_ignores_junk(caplog):
    from onnxrt.framework.ep_devices import _supports

    class Mixed(ort.ExecutionProvider):
        name = "MixedExecutionProvider"

        @classmethod
        def supported_devices(cls, devices):
            return [devices[0], "junk"]

    got = _supports(Mixed, (CPU_HW,))
    assert got == [DeviceSupport(CPU_HW)] and "junk" in caplog.text
