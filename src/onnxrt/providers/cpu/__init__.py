"""The CPU execution provider: NumPy kernels, BLAS for matrix work.

Every module of this package registers its kernels on ``CPU`` when imported; importing the
package imports them all, so there is no second list of kernels anywhere.
"""

from __future__ import annotations

import importlib
import pkgutil

from onnxrt.framework.kernel import KernelRegistry
from onnxrt.framework.provider import ExecutionProvider

__all__ = ["CPU", "CPUExecutionProvider"]

CPU = KernelRegistry("CPUExecutionProvider")


class CPUExecutionProvider(ExecutionProvider):
    name = "CPUExecutionProvider"
    kernels = CPU
    options = {}
    max_graph_optimization_level = 99


def _import_kernels() -> None:
    for mod in pkgutil.walk_packages(__path__, prefix=__name__ + "."):
        importlib.import_module(mod.name)


_import_kernels()
