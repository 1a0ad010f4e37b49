"""Check and convert what the caller feeds a session, before anything runs."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx

from onnxrt.errors import InvalidArgument
from onnxrt.ir.dtypes import elem_type_name, np_dtype, onnx_elem_type, type_string
from onnxrt.framework.ortvalue import OrtValue, strings_to_objects

__all__ = ["InputSpec", "prepare_feeds", "host_output"]

_SHAPES_KEPT = 64      # accepted shapes remembered per input (free dims take many values)


class InputSpec:
    """What one graph input accepts, precomputed once per session."""

    __slots__ = ("name", "type", "kind", "dtype", "rank", "dims", "type_str", "optional",
                 "_shapes")

    def __init__(self, name: str, tp: onnx.TypeProto | None,
                 free_dims: dict[str, int] | None = None) -> None:
        self.name = name
        self.type = tp
        self.type_str = type_string(tp)
        self.kind = tp.WhichOneof("value") if tp is not None else None
        self.optional = self.kind == "optional_type"
        inner = tp.optional_type.elem_type if self.optional else tp
        kind = inner.WhichOneof("value") if inner is not None else None
        self.dtype: np.dtype | None = None
        self.rank: int | None = None
        self.dims: tuple[int | None, ...] = ()
        # shapes of arrays of the declared dtype already accepted: the next array of one of
        # them passes with one set lookup (9 inputs of a converted pipeline: 14 us a run)
        self._shapes: set[tuple[int, ...]] = set()
        if kind == "tensor_type":
            self.kind = "tensor_type"
            et = inner.tensor_type.elem_type
            if et:
                try:
                    self.dtype = np_dtype(et)
                except Exception:
                    self.dtype = None
            if inner.tensor_type.HasField("shape"):
                dims = []
                for d in inner.tensor_type.shape.dim:
                    if d.HasField("dim_value") and d.dim_value >= 0:
                        dims.append(int(d.dim_value))
                    elif d.HasField("dim_param") and free_dims and d.dim_param in free_dims:
                        dims.append(free_dims[d.dim_param])
                    else:
                        dims.append(None)
                self.rank = len(dims)
                self.dims = tuple(dims)
        elif kind is not None:
            self.kind = kind

    def convert(self, value: Any) -> Any:
        if isinstance(value, OrtValue):
            if not value.device().is_host:
                return value  # bound on a device: the plan's copies handle it
            value = value.value()
        if self.kind == "tensor_type":
            if value is None:
                if self.optional:
                    return None
                raise InvalidArgument(f"input '{self.name}' is None; expected "
                                      f"{self.type_str}")
            return self._tensor(value)
        if self.kind == "sequence_type":
            if not isinstance(value, (list, tuple)):
                raise InvalidArgument(f"input '{self.name}' expects {self.type_str}, got "
                                      f"{type(value).__name__}")
            return [np.asarray(v) if not isinstance(v, (list, dict)) else v for v in value]
        if self.kind == "map_type":
            if not isinstance(value, dict):
                raise InvalidArgument(f"input '{self.name}' expects {self.type_str}, got "
                                      f"{type(value).__name__}")
            return value
        return value

    def _tensor(self, value: Any) -> np.ndarray:
        want = self.dtype
        if (type(value) is np.ndarray and value.dtype == want
                and value.shape in self._shapes):
            return value
        arr = self._checked(value)
        if (type(arr) is np.ndarray and want is not None and want.kind != "O"
                and len(self._shapes) < _SHAPES_KEPT):
            self._shapes.add(arr.shape)
        return arr

    def _checked(self, value: Any) -> np.ndarray:
        want = self.dtype
        if isinstance(value, np.ndarray):
            arr = value
        elif isinstance(value, np.generic):
            arr = np.asarray(value)
        elif isinstance(value, (list, tuple, int, float, bool, str, bytes)):
            try:
                arr = np.asarray(value, dtype=want if want is not None and want.kind != "O"
                                 else None)
            except (ValueError, TypeError, OverflowError) as e:
                raise InvalidArgument(f"input '{self.name}': cannot convert the given "
                                      f"{type(value).__name__} to {self.type_str}: {e}") from None
        else:
            arr = _from_foreign(value, self.name)
        if (arr.dtype.kind in "US" or arr.dtype.type is np.void) and (
                want is None or want.kind == "O"):
            arr = strings_to_objects(arr)
        if want is not None and arr.dtype != want:
            got = _dtype_name(arr.dtype)
            raise InvalidArgument(
                f"Unexpected input data type for input '{self.name}'. "
                f"Actual: (tensor({got})) , expected: ({self.type_str})")
        # a declared rank of 0 accepts any shape, as in onnxruntime (TorchScript exports
        # declare loop counts that way and callers pass shape (1,))
        if self.rank:
            if arr.ndim != self.rank:
                raise InvalidArgument(
                    f"Invalid rank for input: {self.name} Got: {arr.ndim} Expected: "
                    f"{self.rank} Please fix either the inputs/outputs or the model.")
            # (every input of every run: a shape equal to the declared one, the common
            # case without free dimensions, is accepted without building a list)
            bad = [] if arr.shape == self.dims else [
                (i, g, e) for i, (g, e) in enumerate(zip(arr.shape, self.dims))
                if e is not None and g != e]
            if bad:
                detail = "".join(f" index: {i} Got: {g} Expected: {e}\n" for i, g, e in bad)
                raise InvalidArgument(
                    f"Got invalid dimensions for input: {self.name} for the following "
                    f"indices\n{detail} Please fix either the inputs/outputs or the model.")
        return arr


def _dtype_name(dt: np.dtype) -> str:
    try:
        return elem_type_name(onnx_elem_type(dt))
    except Exception:
        return str(dt)


def _from_foreign(value: Any, name: str) -> np.ndarray:
    if hasattr(value, "__array__") or hasattr(value, "__array_interface__"):
        return np.asarray(value)
    raise InvalidArgument(f"input '{name}': cannot use a {type(value).__name__} as a tensor; "
                          f"pass a numpy array, a list, a numpy scalar or an OrtValue")


def prepare_feeds(specs: dict[str, InputSpec], required: Sequence[str],
                  feeds: dict[str, Any]) -> dict[str, Any]:
    """Validated, converted feeds; raises InvalidArgument naming the bad input."""
    if not isinstance(feeds, dict):
        raise InvalidArgument(f"input_feed must be a dict of input name to value, got "
                              f"{type(feeds).__name__}")
    out = {}
    for name, v in feeds.items():
        spec = specs.get(name)
        if spec is None:
            raise InvalidArgument(f"Invalid input name: {name}. Valid input names: "
                                  f"{', '.join(specs)}")
        out[name] = spec.convert(v)
    missing = [n for n in required if n not in out]
    if missing:
        raise InvalidArgument(f"Required inputs ({missing}) are missing from input feed "
                              f"({list(feeds)}).")
    return out


def host_output(v: Any, const_ids: frozenset[int] = frozenset()) -> Any:
    """An output as the caller gets it: never the session's constants or a view of them."""
    if isinstance(v, np.ndarray):
        if v.base is None and v.flags.writeable and id(v) not in const_ids:
            return v
        return v.copy()
    if isinstance(v, np.generic):
        return np.asarray(v)
    if isinstance(v, list):
        if v and isinstance(v[0], dict):
            # a sequence of maps (ZipMap's rows) holds Python scalars made by this run:
            # nothing to copy, and a call per row cost more than the model at batch 1,000
            return v
        return [host_output(x, const_ids) for x in v]
    return v
