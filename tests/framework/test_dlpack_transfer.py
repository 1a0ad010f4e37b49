"""OrtValue.from_dlpack asks the available providers' data transfers, not one provider by
name: a third-party provider's own tensors stay on its device, host producers go through
numpy."""

from __future__ import annotations

import numpy as np

import onnxrt as ort
from framework.fake_device import FakeDeviceExecutionProvider, FakeTensor


def test_a_providers_transfer_takes_its_own_tensors():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = ort.OrtValue.from_dlpack(FakeTensor(x))
    assert v.device_name() == FakeDeviceExecutionProvider.device.type
    np.testing.assert_array_equal(v.numpy(), x)


def test_a_host_producer_gives_a_host_value():
    x = np.arange(4, dtype=np.int64)
    v = ort.OrtValue.from_dlpack(x)
    assert v.device_name() == "cpu"
    np.testing.assert_array_equal(v.numpy(), x)
    b = ort.OrtValue.from_dlpack(np.array([0, 1, 2], np.uint8), is_bool_tensor=True)
    assert b.numpy().dtype == np.bool_ and b.numpy().tolist() == [False, True, True]
