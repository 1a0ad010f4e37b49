"""DeformConv (19, 22), N-D: deformable im2col, then one matmul per group.

The column tensor is built per (offset group, kernel position): the sampling positions of every
output location at once, sampled N-linearly (2**r taps, zero outside the input), scaled by the
mask. The weights are reshaped once per session when they are constant.
"""

from __future__ import annotations

import itertools

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.nn_extra._common import compute_dtype


def _sample(xt: np.ndarray, pos: list[np.ndarray], sizes: list[int], cdt) -> np.ndarray:
    """N-linear sample of channels-last xt [N, prod(sizes), C] at positions pos[d] [N, P];
    zeros outside. Returns [N, P, C]."""
    r = len(sizes)
    strides = [int(np.prod(sizes[d + 1:], dtype=np.int64)) for d in range(r)]
    lows, fracs = [], []
    for d in range(r):
        p = pos[d]
        lo = np.floor(p)
        lows.append(np.where(np.isfinite(lo), lo, -2).astype(np.int64))
        fracs.append((p - lo).astype(cdt))
    n, c = xt.shape[0], xt.shape[2]
    out = np.zeros((n, pos[0].shape[1], c), dtype=cdt)
    bidx = np.arange(n)[:, None]
    for corner in itertools.product((0, 1), repeat=r):
        flat = np.zeros_like(lows[0])
        w = None
        valid = None
        for d in range(r):
            idx = lows[d] + corner[d]
            ok = (idx >= 0) & (idx < sizes[d])
            valid = ok if valid is None else valid & ok
            flat += np.clip(idx, 0, sizes[d] - 1) * strides[d]
            wd = fracs[d] if corner[d] else 1 - fracs[d]
            w = wd if w is None else w * wd
        w = np.where(valid, w, cdt.type(0))
        vals = xt[bidx, flat]
        vals *= w[:, :, None]
        out += vals
    return out


class DeformConv:
    def __init__(self, node) -> None:
        a = node.attrs
        self.group = int(a.get("group", 1))
        self.offset_group = int(a.get("offset_group", 1))
        self.kernel_shape = a.get("kernel_shape")
        self.strides = a.get("strides")
        self.pads = a.get("pads")
        self.dilations = a.get("dilations")

    def __call__(self, x, w, offset, b=None, mask=None):
        r = x.ndim - 2
        n, c = x.shape[:2]
        sizes = list(x.shape[2:])
        oc = w.shape[0]
        ks = list(self.kernel_shape) if self.kernel_shape else list(w.shape[2:])
        st = list(self.strides) if self.strides else [1] * r
        dl = list(self.dilations) if self.dilations else [1] * r
        pd = list(self.pads) if self.pads else [0] * (2 * r)
        g, og = self.group, self.offset_group
        if c % g or oc % g or c % og:
            raise ValueError(f"DeformConv: channels C={c}, oC={oc} do not divide by "
                             f"group={g} / offset_group={og}")
        outs = [(sizes[d] + pd[d] + pd[r + d] - dl[d] * (ks[d] - 1) - 1) // st[d] + 1
                for d in range(r)]
        kp = int(np.prod(ks))
        p_total = int(np.prod(outs))
        if offset.shape != tuple([n, og * kp * r] + outs):
            raise ValueError(f"DeformConv: offset shape {offset.shape}, expected "
                             f"{tuple([n, og * kp * r] + outs)}")
        cdt = compute_dtype(x.dtype)
        # channels-last: every sample gathers a contiguous row of channels
        xt = np.ascontiguousarray(x.astype(cdt, copy=False).reshape(n, c, -1).transpose(0, 2, 1))
        offs = offset.astype(cdt, copy=False).reshape(n, og, kp, r, p_total)
        msk = None if mask is None else mask.astype(cdt, copy=False).reshape(n, og, kp, p_total)
        grids = np.meshgrid(*(np.arange(o) for o in outs), indexing="ij")
        base = [(grids[d].reshape(-1) * st[d] - pd[d]).astype(cdt) for d in range(r)]
        cpg = c // og
        cols = np.empty((n, c, kp, p_total), dtype=cdt)
        for gi in range(og):
            xg = np.ascontiguousarray(xt[:, :, gi * cpg:(gi + 1) * cpg]) if og > 1 else xt
            for kk, k in enumerate(itertools.product(*(range(v) for v in ks))):
                pos = [base[d][None, :] + cdt.type(k[d] * dl[d]) + offs[:, gi, kk, d]
                       for d in range(r)]
                v = _sample(xg, pos, sizes, cdt)               # [N, P, Cg]
                if msk is not None:
                    v *= msk[:, gi, kk][:, :, None]
                cols[:, gi * cpg:(gi + 1) * cpg, kk] = v.transpose(0, 2, 1)
        wc = w.astype(cdt, copy=False).reshape(g, oc // g, -1)
        cols = cols.reshape(n, g, (c // g) * kp, p_total)
        y = np.matmul(wc[None], cols).reshape([n, oc] + outs)
        if b is not None:
            y += b.astype(cdt, copy=False).reshape([1, oc] + [1] * r)
        return y.astype(x.dtype, copy=False)


CPU.register("DeformConv", DeformConv, since=19)
