"""The CPU provider's compiled (numba) kernels: loading them, running them over the session's
threads, and their preconditions.

The loops live by kernel family (``loops_conv``, ``loops_pool``, ``loops_gemm``), the hot
workers' native items in ``native``, the kernels that use them beside their ops
(``conv_jit``, ``pool_jit``; ``split_matmul`` here, for MatMul and Gemm), and whether and
how kernels compile in ``compiling``. ``_load`` compiles (or loads from numba's disk cache)
every loop once per process; kernels are chosen and warmed in the class kernels'
``__init__``, so a run never compiles.

Results match the NumPy path: depthwise conv and max pooling bit for bit (the same products
summed in the same order); average pooling and the BLAS-based convs within float32 rounding
(other summation orders).

Threads: every kernel is compiled ``nogil`` and takes a range of items (planes, images,
bands) as its last two arguments; a big enough call is split into one contiguous range per
thread of the session (the ThreadPool of framework/parallel.py its run context gives the
kernel). numba's own ``prange`` is not used: its OpenMP layer's spinning threads fight the
other work on a small machine, and its workqueue layer must not be entered from two
threads at once.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np

from onnxrt.framework import hotpool, warmup
from onnxrt.framework.blas_threads import blas_threads_unused
from onnxrt.framework.parallel import SERIAL, ThreadPool, split
from onnxrt.ir.dtypes import np_dtype
from onnxrt.providers.cpu import blas, vmath
from onnxrt.providers.cpu.nn import compiling, loops_conv, loops_gemm, loops_pool, native
from onnxrt.providers.cpu.nn.compiling import (available, compile_once, enabled, njit,
                                               numba_module, set_enabled, wait_compiled)
from onnxrt.providers.cpu.nn.native import Kind

__all__ = ["available", "enabled", "set_enabled", "input_dtype", "compile_once",
           "wait_compiled", "check_window", "split_matmul"]

_njit = njit            # the name the kernels of other families compile through
_LOAD_LOCK = threading.Lock()
_K: dict[str, Any] = {}             # name -> dispatcher, built once
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
# below this many multiply-adds a kernel runs on one thread: waking another costs more
_PAR_MIN_WORK = 1 << 19


def _load() -> dict[str, Any] | None:
    """The dispatchers (numba imported here, once); None if numba fails to import."""
    if _K:
        return _K
    with _LOAD_LOCK:
        if _K:
            return _K
        numba = numba_module()
        if numba is None:
            return None
        # helpers compiled into their callers: numba resolves a callee through its caller's
        # module globals when it compiles the caller, so each goes into its loops' module
        plain = dict(error_model="numpy")
        inline = dict(inline="always", error_model="numpy")
        _install(loops_conv, numba, plain, ("_fill", "_dwcl_image", "_dw3_plane"))
        # per border pixel: a call each was the cost
        _install(loops_conv, numba, inline, ("_dw3_tap", "_dw3_pixel"))
        _install(loops_pool, numba, plain, ("_spool_block", "_pool3_plane"))
        _install(loops_pool, numba, dict(inline="always"), ("_mx",))  # else no vectorizing
        _install(loops_pool, numba, inline, ("_shift_reduce",))
        _install(loops_gemm, numba, plain, ("_im2col_band",))
        loops_gemm._exp_nonpos = numba.njit(inline="always", error_model="numpy",
                                            fastmath={"contract"})(vmath.exp_nonpos)
        loops_gemm._epi_image = epi = njit(numba, loops_gemm._epi_image)
        _K.update(epi=epi, gemm_conv=njit(numba, loops_gemm._gemm_conv_items),
                  taps_conv=njit(numba, loops_gemm._taps_conv_items),
                  conv=njit(numba, loops_conv._conv_planes),
                  dwcl=njit(numba, loops_conv._dwcl_images),
                  pool=njit(numba, loops_pool._dpool_planes),
                  spool=njit(numba, loops_pool._spool_planes),
                  mm=njit(numba, loops_gemm._mm_items),
                  pack=njit(numba, native._pack), pack_mm=njit(numba, native._pack_mm),
                  pack_dw=njit(numba, native._pack_dw),
                  pack_pool=njit(numba, native._pack_pool))
        # the native serving loop's pieces (compiled into it, resolved as its globals)
        native.install_globals(dict(
            _gemm_conv_items=_K["gemm_conv"], _taps_conv_items=_K["taps_conv"],
            _mm_items=_K["mm"], _conv_planes=_K["conv"], _dpool_planes=_K["pool"],
            _spool_planes=_K["spool"], _ptr=native._pointer_intrinsic(numba),
            carray=numba.carray, _cas=hotpool.cas_intrinsic(numba)))
        _install(native, numba, plain, ("_put", "_conv_arrays", "_gemm_slots", "_taps_slots",
                                        "_mm_slots", "_dw_slots", "_pool_slots"))
        _K["serve"] = njit(numba, native._serve)
    return _K


def _install(module: Any, numba: Any, options: dict[str, Any], names: tuple[str, ...]
             ) -> None:
    """Replace the plain functions ``names`` of ``module`` by their compiled versions (not
    cached on disk: they compile into their cached callers)."""
    for name in names:
        setattr(module, name, numba.njit(**options)(getattr(module, name)))


def _call(pool: ThreadPool, key: str, total: int, spread: bool, args: tuple,
          native: tuple[int, Callable] | None = None) -> None:
    """Run kernel ``key`` over items 0..total-1 (its last two arguments): in one call, or
    when ``spread`` in one contiguous range per thread of the session's ``pool``:
    as native items (``native`` = (kind, pack), float32 kernels) where the hot pool's
    serving loop runs them, else as Python items. The kernels that call BLAS keep it
    single-threaded in a one-range call too (ThreadPool._one_call)."""
    blas = key in _BLAS_KERNELS
    if spread and native is not None and _install_native():
        pool.native_ranges(native[0], native[1], _K[key], args, total, blas)
    else:
        pool.for_ranges(_K[key], args, total, spread, blas)


_BLAS_KERNELS = frozenset(("gemm_conv", "taps_conv", "mm"))


def _ready(dtype: np.dtype) -> bool:
    return (compiling._ENABLED[0] and np.dtype(dtype) in _FLOATS and warmup.ready()
            and _load() is not None)


def input_dtype(node: Any) -> np.dtype:
    """The node's first input element type where the graph declares it, else float32: a
    compiled kernel is prepared for that dtype, and inputs of another take the NumPy path."""
    t = node.input_types[0] if node.input_types else None
    if t is not None and t.HasField("tensor_type") and t.tensor_type.elem_type:
        try:
            return np.dtype(np_dtype(t.tensor_type.elem_type))
        except Exception:   # no NumPy dtype for it: never compiled
            return np.dtype(object)
    return np.dtype(np.float32)


# -- preconditions -----------------------------------------------------------------------------
#
# The loops above index flat arrays with unsigned offsets and no bounds checks: every
# geometry they receive is checked here first, in the Python wrappers, once per call
# (tests/fuzz/test_boundscheck.py runs them with NUMBA_BOUNDSCHECK=1 over generated
# arguments). Attributes were validated against the spec at session creation
# (onnxrt/validate); these checks hold whoever calls the wrappers.

def check_window(spatial: Any, kernel: Any, strides: Any, dil: Any, begin: Any, out: Any,
                 end: Any = None) -> None:
    """The preconditions of the windowed loops (_fill, _conv_planes, _dwcl_image,
    _im2col_band, _taps_conv_items, _dpool_planes, _spool_planes), per spatial axis:
    kernel, stride and dilation >= 1, begin pads >= 0, output size >= 0 (the loops read
    the input only at positions they test against its extent, and size their buffers from
    these values); with ``end`` (pads, ceil_mode's extra included), every window also
    starts inside the padded input, (out-1)*stride < size + begin + end. Raises ValueError
    naming the offending value."""
    nd = len(spatial)
    given = end is not None
    end = [0] * nd if end is None else end
    for name, v in (("kernel", kernel), ("strides", strides), ("dilations", dil),
                    ("begin pads", begin), ("end pads", end), ("output", out)):
        if len(v) != nd:
            raise ValueError(f"compiled window: {name} {list(v)} for {nd} spatial axes")
    for i in range(nd):
        k, s, d, b, e, o, n = (int(kernel[i]), int(strides[i]), int(dil[i]), int(begin[i]),
                               int(end[i]), int(out[i]), int(spatial[i]))
        if k < 1 or s < 1 or d < 1 or b < 0 or e < 0 or o < 0 or n < 0:
            raise ValueError(f"compiled window: axis {i} has kernel {k}, stride {s}, "
                             f"dilation {d}, pads ({b}, {e}), output {o}, input {n}: kernel, "
                             f"stride and dilation must be >= 1, pads and sizes >= 0")
        if given and o > 0 and (o - 1) * s >= n + b + e:
            raise ValueError(f"compiled window: axis {i}: output {o} at stride {s} runs past "
                             f"the padded input {n + b + e}")


def _empty(*sizes: int) -> bool:
    return any(int(v) == 0 for v in sizes)


# a float32 product of at least this many flops is split over the session's threads (BLAS
# single-threaded inside), in blocks of columns of b, so that each thread reads only its
# part of the weights: as fast as OpenBLAS's own threads, which spin after each product
# (unless OPENBLAS_THREAD_TIMEOUT was set before numpy loaded) and take the cores from the
# next kernels
_MM_SPLIT_MIN = 4_000_000
_MM_GEMV_M = 4      # fewer rows of a: matrix-vector products


def split_matmul(a: np.ndarray, b: np.ndarray, pool: ThreadPool = SERIAL) -> np.ndarray | None:
    """a @ b for 2-D float32 operands, through the BLAS single-threaded and split over the
    session's threads (columns of b, aligned to 64, else rows of a), or None where that does
    not apply: another dtype, a small product, one thread, numba missing. A b stored
    transposed (a tied embedding's .T, Gemm's transB) is read as it is."""
    if (a.dtype != np.float32 or b.dtype != np.float32 or a.ndim != 2 or b.ndim != 2
            or not _ready(a.dtype)):
        return None
    m, k = a.shape
    n = b.shape[1]
    t = pool.threads
    if t >= 2 and m == 1 and b.shape[0] == k:
        # one row (a decoder's step): one gemv on one BLAS thread. Column blocks of b on
        # the session's threads (strided halves of b, a worker to wake per product) were
        # 1.5-2x slower at every size of a genai decoder's step (512x1024 to 512x8000,
        # under the lock, the second core shared); BLAS's own threads were faster on
        # median but spin-wait on a busy core (framework/hotpool.py's ViT note). Below
        # OpenBLAS's own threading threshold it runs on this thread anyway: no bound to set
        if blas_threads_unused(n * k):
            return np.matmul(a, b)
        with pool.single_blas():
            return np.matmul(a, b)
    if t < 2 or 2 * m * n * k < _MM_SPLIT_MIN or b.shape[0] != k:
        return None
    if m < _MM_GEMV_M:
        # matrix-vector products: numpy's (BLAS's gemm on one row is slower than its
        # gemv), one row in column blocks over
        # the threads (a block's dot products are the whole product's), two or three rows
        # on one thread (column blocks of those were not summed as the whole product is:
        # the light zoo models' tied logits split apart)
        if m > 1:
            with pool.single_blas():
                return np.matmul(a, b)
        c = np.empty((1, n), np.float32)
        cols = split(n, t, 64)

        def part(j: int) -> None:
            n0, n1 = cols[j]
            np.matmul(a, b[:, n0:n1], out=c[:, n0:n1])

        pool.parallel_for(len(cols), part)
        return c
    gemm = blas.gemm(np.float32)
    if gemm is None:
        return None
    a = np.ascontiguousarray(a)
    tb = not b.flags.c_contiguous and b.T.flags.c_contiguous
    b = b.T if tb else np.ascontiguousarray(b)
    c = np.empty((m, n), np.float32)
    if n >= 64 * t:
        parts = split(n, t, 64)
        items = np.array([(0, m, n0, n1) for n0, n1 in parts], np.int64)
    else:
        parts = split(m, t, 8)
        items = np.array([(m0, m1, 0, n) for m0, m1 in parts], np.int64)
    one, zero = np.float32(1), np.float32(0)
    _call(pool, "mm", len(items), True, (gemm, a, b, c, tb, one, zero, items),
          (Kind.MATMUL, lambda ji, jf: _K["pack_mm"](ji, a, b, c, tb, items)))
    return c


_NATIVE: list[bool] = []


def _slots() -> tuple[np.ndarray, np.ndarray]:
    """Scratch slot arrays shaped like the hot pool's, to compile a pack function now."""
    return np.zeros(hotpool.INT_SLOTS, np.int64), np.zeros(hotpool.FLOAT_SLOTS, np.float64)


def _install_native() -> bool:
    """Give the hot pool the serving loop that runs conv items itself (_serve), once;
    False where it cannot (no BLAS gemm, no compiled spin loops)."""
    if _NATIVE:
        return _NATIVE[0]
    with _LOAD_LOCK:
        if not _NATIVE:
            gemm = blas.gemm(np.float32)
            ok = gemm is not None and hotpool.install_native(_K["serve"], (gemm,))
            if ok:      # split_matmul's calls, compiled now rather than in a run, for a
                # weight b (read-only) and for a computed one
                a = np.zeros((1, 1), np.float32)
                ro = a.copy()
                ro.flags.writeable = False
                items = np.zeros((0, 4), np.int64)
                for b in (ro, a):
                    _K["pack_mm"](_slots()[0], a, b, a, False, items)
                    _K["mm"](gemm, a, b, a, False, np.float32(1), np.float32(0), items, 0, 0)
            _NATIVE.append(ok)
    return _NATIVE[0]
