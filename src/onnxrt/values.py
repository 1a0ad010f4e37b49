"""OrtValue, NodeArg, ModelMetadata and IOBinding."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx

from onnxrt.errors import InvalidArgument
from onnxrt.framework.allocators import OrtDevice
from onnxrt.framework.device import Device
from onnxrt.framework.ortvalue import (OrtValue, _dtype_of, _resolve_device, _to_host_array,
                                       array_at, strings_to_objects, value_type_string)
from onnxrt.ir.dtypes import type_string

__all__ = ["OrtValue", "NodeArg", "ModelMetadata", "IOBinding", "SessionIOBinding",
           "OrtValueVector", "value_type_string", "OrtDevice", "strings_to_objects"]


class NodeArg:
    """An input or output of a model: name, type string and shape (ints, dim names, None)."""

    def __init__(self, name: str, type: str, shape: list[Any]) -> None:  # noqa: A002
        self.name = name
        self.type = type
        self.shape = shape

    @classmethod
    def from_value_info(cls, name: str, tp: onnx.TypeProto | None) -> "NodeArg":
        shape: list[Any] = []
        if tp is not None:
            t = tp
            while t.WhichOneof("value") == "optional_type":
                t = t.optional_type.elem_type
            if t.WhichOneof("value") in ("tensor_type", "sparse_tensor_type"):
                tt = t.tensor_type if t.HasField("tensor_type") else t.sparse_tensor_type
                if tt.HasField("shape"):
                    for d in tt.shape.dim:
                        if d.HasField("dim_value") and d.dim_value >= 0:
                            shape.append(int(d.dim_value))
                        elif d.HasField("dim_param"):
                            shape.append(d.dim_param)
                        else:
                            shape.append(None)
                else:
                    shape = None  # type: ignore[assignment]
        return cls(name, type_string(tp), shape)

    def __repr__(self) -> str:
        return f"NodeArg(name='{self.name}', type='{self.type}', shape={self.shape})"

    __str__ = __repr__


class ModelMetadata:
    def __init__(self, model: onnx.ModelProto) -> None:
        self.producer_name = model.producer_name
        self.graph_name = model.graph.name
        self.domain = model.domain
        self.description = model.doc_string
        self.graph_description = model.graph.doc_string
        # onnxruntime reports INT64_MAX when the model does not set a version
        self.version = (int(model.model_version) if model.HasField("model_version")
                        else 2**63 - 1)
        self.custom_metadata_map = {p.key: p.value for p in model.metadata_props}

    def __repr__(self) -> str:
        return (f"ModelMetadata(producer_name={self.producer_name!r}, "
                f"graph_name={self.graph_name!r}, version={self.version})")


class OrtValueVector(list):
    """A list of OrtValues, as onnxruntime's C layer returns from runs and bindings."""

    def push_back(self, value: OrtValue) -> None:
        if not isinstance(value, OrtValue):
            raise InvalidArgument(f"OrtValueVector holds OrtValues, not {type(value).__name__}")
        self.append(value)

    def reserve(self, n: int) -> None:
        """A capacity hint in onnxruntime; a Python list grows as needed."""

    def element_type_at(self, index: int) -> int:
        return self[index].element_type()

    def dlpack_at(self, index: int) -> Any:
        return self[index].to_dlpack()


class IOBinding:
    """Inputs and outputs bound ahead of a run (onnxruntime.IOBinding).

    Devices are given as a name and an id, or as an OrtDevice; buffers as NumPy arrays,
    OrtValues, device tensors, or raw host pointers (``ortvalue.data_ptr()``, a torch tensor's
    ``data_ptr()``), which are read and written in place, as onnxruntime does: the caller
    keeps that memory alive.
    """

    def __init__(self, session: Any) -> None:
        self._session = getattr(session, "_session", session)
        self._inputs: dict[str, OrtValue] = {}
        self._outputs: dict[str, tuple[Device, OrtValue | None]] = {}
        self._output_order: list[str] = []
        self._results: list[OrtValue] = []

    def bind_cpu_input(self, name: str, arr_on_cpu: Any) -> None:
        self._inputs[name] = OrtValue(_to_host_array(arr_on_cpu))

    def bind_input(self, name: str, device_type: Any, device_id: Any, element_type: Any,
                   shape: Any = None, buffer_ptr: Any = None) -> None:
        if isinstance(device_type, OrtDevice):  # onnxruntime's C form: no device_id
            device_type, device_id, element_type, shape, buffer_ptr = (
                device_type, 0, device_id, element_type, shape)
        dev = _resolve_device(device_type, device_id)
        if isinstance(buffer_ptr, OrtValue):
            self._inputs[name] = buffer_ptr
            return
        if isinstance(buffer_ptr, (int, np.integer)) and not isinstance(buffer_ptr, bool):
            if not dev.is_host:
                raise InvalidArgument(f"bind_input('{name}'): a raw pointer on {dev} cannot be "
                                      f"read by onnxrt; bind an OrtValue or a device tensor")
            self._inputs[name] = OrtValue(array_at(int(buffer_ptr), element_type, shape))
            return
        arr = np.asarray(buffer_ptr, dtype=_dtype_of(element_type)).reshape(tuple(shape))
        self._inputs[name] = OrtValue.ortvalue_from_numpy(arr, dev.type, dev.id)

    def bind_ortvalue_input(self, name: str, ortvalue: OrtValue) -> None:
        self._inputs[name] = ortvalue

    def synchronize_inputs(self) -> None:
        """Copies finish before a run returns in onnxrt: nothing to wait for."""

    def bind_output(self, name: str, device_type: Any = "cpu", device_id: Any = 0,
                    element_type: Any = None, shape: Sequence[int] | None = None,
                    buffer_ptr: Any = None) -> None:
        if isinstance(device_type, OrtDevice):  # onnxruntime's C form: no device_id
            device_type, device_id, element_type, shape, buffer_ptr = (
                device_type, 0, device_id if device_id != 0 else None, element_type, shape)
        dev = _resolve_device(device_type, device_id)
        pre = None
        if isinstance(buffer_ptr, OrtValue):
            pre = buffer_ptr
        elif isinstance(buffer_ptr, np.ndarray):
            pre = OrtValue(buffer_ptr, dev)
        elif isinstance(buffer_ptr, (int, np.integer)) and not isinstance(buffer_ptr, bool):
            if not dev.is_host:
                raise InvalidArgument(f"bind_output('{name}'): a raw pointer on {dev} cannot "
                                      f"be written by onnxrt; bind an OrtValue instead")
            if element_type is None or shape is None:
                raise InvalidArgument(f"bind_output('{name}'): a buffer pointer needs its "
                                      f"element_type and shape")
            pre = OrtValue(array_at(int(buffer_ptr), element_type, shape))
        self._bind_out(name, dev, pre)

    def bind_ortvalue_output(self, name: str, ortvalue: OrtValue) -> None:
        self._bind_out(name, ortvalue.device(), ortvalue)

    def _bind_out(self, name: str, dev: Device, pre: OrtValue | None) -> None:
        if name not in self._outputs:
            self._output_order.append(name)
        self._outputs[name] = (dev, pre)

    def synchronize_outputs(self) -> None:
        """Copies finish before a run returns in onnxrt: nothing to wait for."""

    def get_outputs(self) -> list[OrtValue]:
        return OrtValueVector(self._results)

    def get_outputs_as_ortvaluevector(self) -> OrtValueVector:
        return OrtValueVector(self._results)

    def copy_outputs_to_cpu(self) -> list[Any]:
        return [v.numpy() for v in self._results]

    def clear_binding_inputs(self) -> None:
        self._inputs.clear()

    def clear_binding_outputs(self) -> None:
        self._outputs.clear()
        self._output_order.clear()
        self._results = []


class SessionIOBinding(IOBinding):
    """onnxruntime's C-level binding, built on ``session._sess``: the same binding, with
    devices given as OrtDevice objects."""
