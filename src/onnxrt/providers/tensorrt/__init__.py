"""The TensorRT execution provider (``pip install onnxrt[tensorrt]``).

Importing this package never imports tensorrt or torch:
``TensorrtExecutionProvider.unavailable_reason()`` says why it cannot run where the package
or a CUDA GPU is missing. ``Backend`` is the seam between the provider's logic and TensorRT.
"""

from __future__ import annotations

from onnxrt.providers.tensorrt.backend import Backend, BuildRequest, Engine, GpuInfo
from onnxrt.providers.tensorrt.provider import TensorrtExecutionProvider

__all__ = ["TensorrtExecutionProvider", "Backend", "BuildRequest", "Engine", "GpuInfo"]
