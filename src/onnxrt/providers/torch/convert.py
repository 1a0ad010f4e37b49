"""numpy <-> torch conversion, the DataTransfer of the torch-backed providers, and DLPack
helpers for OrtValues that wrap torch tensors."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import torch

from onnxrt.framework.device import Device
from onnxrt.framework.transfer import DataTransfer

__all__ = ["to_torch", "to_numpy", "torch_device", "torch_dtype", "numpy_dtype",
           "TorchTransfer", "ortvalue_from_dlpack", "ortvalue_to_dlpack", "ortvalue_from_torch"]

# numpy dtypes torch.from_numpy takes directly
_DIRECT = {np.dtype(t): d for t, d in (
    (np.float16, torch.float16), (np.float32, torch.float32), (np.float64, torch.float64),
    (np.int8, torch.int8), (np.int16, torch.int16), (np.int32, torch.int32),
    (np.int64, torch.int64), (np.uint8, torch.uint8), (np.bool_, torch.bool),
    (np.complex64, torch.complex64), (np.complex128, torch.complex128),
    (np.uint16, torch.uint16), (np.uint32, torch.uint32), (np.uint64, torch.uint64))}
# ml_dtypes types: moved as their bits (a same-width integer view) and re-viewed on arrival
_BITS = {np.dtype(ml_dtypes.bfloat16): (np.int16, torch.int16, torch.bfloat16),
         np.dtype(ml_dtypes.float8_e4m3fn): (np.uint8, torch.uint8, torch.float8_e4m3fn),
         np.dtype(ml_dtypes.float8_e5m2): (np.uint8, torch.uint8, torch.float8_e5m2),
         np.dtype(ml_dtypes.float8_e4m3fnuz): (np.uint8, torch.uint8, torch.float8_e4m3fnuz),
         np.dtype(ml_dtypes.float8_e5m2fnuz): (np.uint8, torch.uint8, torch.float8_e5m2fnuz)}
_TO_NP = {d: t for t, d in _DIRECT.items()}
_BITS_BACK = {td: (np.dtype(nd), torch_int, np.dtype(t))
              for t, (nd, torch_int, td) in _BITS.items()}


def torch_dtype(dt: Any) -> torch.dtype:
    """The torch dtype holding numpy dtype ``dt``."""
    dt = np.dtype(dt)
    d = _DIRECT.get(dt)
    if d is not None:
        return d
    b = _BITS.get(dt)
    if b is not None:
        return b[2]
    raise TypeError(f"torch has no element type for {dt} (strings, int4 and friends stay on "
                    f"the host)")


def numpy_dtype(td: torch.dtype) -> np.dtype:
    """The numpy dtype holding torch dtype ``td``."""
    d = _TO_NP.get(td)
    if d is not None:
        return d
    b = _BITS_BACK.get(td)
    if b is not None:
        return b[2]
    raise TypeError(f"no numpy dtype for {td}")


def torch_device(device: Device) -> torch.device:
    """onnxrt's device -> torch's: ``torch`` is torch's CPU device, ``cuda:N`` a GPU."""
    if device.type in ("torch", "cpu"):
        return torch.device("cpu")
    return torch.device(device.type, device.id)


def to_torch(array: Any, device: torch.device | None = None) -> torch.Tensor:
    """A torch tensor with ``array``'s values (sharing memory on the CPU when it can)."""
    a = np.asarray(array)
    bits = _BITS.get(a.dtype)
    if bits is not None:
        t = _from_numpy(a.view(bits[0])).view(bits[2])
    elif a.dtype in _DIRECT:
        t = _from_numpy(a)
    else:
        raise TypeError(f"a {a.dtype} tensor cannot live on a torch device (no torch element "
                        f"type for it)")
    if device is not None and device.type != "cpu":
        t = t.to(device)
    return t


def _from_numpy(a: np.ndarray) -> torch.Tensor:
    # torch wants writable, non-negatively strided memory; the kernels never write into
    # their inputs, but torch cannot know that, so read-only arrays are copied
    if not a.flags.writeable or any(s < 0 for s in a.strides):
        a = np.array(a)
    return torch.from_numpy(a)


def to_numpy(t: Any) -> np.ndarray:
    """A numpy array with tensor ``t``'s values (shares memory for CPU tensors)."""
    if isinstance(t, np.ndarray):
        return t
    if not isinstance(t, torch.Tensor):
        return np.asarray(t)
    t = t.detach()
    if t.numel() > 1 and 0 in t.stride():  # an expanded view: give the host its own memory
        t = t.contiguous()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.is_conj():
        t = t.resolve_conj()
    back = _BITS_BACK.get(t.dtype)
    if back is not None:
        return t.view(back[1]).numpy().view(back[2])
    return t.numpy()


class TorchTransfer(DataTransfer):
    """Host <-> torch device copies. ``channels_last`` lays 4-D (5-D) values out NHWC
    (NDHWC) on arrival, so cuDNN runs convolutions in that layout (``prefer_nhwc``)."""

    def __init__(self, channels_last: bool = False, pin_memory: bool = False) -> None:
        super().__init__()
        self.channels_last = channels_last
        self.pin_memory = pin_memory

    def _to_device(self, array: np.ndarray, device: Device) -> Any:
        dev = torch_device(device)
        t = to_torch(array)
        if dev.type != "cpu":
            if self.pin_memory and t.numel() * t.element_size() >= 1 << 20:
                t = t.pin_memory().to(dev, non_blocking=True)
            else:
                t = t.to(dev)
        if self.channels_last and t.dim() in (4, 5) and t.is_floating_point():
            t = t.contiguous(memory_format=torch.channels_last if t.dim() == 4
                             else torch.channels_last_3d)
        return t

    def _to_host(self, value: Any) -> np.ndarray:
        return to_numpy(value)

    def from_dlpack(self, data: Any) -> Any:
        """Any DLPack producer through torch (capsules and device memory included); an
        object that is neither a producer nor a capsule is not this transfer's."""
        if not hasattr(data, "__dlpack__") and type(data).__name__ != "PyCapsule":
            return None
        return ortvalue_from_dlpack(data)


# -- OrtValues and DLPack ------------------------------------------------------------------

def ortvalue_from_torch(t: torch.Tensor) -> Any:
    """An OrtValue wrapping torch tensor ``t`` where it lives (no copy): on a GPU as a
    ``cuda:N`` value, on torch's CPU device as a ``torch`` value."""
    from onnxrt.framework.ortvalue import OrtValue

    dev = (Device("cuda", t.device.index or 0) if t.device.type == "cuda"
           else Device("torch", 0))
    return OrtValue(t, dev, to_numpy)


def ortvalue_from_dlpack(data: Any, device: str | None = None) -> Any:
    """An OrtValue from any DLPack producer (a torch/cupy/jax/numpy array or a capsule),
    without copying. Host memory becomes a host (numpy) value unless ``device="torch"``."""
    from onnxrt.framework.ortvalue import OrtValue

    t = torch.from_dlpack(data)
    if t.device.type == "cpu" and device != "torch":
        return OrtValue(to_numpy(t))
    return ortvalue_from_torch(t)


def ortvalue_to_dlpack(value: Any) -> Any:
    """A DLPack capsule of an OrtValue's tensor (no copy; host values through numpy)."""
    v = value.value() if hasattr(value, "value") and callable(value.value) else value
    if isinstance(v, torch.Tensor):
        return v.__dlpack__()
    return to_torch(np.asarray(v)).__dlpack__()
