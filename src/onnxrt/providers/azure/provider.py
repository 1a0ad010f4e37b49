"""AzureExecutionProvider: runs onnxruntime-extensions' invoker operators
(``AzureTritonInvoker``, ``AzureTextToText``, ``AzureAudioToText``, ``OpenAIAudioToText``) by
sending their inputs to the endpoint named in the node and returning what it answers."""

from __future__ import annotations

import importlib
from typing import Any, ClassVar

from onnxrt.framework.kernel import KernelRegistry
from onnxrt.framework.provider import ExecutionProvider

__all__ = ["AzureExecutionProvider", "AZURE", "DOMAIN"]

DOMAIN = "com.microsoft.extensions"
AZURE = KernelRegistry("AzureExecutionProvider")

# the modules that register kernels on AZURE (each imports the HTTP client it needs)
_KERNEL_MODULES = ("onnxrt.providers.azure.triton", "onnxrt.providers.azure.curl_ops")


class AzureExecutionProvider(ExecutionProvider):
    """Claims the invoker operators of domain ``com.microsoft.extensions``; every other node
    is declined ("no kernel") and runs on the providers after it, so a hybrid model runs its
    local part on the CPU provider and its remote part here.

    No provider options (onnxruntime's Azure provider keeps its configuration map unread).
    Each request waits at most the node's ``timeout`` attribute (seconds, an onnxrt
    addition) or the run's ``azure.timeout_s`` config entry, 60 s when neither is given.
    """

    name: ClassVar[str] = "AzureExecutionProvider"
    kernels: ClassVar[KernelRegistry | None] = AZURE
    ep_vendor: ClassVar[str] = "onnxrt"
    # the invokers only move host arrays: fusions before them change nothing they claim
    max_graph_optimization_level: ClassVar[int] = 99

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        why = self.unavailable_reason()
        if why:
            raise RuntimeError(why)
        _import_kernels()

    @classmethod
    def unavailable_reason(cls) -> str:
        try:
            importlib.import_module("urllib3")
            importlib.import_module("tritonclient.http")
        except Exception as e:  # ImportError, or a broken install of either
            return (f"the Azure provider's HTTP client cannot be imported ({e}); install it "
                    f"with pip install onnxrt[azure]")
        return ""


def _import_kernels() -> None:
    for mod in _KERNEL_MODULES:
        importlib.import_module(mod)
