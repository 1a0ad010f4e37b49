"""com.microsoft QAttention: Attention whose input projection is an 8-bit matrix product
(exact int32 sums, then times input_scale * weight_scale in float32, plus the bias; through
the compiled integer product with the weight packed once when it is constant)."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.framework.parallel import pool_of
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.contrib.attention import Attention
from onnxrt.providers.cpu.quant import igemm
from onnxrt.providers.cpu.quant.qmatmul import matmul_integer

MS = "com.microsoft"
_F32 = np.float32


@CPU.kernel("QAttention", since=1, domain=MS, needs_node=True, threads=True)
class QAttention:
    """input (B, S, H_in) uint8/int8 @ weight (H_in, 3 * hidden) int8/uint8 with zero points
    and scales (weight per tensor or per column), + bias, then Attention over num_heads:
    mask_index, past (2, B, N, P, H), unidirectional, present."""

    def __init__(self, node: Any) -> None:
        a = node.attrs
        if int(a.get("do_rotary", 0)):
            raise ValueError("QAttention: do_rotary=1 is not supported (onnxruntime's CPU "
                             "kernel does not rotate either)")
        if int(a.get("past_present_share_buffer", 0)):
            raise ValueError("QAttention: past_present_share_buffer=1 is not supported")
        self.att = Attention(node)
        self.att.heads = None       # the compiled path reads float weights; this has none
        self.packed = igemm.prepack(node, 1, 7, warm=igemm.Epilogue(igemm.MODE_FLOAT, _F32))

    def __call__(self, x, weight, bias, input_scale, weight_scale, mask_index=None,
                 input_zero_point=None, weight_zero_point=None, past=None, *, ctx=None):
        for what, v in (("input", x), ("weight", weight)):
            if v.dtype not in (np.uint8, np.int8):
                raise TypeError(f"QAttention: {what} has type {v.dtype}; 8-bit expected")
        if np.size(input_scale) != 1:
            raise ValueError("QAttention: input_scale must be a scalar")
        n_cols = weight.shape[-1]
        wz = weight_zero_point
        if wz is not None and np.size(wz) not in (1, n_cols):
            raise ValueError(f"QAttention: weight_zero_point must be a scalar or {n_cols} "
                             f"values")
        mult = (np.asarray(input_scale, _F32).reshape(()) *
                np.asarray(weight_scale, _F32).reshape(-1)).astype(_F32)
        dt = np.asarray(bias).dtype
        pb = self.packed
        if (pb is not None and mult.size in (1, n_cols) and np.size(bias) == n_cols
                and igemm.usable(x, input_zero_point)):
            epi = igemm.Epilogue(igemm.MODE_FLOAT, _F32, scale=mult,
                                 fbias=np.asarray(bias, _F32), per_col=True)
            qkv = igemm.product(x, input_zero_point, pb, epi, pool_of(ctx))
            return self.att.attend_qkv(qkv, mask_index, past, None, dt)
        acc = matmul_integer(x, weight, input_zero_point,
                             None if wz is None else np.asarray(wz).reshape(-1)
                             if np.size(wz) > 1 else np.asarray(wz).reshape(()))
        qkv = acc.astype(_F32) * (mult if mult.size > 1 else mult.reshape(()))
        qkv += np.asarray(bias, _F32)
        return self.att.attend_qkv(qkv, mask_index, past, None, dt)
