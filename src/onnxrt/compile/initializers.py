"""Where a compiled model keeps its initializers: inside it, in one external file
(``external_initializers_file_path`` above ``external_initializers_size_threshold`` bytes),
or where the application's ``get_initializer_location_func`` says."""

from __future__ import annotations

import os
from typing import Any, Callable

import onnx
from onnx import numpy_helper
from onnx.external_data_helper import uses_external_data

from onnxrt.errors import Fail, InvalidArgument

__all__ = ["OrtExternalInitializerInfo", "to_external_file", "by_callback",
           "original_locations"]


class OrtExternalInitializerInfo:
    """Where an initializer's bytes lie in an external file (onnxruntime's class)."""

    def __init__(self, filepath: str, file_offset: int, byte_size: int) -> None:
        self.filepath = os.fspath(filepath)
        self.file_offset = int(file_offset)
        self.byte_size = int(byte_size)

    def __repr__(self) -> str:
        return (f"OrtExternalInitializerInfo({self.filepath!r}, {self.file_offset}, "
                f"{self.byte_size})")


def _location(path: str, out_dir: str | None) -> str:
    """The location written in the model: relative to the model's folder where the file
    lies under it (a loader reads external data only from there)."""
    if out_dir is None or not os.path.isabs(path):
        return path
    rel = os.path.relpath(path, out_dir)
    return path if rel.startswith("..") else rel


def to_external_file(m: onnx.ModelProto, file_path: str, threshold: int,
                     out_dir: str | None) -> None:
    """Move the initializers over ``threshold`` bytes into ``file_path`` (relative to the
    compiled model's folder, or to the working directory for a model kept in memory)."""
    if os.path.isabs(file_path):
        raise InvalidArgument(f"external_initializers_file_path {file_path!r} must be a "
                              f"relative path: it is written beside the compiled model")
    base = out_dir or os.getcwd()
    full = os.path.normpath(os.path.join(base, file_path))
    if os.path.commonpath([os.path.realpath(base), os.path.realpath(full)]) != \
            os.path.realpath(base):
        raise InvalidArgument(f"external_initializers_file_path {file_path!r} leads out of "
                              f"the compiled model's folder {base}")
    with open(full, "wb") as f:
        for t in m.graph.initializer:
            if t.data_type == onnx.TensorProto.STRING:
                continue
            raw = numpy_helper.to_array(t).tobytes() if not t.raw_data else t.raw_data
            if len(raw) <= threshold:
                continue
            offset = f.tell()
            f.write(raw)
            _point_to(t, file_path, offset, len(raw))


def original_locations(model_path: str | None) -> dict[str, OrtExternalInitializerInfo]:
    """The external-data locations of the input model's initializers (absolute paths)."""
    if model_path is None:
        return {}
    m = onnx.load(model_path, load_external_data=False)
    base = os.path.dirname(os.path.abspath(model_path))
    out = {}
    for t in m.graph.initializer:
        if uses_external_data(t):
            d = {e.key: e.value for e in t.external_data}
            out[t.name] = OrtExternalInitializerInfo(
                os.path.join(base, d.get("location", "")), int(d.get("offset", 0) or 0),
                int(d.get("length", 0) or 0))
    return out


def by_callback(m: onnx.ModelProto, func: Callable[..., Any],
                originals: dict[str, OrtExternalInitializerInfo], out_dir: str | None) -> None:
    """Ask ``func(name, OrtValue, original_info_or_None)`` for each initializer: None keeps
    it inside the model; an OrtExternalInitializerInfo points it at bytes the application
    wrote (or kept)."""
    from onnxrt.values import OrtValue

    for t in m.graph.initializer:
        if t.data_type == onnx.TensorProto.STRING:
            continue
        value = OrtValue.ortvalue_from_numpy(numpy_helper.to_array(t))
        try:
            info = func(t.name, value, originals.get(t.name))
        except Exception as e:
            raise Fail(f"get_initializer_location_func raised for initializer {t.name!r}: "
                       f"{type(e).__name__}: {e}") from e
        if info is None:
            continue
        if not isinstance(info, OrtExternalInitializerInfo):
            raise InvalidArgument(f"get_initializer_location_func returned "
                                  f"{type(info).__name__} for {t.name!r}; expected "
                                  f"OrtExternalInitializerInfo or None")
        _point_to(t, _location(info.filepath, out_dir), info.file_offset, info.byte_size)


def _point_to(t: onnx.TensorProto, location: str, offset: int, length: int) -> None:
    """Make ``t`` read its bytes from ``location`` instead of holding them."""
    dims, dtype, name = list(t.dims), t.data_type, t.name
    t.Clear()
    t.name, t.data_type = name, dtype
    t.dims.extend(dims)
    t.data_location = onnx.TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(int(offset))),
                 ("length", str(int(length)))):
        e = t.external_data.add()
        e.key, e.value = k, v
