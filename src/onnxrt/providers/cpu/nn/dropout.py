"""Dropout, every version. Inference returns the input itself and an all-true mask.

Training (v12+ ``training_mode`` input true, or v1/v6 with is_test=0) drops with ``ratio``
and scales by 1/(1-ratio). A ``seed`` attribute gives a reproducible mask drawn as
``RandomState(seed).uniform(0, 1, shape) >= ratio``, the ONNX suite's own convention.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.nn import compute_dtype
from onnxrt.providers.cpu.random_state import generator

__all__ = []


def _mask_dtype(since: int, dt: np.dtype) -> np.dtype:
    # Dropout-1..9 declare the mask with the data's type; 10+ made it bool
    return np.dtype(bool) if since >= 10 else dt


@CPU.kernel("Dropout", since=1, needs_node=True, host_inputs=(1, 2))
class Dropout:
    def __init__(self, node: Any) -> None:
        a = node.attrs
        self.since = node.since_version
        self.ratio = float(a.get("ratio", 0.5))
        self.seed = a.get("seed")
        self.is_test = bool(a.get("is_test", 0)) if self.since < 7 else True
        self.want_mask = node.output_present(1)

    def __call__(self, x: np.ndarray, ratio: Any = None, training_mode: Any = None
                 ) -> tuple[np.ndarray, ...]:
        if self.since >= 12:
            r = self.ratio if ratio is None else float(np.asarray(ratio).reshape(()))
            training = training_mode is not None and bool(np.asarray(training_mode).reshape(()))
        else:
            r = self.ratio
            training = not self.is_test
        mdt = _mask_dtype(self.since, x.dtype)
        if not training or r == 0:
            if not self.want_mask:
                return (x,)
            return x, np.ones(x.shape, dtype=mdt)
        if not 0 <= r < 1:
            raise ValueError(f"Dropout ratio must be in [0, 1), got {r}")
        if self.seed is not None:
            u = np.random.RandomState(int(self.seed)).uniform(0.0, 1.0, x.shape)
        else:
            u = generator().uniform(0.0, 1.0, x.shape)
        keep = u >= r
        cdt = compute_dtype(x.dtype)
        y = x.astype(cdt, copy=False) * keep
        y *= cdt.type(1.0 / (1.0 - r))
        y = y.astype(x.dtype, copy=False)
        if not self.want_mask:
            return (y,)
        return y, keep.astype(mdt, copy=False)
