"""Copies between host memory and a provider's device memory."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.framework.device import Device

__all__ = ["DataTransfer"]


class DataTransfer:
    """How a provider moves values between the host and its device.

    Subclasses implement ``_to_device`` and ``_to_host``; the counters feed the provider's
    allocation statistics.
    """

    def __init__(self) -> None:
        self.copies_to_device = 0
        self.copies_to_host = 0
        self.bytes_to_device = 0
        self.bytes_to_host = 0

    def to_device(self, value: Any, device: Device) -> Any:
        if isinstance(value, list):
            return [self.to_device(v, device) for v in value]
        if value is None:
            return None
        if not isinstance(value, (np.ndarray, np.generic)):
            return value  # already a device value (an input bound on this device)
        self.copies_to_device += 1
        self.bytes_to_device += int(getattr(value, "nbytes", 0))
        return self._to_device(np.asarray(value), device)

    def to_host(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.to_host(v) for v in value]
        if value is None or isinstance(value, (np.ndarray, np.generic)):
            return value
        out = self._to_host(value)
        self.copies_to_host += 1
        self.bytes_to_host += int(getattr(out, "nbytes", 0))
        return out

    def stats(self) -> dict[str, int]:
        return {"copies_to_device": self.copies_to_device,
                "bytes_to_device": self.bytes_to_device,
                "copies_to_host": self.copies_to_host,
                "bytes_to_host": self.bytes_to_host}

    def from_dlpack(self, data: Any) -> Any:
        """An OrtValue sharing the memory of a DLPack producer (an array or a capsule) that
        this provider's engine can take, or None (then the host reads it through numpy).
        ``OrtValue.from_dlpack`` asks every available provider's transfer in turn."""
        return None

    # -- to implement -------------------------------------------------------------------
    def _to_device(self, array: np.ndarray, device: Device) -> Any:
        raise NotImplementedError

    def _to_host(self, value: Any) -> np.ndarray:
        raise NotImplementedError
