"""Inputs for a model: read from .npy files or generated from the declared types."""

from __future__ import annotations

from typing import Any

import numpy as np


_TYPES = {
    "float": np.float32, "double": np.float64, "float16": np.float16, "int64": np.int64,
    "int32": np.int32, "int16": np.int16, "int8": np.int8, "uint8": np.uint8,
    "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "bool": np.bool_,
}


def parse_dims(specs: list[str]) -> dict[str, int]:
    dims = {}
    for s in specs:
        name, sep, val = s.partition("=")
        if not sep or not val.strip().lstrip("-").isdigit():
            raise ValueError(f"--dim {s!r}: expected NAME=INT")
        dims[name.strip()] = int(val)
    return dims


def concrete_shape(shape: list[Any] | None, dims: dict[str, int], batch: int | None) -> list[int]:
    out = []
    for i, d in enumerate(shape or []):
        if isinstance(d, int):
            out.append(d)
        elif isinstance(d, str) and d in dims:
            out.append(dims[d])
        elif i == 0 and batch is not None:
            out.append(batch)
        else:
            out.append(1)
    if batch is not None and out and isinstance((shape or [None])[0], int):
        out[0] = batch
    return out


def generate(arg: Any, dims: dict[str, int], batch: int | None = None,
             seed: int = 0) -> Any:
    """A random value for a NodeArg: normal floats, small non-negative ints, words."""
    rng = np.random.default_rng(seed)
    t = arg.type
    if t.startswith("tensor("):
        elem = t[len("tensor("):-1]
        shape = concrete_shape(arg.shape, dims, batch)
        if elem == "string":
            words = np.array(["onnx", "runtime", "model", "input"], dtype=object)
            return words[rng.integers(0, len(words), size=shape)]
        dt = _TYPES.get(elem)
        if dt is None:
            import ml_dtypes

            return rng.standard_normal(shape).astype(getattr(ml_dtypes, elem, np.float32))
        if np.issubdtype(dt, np.floating):
            return rng.standard_normal(shape).astype(dt)
        if dt is np.bool_:
            return rng.integers(0, 2, size=shape).astype(bool)
        return rng.integers(0, 4, size=shape).astype(dt)
    if t.startswith("seq("):
        inner = type(arg)(arg.name, t[4:-1], [])
        return [generate(inner, dims, batch, seed + i) for i in range(2)]
    raise ValueError(f"cannot generate a value of type {t} for input {arg.name!r}; "
                     f"pass it with --input {arg.name}=FILE.npy")


def load_inputs(specs: list[str]) -> dict[str, Any]:
    feeds = {}
    for s in specs:
        name, sep, path = s.partition("=")
        if not sep:
            raise ValueError(f"--input {s!r}: expected NAME=FILE.npy")
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            raise ValueError(f"--input {name}: file {path!r} not found") from None
        except Exception as e:
            raise ValueError(f"--input {name}: cannot read {path!r} as .npy: {e}") from None
    return feeds
