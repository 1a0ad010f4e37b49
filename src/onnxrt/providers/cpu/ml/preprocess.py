"""ai.onnx.ml feature preprocessing: ArrayFeatureExtractor, Binarizer, CastMap,
CategoryMapper, DictVectorizer, FeatureVectorizer, Imputer, Normalizer, OneHotEncoder,
Scaler, ZipMap."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.framework.kernel import NodeInfo
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.ml._common import ML, as_2d_float, string_array

_F32 = np.float32


@CPU.kernel("ArrayFeatureExtractor", since=1, domain=ML, host_inputs=(1,))
def array_feature_extractor(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    idx = np.asarray(y, dtype=np.int64).reshape(-1)
    if x.ndim == 0:
        raise ValueError("ArrayFeatureExtractor needs an input of rank >= 1")
    d = x.shape[-1]
    if idx.size and (idx.min() < 0 or idx.max() >= d):
        raise ValueError(f"ArrayFeatureExtractor: index out of range [0, {d}): "
                         f"{idx[(idx < 0) | (idx >= d)][:5].tolist()}")
    z = np.take(x, idx, axis=-1)
    return z.reshape(1, -1) if x.ndim == 1 else z


@CPU.kernel("Binarizer", since=1, domain=ML)
def binarizer(x: np.ndarray, *, threshold: float = 0.0) -> np.ndarray:
    return (x > x.dtype.type(threshold) if x.dtype.kind == "f" else x > threshold).astype(x.dtype)


@CPU.kernel("CastMap", since=1, domain=ML)
class CastMap:
    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        self.cast_to = a.get("cast_to", "TO_FLOAT")
        self.map_form = a.get("map_form", "DENSE")
        self.max_map = int(a.get("max_map", 1))
        if self.cast_to not in ("TO_FLOAT", "TO_STRING", "TO_INT64"):
            raise ValueError(f"CastMap: unknown cast_to {self.cast_to!r}")
        if self.map_form not in ("DENSE", "SPARSE"):
            raise ValueError(f"CastMap: unknown map_form {self.map_form!r}")

    def __call__(self, x: dict) -> np.ndarray:
        keys = np.array(sorted(x), dtype=np.int64)
        vals = [x[k] for k in keys.tolist()]
        if self.cast_to == "TO_STRING":
            conv = [v if isinstance(v, str) else _float_str(v) for v in vals]
            values = string_array(conv)
            fill: Any = "0.f"  # onnxruntime's filler for absent keys in sparse form
            dt: Any = object
        else:
            dt = _F32 if self.cast_to == "TO_FLOAT" else np.int64
            values = np.array([float(v) for v in vals], dtype=np.float64)
            values = values.astype(dt) if dt is _F32 else np.trunc(values).astype(dt)
            fill = 0
        if self.map_form == "DENSE":
            return values.reshape(1, -1)
        out = np.full(self.max_map, fill, dtype=dt)
        if keys.size and (keys.min() < 0 or keys.max() >= self.max_map):
            raise ValueError(f"CastMap: key out of range [0, {self.max_map}) in sparse form")
        out[keys] = values
        return out.reshape(1, -1)


def _float_str(v: Any) -> str:
    return f"{float(v):f}"


@CPU.kernel("CategoryMapper", since=1, domain=ML)
class CategoryMapper:
    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        cs = list(a.get("cats_strings") or [])
        ci = list(a.get("cats_int64s") or [])
        if len(cs) != len(ci):
            raise ValueError("CategoryMapper: cats_strings and cats_int64s differ in length")
        self.s2i = dict(zip(cs, ci))
        self.i2s = dict(zip(ci, cs))
        self.default_int = int(a.get("default_int64", -1))
        self.default_str = a.get("default_string", "_Unused")

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if x.dtype == object or x.dtype.kind in "US":
            uniq, inv = np.unique(x.astype(object).reshape(-1), return_inverse=True)
            m = np.array([self.s2i.get(u, self.default_int) for u in uniq.tolist()],
                         dtype=np.int64)
            return m[inv].reshape(x.shape)
        uniq, inv = np.unique(x.reshape(-1), return_inverse=True)
        m = string_array([self.i2s.get(int(u), self.default_str) for u in uniq.tolist()])
        return m[inv].reshape(x.shape)


@CPU.kernel("DictVectorizer", since=1, domain=ML, needs_node=True)
def dict_vectorizer(x: dict, *, int64_vocabulary=None, string_vocabulary=None,
                    node: NodeInfo) -> np.ndarray:
    vocab = string_vocabulary if string_vocabulary else int64_vocabulary or []
    pos = {k: i for i, k in enumerate(vocab)}
    vals = list(x.values())
    dt = _dict_value_dtype(node, vals)
    out = np.zeros(len(vocab), dtype=dt) if dt != object else string_array([""] * len(vocab))
    for k, v in x.items():
        i = pos.get(k if isinstance(k, str) else int(k))
        if i is not None:
            out[i] = v
    return out.reshape(1, -1)


def _dict_value_dtype(node: NodeInfo, vals: list) -> Any:
    tp = node.input_types[0] if node.input_types else None
    if tp is not None and tp.HasField("map_type"):
        from onnxrt.ir.dtypes import np_dtype
        return np_dtype(tp.map_type.value_type.tensor_type.elem_type)
    if vals and isinstance(vals[0], str):
        return object
    if vals and isinstance(vals[0], (int, np.integer)):
        return np.int64
    return _F32


@CPU.kernel("FeatureVectorizer", since=1, domain=ML)
def feature_vectorizer(*xs: np.ndarray, inputdimensions=None) -> np.ndarray:
    dims = list(inputdimensions or [])
    if len(dims) != len(xs):
        raise ValueError(f"FeatureVectorizer: {len(xs)} inputs but inputdimensions has "
                         f"{len(dims)} entries")
    parts = []
    n = None
    for x, d in zip(xs, dims):
        x2 = as_2d_float(x, _F32)
        if n is None:
            n = x2.shape[0]
        elif x2.shape[0] != n:
            raise ValueError("FeatureVectorizer: inputs disagree on the batch size")
        c = x2.shape[1]
        if c >= d:
            parts.append(x2[:, :d])
        else:  # short inputs are zero-padded to their declared width
            parts.append(np.pad(x2, [(0, 0), (0, d - c)]))
    return np.concatenate(parts, axis=1) if parts else np.zeros((1, 0), _F32)


@CPU.kernel("Imputer", since=1, domain=ML)
def imputer(x: np.ndarray, *, imputed_value_floats=None, imputed_value_int64s=None,
            replaced_value_float=0.0, replaced_value_int64=0) -> np.ndarray:
    if x.dtype.kind == "f":
        imp = np.asarray(imputed_value_floats or [], dtype=x.dtype)
        rv = replaced_value_float
        mask = np.isnan(x) if np.isnan(rv) else x == x.dtype.type(rv)
    else:
        imp = np.asarray(imputed_value_int64s or [], dtype=x.dtype)
        mask = x == replaced_value_int64
    if imp.size == 0:
        raise ValueError("Imputer: no imputed values for this input type")
    if imp.size != 1:
        if x.ndim == 0 or x.shape[-1] != imp.size:
            raise ValueError(f"Imputer: {imp.size} imputed values for {x.shape[-1]} features")
    return np.where(mask, imp if imp.size != 1 else imp[0], x)


@CPU.kernel("Normalizer", since=1, domain=ML)
def normalizer(x: np.ndarray, *, norm: str = "MAX") -> np.ndarray:
    if x.dtype == _F32 and x.ndim == 2 and x.shape[1]:
        return _normalize_f32(x, norm)
    x2 = as_2d_float(x, np.float64) if x.ndim != 2 else x.astype(np.float64)
    # (ufunc reductions, not the array methods: their Python wrappers cost ~1 us each,
    # as much as the work at batch 1)
    if norm == "MAX":
        d = np.maximum.reduce(x2, axis=1, keepdims=True) if x2.shape[1] else \
            np.zeros((x2.shape[0], 1))
    elif norm == "L1":
        d = np.add.reduce(np.abs(x2), axis=1, keepdims=True)
    elif norm == "L2":
        d = np.sqrt(np.add.reduce(x2 * x2, axis=1, keepdims=True))
    else:
        raise ValueError(f"Normalizer: unknown norm {norm!r}")
    d += d == 0             # a zero norm (only 0 -> 1) leaves its row as it is
    # a 1-D input is one sample and stays 1-D, as onnxruntime returns it
    return (x2 / d).astype(_F32).reshape(x.shape if x.ndim in (1, 2) else x2.shape)


def _normalize_f32(x: np.ndarray, norm: str) -> np.ndarray:
    """Rows of float32 in float32, as onnxruntime computes them: four NumPy calls where the
    float64 round trip took eight (half a batch-1 Normalizer's time)."""
    if norm == "L1":
        d = np.add.reduce(np.abs(x), axis=1, keepdims=True)
    elif norm == "MAX":
        d = np.maximum.reduce(x, axis=1, keepdims=True)
    elif norm == "L2":
        d = np.sqrt(np.add.reduce(x * x, axis=1, keepdims=True))
    else:
        raise ValueError(f"Normalizer: unknown norm {norm!r}")
    d[d == 0] = 1           # a zero norm leaves its row as it is
    return x / d


_FEW_ROWS = 16     # OneHotEncoder inputs up to this size take the dict lookup


@CPU.kernel("OneHotEncoder", since=1, domain=ML)
class OneHotEncoder:
    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        self.strings = list(a.get("cats_strings") or [])
        self.ints = list(a.get("cats_int64s") or [])
        self.zeros = int(a.get("zeros", 1))
        # integer categories looked up by one searchsorted (a repeated category: its last
        # position, as a dict built in order keeps)
        cats = np.asarray(self.ints, dtype=np.int64)
        rev_sorted, first = np.unique(cats[::-1], return_index=True)
        self._sorted = rev_sorted
        self._pos = (cats.size - 1 - first).astype(np.int64)
        # the same lookup as a dict for a few rows: a dozen NumPy calls cost ~10 us a node
        self._index = {c: i for i, c in enumerate(self.ints)}

    def _int_positions(self, xi: np.ndarray) -> np.ndarray:
        srt = self._sorted
        if not srt.size:
            return np.full(xi.shape, -1, np.int64)
        p = np.minimum(np.searchsorted(srt, xi), srt.size - 1)
        return np.where(srt[p] == xi, self._pos[p], -1)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if x.dtype == object or x.dtype.kind in "US":
            cats = self.strings
            uniq, inv = np.unique(x.astype(object).reshape(-1), return_inverse=True)
            pos = {c: i for i, c in enumerate(cats)}
            m = np.array([pos.get(u, -1) for u in uniq.tolist()], dtype=np.int64)
            return self._encode(m[inv], x.shape, len(cats))
        if x.size <= _FEW_ROWS:
            return self._encode_few(x.astype(np.int64, copy=False).reshape(-1).tolist(),
                                    x.shape)
        idx = self._int_positions(x.astype(np.int64).reshape(-1))
        return self._encode(idx, x.shape, len(self.ints))

    def _encode_few(self, vals: list[int], shape: tuple[int, ...]) -> np.ndarray:
        n = len(self.ints)
        out = np.zeros((len(vals), n), dtype=_F32)
        index = self._index
        for r, v in enumerate(vals):
            p = index.get(v)
            if p is not None:
                out[r, p] = 1.0
            elif not self.zeros:
                raise ValueError("OneHotEncoder: input holds a category that is not in the "
                                 "list and zeros=0")
        return out.reshape(shape + (n,))

    def _encode(self, idx: np.ndarray, shape: tuple[int, ...], n: int) -> np.ndarray:
        if not self.zeros and np.any(idx < 0):
            raise ValueError("OneHotEncoder: input holds a category that is not in the list "
                             "and zeros=0")
        out = np.zeros((idx.size, n), dtype=_F32)
        ok = idx >= 0
        out[np.nonzero(ok)[0], idx[ok]] = 1.0
        return out.reshape(shape + (n,))


@CPU.kernel("Scaler", since=1, domain=ML)
class Scaler:
    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        self.offset = np.asarray(a.get("offset") or [0.0], dtype=np.float64)
        self.scale = np.asarray(a.get("scale") or [1.0], dtype=np.float64)
        # float32 rows are scaled in float32, as onnxruntime does (two NumPy calls where
        # the float64 round trip took four)
        self._offset32 = self.offset.astype(_F32)
        self._scale32 = self.scale.astype(_F32)
        self._widths: set[int] = set()     # feature counts already checked

    def __call__(self, x: np.ndarray) -> np.ndarray:
        w = x.shape[-1] if x.ndim else -1
        if w not in self._widths:
            for p, what in ((self.offset, "offset"), (self.scale, "scale")):
                if p.size != 1 and w != p.size:
                    raise ValueError(f"Scaler: {what} has {p.size} values for "
                                     f"{x.shape[-1] if x.ndim else 0} features")
            self._widths.add(w)
        if x.dtype == _F32:
            return (x - self._offset32) * self._scale32
        return ((x.astype(np.float64) - self.offset) * self.scale).astype(_F32)


def _dicts2(rows: list, k0: Any, k1: Any) -> list[dict]:
    return [{k0: v0, k1: v1} for v0, v1 in rows]


def _dicts3(rows: list, k0: Any, k1: Any, k2: Any) -> list[dict]:
    return [{k0: v0, k1: v1, k2: v2} for v0, v1, v2 in rows]


def _dicts4(rows: list, k0: Any, k1: Any, k2: Any, k3: Any) -> list[dict]:
    return [{k0: v0, k1: v1, k2: v2, k3: v3} for v0, v1, v2, v3 in rows]


# a dict display per row is ~1.6x faster than dict(zip(keys, row)) (1,000 rows of 3 classes:
# 0.27 ms against 0.43); written out for the common class counts, dict(zip) beyond
_ROW_DICTS: dict[int, Any] = {2: _dicts2, 3: _dicts3, 4: _dicts4}


@CPU.kernel("ZipMap", since=1, domain=ML)
class ZipMap:
    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        if a.get("classlabels_strings"):
            self.keys = list(a["classlabels_strings"])
        else:
            self.keys = [int(v) for v in (a.get("classlabels_int64s") or [])]
        self._make = _ROW_DICTS.get(len(self.keys))

    def __call__(self, x: np.ndarray) -> list[dict]:
        x2 = x.reshape(1, -1) if x.ndim == 1 else x
        if x2.ndim != 2 or x2.shape[1] != len(self.keys):
            raise ValueError(f"ZipMap: input of shape {x.shape} does not have one column per "
                             f"label ({len(self.keys)})")
        keys = self.keys
        # tolist gives Python floats straight from float32 or float64 rows
        if self._make is not None:
            return self._make(x2.tolist(), *keys)
        return [dict(zip(keys, row)) for row in x2.tolist()]
