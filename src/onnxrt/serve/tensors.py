"""Tensor data in the protocol's two forms: JSON lists and raw little-endian bytes (the
binary-tensor extension over HTTP, ``raw_*_contents`` over gRPC). BYTES elements are
UTF-8 strings here (ONNX string tensors); raw, each is a 4-byte little-endian length and
its bytes."""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

from onnxrt.serve.datatypes import DataType
from onnxrt.serve.errors import bad_request

__all__ = ["check_shape", "from_json", "from_raw", "to_json", "to_raw", "raw_size"]

_LEN = struct.Struct("<I")


def check_shape(what: str, shape: object) -> tuple[int, ...]:
    if (not isinstance(shape, (list, tuple))
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                       for d in shape)):
        raise bad_request(f"{what}: shape must be a list of non-negative integers, "
                          f"got {shape!r}")
    return tuple(shape)


def _flatten(data: object, out: list[Any]) -> None:
    if isinstance(data, list):
        for d in data:
            _flatten(d, out)
    else:
        out.append(data)


def from_json(what: str, dt: DataType, shape: tuple[int, ...], data: object) -> np.ndarray:
    """The array a JSON ``data`` list (flat or nested, row-major) gives for ``shape``."""
    count = math.prod(shape)
    if not isinstance(data, list):
        raise bad_request(f"{what}: 'data' must be a list, got {type(data).__name__}")
    if dt.name == "BYTES":
        flat: list[Any] = []
        _flatten(data, flat)
        if not all(isinstance(s, str) for s in flat):
            raise bad_request(f"{what}: BYTES data must be strings")
        arr = np.empty(len(flat), dtype=object)
        arr[:] = flat
    else:
        try:
            arr = np.asarray(data)
        except ValueError:
            raise bad_request(f"{what}: 'data' is a ragged nested list") from None
        if arr.size and dt.dtype.kind in "iu" and arr.dtype.kind in "fO":
            # NumPy turns integers past int64 (UINT64's upper half) into floats: look at
            # the Python values themselves
            flat = []
            _flatten(data, flat)
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in flat):
                raise bad_request(f"{what}: {dt.name} data must be integers")
            _check_range(what, dt, min(flat), max(flat))
            arr = np.array(flat, dtype=dt.dtype).reshape(arr.shape)
        elif arr.size and arr.dtype.kind not in dt.json_kinds:
            raise bad_request(f"{what}: {dt.name} data must be "
                              f"{_KIND_WORDS[dt.json_kinds]}, got {_describe(arr)}")
        elif arr.size and dt.dtype.kind in "iu":
            _check_range(what, dt, int(arr.min()), int(arr.max()))
        arr = arr.astype(dt.dtype)
    if arr.size != count:
        raise bad_request(f"{what}: shape {list(shape)} needs {count} element(s), "
                          f"'data' has {arr.size}")
    return arr.reshape(shape)


def _check_range(what: str, dt: DataType, lo: int, hi: int) -> None:
    info = np.iinfo(dt.dtype)
    if lo < info.min or hi > info.max:
        raise bad_request(f"{what}: value {lo if lo < info.min else hi} is out of range "
                          f"for {dt.name}")


_KIND_WORDS = {"b": "true/false", "iu": "integers", "iuf": "numbers", "U": "strings"}


def _describe(arr: np.ndarray) -> str:
    return {"b": "booleans", "f": "non-integers", "U": "strings", "i": "integers",
            "u": "integers", "O": "mixed or out-of-range values"}.get(arr.dtype.kind,
                                                                     str(arr.dtype))


def raw_size(dt: DataType, shape: tuple[int, ...]) -> int | None:
    """Bytes the raw form of a tensor takes; None for BYTES (it depends on the strings)."""
    return None if dt.name == "BYTES" else math.prod(shape) * dt.itemsize


def from_raw(what: str, dt: DataType, shape: tuple[int, ...], raw: bytes | memoryview
             ) -> np.ndarray:
    """The array of raw bytes: a read-only view of ``raw`` where it is aligned."""
    if dt.name != "BYTES":
        need = math.prod(shape) * dt.itemsize
        if len(raw) != need:
            raise bad_request(f"{what}: shape {list(shape)} of {dt.name} takes {need} bytes, "
                              f"got {len(raw)}")
        arr = np.frombuffer(raw, dtype=dt.dtype.newbyteorder("<")).reshape(shape)
        # a tensor after a JSON header of any length sits at any byte offset: compiled
        # kernels get a specialization of their own, and a slower one, for misaligned
        # arrays, so those are copied (aligned ones stay views of the body)
        return arr if arr.flags.aligned else arr.copy()
    count = math.prod(shape)
    view = memoryview(raw)
    items: list[str] = []
    pos = 0
    while pos < len(view):
        if pos + 4 > len(view):
            raise bad_request(f"{what}: BYTES data ends inside an element's 4-byte length")
        (n,) = _LEN.unpack_from(view, pos)
        pos += 4
        if pos + n > len(view):
            raise bad_request(f"{what}: BYTES element {len(items)} claims {n} bytes, "
                              f"{len(view) - pos} left")
        try:
            items.append(str(view[pos:pos + n], "utf-8"))
        except UnicodeDecodeError:
            raise bad_request(f"{what}: BYTES element {len(items)} is not UTF-8 (ONNX "
                              "strings are UTF-8)") from None
        pos += n
    if len(items) != count:
        raise bad_request(f"{what}: shape {list(shape)} needs {count} element(s), the BYTES "
                          f"data holds {len(items)}")
    arr = np.empty(count, dtype=object)
    arr[:] = items
    return arr.reshape(shape)


def _as_str(v: object) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def to_json(arr: np.ndarray, dt: DataType) -> list[Any]:
    flat = np.asarray(arr).reshape(-1)
    if dt.name == "BYTES":
        return [_as_str(v) for v in flat]
    if dt.name in ("FP16", "BF16"):
        flat = flat.astype(np.float32)
    return flat.tolist()


def to_raw(arr: np.ndarray, dt: DataType) -> bytes:
    if dt.name == "BYTES":
        parts = []
        for v in np.asarray(arr).reshape(-1):
            b = v if isinstance(v, bytes) else str(v).encode("utf-8")
            parts.append(_LEN.pack(len(b)))
            parts.append(b)
        return b"".join(parts)
    return np.ascontiguousarray(arr, dtype=dt.dtype.newbyteorder("<")).tobytes()
