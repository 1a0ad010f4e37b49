"""Random generators: RandomNormal(Like), RandomUniform(Like), Multinomial, Bernoulli.

A node with a ``seed`` attribute draws from a fresh generator seeded with it on every run,
so it gives the same values in every run and every session, and needs no state shared
between concurrent runs. Without a seed, the process-wide generator of ``random_state``
is used (``onnxrt`` seeds it on request).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.ir.dtypes import np_dtype
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.random_state import generator as _shared_generator

_FLOATS = ("float16", "float32", "float64", "bfloat16")


def generator(seed: float | None) -> np.random.Generator:
    # any float is a valid ONNX seed; NumPy wants a non-negative integer
    return _shared_generator(None if seed is None else int(seed) % 2 ** 64)


def _float_dtype(elem: int | None, like: np.ndarray | None, op: str) -> np.dtype:
    dt = np_dtype(elem) if elem is not None else like.dtype  # type: ignore[union-attr]
    if dt.name not in _FLOATS:
        raise TypeError(f"{op} produces float16, bfloat16, float or double, not {dt}"
                        + ("" if elem is not None else " (set the dtype attribute)"))
    return dt


def _draw_dtype(dt: np.dtype) -> type:
    # numpy draws float32 or float64 directly; the narrow floats come from float32
    return np.float64 if dt == np.float64 else np.float32


def _normal(shape: tuple[int, ...], dt: np.dtype, mean: float, scale: float,
            seed: float | None) -> np.ndarray:
    d = _draw_dtype(dt)
    x = generator(seed).standard_normal(shape, dtype=d)
    x *= d(scale)
    x += d(mean)
    return x.astype(dt, copy=False)


def _uniform(shape: tuple[int, ...], dt: np.dtype, low: float, high: float,
             seed: float | None) -> np.ndarray:
    d = _draw_dtype(dt)
    x = generator(seed).random(shape, dtype=d)
    x *= d(high - low)
    x += d(low)
    return x.astype(dt, copy=False)


def _shape(shape: Any) -> tuple[int, ...]:
    if shape is None:
        raise ValueError("the 'shape' attribute is required")
    s = tuple(int(v) for v in shape)
    if any(v < 0 for v in s):
        raise ValueError(f"shape must be non-negative, got {list(s)}")
    return s


@CPU.kernel("RandomNormal", since=1)
def random_normal(*, shape: Any = None, dtype: int = 1, mean: float = 0.0, scale: float = 1.0,
                  seed: float | None = None) -> np.ndarray:
    return _normal(_shape(shape), _float_dtype(dtype, None, "RandomNormal"), mean, scale, seed)


@CPU.kernel("RandomUniform", since=1)
def random_uniform(*, shape: Any = None, dtype: int = 1, low: float = 0.0, high: float = 1.0,
                   seed: float | None = None) -> np.ndarray:
    return _uniform(_shape(shape), _float_dtype(dtype, None, "RandomUniform"), low, high,
                    seed)


@CPU.kernel("RandomNormalLike", since=1)
def random_normal_like(input: np.ndarray, *, dtype: int | None = None, mean: float = 0.0,
                       scale: float = 1.0, seed: float | None = None) -> np.ndarray:
    dt = _float_dtype(dtype, input, "RandomNormalLike")
    return _normal(np.shape(input), dt, mean, scale, seed)


@CPU.kernel("RandomUniformLike", since=1)
def random_uniform_like(input: np.ndarray, *, dtype: int | None = None, low: float = 0.0,
                        high: float = 1.0, seed: float | None = None) -> np.ndarray:
    dt = _float_dtype(dtype, input, "RandomUniformLike")
    return _uniform(np.shape(input), dt, low, high, seed)


@CPU.kernel("Bernoulli", since=15)
def bernoulli(input: np.ndarray, *, dtype: int | None = None,
              seed: float | None = None) -> np.ndarray:
    dt = input.dtype if dtype is None else np_dtype(dtype)
    p = input.astype(_draw_dtype(input.dtype), copy=False)
    u = generator(seed).random(p.shape, dtype=p.dtype)
    return (u < p).astype(dt)


@CPU.kernel("Multinomial", since=7)
def multinomial(input: np.ndarray, *, dtype: int = 6, sample_size: int = 1,
                seed: float | None = None) -> np.ndarray:
    """``input`` holds unnormalized log-probabilities, one row per batch entry."""
    out_dt = np_dtype(dtype)
    if out_dt not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise TypeError(f"Multinomial output must be int32 or int64, got {out_dt}")
    if input.ndim != 2:
        raise ValueError(f"input must be [batch_size, class_size], got {input.shape}")
    B, C = input.shape
    n = int(sample_size)
    if C == 0 or n <= 0:
        return np.zeros((B, max(n, 0)), out_dt)
    x = input.astype(np.float64)
    p = np.exp(x - x.max(axis=1, keepdims=True))
    cdf = np.cumsum(p, axis=1)
    cdf /= cdf[:, -1:]
    # one searchsorted for the whole batch: row r's cdf lives in [r, r + 1]
    rows = np.arange(B, dtype=np.float64)[:, None]
    u = generator(seed).random((B, n)) + rows
    pos = np.searchsorted((cdf + rows).reshape(-1), u.reshape(-1), side="right")
    idx = pos.reshape(B, n) - np.arange(B)[:, None] * C
    return np.clip(idx, 0, C - 1).astype(out_dt)
