"""ONNX attributes as plain Python values, with the schema's defaults filled in."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import AttributeProto, numpy_helper

from onnxrt.errors import InvalidGraph

__all__ = ["attribute_value", "tensor_to_array", "sparse_to_dense", "schema_defaults",
           "constant_node_value"]


def tensor_to_array(t: onnx.TensorProto) -> np.ndarray:
    """A TensorProto as a numpy array (strings as an object array of ``str``)."""
    arr = numpy_helper.to_array(t)
    if t.data_type == onnx.TensorProto.STRING:
        flat = [x.decode("utf-8", errors="surrogateescape") if isinstance(x, bytes) else x
                for x in arr.reshape(-1)]
        out = np.empty(len(flat), dtype=object)
        out[:] = flat
        arr = out.reshape(arr.shape)
    return arr


def sparse_to_dense(sp: onnx.SparseTensorProto) -> np.ndarray:
    values = tensor_to_array(sp.values)
    idx = tensor_to_array(sp.indices).astype(np.int64)
    dims = tuple(sp.dims)
    dense = np.zeros(int(np.prod(dims)) if dims else 1, dtype=values.dtype)
    if idx.ndim == 2:  # coordinates, one row per value
        idx = np.ravel_multi_index(tuple(idx.T), dims) if idx.size else idx.reshape(-1)
    dense[idx.reshape(-1)] = values.reshape(-1)
    return dense.reshape(dims)


def _decode(s: bytes) -> str:
    return s.decode("utf-8", errors="surrogateescape")


def attribute_value(a: AttributeProto) -> Any:
    """The value of one attribute: int, float, str, ndarray, GraphProto, TypeProto or lists."""
    t = a.type
    if t == AttributeProto.INT:
        return int(a.i)
    if t == AttributeProto.FLOAT:
        return float(a.f)
    if t == AttributeProto.STRING:
        return _decode(a.s)
    if t == AttributeProto.TENSOR:
        return tensor_to_array(a.t)
    if t == AttributeProto.GRAPH:
        return a.g
    if t == AttributeProto.SPARSE_TENSOR:
        return sparse_to_dense(a.sparse_tensor)
    if t == AttributeProto.TYPE_PROTO:
        return a.tp
    if t == AttributeProto.INTS:
        return [int(x) for x in a.ints]
    if t == AttributeProto.FLOATS:
        return [float(x) for x in a.floats]
    if t == AttributeProto.STRINGS:
        return [_decode(x) for x in a.strings]
    if t == AttributeProto.TENSORS:
        return [tensor_to_array(x) for x in a.tensors]
    if t == AttributeProto.GRAPHS:
        return list(a.graphs)
    if t == AttributeProto.SPARSE_TENSORS:
        return [sparse_to_dense(x) for x in a.sparse_tensors]
    if t == AttributeProto.TYPE_PROTOS:
        return list(a.type_protos)
    # UNDEFINED: infer from whichever field is set (very old models omit the type)
    for field, conv in (("ints", list), ("floats", list), ("strings", None), ("i", int),
                        ("f", float), ("s", None), ("t", None), ("g", None)):
        if field in ("i", "f", "s", "t", "g"):
            if a.HasField(field):
                if field == "s":
                    return _decode(a.s)
                if field == "t":
                    return tensor_to_array(a.t)
                if field == "g":
                    return a.g
                return conv(getattr(a, field))
        elif len(getattr(a, field)):
            if field == "strings":
                return [_decode(x) for x in a.strings]
            return conv(getattr(a, field))
    return None


def schema_defaults(schema: onnx.defs.OpSchema | None) -> dict[str, Any]:
    """Attribute defaults declared by an op schema (attributes without a default are absent)."""
    if schema is None:
        return {}
    out: dict[str, Any] = {}
    for name, attr in schema.attributes.items():
        d = attr.default_value
        if d is not None and d.name:
            out[name] = attribute_value(d)
    return out


def constant_node_value(node: onnx.NodeProto) -> Any:
    """The value a Constant node holds, whichever attribute holds it."""
    for a in node.attribute:
        v = attribute_value(a)
        if a.name == "value" or a.name == "sparse_value":
            return v
        if a.name == "value_float":
            return np.array(v, dtype=np.float32)
        if a.name == "value_floats":
            return np.array(v, dtype=np.float32)
        if a.name == "value_int":
            return np.array(v, dtype=np.int64)
        if a.name == "value_ints":
            return np.array(v, dtype=np.int64)
        if a.name == "value_string":
            return np.array(v, dtype=object)
        if a.name == "value_strings":
            out = np.empty(len(v), dtype=object)
            out[:] = v
            return out
    raise InvalidGraph(f"Constant node {node.name!r} has no value attribute")
