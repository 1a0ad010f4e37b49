"""The OpenVINO execution provider (``pip install onnxrt[openvino]``).

Importing this package never imports openvino: ``OpenVINOExecutionProvider.
unavailable_reason()`` says why it cannot run where the package or the device is missing.
"""

from __future__ import annotations

from onnxrt.providers.openvino.provider import OpenVINOExecutionProvider

__all__ = ["OpenVINOExecutionProvider"]
