"""Scan: iterate a body over slices of the scan inputs, carrying state.

Scan 8 has a batch axis 0, the sequence axis 1 and optional per-batch ``sequence_lens``;
Scan 9+ has no batch axis and takes per-input/per-output axes and directions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.framework.kernel import NodeInfo
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.controlflow import scan_cdist
from onnxrt.providers.cpu.controlflow._common import check_io, empty_stacked, outer_of


def _per_input(values: Any, n: int, default: int, name: str) -> list[int]:
    if values is None or len(values) == 0:
        return [default] * n
    vals = [int(v) for v in values]
    if len(vals) != n:
        raise ValueError(f"Scan attribute {name} has {len(vals)} entries; expected {n}")
    return vals


def _directions(values: Any, n: int, name: str) -> list[bool]:
    """True where the direction is reverse."""
    dirs = _per_input(values, n, 0, name)
    if any(d not in (0, 1) for d in dirs):
        raise ValueError(f"Scan attribute {name} must hold 0 (forward) or 1 (reverse): {dirs}")
    return [d == 1 for d in dirs]


@CPU.kernel("Scan", since=9, context=True)
class Scan:
    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        self.node = node
        self.body = a["body"]
        self.n_own = node.num_inputs
        self.m = int(a["num_scan_inputs"])
        self.n_state = self.n_own - self.m
        if self.m < 1 or self.n_state < 0:
            raise ValueError(f"Scan num_scan_inputs={self.m} does not fit {self.n_own} inputs")
        check_io(node, self.body, self.n_own, self.n_state, "body")
        self.k = len(self.body.output_names) - self.n_state
        self.in_axes = _per_input(a.get("scan_input_axes"), self.m, 0, "scan_input_axes")
        self.in_rev = _directions(a.get("scan_input_directions"), self.m,
                                  "scan_input_directions")
        self.out_axes = _per_input(a.get("scan_output_axes"), self.k, 0, "scan_output_axes")
        self.out_rev = _directions(a.get("scan_output_directions"), self.k,
                                   "scan_output_directions")
        types = self.body.output_types
        self.out_types = [types[self.n_state + j] if self.n_state + j < len(types) else None
                          for j in range(self.k)]
        # a pairwise squared-distance body (skl2onnx's k-nearest neighbours) runs as one
        # call over every scanned row (controlflow/scan_cdist.py)
        self.cdist = (self.n_state == 1 and self.m == 1 and self.k == 1
                      and self.in_axes == [0] and not self.in_rev[0]
                      and self.out_axes == [0] and not self.out_rev[0]
                      and scan_cdist.match(self.body.plan))
        self._cdist_fn = scan_cdist.kernel() if self.cdist else None

    def __call__(self, *inputs: Any, ctx: Any) -> tuple[Any, ...]:
        n_own, ns = self.n_own, self.n_state
        if self.cdist:
            state, rows = np.asarray(inputs[0]), np.asarray(inputs[1])
            return state, scan_cdist.squared_distances(state, rows, self._cdist_fn,
                                                       ctx.thread_pool)
        outer = outer_of(self.node, inputs[n_own:]) if len(inputs) > n_own else None
        states = list(inputs[:ns])
        # each scan input with its scan axis moved first and reversed if scanned backwards
        xs = []
        seq_len = None
        for j, x in enumerate(inputs[ns:n_own]):
            x = np.asarray(x)
            ax = self.in_axes[j]
            if not -x.ndim <= ax < x.ndim:
                raise ValueError(f"Scan input {j} (rank {x.ndim}) has no axis {ax}")
            x = np.moveaxis(x, ax, 0) if ax % x.ndim else x
            if self.in_rev[j]:
                x = x[::-1]
            if seq_len is None:
                seq_len = x.shape[0]
            elif x.shape[0] != seq_len:
                raise ValueError(f"Scan inputs have different sequence lengths: {seq_len} "
                                 f"and {x.shape[0]} (input {j})")
            xs.append(x)
        accs: list[list[Any]] = [[] for _ in range(self.k)]
        body = self.body
        for t in range(seq_len or 0):
            ctx.check_terminate()
            res = body.run(states + [x[t] for x in xs], outer, ctx)
            states = res[:ns]
            for acc, v in zip(accs, res[ns:]):
                acc.append(v)
        outs = list(states)
        for j, acc in enumerate(accs):
            if not acc:
                outs.append(empty_stacked(self.out_types[j], self.out_axes[j]))
                continue
            if self.out_rev[j]:
                acc.reverse()
            rank = np.ndim(acc[0]) + 1
            ax = self.out_axes[j]
            if not -rank <= ax < rank:
                raise ValueError(f"Scan output {j} (rank {rank}) has no axis {ax}")
            outs.append(_stack(acc, ax, j))
        return tuple(outs)


def _stack(values: list[Any], axis: int, j: int) -> np.ndarray:
    try:
        return np.stack(values, axis=axis)
    except ValueError:
        shapes = sorted({np.shape(v) for v in values})
        raise ValueError(f"Scan output {j} changes shape across iterations ({shapes[:4]}); "
                         f"every iteration must produce the same shape") from None


@CPU.kernel("Scan", since=8, until=8, context=True, host_inputs=(0,))
class Scan8:
    """Batch axis 0, sequence axis 1; scan outputs past a batch's length are zero padded."""

    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        self.node = node
        self.body = a["body"]
        self.n_own = node.num_inputs
        self.m = int(a["num_scan_inputs"])
        self.n_state = self.n_own - 1 - self.m
        if self.m < 1 or self.n_state < 0:
            raise ValueError(f"Scan num_scan_inputs={self.m} does not fit {self.n_own} inputs")
        check_io(node, self.body, self.n_own - 1, self.n_state, "body")
        self.k = len(self.body.output_names) - self.n_state
        self.rev = _directions(a.get("directions"), self.m, "directions")
        types = self.body.output_types
        self.out_types = [types[self.n_state + j] if self.n_state + j < len(types) else None
                          for j in range(self.k)]

    def __call__(self, *inputs: Any, ctx: Any) -> tuple[Any, ...]:
        n_own, ns = self.n_own, self.n_state
        outer = outer_of(self.node, inputs[n_own:]) if len(inputs) > n_own else None
        lens_in = inputs[0]
        init = list(inputs[1: 1 + ns])
        xs = [np.asarray(x) for x in inputs[1 + ns: n_own]]
        for j, x in enumerate(xs):
            if x.ndim < 2:
                raise ValueError(f"Scan input {j} needs a batch and a sequence axis; "
                                 f"got shape {x.shape}")
        batch, max_len = xs[0].shape[:2]
        if any(x.shape[:2] != (batch, max_len) for x in xs):
            raise ValueError(f"Scan inputs disagree on [batch, sequence] sizes: "
                             f"{[x.shape[:2] for x in xs]}")
        if lens_in is None:
            lens = [max_len] * batch
        else:
            lens = [int(v) for v in np.asarray(lens_in).reshape(-1)]
            if len(lens) != batch or any(not 0 <= n <= max_len for n in lens):
                raise ValueError(f"Scan sequence_lens {lens} must have {batch} entries in "
                                 f"[0, {max_len}]")
        body = self.body
        finals: list[list[Any]] = [[] for _ in range(ns)]
        per_batch: list[list[Any]] = []  # per batch: per output the list of elements
        for b in range(batch):
            states = [s[b] for s in init]
            n = lens[b]
            accs: list[list[Any]] = [[] for _ in range(self.k)]
            for t in range(n):
                ctx.check_terminate()
                elems = [x[b, n - 1 - t] if r else x[b, t] for x, r in zip(xs, self.rev)]
                res = body.run(states + elems, outer, ctx)
                states = res[:ns]
                for acc, v in zip(accs, res[ns:]):
                    acc.append(v)
            for f, s in zip(finals, states):
                f.append(s)
            per_batch.append(accs)
        outs: list[Any] = [np.stack(f) if f else np.asarray(s)[:0]
                           for f, s in zip(finals, init)]
        for j in range(self.k):
            sample = next((pb[j][0] for pb in per_batch if pb[j]), None)
            if sample is None:
                e = empty_stacked(self.out_types[j])  # shape (0, *elem)
                outs.append(np.zeros((batch, max_len) + e.shape[1:], dtype=e.dtype))
                continue
            sample = np.asarray(sample)
            out = np.zeros((batch, max_len) + sample.shape, dtype=sample.dtype)
            for b, pb in enumerate(per_batch):
                if pb[j]:
                    out[b, : len(pb[j])] = np.stack(pb[j])
            outs.append(out)
        return tuple(outs)
