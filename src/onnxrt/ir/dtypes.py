"""Element types: ONNX enum <-> numpy dtype (ml_dtypes for the narrow floats and ints) <-> names."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto
from onnx.helper import tensor_dtype_to_np_dtype

__all__ = [
    "np_dtype",
    "onnx_elem_type",
    "elem_type_name",
    "type_string",
    "STRING_DTYPE",
]

STRING_DTYPE = np.dtype(object)

_NAME_OVERRIDES = {TensorProto.STRING: "string"}


def _build_tables() -> tuple[dict[int, np.dtype], dict[np.dtype, int], dict[int, str]]:
    to_np: dict[int, np.dtype] = {}
    to_onnx: dict[np.dtype, int] = {}
    names: dict[int, str] = {}
    for name, code in TensorProto.DataType.items():
        if code == TensorProto.UNDEFINED:
            continue
        names[code] = _NAME_OVERRIDES.get(code, name.lower())
        try:
            dt = np.dtype(tensor_dtype_to_np_dtype(code))
        except Exception:  # an element type this onnx/ml_dtypes pair cannot express
            continue
        to_np[code] = dt
        to_onnx.setdefault(dt, code)
    to_onnx[np.dtype(object)] = TensorProto.STRING
    return to_np, to_onnx, names


_TO_NP, _TO_ONNX, _NAMES = _build_tables()


def np_dtype(elem_type: int) -> np.dtype:
    """The numpy dtype that holds ONNX element type ``elem_type``."""
    try:
        return _TO_NP[elem_type]
    except KeyError:
        from onnxrt.errors import NotImplemented as _NI

        raise _NI(f"element type {elem_type_name(elem_type)} has no numpy representation") from None


def onnx_elem_type(dtype: np.dtype | type) -> int:
    """The ONNX element type of a numpy dtype (unicode and bytes strings map to STRING)."""
    dt = np.dtype(dtype)
    if dt.kind in "USO":
        return TensorProto.STRING
    try:
        return _TO_ONNX[dt]
    except KeyError:
        from onnxrt.errors import NotImplemented as _NI

        raise _NI(f"numpy dtype {dt} has no ONNX element type") from None


def elem_type_name(elem_type: int) -> str:
    """onnxruntime's spelling of an element type: float, int64, string, bfloat16..."""
    return _NAMES.get(elem_type, f"undefined({elem_type})")


def type_string(tp: onnx.TypeProto | None) -> str:
    """onnxruntime's type string: tensor(float), seq(tensor(int64)), map(string,tensor(float))..."""
    if tp is None:
        return "unknown"
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        return f"tensor({elem_type_name(tp.tensor_type.elem_type)})"
    if which == "sparse_tensor_type":
        return f"sparse_tensor({elem_type_name(tp.sparse_tensor_type.elem_type)})"
    if which == "sequence_type":
        return f"seq({type_string(tp.sequence_type.elem_type)})"
    if which == "map_type":
        key = elem_type_name(tp.map_type.key_type)
        return f"map({key},{type_string(tp.map_type.value_type)})"
    if which == "optional_type":
        return f"optional({type_string(tp.optional_type.elem_type)})"
    return "unknown"
