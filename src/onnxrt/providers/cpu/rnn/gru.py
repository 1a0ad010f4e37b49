"""GRU, every schema version (linear_before_reset from opset 3, layout from opset 14)."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.framework.kernel import NodeInfo
from onnxrt.framework.parallel import pool_of
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.rnn import compiled
from onnxrt.providers.cpu.rnn._common import RecurrentKernel


@CPU.kernel("GRU", since=1, threads=True)
class GRU(RecurrentKernel):
    """Gates in W/R/B are stacked z (update), r (reset), h (hidden)."""

    n_gates = 3
    default_acts = ("Sigmoid", "Tanh")
    kind = compiled.KIND_GRU

    def __init__(self, node: NodeInfo) -> None:
        self.linear_before_reset = bool(node.attrs.get("linear_before_reset", 0))
        super().__init__(node)

    def pack_extra(self, Wt: np.ndarray, Rt: np.ndarray, wb: np.ndarray, rb: np.ndarray,
                   H: int) -> tuple[Any, ...]:
        # R's bias of the h gate sits inside the reset product, so it cannot fold into the
        # input projection; z and r fold both biases
        bias_x = wb.copy()
        bias_x[:, :2 * H] += rb[:, :2 * H]
        rzr = np.ascontiguousarray(Rt[:, :, :2 * H])
        rh = np.ascontiguousarray(Rt[:, :, 2 * H:])
        rbh = np.ascontiguousarray(rb[:, None, 2 * H:])
        return (Wt, Rt, bias_x[:, None, :], H, rzr, rh, rbh)

    def recurrent_bias(self, packed: tuple[Any, ...]) -> np.ndarray:
        return packed[6]

    def cell(self, gx: np.ndarray, h: np.ndarray, c: Any, packed: tuple[Any, ...],
             extra: Any) -> tuple[np.ndarray, None]:
        H = packed[3]
        if self.linear_before_reset:
            gh = np.matmul(h, packed[1])
            zr = gh[..., :2 * H]
            zr += gx[..., :2 * H]
            zr = self.act(0, zr)
            z, r = zr[..., :H], zr[..., H:]
            hh = gh[..., 2 * H:]
            hh += packed[6]
            hh *= r
            hh += gx[..., 2 * H:]
        else:
            zr = np.matmul(h, packed[4])
            zr += gx[..., :2 * H]
            zr = self.act(0, zr)
            z, r = zr[..., :H], zr[..., H:]
            hh = np.matmul(r * h, packed[5])
            hh += packed[6]
            hh += gx[..., 2 * H:]
        hh = self.act(1, hh)
        # (1 - z) * hh + z * h, with one temporary less
        out = h - hh
        out *= z
        out += hh
        return out, None

    def __call__(self, X: np.ndarray, W: np.ndarray, R: np.ndarray, B: Any = None,
                 sequence_lens: Any = None, initial_h: Any = None,
                 ctx: Any = None) -> tuple[Any, ...]:
        return self.run(X, W, R, B, sequence_lens, initial_h, pool=pool_of(ctx))
