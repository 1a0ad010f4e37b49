"""The TVM execution provider (``pip install onnxrt[tvm]``): groups of nodes compiled for the
host CPU by Apache TVM (its Relax ONNX frontend, LLVM code generation), cached on disk.

Importing this package never imports tvm: ``TVMExecutionProvider.unavailable_reason()`` says
why it cannot run where apache-tvm is missing.
"""

from __future__ import annotations

from onnxrt.providers.tvm.provider import TVMExecutionProvider

__all__ = ["TVMExecutionProvider"]
