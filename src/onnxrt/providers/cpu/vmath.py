"""Branch-free math for the compiled (numba) kernels, written so that LLVM vectorizes the
loops that call it: numba compiles ``math.exp`` to one libm call per element (no SVML
here), 6x slower than a vectorized polynomial.

``exp_nonpos(x, bits, scale)`` replaces float32 ``x`` (every element <= 0, or NaN) by
exp(x) in place: exp(x) = 2^k * e^r with k = round(x / ln 2) and |r| <= ln(2) / 2, e^r by
its Taylor polynomial to r^7 (truncation under 6e-9 relative, below float32's rounding),
2^k written as float32 bits into ``bits`` (int32 scratch as long as x) and read back
through ``scale`` (its float32 view); ln 2 in two parts so that k * ln 2 stays exact.
Elements below -87 (exp under float32's smallest normal) give 0, a NaN stays NaN.
Callers compile it into their own loops with ``compiled()``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["exp_nonpos", "compiled"]

_LOG2E = np.float32(1.4426950408889634)
_LN2_HI = np.float32(0.693145751953125)
_LN2_LO = np.float32(1.428606765330187e-06)
_E2, _E3, _E4 = np.float32(1 / 2), np.float32(1 / 6), np.float32(1 / 24)
_E5, _E6, _E7 = np.float32(1 / 120), np.float32(1 / 720), np.float32(1 / 5040)
_LOW = np.float32(-87.0)


def exp_nonpos(x, bits, scale):
    n = x.shape[0]
    for j in range(n):
        v = x[j]
        xc = v if v > _LOW else _LOW
        ki = np.int32(xc * _LOG2E - np.float32(0.5))      # round half away, xc <= 0
        k = np.float32(ki)
        r = xc - k * _LN2_HI - k * _LN2_LO
        p = np.float32(1) + r * (np.float32(1) + r * (_E2 + r * (_E3 + r * (
            _E4 + r * (_E5 + r * (_E6 + r * _E7))))))
        x[j] = p if v == v else v
        bits[j] = (ki + np.int32(127)) << np.int32(23) if v >= _LOW else np.int32(0)
    for j in range(n):
        x[j] *= scale[j]


_DONE: list[Any] = []


def compiled() -> Any:
    """exp_nonpos compiled to be inlined into its callers (contraction: fused multiply-adds),
    once per process (nn/jit.py compile_once), for the builds of the kernels that call it."""
    from onnxrt.providers.cpu.nn import jit
    return jit.compile_once(_DONE, lambda numba: numba.njit(
        inline="always", error_model="numpy", fastmath={"contract"})(exp_nonpos))
