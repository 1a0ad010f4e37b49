"""A provider on a simulated second device, for the framework tests.

Its values are ``FakeTensor`` objects that refuse to be read as numpy arrays, so any missing
copy between the host and the device fails loudly instead of silently working.
"""

from __future__ import annotations

import numpy as np

import onnxrt as ort


class FakeTensor:
    __slots__ = ("data", "shape", "dtype")

    def __init__(self, data: np.ndarray) -> None:
        self.data = np.array(data)
        self.shape = self.data.shape
        self.dtype = self.data.dtype

    def __array__(self, *a, **k):
        raise TypeError("FakeTensor lives on the fake device: it must be copied to the host")

    def __repr__(self) -> str:
        return f"FakeTensor({self.shape}, {self.dtype})"


class FakeTransfer(ort.DataTransfer):
    def _to_device(self, array, device):
        return FakeTensor(array)

    def _to_host(self, value):
        if not isinstance(value, FakeTensor):
            raise TypeError(f"expected a FakeTensor, got {type(value).__name__}")
        return value.data.copy()

    def from_dlpack(self, data):
        # this device's own tensors stay on it; any other producer is not this device's
        if isinstance(data, FakeTensor):
            return ort.OrtValue(data, FakeDeviceExecutionProvider.device, self.to_host)
        return None


fake_kernels = ort.KernelRegistry("FakeDeviceExecutionProvider")
CALLS: dict[str, int] = {}


def _dev(fn):
    def kernel(*args, **attrs):
        for a in args:
            if a is not None and not isinstance(a, FakeTensor):
                raise TypeError(f"fake-device kernel got a host {type(a).__name__}")
        CALLS[fn.__name__] = CALLS.get(fn.__name__, 0) + 1
        res = fn(*[a.data if a is not None else None for a in args], **attrs)
        return FakeTensor(np.asarray(res))
    kernel.__name__ = fn.__name__
    return kernel


@fake_kernels.kernel("Relu", since=6)
@_dev
def relu(x):
    return np.maximum(x, 0).astype(x.dtype)


@fake_kernels.kernel("Add", since=7)
@_dev
def add(a, b):
    return a + b


@fake_kernels.kernel("Mul", since=7)
@_dev
def mul(a, b):
    return a * b


@fake_kernels.kernel("MatMul", since=9)
@_dev
def matmul(a, b):
    return a @ b


def _reshape(x, shape, *, allowzero=0):
    # the shape arrives as a host array: the kernel declares input 1 a host input
    if not isinstance(shape, np.ndarray):
        raise TypeError(f"fake Reshape wants a host shape, got {type(shape).__name__}")
    if not isinstance(x, FakeTensor):
        raise TypeError("fake Reshape got a host value")
    dims = [x.shape[i] if (s == 0 and not allowzero) else int(s) for i, s in enumerate(shape)]
    return FakeTensor(x.data.reshape(dims))


fake_kernels.register("Reshape", _reshape, since=14, host_inputs=(1,))


class FakeDeviceExecutionProvider(ort.ExecutionProvider):
    name = "FakeDeviceExecutionProvider"
    kernels = fake_kernels
    device = ort.Device("fake", 0)
    options = {"flavour": "plain"}

    def __init__(self, **options):
        super().__init__(**options)
        self.started = 0
        self.ended = 0

    def data_transfer(self):
        return FakeTransfer()

    def on_run_start(self, run_options):
        self.started += 1

    def on_run_end(self, run_options):
        self.ended += 1


ort.register_execution_provider(FakeDeviceExecutionProvider)


class MissingDeviceExecutionProvider(ort.ExecutionProvider):
    """Known but never available: its device is absent."""

    name = "MissingDeviceExecutionProvider"
    kernels = fake_kernels

    @classmethod
    def unavailable_reason(cls) -> str:
        return "no missing-device hardware is present"


ort.register_execution_provider(MissingDeviceExecutionProvider)
