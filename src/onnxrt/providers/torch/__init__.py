"""PyTorch-backed execution providers: ``CUDAExecutionProvider``, ``ROCMExecutionProvider``
and ``TorchExecutionProvider`` (torch's CPU device or any torch device).

One registry of kernels written against torch tensors (``registry.TORCH``) serves all three;
it is filled when a provider is created, so importing this package does not import torch.
``ortvalue_from_dlpack`` / ``ortvalue_to_dlpack`` / ``ortvalue_from_torch`` move tensors in
and out of OrtValues without copies.
"""

from __future__ import annotations

from typing import Any

from onnxrt.providers.torch.provider import (CUDAExecutionProvider, ROCMExecutionProvider,
                                             TorchExecutionProvider, TorchProviderBase,
                                             torch_import_error)

__all__ = ["CUDAExecutionProvider", "ROCMExecutionProvider", "TorchExecutionProvider",
           "TorchProviderBase", "torch_import_error", "ortvalue_from_dlpack",
           "ortvalue_to_dlpack", "ortvalue_from_torch"]


def ortvalue_from_dlpack(data: Any, device: str | None = None) -> Any:
    """An OrtValue over any DLPack producer's memory (no copy); see ``convert``."""
    from onnxrt.providers.torch.convert import ortvalue_from_dlpack as f

    return f(data, device)


def ortvalue_to_dlpack(value: Any) -> Any:
    """A DLPack capsule of an OrtValue's tensor (no copy)."""
    from onnxrt.providers.torch.convert import ortvalue_to_dlpack as f

    return f(value)


def ortvalue_from_torch(tensor: Any) -> Any:
    """An OrtValue wrapping a torch tensor where it lives."""
    from onnxrt.providers.torch.convert import ortvalue_from_torch as f

    return f(tensor)
