"""The process-wide generator behind random ops that have no ``seed`` attribute."""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["generator", "set_seed"]

_LOCK = threading.Lock()
_GEN = [np.random.default_rng()]


def set_seed(seed: int) -> None:
    with _LOCK:
        _GEN[0] = np.random.default_rng(int(seed))


def generator(seed: float | None = None) -> np.random.Generator:
    """A generator for one node: seeded by its ``seed`` attribute, else the shared one."""
    if seed is not None:
        return np.random.default_rng(int(seed))
    return _GEN[0]
