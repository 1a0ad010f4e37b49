"""The Open Inference Protocol's tensor datatypes and how they map to ONNX and NumPy."""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from onnxrt.serve.errors import bad_request

__all__ = ["DataType", "DATATYPES", "by_name", "by_onnx_type"]


@dataclass(frozen=True)
class DataType:
    name: str           # the protocol's name: "FP32"
    onnx_type: str      # NodeArg.type: "tensor(float)"
    dtype: np.dtype     # the host array's dtype (object for BYTES: Python str)
    json_kinds: str     # NumPy kinds a JSON list may parse to for this type

    @property
    def itemsize(self) -> int:
        """Bytes per element in the binary form (0 for BYTES: each element has a length)."""
        return 0 if self.name == "BYTES" else self.dtype.itemsize

    @property
    def config_name(self) -> str:
        """The name in a Triton model configuration (TYPE_FP32; BYTES is TYPE_STRING)."""
        return "TYPE_STRING" if self.name == "BYTES" else "TYPE_" + self.name


def _dt(name: str, onnx_type: str, dtype: object, kinds: str) -> DataType:
    return DataType(name, onnx_type, np.dtype(dtype), kinds)  # type: ignore[call-overload]


DATATYPES: tuple[DataType, ...] = (
    _dt("BOOL", "tensor(bool)", np.bool_, "b"),
    _dt("UINT8", "tensor(uint8)", np.uint8, "iu"),
    _dt("UINT16", "tensor(uint16)", np.uint16, "iu"),
    _dt("UINT32", "tensor(uint32)", np.uint32, "iu"),
    _dt("UINT64", "tensor(uint64)", np.uint64, "iu"),
    _dt("INT8", "tensor(int8)", np.int8, "iu"),
    _dt("INT16", "tensor(int16)", np.int16, "iu"),
    _dt("INT32", "tensor(int32)", np.int32, "iu"),
    _dt("INT64", "tensor(int64)", np.int64, "iu"),
    _dt("FP16", "tensor(float16)", np.float16, "iuf"),
    _dt("FP32", "tensor(float)", np.float32, "iuf"),
    _dt("FP64", "tensor(double)", np.float64, "iuf"),
    _dt("BF16", "tensor(bfloat16)", ml_dtypes.bfloat16, "iuf"),
    _dt("BYTES", "tensor(string)", object, "U"),
)
_BY_NAME = {d.name: d for d in DATATYPES}
_BY_ONNX = {d.onnx_type: d for d in DATATYPES}


def by_name(name: object, what: str) -> DataType:
    """The datatype a request names for ``what`` (e.g. "input 'x'"); 400 if unknown."""
    if not isinstance(name, str) or name not in _BY_NAME:
        raise bad_request(f"{what}: unknown datatype {name!r}; the protocol's datatypes are "
                          f"{', '.join(_BY_NAME)}")
    return _BY_NAME[name]


def by_onnx_type(onnx_type: str) -> DataType | None:
    """The datatype that carries an ONNX type string; None where the protocol has none
    (sequences, maps, optionals, complex, float8, int4...)."""
    return _BY_ONNX.get(onnx_type)
