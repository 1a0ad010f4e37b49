"""An execution provider that lives in its own package and is found by name through the
``onnxrt.execution_providers`` entry point: it runs Relu and Neg, and counts its calls."""

from __future__ import annotations

import numpy as np

import onnxrt as ort

kernels = ort.KernelRegistry("TestPluginExecutionProvider")
CALLS = {"Relu": 0, "Neg": 0}


@kernels.kernel("Relu", since=6)
def relu(x):
    CALLS["Relu"] += 1
    return np.maximum(x, 0).astype(x.dtype, copy=False)


@kernels.kernel("Neg", since=6)
def neg(x):
    CALLS["Neg"] += 1
    return np.negative(x)


class TestPluginExecutionProvider(ort.ExecutionProvider):
    name = "TestPluginExecutionProvider"
    kernels = kernels
    options = {"scale": "1"}
    ep_vendor = "onnxrt-tests"

    @classmethod
    def supported_devices(cls, devices):
        # runs on the host: takes part in get_ep_devices() and the selection policies
        return [ort.DeviceSupport(d) for d in devices
                if d.type == ort.OrtHardwareDeviceType.CPU]


wrong_kernels = ort.KernelRegistry("WrongReluExecutionProvider")


@wrong_kernels.kernel("Relu", since=6)
def wrong_relu(x):
    # deliberately wrong: leaks a tenth of the negative part, for `onnxrt compare` tests
    return np.where(x > 0, x, 0.1 * x).astype(x.dtype)


class WrongReluExecutionProvider(ort.ExecutionProvider):
    """A provider whose Relu is deliberately wrong."""

    name = "WrongReluExecutionProvider"
    kernels = wrong_kernels
