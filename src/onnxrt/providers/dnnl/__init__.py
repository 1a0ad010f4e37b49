"""The oneDNN (DNNL) execution provider (``pip install onnxrt[dnnl]``).

Importing this package never loads libdnnl: ``DnnlExecutionProvider.unavailable_reason()``
says why it cannot run where the library is missing.
"""

from __future__ import annotations

from onnxrt.providers.dnnl.provider import DnnlExecutionProvider

__all__ = ["DnnlExecutionProvider"]
