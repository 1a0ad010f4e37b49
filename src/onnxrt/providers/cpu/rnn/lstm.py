"""LSTM, every schema version: peepholes, input_forget, layout, clip, sequence_lens."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.framework.kernel import NodeInfo
from onnxrt.framework.parallel import pool_of
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.rnn import compiled
from onnxrt.providers.cpu.rnn._common import RecurrentKernel


@CPU.kernel("LSTM", since=1, threads=True)
class LSTM(RecurrentKernel):
    """Gates in W/R/B are stacked i, o, f, c; peepholes P are i, o, f."""

    n_gates = 4
    default_acts = ("Sigmoid", "Tanh", "Tanh")
    has_cell = True
    kind = compiled.KIND_LSTM

    def __init__(self, node: NodeInfo) -> None:
        self.input_forget = bool(node.attrs.get("input_forget", 0))
        super().__init__(node)

    def pack_extra(self, Wt: np.ndarray, Rt: np.ndarray, wb: np.ndarray, rb: np.ndarray,
                   H: int) -> tuple[Any, ...]:
        i_and_f = np.r_[0:H, 2 * H:3 * H]  # columns of the i and f gates
        return (Wt, Rt, (wb + rb)[:, None, :], H, i_and_f)

    def prepare_extra(self, extra_inputs: tuple[Any, ...], D: int, B: int, H: int,
                      cdt: np.dtype) -> Any:
        P = extra_inputs[0] if extra_inputs else None
        if P is None:
            return None
        if P.shape != (D, 3 * H):
            raise ValueError(f"P must have shape {(D, 3 * H)}, got {P.shape}")
        P = P.astype(cdt, copy=False)[:, None, :]
        return P[..., :H], P[..., H:2 * H], P[..., 2 * H:]

    def cell(self, gx: np.ndarray, h: np.ndarray, c: Any, packed: tuple[Any, ...],
             extra: Any) -> tuple[np.ndarray, np.ndarray]:
        H = packed[3]
        g = np.matmul(h, packed[1])
        g += gx
        gi, go, gf, gc = g[..., :H], g[..., H:2 * H], g[..., 2 * H:3 * H], g[..., 3 * H:]
        o = None
        if extra is not None:
            pi, po, pf = extra
            gi += pi * c
            gf += pf * c
        if self.input_forget:
            # the forget gate is coupled to the input gate: f = 1 - i
            i = self.act(0, gi)
            f = 1 - i
        elif isinstance(self.acts[0], list):
            i = self.act(0, gi)
            f = self.act(0, gf)
        elif extra is None:
            # i, o and f share their function and o needs no peephole: one call for all
            iof = self.act(0, g[..., :3 * H])
            i, o, f = iof[..., :H], iof[..., H:2 * H], iof[..., 2 * H:]
        else:
            both = self.act(0, g[..., packed[4]])
            i, f = both[..., :H], both[..., H:]
        cc = self.act(1, gc)
        cn = f * c
        cc *= i
        cn += cc
        if o is None:
            if extra is not None:
                go += extra[1] * cn
            o = self.act(0, go)
        # onnxruntime clips gate inputs only, not the cell state fed to h
        hn = self.act(2, cn, clip=False)
        hn *= o
        return hn, cn

    def __call__(self, X: np.ndarray, W: np.ndarray, R: np.ndarray, B: Any = None,
                 sequence_lens: Any = None, initial_h: Any = None, initial_c: Any = None,
                 P: Any = None, ctx: Any = None) -> tuple[Any, ...]:
        return self.run(X, W, R, B, sequence_lens, initial_h, initial_c, P,
                        pool=pool_of(ctx))
