"""LoRA adapters in onnxruntime's ``.onnx_adapter`` format (AdapterFormat, LoraAdapter).

An adapter file is a FlatBuffer (file identifier ``TORT``): format, adapter and model
versions, and named parameters (dims, ONNX element type, raw little-endian bytes). A run
given ``RunOptions.add_active_adapter(adapter)`` feeds each parameter in place of the model
input or overridable initializer of the same name, so the adapter's weights replace the
model's for that run only. Reading and writing need the ``flatbuffers`` package
(``pip install onnxrt[lora]``; onnxruntime depends on it too).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from onnxrt.errors import InvalidArgument, NoSuchFile
from onnxrt.ir.dtypes import np_dtype, onnx_elem_type

__all__ = ["AdapterFormat", "LoraAdapter", "FORMAT_VERSION"]

FORMAT_VERSION = 1
_IDENT = b"TORT"
# vtable slots (4 + 2 * field index) of the two tables of the schema
_A_FORMAT, _A_ADAPTER, _A_MODEL, _A_PARAMS = 4, 6, 8, 10
_P_NAME, _P_DIMS, _P_TYPE, _P_RAW = 4, 6, 8, 10


def _flatbuffers() -> Any:
    try:
        import flatbuffers
    except ImportError:
        raise ImportError("LoRA adapter files need the flatbuffers package: "
                          "pip install onnxrt[lora]") from None
    return flatbuffers


def _ortvalue(arr: np.ndarray) -> Any:
    from onnxrt.values import OrtValue

    return OrtValue(arr)


def _as_array(v: Any, name: str) -> np.ndarray:
    from onnxrt.values import OrtValue

    arr = v.numpy() if isinstance(v, OrtValue) else np.asarray(v)
    if not isinstance(arr, np.ndarray) or arr.dtype == object:
        raise InvalidArgument(f"adapter parameter {name!r} must be a numeric tensor")
    return arr


def parse_adapter(data: bytes, where: str) -> tuple[int, int, int, dict[str, np.ndarray]]:
    """(format_version, adapter_version, model_version, parameters) of an adapter file."""
    fb = _flatbuffers()
    from flatbuffers import number_types as nt
    from flatbuffers.table import Table

    if len(data) < 8 or data[4:8] != _IDENT:
        raise InvalidArgument(f"{where} is not an onnxruntime adapter file (no 'TORT' "
                              f"identifier)")
    buf = bytearray(data)
    try:
        root = Table(buf, fb.util.encode.Get(fb.packer.uoffset, buf, 0))

        def scalar(t: Table, slot: int) -> int:
            o = t.Offset(slot)
            return int(t.Get(nt.Int32Flags, o + t.Pos)) if o else 0

        params: dict[str, np.ndarray] = {}
        o = root.Offset(_A_PARAMS)
        count = root.VectorLen(o) if o else 0
        start = root.Vector(o) if o else 0
        for i in range(count):
            p = Table(buf, root.Indirect(start + 4 * i))
            on = p.Offset(_P_NAME)
            name = p.String(on + p.Pos).decode() if on else ""
            od = p.Offset(_P_DIMS)
            dims = [int(d) for d in p.GetVectorAsNumpy(nt.Int64Flags, od)] if od else []
            dtype = np_dtype(scalar(p, _P_TYPE))
            orw = p.Offset(_P_RAW)
            raw = bytes(p.GetVectorAsNumpy(nt.Uint8Flags, orw)) if orw else b""
            need = int(np.prod(dims)) * dtype.itemsize if dims else dtype.itemsize
            if len(raw) != need:
                raise InvalidArgument(f"{where}: parameter {name!r} has {len(raw)} bytes of "
                                      f"data, its dims {dims} and type need {need}")
            params[name] = np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(
                dtype).reshape(dims)
        return scalar(root, _A_FORMAT), scalar(root, _A_ADAPTER), scalar(root, _A_MODEL), \
            params
    except (IndexError, ValueError, TypeError) as e:
        raise InvalidArgument(f"{where}: malformed adapter file ({e})") from None


def build_adapter(adapter_version: int, model_version: int,
                  params: dict[str, np.ndarray]) -> bytes:
    fb = _flatbuffers()
    b = fb.Builder(1024)
    offsets = []
    for name, arr in params.items():
        arr = np.ascontiguousarray(arr)
        raw = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        name_off = b.CreateString(name)
        dims_off = b.CreateNumpyVector(np.asarray(arr.shape, dtype=np.int64))
        # raw_data is declared force_align 8: start the vector on an 8-byte boundary
        b.StartVector(1, len(raw), 8)
        b.head -= len(raw)
        b.Bytes[b.head:b.head + len(raw)] = raw
        raw_off = b.EndVector(len(raw))
        b.StartObject(4)
        b.PrependUOffsetTRelativeSlot(0, name_off, 0)
        b.PrependUOffsetTRelativeSlot(1, dims_off, 0)
        b.PrependInt32Slot(2, onnx_elem_type(arr.dtype), 0)
        b.PrependUOffsetTRelativeSlot(3, raw_off, 0)
        offsets.append(b.EndObject())
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    vec = b.EndVector(len(offsets))
    b.StartObject(4)
    b.PrependInt32Slot(0, FORMAT_VERSION, 0)
    b.PrependInt32Slot(1, int(adapter_version), 0)
    b.PrependInt32Slot(2, int(model_version), 0)
    b.PrependUOffsetTRelativeSlot(3, vec, 0)
    b.Finish(b.EndObject(), file_identifier=_IDENT)
    return bytes(b.Output())


def _read_file(file_path: Any) -> bytes:
    path = os.fspath(file_path)
    if not os.path.isfile(path):
        raise NoSuchFile(f"adapter file {path} does not exist")
    with open(path, "rb") as f:
        return f.read()


class AdapterFormat:
    """Writes and reads adapter files (onnxruntime.AdapterFormat)."""

    def __init__(self, adapter: Any = None) -> None:
        self._format_version = FORMAT_VERSION
        self._adapter_version = 0
        self._model_version = 0
        self._params: dict[str, np.ndarray] = {}
        if isinstance(adapter, LoraAdapter):
            self._params = dict(adapter._params)
            self._adapter_version = adapter._adapter_version
            self._model_version = adapter._model_version

    @staticmethod
    def read_adapter(file_path: Any) -> "AdapterFormat":
        fmt = AdapterFormat()
        path = os.fspath(file_path)
        (fmt._format_version, fmt._adapter_version, fmt._model_version,
         fmt._params) = parse_adapter(_read_file(path), path)
        return fmt

    def export_adapter(self, file_path: Any) -> None:
        data = build_adapter(self._adapter_version, self._model_version, self._params)
        with open(os.fspath(file_path), "wb") as f:
            f.write(data)

    def get_format_version(self) -> int:
        return self._format_version

    def set_adapter_version(self, adapter_version: int) -> None:
        self._adapter_version = int(adapter_version)

    def get_adapter_version(self) -> int:
        return self._adapter_version

    def set_model_version(self, model_version: int) -> None:
        self._model_version = int(model_version)

    def get_model_version(self) -> int:
        return self._model_version

    def set_parameters(self, params: dict[str, Any]) -> None:
        self._params = {str(k): _as_array(v, str(k)) for k, v in params.items()}

    def get_parameters(self) -> dict[str, Any]:
        return {k: _ortvalue(v) for k, v in self._params.items()}


class LoraAdapter:
    """An adapter loaded for runs (onnxruntime.LoraAdapter): ``Load(path)`` then
    ``RunOptions.add_active_adapter(adapter)``."""

    def __init__(self) -> None:
        self._params: dict[str, np.ndarray] = {}
        self._adapter_version = 0
        self._model_version = 0
        self._loaded = False

    def Load(self, file_path: Any) -> None:  # noqa: N802 - onnxruntime's name
        path = os.fspath(file_path)
        _, self._adapter_version, self._model_version, params = parse_adapter(
            _read_file(path), path)
        self._params = params
        self._loaded = True

    load = Load

    @staticmethod
    def create_from_bytes(data: bytes) -> "LoraAdapter":
        ad = LoraAdapter()
        _, ad._adapter_version, ad._model_version, ad._params = parse_adapter(
            bytes(data), "<bytes>")
        ad._loaded = True
        return ad

    def parameters(self) -> dict[str, np.ndarray]:
        """The parameters a run feeds, by name (read-only arrays)."""
        if not self._loaded:
            raise InvalidArgument("the LoraAdapter was not loaded: call Load(path) first")
        out = {}
        for k, v in self._params.items():
            ro = v.view()
            ro.flags.writeable = False
            out[k] = ro
        return out
