"""The native items of the hot workers (framework/hotpool.py): a kernel's split posted to the
spinning workers as a kind and a range, run by a compiled serving loop without the GIL.

A native item's arguments travel in the pool's two shared slot arrays (``ji``, int64, and
``jf``, float64; one caller at a time holds the hot workers): each array argument as its
address then its dimensions, then flags and geometry. The packing functions (``_pack*``,
compiled, called by the posting thread) and the unpacking ones (``_*_slots``, compiled into
the serving loop) share the layouts below; the workers rebuild the arrays over the caller's
memory (``_ptr``, ``carray``) and call the kernels without leaving compiled code.

Float32 only: each dtype would compile every kernel into the serving loop again, lengthening
the first session's compile (float64 takes the Python items instead).
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from onnxrt.framework.hotpool import (CLAIM, DONE, FLOAT_SLOTS, HI, INT_SLOTS, KIND, LO,
                                      PARK, POSTED)
from onnxrt.providers.cpu.nn.loops_conv import _conv_planes
from onnxrt.providers.cpu.nn.loops_gemm import _gemm_conv_items, _mm_items, _taps_conv_items
from onnxrt.providers.cpu.nn.loops_pool import _dpool_planes, _spool_planes

__all__ = ["Kind", "install_globals"]


class Kind(enum.IntEnum):
    """What a posted item runs (a control row's KIND)."""

    PYTHON = 0          # a Python callable: hotpool's own loop returns it to Python
    GEMM_CONV = 1       # loops_gemm._gemm_conv_items
    TAPS_CONV = 2       # loops_gemm._taps_conv_items
    MATMUL = 3          # loops_gemm._mm_items
    DEPTHWISE = 4       # loops_conv._conv_planes
    POOL_STRIDE1 = 5    # loops_pool._spool_planes
    POOL_ANY = 6        # loops_pool._dpool_planes


# the kinds as plain ints, the constants the compiled serving loop compares with
PYTHON, GEMM_CONV, TAPS_CONV, MATMUL, DEPTHWISE, POOL_STRIDE1, POOL_ANY = (int(k) for k in Kind)

# -- the slot layouts (offsets into ji; an array takes 1 + ndim slots) ----------------------
# a dense conv (GEMM_CONV, TAPS_CONV): x (N, C, H, W), w (2-D, or 3-D for taps), y (N, M,
# P), b (M), z (N, M, P: the residual), items (n, 3); flags, the epilogue's kind, then the
# geometry; alpha and beta in jf
CONV_X, CONV_W, CONV_Y, CONV_B, CONV_Z, CONV_ITEMS = 0, 5, 9, 13, 15, 19
CONV_HAS_B, CONV_HAS_Z, CONV_EPI, CONV_GEO = 22, 23, 24, 25
CONV_ALPHA, CONV_BETA = 0, 1
CONV_GEO_N = 11
# a matrix product: a, b, c (2-D), items (n, 4), whether b is transposed
MM_A, MM_B, MM_C, MM_ITEMS, MM_TB = 0, 3, 6, 9, 12
# a depthwise conv: x, w, out (4-D), b (1-D), then the geometry
DW_X, DW_W, DW_B, DW_OUT, DW_GEO = 0, 5, 10, 12, 17
DW_GEO_N = 7
# a pool: x, out (3-D: planes), div (2-D), then the geometry
POOL_X, POOL_OUT, POOL_DIV, POOL_GEO = 0, 4, 8, 11
POOL_GEO_N = 9

assert max(CONV_GEO + CONV_GEO_N, MM_TB + 1, DW_GEO + DW_GEO_N,
           POOL_GEO + POOL_GEO_N) <= INT_SLOTS and CONV_BETA < FLOAT_SLOTS

# compiled stand-ins set by install_globals (the serving loop resolves them as globals)
_ptr: Any = None
carray: Any = None
_cas: Any = None


def _put(ji, at, a):
    ji[at] = a.ctypes.data
    for d in range(a.ndim):
        ji[at + 1 + d] = a.shape[d]


def _pack(ji, jf, x, w, y, b, has_b, z, has_z, kind, alpha, beta, items, geo):
    """A conv's arguments into the slots (the CONV_ layout); alpha, beta in jf."""
    _put(ji, CONV_X, x)
    _put(ji, CONV_W, w)
    _put(ji, CONV_Y, y)
    _put(ji, CONV_B, b)
    _put(ji, CONV_Z, z)
    _put(ji, CONV_ITEMS, items)
    ji[CONV_HAS_B] = has_b
    ji[CONV_HAS_Z] = has_z
    ji[CONV_EPI] = kind
    for j in range(len(geo)):
        ji[CONV_GEO + j] = geo[j]
    jf[CONV_ALPHA] = alpha
    jf[CONV_BETA] = beta


def _pack_mm(ji, a, b, c, tb, items):
    """A product's arguments into the slots (the MM_ layout)."""
    _put(ji, MM_A, a)
    _put(ji, MM_B, b)
    _put(ji, MM_C, c)
    _put(ji, MM_ITEMS, items)
    ji[MM_TB] = tb


def _mm_slots(gemm, ji, like, lo, hi):
    a = carray(_ptr(ji[MM_A], like), (ji[MM_A + 1], ji[MM_A + 2]))
    b = carray(_ptr(ji[MM_B], like), (ji[MM_B + 1], ji[MM_B + 2]))
    c = carray(_ptr(ji[MM_C], like), (ji[MM_C + 1], ji[MM_C + 2]))
    items = carray(_ptr(ji[MM_ITEMS], ji), (ji[MM_ITEMS + 1], ji[MM_ITEMS + 2]))
    t = like.dtype.type
    _mm_items(gemm, a, b, c, ji[MM_TB] != 0, t(1), t(0), items, lo, hi)


def _pack_dw(ji, x, w, b, out, geo):
    """A depthwise conv's arguments into the slots (the DW_ layout)."""
    _put(ji, DW_X, x)
    _put(ji, DW_W, w)
    _put(ji, DW_B, b)
    _put(ji, DW_OUT, out)
    for j in range(len(geo)):
        ji[DW_GEO + j] = geo[j]


def _dw_slots(ji, like, lo, hi):
    x = carray(_ptr(ji[DW_X], like), (ji[DW_X + 1], ji[DW_X + 2], ji[DW_X + 3], ji[DW_X + 4]))
    w = carray(_ptr(ji[DW_W], like), (ji[DW_W + 1], ji[DW_W + 2], ji[DW_W + 3], ji[DW_W + 4]))
    b = carray(_ptr(ji[DW_B], like), (ji[DW_B + 1],))
    out = carray(_ptr(ji[DW_OUT], like),
                 (ji[DW_OUT + 1], ji[DW_OUT + 2], ji[DW_OUT + 3], ji[DW_OUT + 4]))
    g = ji[DW_GEO:]
    _conv_planes(x, w, b, out, g[0], g[1], g[2], g[3], g[4], g[5], g[6], lo, hi)


def _pack_pool(ji, x, out, div, geo):
    """A pool's arguments into the slots (the POOL_ layout)."""
    _put(ji, POOL_X, x)
    _put(ji, POOL_OUT, out)
    _put(ji, POOL_DIV, div)
    for j in range(len(geo)):
        ji[POOL_GEO + j] = geo[j]


def _pool_slots(ji, like, strided, lo, hi):
    x = carray(_ptr(ji[POOL_X], like), (ji[POOL_X + 1], ji[POOL_X + 2], ji[POOL_X + 3]))
    out = carray(_ptr(ji[POOL_OUT], like),
                 (ji[POOL_OUT + 1], ji[POOL_OUT + 2], ji[POOL_OUT + 3]))
    div = carray(_ptr(ji[POOL_DIV], like), (ji[POOL_DIV + 1], ji[POOL_DIV + 2]))
    g = ji[POOL_GEO:]
    if strided:
        _dpool_planes(x, out, div, g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], lo,
                      hi)
    else:
        _spool_planes(x, out, div, g[0], g[1], g[2], g[3], g[4], g[5], g[6], lo, hi)


def _conv_arrays(ji, like):
    """x, y, b, z and items of the packed conv, over the caller's memory, in like's dtype."""
    x = carray(_ptr(ji[CONV_X], like),
               (ji[CONV_X + 1], ji[CONV_X + 2], ji[CONV_X + 3], ji[CONV_X + 4]))
    y = carray(_ptr(ji[CONV_Y], like), (ji[CONV_Y + 1], ji[CONV_Y + 2], ji[CONV_Y + 3]))
    b = carray(_ptr(ji[CONV_B], like), (ji[CONV_B + 1],))
    z = carray(_ptr(ji[CONV_Z], like), (ji[CONV_Z + 1], ji[CONV_Z + 2], ji[CONV_Z + 3]))
    items = carray(_ptr(ji[CONV_ITEMS], ji), (ji[CONV_ITEMS + 1], ji[CONV_ITEMS + 2]))
    return x, y, b, z, items


def _gemm_slots(gemm, ji, jf, like, lo, hi):
    x, y, b, z, items = _conv_arrays(ji, like)
    w = carray(_ptr(ji[CONV_W], like), (ji[CONV_W + 1], ji[CONV_W + 2]))
    t = like.dtype.type
    g = ji[CONV_GEO:]
    _gemm_conv_items(gemm, x, w, y, b, ji[CONV_HAS_B] != 0, z, ji[CONV_HAS_Z] != 0,
                     ji[CONV_EPI], t(jf[CONV_ALPHA]), t(jf[CONV_BETA]), t(1), t(0), g[0],
                     g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], items, g[10] != 0,
                     lo, hi)


def _taps_slots(gemm, ji, jf, like, lo, hi):
    x, y, b, z, items = _conv_arrays(ji, like)
    wt = carray(_ptr(ji[CONV_W], like), (ji[CONV_W + 1], ji[CONV_W + 2], ji[CONV_W + 3]))
    t = like.dtype.type
    g = ji[CONV_GEO:]
    _taps_conv_items(gemm, x, wt, y, b, ji[CONV_HAS_B] != 0, z, ji[CONV_HAS_Z] != 0,
                     ji[CONV_EPI], t(jf[CONV_ALPHA]), t(jf[CONV_BETA]), t(1), t(0), g[0],
                     g[1], g[2], g[3], g[4], g[5], g[6], items, lo, hi)


def _serve(ctl, w, done, spins, yield_fn, ji, jf, gemm):
    """The hot pool's serving loop (hotpool._serve's contract) running the native float32
    items it is posted: ``Kind`` in its control row's KIND, the range in LO, HI, each
    claimed first (CLAIM, hotpool's claim word). The sched_yield calls around
    an item also keep the compiler from moving the slot reads before the post is seen, or
    the kernel's stores after the "done" mark."""
    ctl[w, DONE] = done
    i = 0
    while i < spins:
        v = ctl[w, POSTED]
        if v != done:
            if _cas(ctl, w, CLAIM, v, -v) != v:
                done = v            # the caller took it back (hotpool._steal)
                ctl[w, DONE] = done
                i = 0
                continue
            k = ctl[w, KIND]
            if k == PYTHON:
                return v
            yield_fn()
            lo, hi = ctl[w, LO], ctl[w, HI]
            if k == GEMM_CONV:
                _gemm_slots(gemm, ji, jf, np.empty(0, np.float32), lo, hi)
            elif k == TAPS_CONV:
                _taps_slots(gemm, ji, jf, np.empty(0, np.float32), lo, hi)
            elif k == MATMUL:
                _mm_slots(gemm, ji, np.empty(0, np.float32), lo, hi)
            elif k == DEPTHWISE:
                _dw_slots(ji, np.empty(0, np.float32), lo, hi)
            elif k == POOL_STRIDE1 or k == POOL_ANY:
                _pool_slots(ji, np.empty(0, np.float32), k == POOL_ANY, lo, hi)
            yield_fn()
            done = v
            ctl[w, DONE] = done
            i = 0
            continue
        if ctl[w, PARK] != 0:
            return -1
        yield_fn()
        i += 1
    return -1


def _pointer_intrinsic(numba: Any) -> Any:
    """_ptr(addr, like): the address as a pointer to like's element type (for carray)."""
    from numba.core import types
    from numba.extending import intrinsic

    @intrinsic
    def _ptr(typingctx, addr, like):
        sig = types.CPointer(like.dtype)(addr, like)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(signature.return_type))
        return sig, codegen
    return _ptr


def install_globals(compiled: dict[str, Any]) -> None:
    """Make the names the compiled functions here call resolve to compiled code (numba
    reads a compiled callee from its caller's globals when it compiles the caller)."""
    globals().update(compiled)
