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
