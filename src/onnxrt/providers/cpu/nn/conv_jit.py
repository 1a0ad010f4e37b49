"""The compiled Conv kernels, chosen per node in Conv's ``__init__`` (conv.py): the direct
loops for one input channel per group (``JitConv``: depthwise, single-channel inputs) and
im2col + BLAS + epilogue in one compiled call per range of items for the rest
(``GemmConv``), and Conv's compiled epilogue (bias, residual, activation)."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from onnxrt.framework.blas_threads import blas_threads_unused
from onnxrt.framework.parallel import SERIAL, ThreadPool
from onnxrt.providers.cpu import blas
from onnxrt.providers.cpu.nn import jit
from onnxrt.providers.cpu.nn.native import Kind

__all__ = ["JitConv", "conv_kernel", "GemmConv", "gemm_conv_kernel", "epilogue_kernel",
           "EPI_KINDS"]

# grouped conv with several input channels per group stays on the NumPy path's batched
# matmuls, faster there
_MAX_CG = 1
# depthwise outputs narrower than this run channels-last (_dwcl_image): per-plane loops
# are a few pixels long there
_MIN_OUT_W = 10


class JitConv:
    """Grouped 1-D/2-D conv with its bias; weights (M, Cg, KH, KW) prepared once."""

    def __init__(self, w: np.ndarray, group: int, kernel: tuple[int, ...]) -> None:
        m, cg = w.shape[0], w.shape[1]
        self.w = np.ascontiguousarray(w.reshape((m, cg) + ((1,) if len(kernel) == 1 else ())
                                                + kernel))
        self.cg, self.mg = int(cg), m // group
        self.nd = len(kernel)
        self.zero = np.zeros(m, dtype=w.dtype)
        # channels-last weights (KH, KW, M) for narrow depthwise outputs
        self.wt = np.ascontiguousarray(self.w[:, 0].transpose(1, 2, 0)) if cg == 1 else None
        self._warm()

    def _warm(self) -> None:
        # compile (or load from the cache) every kernel a run may take, now
        m, dt = self.w.shape[0], self.w.dtype
        x = np.zeros((1, self.cg * (m // self.mg), 3, 3), dt)
        # the weights themselves (a read-only array is a type of its own), over a 3x3 image
        # padded to the kernel's size
        kh, kw = self.w.shape[2], self.w.shape[3]
        jit._K["conv"](x, self.w, self.zero, np.empty((1, m, 1, 1), dt), self.mg, 1, 1, 1, 1,
                   max(0, kh - 3), max(0, kw - 3), 0, 1)
        if self.wt is not None:
            jit._K["dwcl"](x, self.wt, self.zero, np.empty((1, m, 1, 1), dt), self.mg, 1, 1, 1, 1,
                       max(0, kh - 3), max(0, kw - 3), 0, 1)
        if dt == np.float32 and jit._install_native():
            # its serving loop runs the planes: that and the packing compiled now too
            jit._K["pack_dw"](jit._slots()[0], x, self.w, self.zero, np.empty((1, m, 1, 1), dt),
                          (self.mg, 1, 1, 1, 1, 0, 0))

    def __call__(self, x: np.ndarray, bias: np.ndarray | None, strides: list[int],
                 dil: list[int], begin: list[int], out_sp: list[int],
                 pool: ThreadPool = SERIAL) -> np.ndarray | None:
        # the loops do not check bounds: a wrong input must fail here, not read past memory
        if x.shape[1] != self.cg * (self.w.shape[0] // self.mg) or x.ndim != self.nd + 2:
            raise ValueError(f"input of shape {x.shape} does not match the weight "
                             f"{self.w.shape} with group {self.w.shape[0] // self.mg}")
        narrow = out_sp[-1] < _MIN_OUT_W
        if narrow and self.wt is None:
            return None
        shape = x.shape[:1] + (self.w.shape[0],) + tuple(out_sp)
        if x.ndim == 3:
            x, strides, dil, begin, out_sp = (x[:, :, None], [1] + strides, [1] + dil,
                                              [0] + begin, [1] + out_sp)
        jit.check_window(x.shape[2:], self.w.shape[2:], strides, dil, begin, out_sp)
        if jit._empty(*shape):
            return np.zeros(shape, x.dtype)
        x = np.ascontiguousarray(x)
        n = x.shape[0]
        m = self.w.shape[0]
        out = np.empty((n, m, out_sp[0], out_sp[1]), dtype=x.dtype)
        b = self.zero if bias is None else np.ascontiguousarray(bias, dtype=x.dtype)
        if b.shape != (m,):     # the loops read b[m] for every output channel
            raise ValueError(f"input B of shape {list(b.shape)}: expected ({m},), one value "
                             f"per output channel")
        work = out.size * self.w[0].size
        geo = (strides[0], strides[1], dil[0], dil[1], begin[0], begin[1])
        spread = work >= jit._PAR_MIN_WORK
        if narrow:
            jit._call(pool, "dwcl", n, spread, (x, self.wt, b, out, self.mg) + geo)
        else:
            args = (x, self.w, b, out, self.mg) + geo
            jit._call(pool, "conv", n * m, spread, args,
                  (Kind.DEPTHWISE, lambda ji, jf: jit._K["pack_dw"](ji, *args[:4], args[4:]))
                  if x.dtype == np.float32 else None)
        return out.reshape(shape)

    def bind(self, x_shape: tuple[int, ...], dtype: np.dtype, bias: np.ndarray | None,
             strides: list[int], dil: list[int], begin: list[int], out_sp: list[int],
             threads: int) -> Callable[[np.ndarray, ThreadPool], np.ndarray] | None:
        """``__call__`` for one 2-D input shape and dtype of a session with ``threads``
        threads, its checks and choices made now: ``run(x, pool)`` for x of exactly that
        shape and dtype; None where ``__call__`` must serve (it returns None there, or
        the shape is empty, or not 2-D)."""
        m = self.w.shape[0]
        if (len(x_shape) != 4 or np.dtype(dtype) != self.w.dtype
                or x_shape[1] != self.cg * (m // self.mg)):
            return None
        narrow = out_sp[-1] < _MIN_OUT_W
        if narrow and self.wt is None:
            return None
        jit.check_window(x_shape[2:], self.w.shape[2:], strides, dil, begin, out_sp)
        n = x_shape[0]
        shape = (n, m, int(out_sp[0]), int(out_sp[1]))
        if jit._empty(*shape):
            return None
        b = self.zero if bias is None else np.ascontiguousarray(bias, dtype=self.w.dtype)
        if b.shape != (m,):
            return None
        geo = (strides[0], strides[1], dil[0], dil[1], begin[0], begin[1])
        spread = threads > 1 and math.prod(shape) * self.w[0].size >= jit._PAR_MIN_WORK
        dt, w, wt, mg, k = self.w.dtype, self.w, self.wt, self.mg, jit._K

        if narrow:
            def run(x: np.ndarray, pool: ThreadPool) -> np.ndarray:
                out = np.empty(shape, dt)
                jit._call(pool, "dwcl", n, spread, (np.ascontiguousarray(x), wt, b, out, mg)
                          + geo)
                return out
            return run
        total = n * m
        f32 = dt == np.float32
        if not spread:
            conv = k["conv"]

            def run(x: np.ndarray, pool: ThreadPool) -> np.ndarray:
                out = np.empty(shape, dt)
                conv(np.ascontiguousarray(x), w, b, out, mg, *geo, 0, total)
                return out
            return run

        def run(x: np.ndarray, pool: ThreadPool) -> np.ndarray:
            out = np.empty(shape, dt)
            args = (np.ascontiguousarray(x), w, b, out, mg) + geo
            jit._call(pool, "conv", total, True, args,
                      (Kind.DEPTHWISE, lambda ji, jf: k["pack_dw"](ji, *args[:4], args[4:]))
                      if f32 else None)
            return out
        return run


def conv_kernel(w: np.ndarray, group: int) -> JitConv | None:
    """A compiled kernel for a constant conv weight (M, Cg, *kernel) in the compute dtype,
    where it beats the NumPy path and the im2col one: one input channel per group
    (depthwise, or a single-channel input), 1-D or 2-D."""
    kernel = tuple(int(k) for k in w.shape[2:])
    if w.shape[1] > _MAX_CG or len(kernel) not in (1, 2) or not jit._ready(w.dtype):
        return None
    # one input channel (a grey image, a spectrogram) with group 1 is the depthwise loop
    # with every output from that channel: im2col with K = 9 left BLAS nothing to do
    return JitConv(np.asarray(w), max(group, 1), kernel)


# -- dense Conv: im2col + BLAS + epilogue in one compiled call ---------------------------------

# a band's im2col buffer is kept near this size (in cache while BLAS reads it), as long as
# it keeps _MIN_COLS columns for BLAS to be efficient
_COLS_BYTES = 512 << 10
_MIN_COLS = 512
# stride-1 dense convs with at least this many input channels and at most this many output
# channels take the tap-by-tap products instead of im2col (_taps_conv_items)
_TAPS_MIN_C = 64
_TAPS_MAX_M = 128
# below this many flops a conv runs on the calling thread with BLAS single-threaded: a
# split (handing a part to a spinning worker, GIL hand-offs included) costs more than it
# saves on a smaller conv, and so does waking BLAS's own threads
_GEMM_PAR_MIN = 4_000_000
# a conv of fewer images than threads is split in bands of rows while every thread's share
# keeps this many output columns, else in blocks of output channels
_MIN_SPLIT_COLS = 256
# ... but in blocks of output channels only from this many flops: each thread's product
# then has a fraction of the rows over the same few columns, and a 1x1 conv of 64 -> 64
# channels on 490 pixels (4.0M flops) took 283 us split against 138 on one thread (one
# node under the lock), MobileNetV3's 96 -> 576 on 7x7 (5.4M) 422 against 275
_CHANNEL_SPLIT_MIN = 16_000_000


class GemmConv:
    """A dense or grouped 1-D/2-D float32/float64 Conv with its epilogue in one compiled call
    per thread (_gemm_conv_items, or _taps_conv_items without im2col): no NumPy call and no
    GIL between the im2col of a band, its product and its epilogue, so the session's threads
    split the images (or the bands of one image) and run them fully in parallel."""

    def __init__(self, w: np.ndarray, gemm: Any, group: int = 1) -> None:
        self.m = int(w.shape[0])
        self.group = group
        self.mg = self.m // group
        self.kernel = tuple(int(k) for k in w.shape[2:])
        if len(self.kernel) == 1:
            self.kernel = (1,) + self.kernel
        self.w = np.ascontiguousarray(w.reshape(self.m, -1))
        self.gemm = gemm
        # the library the kernel calls is loaded sequential (MKL): numpy's BLAS threads
        # never wake for it, so no single_blas block around a one-thread call
        self.sequential = blas.name(w.dtype) == "mkl"
        dt = self.w.dtype
        self.one, self.zero = dt.type(1), dt.type(0)
        self.nob = np.zeros(self.m, dt)
        self.noz = np.zeros((1, 1, 1), dt)
        self._plans: dict[tuple, tuple] = {}
        # compile (or load from the cache) now: a 1x1 conv of one pixel
        y = np.empty((1, self.m, 1), dt)
        x = np.zeros((1, self.w.shape[1], 1, 1), dt)
        items = np.array([[0, 0, 1, 0, self.m]], np.int64)
        for direct in (True, False):      # the weight itself: a read-only one is a type
            jit._K["gemm_conv"](gemm, x, self.w, y, self.nob, False, self.noz, False, 0,
                            self.zero, self.zero, self.one, self.zero, 1, 1, 1, 1, 1, 1, 0,
                            0, 1, self.m, items, direct, 0, 1)
        # the tap-by-tap form (_taps_conv_items): weights as (KH*KW, M, C)
        kh, kw = self.kernel
        c = self.w.shape[1] // (kh * kw)
        self.wt = None
        if group == 1 and kh * kw > 1 and c >= _TAPS_MIN_C and self.m <= _TAPS_MAX_M:
            self.wt = np.ascontiguousarray(
                self.w.reshape(self.m, c, kh, kw).transpose(2, 3, 0, 1).reshape(kh * kw,
                                                                              self.m, c))
            jit._K["taps_conv"](gemm, np.zeros((1, c, 1, 1), dt), self.wt, y, self.nob, False,
                            self.noz, False, 0, self.zero, self.zero, self.one, self.zero, kh,
                            kw, 1, 1, kh // 2, kw // 2, 1, items, 0, 1)
        if dt == np.float32 and jit._install_native():
            # splits run in the hot pool's serving loop: the packing of either form too
            ji, jf = jit._slots()
            for wk, n_geo in ((self.w, 11), (self.wt, 7)):
                if wk is not None:
                    jit._K["pack"](ji, jf, x, wk, y, self.nob, False, self.noz, False, 0,
                               self.zero, self.zero, items, (0,) * n_geo)

    def _plan(self, n: int, out: tuple[int, int], direct: bool, t: int) -> tuple:
        """Items (image, row0, row1, m0, m1) and how they are spread over threads."""
        key = (n, out, direct, t)
        hit = self._plans.get(key)
        if hit is not None:
            return hit
        oh, ow = out
        kk = self.w.shape[1]
        if direct:
            band = oh
        else:
            band = max(1, min(oh, _COLS_BYTES // max(kk * ow * self.w.itemsize, 1)))
            band = min(oh, max(band, -(-_MIN_COLS // max(ow, 1))))
        flops = 2 * self.m * kk * oh * ow * n
        # how the work is spread: "one" (the calling thread, BLAS single-threaded: small
        # convs), "split" (one contiguous range of items per thread, BLAS single-threaded
        # inside: images, else bands of rows, else blocks of output channels). Never BLAS's
        # own threads: slower on every shape that fell to them, and with
        # OPENBLAS_THREAD_TIMEOUT unset they spin after each product and take the cores
        # from the rest of the run
        mode = "one"
        units = n * self.group      # (image, group) blocks: independent, equal work
        parts = 1                   # output channel blocks per group
        if t > 1 and flops >= _GEMM_PAR_MIN:
            mode = "split"
            if units < 2 * t and units % t:         # too few to share evenly
                more = t // math.gcd(units, t)      # parts per unit: a multiple of t in all
                if ow * (oh // more) >= _MIN_SPLIT_COLS:
                    # bands of rows, each thread's share >= _MIN_SPLIT_COLS columns
                    band = min(band, -(-oh // more))
                elif flops >= _CHANNEL_SPLIT_MIN:
                    parts = more    # blocks of channels (each thread its own im2col)
                else:
                    mode = "one"
        if mode == "split" and parts == 1:
            # bands of equal work: as many per (image, group) block as make the blocks a
            # multiple of the threads, where the threads get few of them
            nb = -(-oh // band)
            if (units * nb) % t and units * nb < 4 * t:
                step = t // math.gcd(units, t)
                band = -(-oh // min(-(-nb // step) * step, oh))
        rows = [(r, min(oh, r + band)) for r in range(0, oh, band)]
        step = -(-self.mg // parts)
        step = -(-step // 8) * 8 if step > 8 else step
        chans = [(c, min(self.mg, c + step)) for c in range(0, self.mg, step)]
        items = np.array([(i, r0, r1, g * self.mg + c0, g * self.mg + c1) for i in range(n)
                          for r0, r1 in rows for g in range(self.group) for c0, c1 in chans],
                         np.int64)
        hit = (items, mode)
        self._plans[key] = hit
        return hit

    def __call__(self, x: np.ndarray, bias: np.ndarray | None, z: np.ndarray | None,
                 kind: int, alpha: float, beta: float, strides: list[int], dil: list[int],
                 begin: list[int], out_sp: list[int], out: np.ndarray | None = None,
                 pool: ThreadPool = SERIAL) -> np.ndarray:
        """The output (N, M, OH*OW), written into ``out`` when given: that shape, the
        weight's dtype, C-contiguous or a slice of channels of a C-contiguous array (the
        joined output of plan/inplace.py)."""
        if x.ndim == 3:
            x, strides, dil, begin, out_sp = (x[:, :, None], [1] + strides, [1] + dil,
                                              [0] + begin, [1] + out_sp)
        n = x.shape[0]
        kh, kw = self.kernel
        if x.ndim != 4:
            raise ValueError(f"GemmConv: input of rank {x.ndim}, expected 3 or 4")
        jit.check_window(x.shape[2:], self.kernel, strides, dil, begin, out_sp)
        if x.shape[1] * kh * kw != self.w.shape[1] * self.group:
            raise ValueError(f"input has {x.shape[1]} channels, the weight expects "
                             f"{self.w.shape[1] // (kh * kw) * self.group}")
        x = np.ascontiguousarray(x, dtype=self.w.dtype)
        oh, ow = out_sp
        direct = (kh == 1 and kw == 1 and strides == [1, 1] and begin == [0, 0]
                  and (oh, ow) == x.shape[2:])
        y = np.empty((n, self.m, oh * ow), dtype=self.w.dtype) if out is None else \
            _channels_of(out)
        if y.shape[0] != n or y.shape[1] < self.m or y.shape[2] != oh * ow:
            raise ValueError(f"GemmConv: output {y.shape} for {n} images of {self.m} "
                             f"channels of {oh}x{ow}")
        if jit._empty(n, self.m, oh, ow):
            return y
        items, mode = self._plan(n, (oh, ow), direct, pool.threads)
        dt = self.w.dtype
        b = self.nob if bias is None else np.ascontiguousarray(bias, dtype=dt)
        if b.shape != (self.m,):     # _epi_image reads b[m] for every output channel
            raise ValueError(f"input B of shape {list(b.shape)}: expected ({self.m},), one "
                             f"value per output channel")
        zz = self.noz if z is None else np.ascontiguousarray(z, dtype=dt).reshape(y.shape)
        key, wk, native = "gemm_conv", self.w, Kind.GEMM_CONV
        geo: tuple = (kh, kw, strides[0], strides[1], dil[0], dil[1], begin[0], begin[1], ow,
                      self.mg)
        if (self.wt is not None and strides == [1, 1] and not direct
                and x.shape[3] + begin[1] <= ow + (kw - 1) * dil[1]):
            # stride 1, the padded row holds the whole input row: no im2col
            key, wk, native = "taps_conv", self.wt, Kind.TAPS_CONV
            geo = (kh, kw, dil[0], dil[1], begin[0], begin[1], ow)
        head = (x, wk, y, b, bias is not None, zz, z is not None, kind, dt.type(alpha),
                dt.type(beta))
        args = (self.gemm, *head, self.one, self.zero, *geo, items)
        if native == Kind.GEMM_CONV:
            args += (direct,)
            geo += (int(direct),)
        if mode == "one":
            if self.sequential or blas_threads_unused(self.m * self.w.shape[1] * oh * ow * n):
                jit._K[key](*args, 0, len(items))
            else:
                with pool.single_blas():
                    jit._K[key](*args, 0, len(items))
        else:
            jit._call(pool, key, len(items), True, args,
                  (native, lambda ji, jf: jit._K["pack"](ji, jf, *head, items, geo))
                  if dt == np.float32 else None)
        return y

    def bind(self, x_shape: tuple[int, ...], dtype: np.dtype, bias: np.ndarray | None,
             kind: int, alpha: float, beta: float, strides: list[int], dil: list[int],
             begin: list[int], out_sp: list[int], threads: int
             ) -> Callable[[np.ndarray, ThreadPool], np.ndarray] | None:
        """``__call__`` without Z or ``out`` for one 2-D input shape and dtype of a session
        with ``threads`` threads, its checks, plan and arguments made now (they cost ~10 us
        a call, as much as a small conv's product): ``run(x, pool)`` for x of exactly that
        shape and dtype, returning (N, M, OH*OW); None where ``__call__`` must serve."""
        if len(x_shape) != 4 or np.dtype(dtype) != self.w.dtype:
            return None
        n = x_shape[0]
        kh, kw = self.kernel
        jit.check_window(x_shape[2:], self.kernel, strides, dil, begin, out_sp)
        if x_shape[1] * kh * kw != self.w.shape[1] * self.group:
            return None
        oh, ow = int(out_sp[0]), int(out_sp[1])
        if jit._empty(n, self.m, oh, ow):
            return None
        direct = (kh == 1 and kw == 1 and strides == [1, 1] and begin == [0, 0]
                  and (oh, ow) == tuple(x_shape[2:]))
        items, mode = self._plan(n, (oh, ow), direct, threads)
        dt = self.w.dtype
        b = self.nob if bias is None else np.ascontiguousarray(bias, dtype=dt)
        if b.shape != (self.m,):
            return None
        key, wk, native = "gemm_conv", self.w, Kind.GEMM_CONV
        geo: tuple = (kh, kw, strides[0], strides[1], dil[0], dil[1], begin[0], begin[1], ow,
                      self.mg)
        if (self.wt is not None and strides == [1, 1] and not direct
                and x_shape[3] + begin[1] <= ow + (kw - 1) * dil[1]):
            key, wk, native = "taps_conv", self.wt, Kind.TAPS_CONV
            geo = (kh, kw, dil[0], dil[1], begin[0], begin[1], ow)
        mid = (b, bias is not None, self.noz, False, kind, dt.type(alpha), dt.type(beta))
        tail = (self.one, self.zero, *geo, items)
        pgeo = geo
        if native == Kind.GEMM_CONV:
            tail += (direct,)
            pgeo = geo + (int(direct),)
        shape = (n, self.m, oh * ow)
        total = len(items)
        gemm, fn = self.gemm, jit._K[key]
        if mode == "one":
            free = self.sequential or blas_threads_unused(self.m * self.w.shape[1] * oh * ow * n)

            def run(x: np.ndarray, pool: ThreadPool) -> np.ndarray:
                y = np.empty(shape, dt)
                if free:
                    fn(gemm, np.ascontiguousarray(x), wk, y, *mid, *tail, 0, total)
                else:
                    with pool.single_blas():
                        fn(gemm, np.ascontiguousarray(x), wk, y, *mid, *tail, 0, total)
                return y
            return run
        f32 = dt == np.float32
        pack = jit._K["pack"] if f32 else None

        def run(x: np.ndarray, pool: ThreadPool) -> np.ndarray:
            y = np.empty(shape, dt)
            x = np.ascontiguousarray(x)
            jit._call(pool, key, total, True, (gemm, x, wk, y, *mid, *tail),
                      (native, lambda ji, jf: pack(ji, jf, x, wk, y, *mid, items, pgeo))
                      if f32 else None)
            return y
        return run


def _channels_of(out: np.ndarray) -> np.ndarray:
    """``out`` (N, M, L), C-contiguous or channels c0..c0+M of a C-contiguous (N, T, L)
    array, as the kernels' y: itself, or that array seen from channel c0 on, (N, T, L)
    with out's strides. The kernels index y by its own shape and write channels below M
    only, so nothing past out's channels is touched (the view's last image runs past the
    array's end and is never read there)."""
    if out.flags.c_contiguous:
        return out
    n, m, ln = out.shape
    it = out.itemsize
    if out.strides[2] != it or out.strides[1] != ln * it or out.strides[0] % (ln * it):
        raise ValueError(f"GemmConv: out with strides {out.strides} is not a channel slice "
                         f"of a contiguous array")
    t = out.strides[0] // (ln * it)
    return np.lib.stride_tricks.as_strided(out, (n, t, ln), out.strides)


def gemm_conv_kernel(w: np.ndarray, group: int) -> GemmConv | None:
    """The compiled conv for a constant weight (M, Cg, *kernel) in the compute dtype: dense
    or grouped with several channels per group (depthwise has its own kernels), 1-D or
    2-D, float32/float64, when a BLAS exposes its cblas gemm (providers/cpu/blas.py)."""
    if (w.ndim not in (3, 4) or w.shape[1] == 1 or w.shape[0] % group
            or not jit._ready(w.dtype)):
        return None     # one input channel per group: conv_kernel's
    gemm = blas.gemm(w.dtype)
    if gemm is None:
        return None
    jit._install_native()
    return GemmConv(np.asarray(w), gemm, group)


EPI_KINDS = {None: 0, "Relu": 1, "LeakyRelu": 2, "Clip": 3, "HardSigmoid": 4, "HardSwish": 5,
             "Silu": 6}


def epilogue_kernel(dtype: Any) -> Callable | None:
    """The compiled epilogue (_epi_image) for float32/float64 outputs, loaded or compiled
    now; None without numba. Arguments: (y, i, c0, c1, m0, m1, bias, z, has_z, kind, alpha,
    beta)."""
    if not jit._ready(dtype):
        return None
    fn = jit._K["epi"]
    dt = np.dtype(dtype)
    y = np.zeros((1, 1, 1), dt)
    fn(y, 0, 0, 1, 0, 1, np.zeros(1, dt), y, False, 0, dt.type(0), dt.type(0))   # warm
    return fn
