"""Load a model from a path, bytes or ModelProto, safely.

External data is read only from files inside the model's folder: an absolute location or one
that escapes the folder (``..``, symlinks) is refused. Nothing in a model is ever executed.
"""

from __future__ import annotations

import os
from typing import Iterator

import onnx
from google.protobuf.message import DecodeError

from onnxrt.errors import (Fail, InvalidArgument, InvalidGraph, InvalidProtobuf, NoModel,
                           NoSuchFile)

__all__ = ["load_model", "iter_graphs", "MIN_IR_VERSION"]

MIN_IR_VERSION = 3


def load_model(model: object, external_data_dir: str | None = None,
               memory_files: dict[str, bytes] | None = None,
               initializers: dict[str, onnx.TensorProto] | None = None,
               ) -> tuple[onnx.ModelProto, str]:
    """Return ``(model_proto, base_dir)`` with every external tensor read into memory.

    ``initializers`` replace the main graph's initializers of the same names before any
    external data is read (SessionOptions.add_initializer / add_external_initializers: the
    model's own data, possibly a file that does not exist, is never read for them).

    ``model`` is a path (str or os.PathLike), bytes, or an ``onnx.ModelProto`` (which is copied
    before external data is resolved, so the caller's object is never modified).
    """
    if model is None:
        raise NoModel("no model given: pass a path, bytes or an onnx.ModelProto")
    if isinstance(model, onnx.ModelProto):
        proto = onnx.ModelProto()
        proto.CopyFrom(model)
        base = external_data_dir or os.getcwd()
    elif isinstance(model, (bytes, bytearray, memoryview)):
        proto = _parse(bytes(model), "<bytes>")
        base = external_data_dir or os.getcwd()
    elif isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise NoSuchFile(f"Load model from {path} failed: file does not exist")
        if os.path.isdir(path):
            raise InvalidArgument(f"Load model from {path} failed: it is a directory")
        with open(path, "rb") as f:
            data = f.read()
        proto = _parse(data, path)
        base = external_data_dir or os.path.dirname(os.path.abspath(path))
    else:
        raise InvalidArgument(
            f"model must be a path, bytes or onnx.ModelProto, got {type(model).__name__}")
    if not proto.HasField("graph"):
        if proto.ByteSize() == 0:
            raise InvalidArgument("No graph was found in the protobuf: the model is empty")
        raise InvalidProtobuf("Failed to load model because protobuf parsing failed: no graph "
                              "in the protobuf (a truncated file, or not an ONNX model)")
    if not len(proto.opset_import):
        raise InvalidProtobuf("Missing opset in the model: every ModelProto must import an "
                              "operator set (a truncated file, or not an ONNX model)")
    _check_versions(proto)
    if initializers:
        for t in proto.graph.initializer:
            new = initializers.get(t.name)
            if new is not None:
                if new.data_type != t.data_type:
                    raise InvalidArgument(
                        f"initializer {t.name!r} given in SessionOptions has element type "
                        f"{new.data_type}, the model's has {t.data_type} (onnx.TensorProto)")
                t.CopyFrom(new)
    _resolve_external_data(proto, base, memory_files or {})
    _check_names(proto)
    return proto, base


def _parse(data: bytes, where: str) -> onnx.ModelProto:
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise InvalidProtobuf(
            f"Load model from {where} failed: protobuf parsing failed ({e})") from None
    return proto


def _check_versions(proto: onnx.ModelProto) -> None:
    ir = proto.ir_version
    if ir < MIN_IR_VERSION:
        raise InvalidGraph(f"IR version {ir} is not supported: onnxrt needs IR version "
                           f"{MIN_IR_VERSION} or newer (opset imports started there)")
    if ir > onnx.IR_VERSION:
        raise InvalidGraph(f"IR version {ir} is newer than this onnxrt supports "
                           f"(up to {onnx.IR_VERSION}, onnx {onnx.__version__})")
    newest = onnx.defs.onnx_opset_version()
    for imp in proto.opset_import:
        if not 0 <= imp.version < 2 ** 31:
            raise InvalidGraph(f"opset_import: version {imp.version} of domain "
                               f"{imp.domain or 'ai.onnx'!r} is not a valid opset version")
        if imp.domain in ("", "ai.onnx") and imp.version > newest:
            raise Fail(
                f"opset {imp.version} of domain ai.onnx is not supported: the newest this "
                f"onnxrt knows is {newest} (onnx {onnx.__version__})")
        if imp.domain in ("", "ai.onnx") and imp.version < 1:
            raise InvalidGraph(f"opset {imp.version} of domain ai.onnx is not valid")


_DTYPES = frozenset(v for v in onnx.TensorProto.DataType.values()
                    if v != onnx.TensorProto.UNDEFINED)
# element types packed below a byte: bits per element
_PACKED = {getattr(onnx.TensorProto, n): b
           for n, b in (("INT4", 4), ("UINT4", 4), ("FLOAT4E2M1", 4), ("INT2", 2), ("UINT2", 2))
           if hasattr(onnx.TensorProto, n)}


def _check_tensor(t: onnx.TensorProto) -> None:
    """A tensor's data_type, dims and data agree before anything reads it: a mutated file
    gets an error naming the tensor and the field, and dims that promise an absurd size
    fail before any allocation."""
    from onnxrt.validate.alloc import check_alloc

    where = f"tensor {t.name!r}"
    if t.data_type not in _DTYPES:
        raise InvalidGraph(f"{where}: field data_type = {t.data_type} is not a tensor element "
                           f"type")
    dims = list(t.dims)
    if any(d < 0 for d in dims):
        raise InvalidGraph(f"{where}: field dims = {dims} has a negative dim")
    if t.data_type == onnx.TensorProto.STRING:
        n = 1
        for d in dims:
            n *= d
        if len(t.string_data) != n:
            raise InvalidGraph(f"{where}: field string_data holds {len(t.string_data)} "
                               f"strings, dims {dims} need {n}")
        return
    np_dt = onnx.helper.tensor_dtype_to_np_dtype(t.data_type)
    try:
        check_alloc(dims, np_dt, where)
    except MemoryError as e:
        raise InvalidGraph(f"{e} (field dims)") from None
    n = 1
    for d in dims:
        n *= d
    if t.HasField("raw_data"):
        bits = _PACKED.get(t.data_type, 8 * np_dt.itemsize)
        want = -(-n * bits // 8)
        if len(t.raw_data) != want:
            raise InvalidGraph(f"{where}: field raw_data holds {len(t.raw_data)} bytes, dims "
                               f"{dims} of {onnx.TensorProto.DataType.Name(t.data_type)} need "
                               f"{want}")
        return
    field = onnx.helper.tensor_dtype_to_field(t.data_type)
    got = len(getattr(t, field))
    per = 2 if t.data_type in (onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128) else 1
    # packed types keep one packed byte per int32_data value
    want = -(-n * _PACKED[t.data_type] // 8) if t.data_type in _PACKED else n * per
    if got != want:
        raise InvalidGraph(f"{where}: field {field} holds {got} values, dims {dims} of "
                           f"{onnx.TensorProto.DataType.Name(t.data_type)} need {want}")


def _check_names(proto: onnx.ModelProto) -> None:
    """Every name a node or graph holds is text: protobuf hands a string field that is not
    valid UTF-8 (a mutated file) over as bytes."""
    for imp in proto.opset_import:
        if not isinstance(imp.domain, str):
            raise InvalidGraph(f"opset_import: field domain {imp.domain!r} is not valid UTF-8")
    for g in iter_graphs(proto.graph):
        for field in ("input", "output", "value_info", "initializer"):
            for v in getattr(g, field):
                if not isinstance(v.name, str):
                    raise InvalidGraph(f"graph {g.name!r}: field {field}.name {v.name!r} is "
                                       f"not valid UTF-8")
        for i, n in enumerate(g.node):
            try:    # str.join refuses bytes: one C call per list instead of a check per name
                "".join((n.name, n.op_type, n.domain))
                "".join(n.input)
                "".join(n.output)
                ok = not n.attribute or all(isinstance(a.name, str) for a in n.attribute)
            except TypeError:
                ok = False
            if not ok:
                raise InvalidGraph(f"graph {g.name!r}, node #{i} ({n.name!r}, "
                                   f"{n.op_type!r}): a field (name, op_type, domain, input, "
                                   f"output or an attribute name) is not valid UTF-8")


def iter_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """The graph and every nested graph (If/Loop/Scan bodies), depth first."""
    yield graph
    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from iter_graphs(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from iter_graphs(g)


def _iter_tensors(proto: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    graphs = list(iter_graphs(proto.graph))
    for f in proto.functions:
        fake = onnx.GraphProto()
        fake.node.extend(f.node)
        graphs.extend(iter_graphs(fake))
    for g in graphs:
        yield from g.initializer
        for sp in g.sparse_initializer:
            yield sp.values
            yield sp.indices
        for node in g.node:
            for a in node.attribute:
                if a.HasField("t"):
                    yield a.t
                yield from a.tensors


def _resolve_external_data(proto: onnx.ModelProto, base: str,
                           memory_files: dict[str, bytes]) -> None:
    base_real = os.path.realpath(base)
    for t in _iter_tensors(proto):
        if t.data_location != onnx.TensorProto.EXTERNAL:
            _check_tensor(t)
            continue
        info = {e.key: e.value for e in t.external_data}
        location = info.get("location", "")
        where = f"external data of tensor {t.name!r}"
        if not location:
            raise InvalidGraph(f"{where} has no location")
        if location in memory_files:  # given from memory by the session options
            data = memory_files[location]
            offset = int(info.get("offset", 0) or 0)
            n = len(data) - offset if info.get("length") is None else int(info["length"])
            if offset < 0 or n < 0 or offset + n > len(data):
                raise InvalidGraph(f"{where}: offset {offset} and length {n} lie outside the "
                                   f"in-memory file {location!r} ({len(data)} bytes)")
            t.raw_data = data[offset:offset + n]
            del t.external_data[:]
            t.data_location = onnx.TensorProto.DEFAULT
            _check_tensor(t)
            continue
        if os.path.isabs(location) or location.startswith(("/", "\\")) or ":" in location:
            raise InvalidGraph(f"{where}: location {location!r} is absolute; external data "
                               f"must be a relative path inside the model's folder")
        full = os.path.realpath(os.path.join(base_real, location))
        if os.path.commonpath([full, base_real]) != base_real:
            raise InvalidGraph(f"{where}: location {location!r} escapes the model's folder "
                               f"{base_real!r}; refused")
        if not os.path.isfile(full):
            raise NoSuchFile(f"{where}: file {location!r} not found in {base_real!r}")
        offset = int(info.get("offset", 0) or 0)
        length = info.get("length")
        size = os.path.getsize(full)
        n = size - offset if length is None else int(length)
        if offset < 0 or n < 0 or offset + n > size:
            raise InvalidGraph(f"{where}: offset {offset} and length {n} lie outside "
                               f"{location!r} ({size} bytes)")
        with open(full, "rb") as f:
            f.seek(offset)
            t.raw_data = f.read(n)
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT
        _check_tensor(t)
