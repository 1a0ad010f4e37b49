"""RNN (simple Elman recurrence), every schema version."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.framework.parallel import pool_of
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.rnn._common import RecurrentKernel


@CPU.kernel("RNN", since=1, threads=True)
class RNN(RecurrentKernel):
    n_gates = 1
    default_acts = ("Tanh",)

    def cell(self, gx: np.ndarray, h: np.ndarray, c: Any, packed: tuple[Any, ...],
             extra: Any) -> tuple[np.ndarray, None]:
        a = np.matmul(h, packed[1])
        a += gx
        return self.act(0, a), None

    def __call__(self, X: np.ndarray, W: np.ndarray, R: np.ndarray, B: Any = None,
                 sequence_lens: Any = None, initial_h: Any = None,
                 ctx: Any = None) -> tuple[Any, ...]:
        return self.run(X, W, R, B, sequence_lens, initial_h, pool=pool_of(ctx))
