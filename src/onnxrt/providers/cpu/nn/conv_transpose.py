"""ConvTranspose: one matmul per group (weights^T @ input) then col2im by k^d strided adds.

The weight (C, M/group, *k) is re-laid out once per session as (group, M/g * kprod, C/g).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.nn import compute_dtype
from onnxrt.validate import SpecError

__all__ = ["ConvTranspose"]


def _pack(w: np.ndarray, group: int, cdt: np.dtype) -> tuple[np.ndarray, int, tuple[int, ...]]:
    c, mg = int(w.shape[0]), int(w.shape[1])
    kernel = tuple(int(k) for k in w.shape[2:])
    if c % group:
        raise ValueError(f"weight input channels {c} not divisible by group {group}")
    kprod = int(np.prod(kernel)) if kernel else 1
    w = np.asarray(w).astype(cdt, copy=False).reshape(group, c // group, mg * kprod)
    return np.ascontiguousarray(w.transpose(0, 2, 1)), mg * group, kernel


@CPU.kernel("ConvTranspose", since=1, needs_node=True)
class ConvTranspose:
    """ConvTranspose-1/11/22 over N-d inputs."""

    def __init__(self, node: Any) -> None:
        a = node.attrs
        self.group = int(a.get("group", 1))
        self.auto_pad = a.get("auto_pad", "NOTSET")
        if isinstance(self.auto_pad, bytes):
            self.auto_pad = self.auto_pad.decode()
        self.strides = a.get("strides")
        self.dilations = a.get("dilations")
        self.pads = a.get("pads")
        self.output_padding = a.get("output_padding")
        self.output_shape = a.get("output_shape")
        self.packed = None
        w = node.constant_inputs.get(1)
        if w is not None:
            w = np.asarray(w)
            self.packed = _pack(w, self.group, compute_dtype(w.dtype))

    def _pads(self, spatial: tuple[int, ...], kernel: tuple[int, ...], strides: list[int],
              dil: list[int]) -> tuple[list[int], list[int]]:
        nd = len(spatial)
        opad = list(self.output_padding or [0] * nd)
        full = [s * (n - 1) + op + (k - 1) * d + 1
                for s, n, op, k, d in zip(strides, spatial, opad, kernel, dil)]
        if self.output_shape:
            target = list(self.output_shape)[-nd:]
        elif self.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            target = [n * s for n, s in zip(spatial, strides)]
        else:
            pads = list(self.pads or [0] * (2 * nd))
            return pads[:nd], pads[nd:]
        begin, end = [], []
        for f, t in zip(full, target):
            # a target beyond the full extent grows zeros at the end (as onnxruntime does)
            total = max(0, f - t)
            small = total // 2
            if self.auto_pad == "SAME_UPPER":
                begin.append(small)
                end.append(total - small)
            else:
                begin.append(total - small)
                end.append(small)
        return begin, end

    def __call__(self, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
        dt = x.dtype
        cdt = compute_dtype(dt)
        wp, m, kernel = self.packed if self.packed is not None else _pack(w, self.group, cdt)
        g = self.group
        n, c = x.shape[:2]
        spatial = tuple(x.shape[2:])
        nd = len(spatial)
        strides = list(self.strides or [1] * nd)
        dil = list(self.dilations or [1] * nd)
        if c != wp.shape[2] * g:
            raise ValueError(f"input has {c} channels, weight expects {wp.shape[2] * g}")
        L = int(np.prod(spatial))
        xc = x.astype(cdt, copy=False).reshape(n, g, c // g, L)
        cols = np.matmul(wp, xc)                      # (N, g, M/g * kprod, L)
        cols = cols.reshape((n, m) + kernel + spatial)
        opad = list(self.output_padding or [0] * nd)
        full = [s * (sz - 1) + op + (k - 1) * d + 1
                for s, sz, op, k, d in zip(strides, spatial, opad, kernel, dil)]
        begin, end = self._pads(spatial, kernel, strides, dil)
        if self.output_shape:
            outsz = list(self.output_shape)[-nd:]
        else:
            outsz = [f - bg - e for f, bg, e in zip(full, begin, end)]
        if any(o <= 0 for o in outsz):
            # onnxruntime refuses these too; the slices below would silently crop
            raise SpecError("attribute pads", list(self.pads or []),
                            f"the output would be {outsz} for an input of {list(spatial)}: "
                            f"every output dim must be >= 1")
        # the accumulation buffer covers both the full extent and any requested growth
        lo = [min(0, bg) for bg in begin]
        hi = [max(f, bg + o) for f, bg, o in zip(full, begin, outsz)]
        buf = np.zeros((n, m) + tuple(h - l for h, l in zip(hi, lo)), dtype=cdt)
        for off in itertools.product(*(range(k) for k in kernel)):
            dst = tuple(slice(o * d - l, o * d - l + s * (sz - 1) + 1, s)
                        for o, d, l, s, sz in zip(off, dil, lo, strides, spatial))
            buf[(slice(None), slice(None)) + dst] += cols[(slice(None), slice(None)) + off]
        y = buf[(slice(None), slice(None))
                + tuple(slice(bg - l, bg - l + o) for bg, l, o in zip(begin, lo, outsz))]
        if b is not None:
            y = y + b.astype(cdt, copy=False).reshape((-1,) + (1,) * nd)
        elif not y.flags.c_contiguous:
            y = np.ascontiguousarray(y)
        return y if y.dtype == dt else y.astype(dt)
