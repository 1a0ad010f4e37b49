"""OrtValue: a value as the API hands it over, a host array or a device engine's tensor
with the provider's way back to the host. In the bottom layer because data transfers and
providers make OrtValues (``values.py`` exports it with the rest of the value API)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from onnxrt.errors import InvalidArgument
from onnxrt.framework.allocators import OrtDevice
from onnxrt.framework.device import CPU_DEVICE, Device
from onnxrt.ir.dtypes import elem_type_name, np_dtype, onnx_elem_type

__all__ = ["OrtValue", "strings_to_objects", "value_type_string", "array_at"]


def strings_to_objects(arr: np.ndarray) -> np.ndarray:
    """A string tensor as ONNX holds it: an object array of ``str``. NumPy's fixed-width
    unicode (U), bytes (S) and raw (V, ``np.void``) arrays are converted, bytes decoded as
    UTF-8 (as onnxruntime reads them)."""
    kind = arr.dtype.kind
    if kind == "V" and arr.dtype.type is not np.void:
        return arr  # ml_dtypes' bfloat16, float8... are kind V too
    if kind == "U":
        return arr.astype(object)
    if kind in "SV":
        flat = [bytes(b).rstrip(b"\0") if kind == "V" else bytes(b) for b in arr.reshape(-1)]
        try:
            out = [b.decode("utf-8") for b in flat]
        except UnicodeDecodeError as e:
            raise InvalidArgument(f"a bytes string tensor must hold UTF-8 text: {e}") from None
        res = np.empty(len(out), dtype=object)
        res[:] = out
        return res.reshape(arr.shape)
    return arr


def _to_host_array(x: Any) -> np.ndarray:
    return strings_to_objects(np.asarray(x))


def _resolve_device(device_type: Any, device_id: int) -> Device:
    """onnxrt's Device for onnxruntime's two spellings: a name and an id, or an OrtDevice."""
    if isinstance(device_type, OrtDevice):
        return device_type.to_device()
    return Device(str(device_type), int(device_id))


def _dtype_of(element_type: Any) -> np.dtype:
    """A NumPy dtype from a NumPy type or an ONNX element type number."""
    if isinstance(element_type, (int, np.integer)) and not isinstance(element_type, bool):
        return np_dtype(int(element_type))
    return np.dtype(element_type)


def array_at(ptr: int, element_type: Any, shape: Sequence[int]) -> np.ndarray:
    """A NumPy view of host memory at ``ptr`` (onnxruntime's raw-pointer bindings: the caller
    owns the memory and keeps it alive, as with onnxruntime)."""
    import ctypes

    dt = _dtype_of(element_type)
    dims = tuple(int(d) for d in shape)
    n = int(np.prod(dims)) if dims else 1
    if n == 0:
        return np.zeros(dims, dtype=dt)
    if not ptr:
        raise InvalidArgument("a null buffer pointer was bound")
    buf = (ctypes.c_char * (n * dt.itemsize)).from_address(int(ptr))
    return np.frombuffer(buf, dtype=dt).reshape(dims)


def value_type_string(v: Any) -> str:
    """onnxruntime's type string for a runtime value."""
    if isinstance(v, OrtValue):
        return v.data_type()
    if isinstance(v, list):
        inner = value_type_string(v[0]) if v else "tensor(float)"
        return f"seq({inner})"
    if isinstance(v, dict):
        if not v:
            return "map(int64,tensor(float))"
        k = next(iter(v))
        key = "string" if isinstance(k, str) else "int64"
        val = next(iter(v.values()))
        return f"map({key},{value_type_string(np.asarray(val))})"
    arr = np.asarray(v)
    return f"tensor({elem_type_name(onnx_elem_type(arr.dtype))})"


class OrtValue:
    """A value and the device it lives on. On the host the payload is a numpy array, a list
    (sequence), a dict (map) or None (empty optional); on other devices it is the device
    engine's tensor, and reading it as numpy copies it to the host through its provider."""

    __slots__ = ("_value", "_device", "_to_host")

    def __init__(self, value: Any, device: Device = CPU_DEVICE, to_host: Any = None) -> None:
        self._value = value
        self._device = device
        self._to_host = to_host

    # -- construction, as onnxruntime spells it -------------------------------------------
    @staticmethod
    def ortvalue_from_numpy(numpy_obj: Any, device_type: Any = "cpu", device_id: int = 0,
                            vendor_id: int = -1) -> "OrtValue":
        """An OrtValue holding ``numpy_obj`` (shared on the host, copied to a device).
        ``device_type`` is a name (``"cpu"``, ``"cuda"``) or an OrtDevice."""
        dev = _resolve_device(device_type, device_id)
        arr = _to_host_array(numpy_obj)
        if dev.is_host:
            return OrtValue(arr, dev)
        from onnxrt.framework.registry import transfer_to_device

        return transfer_to_device(arr, dev)

    @staticmethod
    def ortvalue_from_shape_and_type(shape: Sequence[int], element_type: Any,
                                     device_type: Any = "cpu", device_id: int = 0,
                                     vendor_id: int = -1) -> "OrtValue":
        dt = _dtype_of(element_type)
        return OrtValue.ortvalue_from_numpy(np.zeros(tuple(shape), dtype=dt), device_type,
                                            device_id)

    @staticmethod
    def ort_value_from_sparse_tensor(sparse_tensor: Any) -> "OrtValue":
        from onnxrt.framework.sparse import SparseTensor

        if not isinstance(sparse_tensor, SparseTensor):
            raise InvalidArgument(f"expected a SparseTensor, got {type(sparse_tensor).__name__}")
        return OrtValue(sparse_tensor, sparse_tensor.device())

    def as_sparse_tensor(self) -> Any:
        """The SparseTensor this value holds."""
        if not self.is_sparse_tensor():
            raise InvalidArgument(f"this OrtValue holds {self.data_type()}, not a sparse tensor")
        return self._value

    def is_sparse_tensor(self) -> bool:
        from onnxrt.framework.sparse import SparseTensor

        return isinstance(self._value, SparseTensor)

    # onnxruntime's Python objects wrap a C object reached through these; onnxrt has one
    @property
    def _ortvalue(self) -> "OrtValue":
        return self

    def _get_c_value(self) -> "OrtValue":
        return self

    @staticmethod
    def ortvalue_from_numpy_with_onnx_type(data: Any, onnx_element_type: int) -> "OrtValue":
        arr = np.asarray(data)
        want = np_dtype(onnx_element_type)
        if arr.dtype != want:
            arr = arr.view(want) if arr.dtype.itemsize == want.itemsize else arr.astype(want)
        return OrtValue(arr)

    @staticmethod
    def from_dlpack(data: Any, is_bool_tensor: bool = False) -> "OrtValue":
        """An OrtValue sharing the memory of any DLPack producer (a torch, cupy or jax array,
        or a capsule) through the first available provider whose data transfer takes it
        (the Torch provider takes device tensors and capsules), else numpy's."""
        from onnxrt.framework.registry import value_from_dlpack

        v = value_from_dlpack(data)
        if v is None:
            arr = np.from_dlpack(data)
            return OrtValue(arr.astype(bool) if is_bool_tensor else arr)
        if is_bool_tensor and v.device().is_host:
            v = OrtValue(np.asarray(v.value()).astype(bool))
        return v

    def to_dlpack(self) -> Any:
        """A DLPack capsule of this value's tensor, without a copy."""
        v = self._value
        if isinstance(v, np.ndarray):
            return v.__dlpack__()
        dl = getattr(v, "__dlpack__", None)
        if dl is None:
            raise InvalidArgument(f"a {type(v).__name__} cannot be exported through DLPack")
        return dl()

    def __dlpack__(self, stream: Any = None) -> Any:
        v = self._value
        return v.__dlpack__() if stream is None else v.__dlpack__(stream=stream)

    def __dlpack_device__(self) -> Any:
        return self._value.__dlpack_device__()

    # -- inspection -----------------------------------------------------------------------
    def numpy(self) -> Any:
        v = self._value
        if not self._device.is_host:
            v = self._to_host(v) if self._to_host is not None else v
        if isinstance(v, (np.ndarray, np.generic)):
            return np.asarray(v)
        return v

    def value(self) -> Any:
        """The raw payload (device tensor on a device)."""
        return self._value

    def is_tensor(self) -> bool:
        return (not isinstance(self._value, (list, dict)) and self._value is not None
                and not self.is_sparse_tensor())

    def tensor_size_in_bytes(self) -> int:
        """Bytes of the tensor's data (element size x element count; strings: the UTF-8
        bytes of every element)."""
        if not self.is_tensor():
            raise InvalidArgument(f"tensor_size_in_bytes() needs a tensor, this value holds "
                                  f"{self.data_type()}")
        v = self._value
        if isinstance(v, np.ndarray) and v.dtype == object:
            return int(sum(len(str(x).encode("utf-8")) for x in v.reshape(-1)))
        nbytes = getattr(v, "nbytes", None)
        if nbytes is not None:
            return int(nbytes)
        return int(v.numel() * v.element_size())  # a device engine's tensor (torch)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """``np.asarray(ortvalue)``: the tensor's data (copied from a device)."""
        if not self.is_tensor():
            raise InvalidArgument(f"np.asarray() needs a tensor, this OrtValue holds "
                                  f"{self.data_type()}")
        arr = np.asarray(self.numpy())
        if dtype is not None and arr.dtype != dtype:
            return arr.astype(dtype)
        return arr.copy() if copy else arr

    def is_tensor_sequence(self) -> bool:
        return isinstance(self._value, list)

    def has_value(self) -> bool:
        return self._value is not None

    def shape(self) -> list[int]:
        return list(getattr(self._value, "shape", ()))

    def element_type(self) -> int:
        dt = getattr(self._value, "dtype", None)
        if dt is None:
            raise InvalidArgument("element_type() is only defined for tensors")
        try:
            return onnx_elem_type(np.dtype(dt))
        except TypeError:
            return onnx_elem_type(np.dtype(str(dt).replace("torch.", "")))

    def data_type(self) -> str:
        if self.is_sparse_tensor():
            return self._value.data_type()
        if self.is_tensor():
            return f"tensor({elem_type_name(self.element_type())})"
        return value_type_string(self._value)

    def device_name(self) -> str:
        return self._device.type

    def device(self) -> Device:
        return self._device

    def data_ptr(self) -> int:
        v = self._value
        if isinstance(v, np.ndarray):
            return int(v.__array_interface__["data"][0])
        ptr = getattr(v, "data_ptr", None)
        return int(ptr()) if callable(ptr) else 0

    def update_inplace(self, np_arr: Any) -> None:
        arr = np.asarray(np_arr)
        if not self._device.is_host:
            from onnxrt.framework.registry import transfer_to_device

            self._value = transfer_to_device(arr, self._device)._value
            return
        if arr.shape != self._value.shape:
            raise InvalidArgument(f"update_inplace: shape {arr.shape} differs from the "
                                  f"value's {self._value.shape}")
        np.copyto(self._value, arr, casting="same_kind")

    def __repr__(self) -> str:
        return f"OrtValue({self.data_type()}, shape={self.shape()}, device={self._device})"
