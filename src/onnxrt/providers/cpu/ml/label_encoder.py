"""ai.onnx.ml LabelEncoder (versions 1, 2 and 4, tensor-valued keys / values included).

Numeric keys are looked up with one searchsorted over the sorted keys; strings go through
np.unique so the dictionary is consulted once per distinct value, not once per element.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.framework.kernel import NodeInfo
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.ml._common import ML, string_array


def _pick(attrs: dict[str, Any], prefix: str) -> np.ndarray | None:
    t = attrs.get(f"{prefix}_tensor")
    if t is not None:
        return np.asarray(t).reshape(-1)
    for suffix, dt in (("strings", object), ("int64s", np.int64), ("floats", np.float32)):
        v = attrs.get(f"{prefix}_{suffix}")
        if v:
            return string_array(v) if dt is object else np.asarray(v, dtype=dt)
    return None


def _default(attrs: dict[str, Any], values: np.ndarray) -> Any:
    t = attrs.get("default_tensor")
    if t is not None:
        t = np.asarray(t).reshape(-1)
        if t.size != 1:
            raise ValueError("LabelEncoder: default_tensor must hold exactly one value")
        return t.astype(values.dtype)[0]
    if values.dtype == object:
        return attrs.get("default_string", "_Unused")
    if values.dtype.kind in "iu":
        return values.dtype.type(attrs.get("default_int64", -1))
    return values.dtype.type(attrs.get("default_float", -0.0))


class _Mapping:
    """A key -> value table with a default, applied element-wise to arrays."""

    def __init__(self, keys: np.ndarray, values: np.ndarray, default: Any) -> None:
        if keys.size != values.size:
            raise ValueError(f"LabelEncoder: {keys.size} keys but {values.size} values")
        self.values_dtype = values.dtype
        self.default = default
        self.is_str = keys.dtype == object
        if self.is_str:
            self.table = dict(zip(keys.tolist(), values.tolist()))  # later keys win
            return
        nan = np.isnan(keys) if keys.dtype.kind == "f" else np.zeros(keys.shape, bool)
        self.nan_value = values[nan][-1] if nan.any() else None
        keys, values = keys[~nan], values[~nan]
        # a repeated key: the last one takes precedence, so keep last occurrences
        rev_keys = keys[::-1]
        uk, first = np.unique(rev_keys, return_index=True)
        self.keys = uk
        self.vals = values[::-1][first]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.is_str:
            flat = x.astype(object).reshape(-1)
            uniq, inv = np.unique(flat, return_inverse=True)
            get = self.table.get
            mapped = [get(u, self.default) for u in uniq.tolist()]
            m = string_array(mapped) if self.values_dtype == object else \
                np.asarray(mapped, dtype=self.values_dtype)
            return m[inv].reshape(x.shape)
        k = x.astype(self.keys.dtype, copy=False) if x.dtype.kind == self.keys.dtype.kind \
            else x
        if self.values_dtype == object:
            out = np.empty(x.shape, dtype=object)
        else:
            out = np.empty(x.shape, dtype=self.values_dtype)
        out[...] = self.default
        if self.keys.size:
            pos = np.searchsorted(self.keys, k)
            pos_c = np.minimum(pos, self.keys.size - 1)
            hit = self.keys[pos_c] == k
            out[hit] = self.vals[pos_c[hit]]
        if self.nan_value is not None:
            out[np.isnan(k)] = self.nan_value
        return out


@CPU.kernel("LabelEncoder", since=2, domain=ML)
class LabelEncoder:
    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        keys = _pick(a, "keys")
        values = _pick(a, "values")
        if keys is None or values is None:
            raise ValueError("LabelEncoder needs one keys_* and one values_* attribute")
        self.map = _Mapping(keys, values, _default(a, values))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.map(x)


@CPU.kernel("LabelEncoder", since=1, until=1, domain=ML)
class LabelEncoderV1:
    """Version 1: strings <-> their index in classes_strings."""

    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        classes = string_array(a.get("classes_strings") or [])
        idx = np.arange(classes.size, dtype=np.int64)
        self.to_int = _Mapping(classes, idx, np.int64(a.get("default_int64", -1)))
        self.to_str = _Mapping(idx, classes, a.get("default_string", "_Unused"))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if x.dtype == object or x.dtype.kind in "US":
            return self.to_int(x)
        return self.to_str(x.astype(np.int64))
