"""The Azure execution provider (``pip install onnxrt[azure]``): kernels for
onnxruntime-extensions' remote-inference operators (domain ``com.microsoft.extensions``),
which send a node's inputs to an endpoint and return its answer as the node's outputs.

Importing this package never imports the HTTP libraries: the kernels' modules are imported
when the provider's registry is first asked for a kernel.
"""

from __future__ import annotations

from onnxrt.providers.azure.provider import AZURE, AzureExecutionProvider

__all__ = ["AzureExecutionProvider", "AZURE"]
