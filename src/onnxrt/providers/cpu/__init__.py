"""The CPU execution provider: NumPy kernels, BLAS for matrix work.

Every module of this package registers its kernels on ``CPU`` when imported; importing the
package imports them all, so there is no second list of kernels anywhere.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Sequence

from onnxrt.framework.devices import DeviceSupport, OrtHardwareDevice, OrtHardwareDeviceType
from onnxrt.framework.kernel import KernelRegistry
from onnxrt.framework.provider import ExecutionProvider

__all__ = ["CPU", "CPUExecutionProvider"]

CPU = KernelRegistry("CPUExecutionProvider")


class CPUExecutionProvider(ExecutionProvider):
    name = "CPUExecutionProvider"
    kernels = CPU
    # onnxruntime's CPU provider options; the session acts on them (onnxrt/session.py):
    # use_arena as SessionOptions.enable_cpu_mem_arena, arena_extend_strategy on the heap
    options = {"use_arena": "1", "arena_extend_strategy": "kNextPowerOfTwo"}

    def __init__(self, **options: object) -> None:
        super().__init__(**options)
        self._given = set(options) & set(self.options)

    def get_provider_options(self) -> dict[str, str]:
        """Only the options given (onnxruntime reports none for its CPU provider)."""
        return {k: v for k, v in super().get_provider_options().items() if k in self._given}
    max_graph_optimization_level = 99
    ep_vendor = "onnxrt"

    @classmethod
    def supported_devices(cls, devices: Sequence[OrtHardwareDevice]) -> list[DeviceSupport]:
        return [DeviceSupport(d) for d in devices if d.type == OrtHardwareDeviceType.CPU]


def _import_kernels() -> None:
    for mod in pkgutil.walk_packages(__path__, prefix=__name__ + "."):
        importlib.import_module(mod.name)


_import_kernels()
