"""Choosing providers by device: add_provider_for_devices, the selection policies and the
selection delegate. Expected choices follow onnxruntime's selection code
(core/session/provider_policy_context.cc: NPU, GPU, CPU; discrete GPUs first; the provider
made for the device's vendor first; the CPU provider last; then by name); argument handling
and error messages are checked against the installed onnxruntime."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort_ref
import pytest
from onnxruntime.capi import onnxruntime_pybind11_state as ref_capi
from onnx import TensorProto as T
from onnx import helper as h

import onnxrt as ort
from models import model
from onnxrt.framework import registry

P = ort.OrtExecutionProviderDevicePolicy
GPU, NPU, CPU_T = (ort.OrtHardwareDeviceType.GPU, ort.OrtHardwareDeviceType.NPU,
                   ort.OrtHardwareDeviceType.CPU)


def _provider(name, hw_type=None, vendor="Contoso", vendor_id=0xBE57, metadata=None,
              ep_vendor_id=0, options=None):
    """A provider with a Mul kernel on its own device of ``hw_type`` (None: the CPU)."""
    kernels = ort.KernelRegistry(name)

    @kernels.kernel("Mul", since=7)
    def mul(a, b):
        return a * b

    own = None if hw_type is None else ort.OrtHardwareDevice(
        hw_type, vendor, vendor_id, 1, {"name": name[:-len("ExecutionProvider")],
                                        **(metadata or {})}, key=f"test:{name}")

    class Provider(ort.ExecutionProvider):
        @classmethod
        def supported_devices(cls, devices):
            if own is None:
                return [ort.DeviceSupport(d) for d in devices if d.type == CPU_T]
            return [ort.DeviceSupport(own, dict(options or {}))]

    Provider.name = name
    Provider.kernels = kernels
    Provider.ep_vendor = "Contoso"
    Provider.ep_vendor_id = ep_vendor_id
    Provider.options = {k: "" for k in (options or {})}
    Provider.__name__ = name
    return Provider


NpuEP = _provider("NpuTestExecutionProvider", NPU)
GpuEP = _provider("GpuTestExecutionProvider", GPU, metadata={"Discrete": "1"})
IgpuEP = _provider("AIntegratedGpuTestExecutionProvider", GPU, metadata={"Discrete": "0"})
AltCpuEP = _provider("AltCpuTestExecutionProvider")
EVERY = (NpuEP, GpuEP, IgpuEP, AltCpuEP)


@pytest.fixture
def only(monkeypatch):
    """Make exactly these providers (and the CPU provider, last) available."""
    def use(*classes):
        cpu = registry.provider_class("CPUExecutionProvider")
        monkeypatch.setattr(registry, "available_provider_classes",
                            lambda: [*classes, cpu])
    return use


def mul_model(**kw):
    return model([h.make_node("Mul", ["x", "x"], ["y"], name="mul")],
                 [h.make_tensor_value_info("x", T.FLOAT, [3, 2])],
                 [h.make_tensor_value_info("y", T.FLOAT, [3, 2])], opset=13, **kw)


def session(so):
    sess = ort.InferenceSession(mul_model().SerializeToString(), sess_options=so)
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x * x)
    return sess


def by_policy(policy):
    so = ort.SessionOptions()
    so.set_provider_selection_policy(policy)
    assert so.has_providers()
    return session(so)


@pytest.mark.parametrize("policy,expected", [
    # DEFAULT chooses among the CPU provider and registered libraries (none here): the
    # providers made available otherwise are not the application's registrations
    (P.DEFAULT, ["CPUExecutionProvider"]),
    (P.PREFER_CPU, ["AltCpuTestExecutionProvider", "CPUExecutionProvider"]),
    (P.PREFER_GPU, ["GpuTestExecutionProvider", "AltCpuTestExecutionProvider",
                    "CPUExecutionProvider"]),
    (P.MAX_PERFORMANCE, ["GpuTestExecutionProvider", "AltCpuTestExecutionProvider",
                         "CPUExecutionProvider"]),
    (P.PREFER_NPU, ["NpuTestExecutionProvider", "AltCpuTestExecutionProvider",
                    "CPUExecutionProvider"]),
    (P.MAX_EFFICIENCY, ["NpuTestExecutionProvider", "AltCpuTestExecutionProvider",
                        "CPUExecutionProvider"]),
    (P.MIN_OVERALL_POWER, ["NpuTestExecutionProvider", "AltCpuTestExecutionProvider",
                           "CPUExecutionProvider"]),
])
def test_every_policy_picks_as_onnxruntime_does(only, policy, expected):
    only(*EVERY)
    sess = by_policy(policy)
    assert sess.get_providers() == expected
    # the placement report names the policy as the reason for each provider
    report = sess.placement_report()
    for name in expected:
        line = next(ln for ln in report.splitlines() if ln.startswith(f"  {name}: "))
        assert f"the provider selection policy {policy.name}" in line
    assert sess.get_provider_graph_assignment_info()[0].ep_name == expected[0]


def test_policies_without_the_preferred_hardware_fall_back_to_the_cpu(only):
    only(AltCpuEP)
    for policy in (P.PREFER_GPU, P.PREFER_NPU, P.MAX_PERFORMANCE):
        assert by_policy(policy).get_providers() == ["AltCpuTestExecutionProvider",
                                                     "CPUExecutionProvider"]
    only()
    assert by_policy(P.DEFAULT).get_providers() == ["CPUExecutionProvider"]
    # PREFER_NPU takes an NPU only when it is the first device of all
    only(GpuEP, AltCpuEP)
    assert by_policy(P.PREFER_NPU).get_providers() == ["AltCpuTestExecutionProvider",
                                                      "CPUExecutionProvider"]


def test_vendor_made_provider_first_then_name(only):
    # two providers on the same kind of GPU: the one made for its vendor wins over the name
    a = _provider("AaaGpuExecutionProvider", GPU, vendor="Nvidiaish", vendor_id=0x10DE)
    z = _provider("ZzzGpuExecutionProvider", GPU, vendor="Nvidiaish", vendor_id=0x10DE,
                  ep_vendor_id=0x10DE)
    only(a, z)
    assert by_policy(P.PREFER_GPU).get_providers()[0] == "ZzzGpuExecutionProvider"
    z.ep_vendor_id = 0
    assert by_policy(P.PREFER_GPU).get_providers()[0] == "AaaGpuExecutionProvider"


def test_default_policy_in_this_environment():
    # installed providers (OpenVINO, DNNL, the test plugin's entry point) are not libraries
    # the application registered: DEFAULT stays on the CPU provider; PREFER_CPU takes the
    # installed CPU provider made for this CPU's vendor (OpenVINO on an Intel CPU), else the
    # first by name (DNNL before OpenVINO)
    assert by_policy(P.DEFAULT).get_providers() == ["CPUExecutionProvider"]
    cpu_eps = {d.ep_name: d for d in ort.get_ep_devices()
               if d.device.type == ort.OrtHardwareDeviceType.CPU
               and d.ep_name in ("OpenVINOExecutionProvider", "DnnlExecutionProvider")}
    if not cpu_eps:
        return
    intel = next(iter(cpu_eps.values())).device.vendor_id == 0x8086
    want = "OpenVINOExecutionProvider" if intel and "OpenVINOExecutionProvider" in cpu_eps \
        else sorted(cpu_eps)[0]
    assert by_policy(P.PREFER_CPU).get_providers()[0] == want


# -- the delegate ---------------------------------------------------------------------------
def _ref_session(so, m):
    return ort_ref.InferenceSession(m.SerializeToString(), sess_options=so,
                                    providers=None)


def test_delegate_gets_onnxruntimes_arguments(only):
    only(*EVERY)
    m = mul_model(producer_name="tests", producer_version="3", doc_string="d",
                  model_version=4, domain="ai.test")
    m.metadata_props.add(key="k", value="v")
    seen = {}

    def record(into):
        def delegate(ep_devices, model_metadata, runtime_metadata, max_selections):
            into.update(devs=list(ep_devices), md=dict(model_metadata),
                        rt=dict(runtime_metadata), n=max_selections)
            return [ep_devices[-1]]
        return delegate

    ref = {}
    so_ref = ort_ref.SessionOptions()
    so_ref.set_provider_selection_policy_delegate(record(ref))
    _ref_session(so_ref, m)
    so = ort.SessionOptions()
    so.set_provider_selection_policy_delegate(record(seen))
    assert so.has_providers()
    sess = ort.InferenceSession(m.SerializeToString(), sess_options=so)
    assert seen["md"] == ref["md"] and seen["rt"] == ref["rt"] and seen["n"] == ref["n"] == 8
    assert [d.ep_name for d in seen["devs"]] == [
        "NpuTestExecutionProvider", "GpuTestExecutionProvider",
        "AIntegratedGpuTestExecutionProvider", "AltCpuTestExecutionProvider",
        "CPUExecutionProvider"]
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert "the provider selection delegate" in sess.placement_report()


def test_delegate_choice_is_used_in_its_order(only):
    only(*EVERY)

    def pick(devs, *_):
        by = {d.ep_name: d for d in devs}
        return [by["AltCpuTestExecutionProvider"], by["NpuTestExecutionProvider"]]

    so = ort.SessionOptions()
    so.set_provider_selection_policy_delegate(pick)
    assert session(so).get_providers() == ["AltCpuTestExecutionProvider",
                                           "NpuTestExecutionProvider", "CPUExecutionProvider"]


@pytest.mark.parametrize("case", ["raises", "empty", "too_many", "not_a_list"])
def test_delegate_failures_are_fail_as_in_onnxruntime(case):
    def delegate(devs, md, rt, n):
        if case == "raises":
            raise ValueError("MY ERROR")
        if case == "empty":
            return []
        if case == "too_many":
            return [devs[-1]] * (n + 1)
        return 5

    msgs = []
    for eng in (ort_ref, ort):
        so = eng.SessionOptions()
        so.set_provider_selection_policy_delegate(delegate)
        with pytest.raises(ref_capi.Fail if eng is ort_ref else ort.Fail) as e:
            eng.InferenceSession(mul_model().SerializeToString(), sess_options=so)
        msgs.append(str(e.value))
    ref, ours = msgs
    if case == "raises":
        assert "EP selection delegate failed: ValueError: MY ERROR" in ref
        assert ours == "EP selection delegate failed: ValueError: MY ERROR"
    elif case == "not_a_list":
        assert "EP selection delegate failed" in ref and ours.startswith(
            "EP selection delegate failed: it returned int")
    else:
        assert ref.endswith(ours), (ref, ours)


def test_last_of_policy_and_delegate_wins_and_explicit_providers_win_over_both():
    calls = []

    def delegate(devs, *_):
        calls.append(1)
        return [devs[-1]]

    for eng in (ort_ref, ort):
        calls.clear()
        so = eng.SessionOptions()
        so.set_provider_selection_policy_delegate(delegate)
        so.set_provider_selection_policy(eng.OrtExecutionProviderDevicePolicy.PREFER_CPU)
        eng.InferenceSession(mul_model().SerializeToString(), sess_options=so)
        assert calls == [], eng
        so = eng.SessionOptions()
        so.set_provider_selection_policy(eng.OrtExecutionProviderDevicePolicy.PREFER_CPU)
        so.set_provider_selection_policy_delegate(delegate)
        eng.InferenceSession(mul_model().SerializeToString(), sess_options=so)
        assert calls == [1], eng
        calls.clear()
        so = eng.SessionOptions()
        cpu = [d for d in eng.get_ep_devices() if d.ep_name == "CPUExecutionProvider"]
        so.add_provider_for_devices(cpu, {})
        so.set_provider_selection_policy_delegate(delegate)
        sess = eng.InferenceSession(mul_model().SerializeToString(), sess_options=so)
        assert calls == [] and sess.get_providers() == ["CPUExecutionProvider"], eng


# -- add_provider_for_devices ---------------------------------------------------------------
def test_arguments_are_checked_as_onnxruntime_checks_them():
    for eng in (ort_ref, ort):
        so = eng.SessionOptions()
        assert not so.has_providers()
        with pytest.raises(ref_capi.InvalidArgument if eng is ort_ref else ort.InvalidArgument,
                           match="one or more OrtEpDevice"):
            so.add_provider_for_devices([], {})
        for bad in ([1], "CPUExecutionProvider"):
            with pytest.raises(TypeError):
                so.add_provider_for_devices(bad, {})
        with pytest.raises(TypeError):
            so.add_provider_for_devices(eng.get_ep_devices()[-1:], {"a": 1})
        with pytest.raises(TypeError):
            so.set_provider_selection_policy(3)
        with pytest.raises(TypeError):
            so.set_provider_selection_policy_delegate(5)
        assert not so.has_providers(), eng
        so.add_provider_for_devices(eng.get_ep_devices()[-1:], {})
        assert so.has_providers()


def test_devices_of_two_providers_are_refused(only):
    only(*EVERY)
    devs = ort.get_ep_devices()
    so = ort.SessionOptions()
    with pytest.raises(ort.InvalidArgument, match="same execution provider"):
        so.add_provider_for_devices(devs[:2], {})


def test_device_options_under_the_users(only):
    ep = _provider("OptsGpuExecutionProvider", GPU, options={"device_id": "3", "mode": "fast"})
    only(ep)
    (dev,) = [d for d in ort.get_ep_devices() if d.ep_name == ep.name]
    assert dev.ep_options == {"device_id": "3", "mode": "fast"}
    so = ort.SessionOptions()
    so.add_provider_for_devices([dev], {"mode": "exact"})
    sess = session(so)
    assert sess.get_providers() == ["OptsGpuExecutionProvider", "CPUExecutionProvider"]
    assert sess.get_provider_options()["OptsGpuExecutionProvider"] == {"device_id": "3",
                                                                      "mode": "exact"}
    assert "added with add_provider_for_devices" in sess.placement_report()
    so = ort.SessionOptions()
    so.add_provider_for_devices([dev], {"nonsense": "1"})
    with pytest.raises(ort.InvalidArgument, match="unknown provider option.*nonsense"):
        session(so)


def test_explicit_devices_keep_their_order_with_added_names(only):
    only(*EVERY)
    devs = {d.ep_name: d for d in ort.get_ep_devices()}
    so = ort.SessionOptions()
    so.add_provider_for_devices([devs["NpuTestExecutionProvider"]], {})
    so.add_provider("TestPluginExecutionProvider", {})
    so.add_provider_for_devices([devs["GpuTestExecutionProvider"]], {})
    assert session(so).get_providers() == ["NpuTestExecutionProvider",
                                           "TestPluginExecutionProvider",
                                           "GpuTestExecutionProvider", "CPUExecutionProvider"]


def test_one_provider_on_two_devices(only):
    class TwoGpus(ort.ExecutionProvider):
        name = "TwoGpusExecutionProvider"
        options = {"devices": ""}
        kernels = GpuEP.kernels
        hw = [ort.OrtHardwareDevice(GPU, "Contoso", 0xBE57, i, {"name": f"g{i}"},
                                    key=f"two:{i}") for i in range(2)]

        @classmethod
        def supported_devices(cls, devices):
            return [ort.DeviceSupport(d, {"devices": str(d.device_id)}) for d in cls.hw]

    only(TwoGpus)
    devs = [d for d in ort.get_ep_devices() if d.ep_name == TwoGpus.name]
    so = ort.SessionOptions()
    so.add_provider_for_devices(devs, {})
    with pytest.raises(ort.InvalidArgument, match="one device at a time"):
        session(so)
    TwoGpus.options_for_devices = classmethod(
        lambda cls, ss: {"devices": ",".join(s.options["devices"] for s in ss)})
    sess = session(so)
    assert sess.get_provider_options()[TwoGpus.name]["devices"] == "0,1"


def test_a_policy_does_not_request_the_cpu_provider(only):
    # onnxruntime drops its CPU provider from a policy's pick when CPU fallback is disabled
    only()
    for eng in (ort_ref, ort):
        so = eng.SessionOptions()
        so.set_provider_selection_policy(eng.OrtExecutionProviderDevicePolicy.PREFER_CPU)
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        with pytest.raises(Exception, match="(?i)fallback"):
            eng.InferenceSession(mul_model().SerializeToString(), sess_options=so)
    # asked for by device, it is a request, as providers=["CPUExecutionProvider"] is in
    # onnxrt (onnxruntime refuses both as conflicting)
    for providers in (["CPUExecutionProvider"], None):
        so = ort.SessionOptions()
        if providers is None:
            so.add_provider_for_devices(ort.get_ep_devices()[-1:], {})
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        ort.InferenceSession(mul_model().SerializeToString(), sess_options=so,
                             providers=providers)


def test_providers_argument_overrides_the_options(only):
    only(*EVERY)
    so = ort.SessionOptions()
    so.set_provider_selection_policy(P.PREFER_GPU)
    sess = ort.InferenceSession(mul_model().SerializeToString(), sess_options=so,
                                providers=["CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert "chosen by device" not in sess.placement_report()
