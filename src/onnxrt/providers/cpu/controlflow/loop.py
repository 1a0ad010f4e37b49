"""Loop: a trip count and/or a condition, loop-carried values, stacked scan outputs."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.framework.kernel import NodeInfo
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.controlflow._common import (check_io, empty_stacked, outer_of,
                                                     scalar_bool, scalar_int)

_TRUE = np.array(True)


@CPU.kernel("Loop", since=1, context=True, host_inputs=(0, 1))
class Loop:
    """Every version: later ones only widen the value types (sequences, optionals)."""

    def __init__(self, node: NodeInfo) -> None:
        self.node = node
        self.body = node.attrs["body"]
        self.n_own = node.num_inputs
        self.n_carried = max(0, node.num_inputs - 2)
        check_io(node, self.body, 2 + self.n_carried, 1 + self.n_carried, "body")
        self.n_scan = len(self.body.output_names) - 1 - self.n_carried
        types = self.body.output_types
        self.scan_types = [types[1 + self.n_carried + k] if 1 + self.n_carried + k < len(types)
                           else None for k in range(self.n_scan)]
        self.n_out = node.num_outputs

    def __call__(self, *inputs: Any, ctx: Any) -> tuple[Any, ...]:
        own = inputs[: self.n_own]
        outer = outer_of(self.node, inputs[self.n_own:]) if len(inputs) > self.n_own else None
        m = own[0] if self.n_own > 0 else None
        cond = own[1] if self.n_own > 1 else None
        carried = list(own[2:])
        trip = None if m is None else scalar_int(m, "Loop M")
        keep_going = True if cond is None else scalar_bool(cond, "Loop cond")
        cond_val = _TRUE if cond is None else cond
        scans: list[list[Any]] = [[] for _ in range(self.n_scan)]
        nc = self.n_carried
        body = self.body
        i = 0
        while keep_going and (trip is None or i < trip):
            ctx.check_terminate()
            res = body.run([np.array(i, dtype=np.int64), cond_val, *carried], outer, ctx)
            cond_val = res[0]
            carried = res[1: 1 + nc]
            for acc, v in zip(scans, res[1 + nc:]):
                acc.append(v)
            # onnxruntime honours the body's cond output even when the node has no cond input
            keep_going = scalar_bool(cond_val, "Loop body cond output")
            i += 1
        outs: list[Any] = list(carried)
        for k, acc in enumerate(scans):
            outs.append(_stack(acc, k) if acc
                        else empty_stacked(self.scan_types[k]))
        return tuple(outs[: self.n_out])


def _stack(values: list[Any], k: int) -> Any:
    if isinstance(values[0], list):  # a sequence-typed scan output: nothing to stack
        return values
    try:
        return np.stack(values)
    except ValueError:
        shapes = sorted({np.shape(v) for v in values})
        raise ValueError(f"Loop scan output {k} changes shape across iterations "
                         f"({shapes[:4]}); every iteration must produce the same shape") from None
