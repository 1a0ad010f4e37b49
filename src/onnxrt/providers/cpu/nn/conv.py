"""Conv: one class kernel choosing, per weight, among the compiled kernels and the NumPy
algorithms of nn/conv_numpy.py.

With numba a constant weight takes a compiled kernel (nn/conv_jit.py): dense and grouped convs
``GemmConv`` (im2col or tap-by-tap products, the BLAS gemm of providers/cpu/blas.py and
the epilogue in one call per thread, images, bands or channel blocks split over the
session's threads), depthwise ones the compiled tap loops. Tiny convs, where a compiled
call's dispatch would dominate, take one matmul (``Conv._tiny_1x1``, ``Conv._tiny_cols``).
The NumPy algorithms serve the rest (weights computed at run time, 3-D, other dtypes, no
numba).

The epilogue (bias, FusedConv's residual Z and activation, see ``Conv.fuse_epilogue``) runs
on each image's band right after its product while it is in cache, in one compiled pass
(nn/conv_jit.py) where numba is available.

Weights are re-laid out once per session when they are constant; float16/bfloat16 compute
in float32 and cast back.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from onnxrt.framework.parallel import SERIAL, ThreadPool
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.nn import compute_dtype, conv_jit, pad_spatial
from onnxrt.providers.cpu.nn.conv_numpy import _Epilogue, _Geometry, _Packed, conv_nd
from onnxrt.validate import SpecError

__all__ = ["Conv", "conv_nd"]

# a 1x1 conv of at most this many multiply-adds takes one matmul and the epilogue
# (Conv._tiny_1x1): below OpenBLAS's own one-thread bound, where the split never applies
_TINY_MACS = 1 << 17
# a dense conv of at most this many multiply-adds takes its columns as one strided copy and
# one matmul (Conv._tiny_cols): the compiled kernels' per-call dispatch dominates below it
_TINY_COLS_MACS = 1 << 19
# input shapes whose call Conv keeps bound (a model fed ever new sizes does not grow it)
_MAX_BOUND = 16


@CPU.kernel("Conv", since=1, needs_node=True, threads=True)
class Conv:
    """Conv-1/11/22 over N-d inputs (N, C, *spatial)."""

    def __init__(self, node: Any) -> None:
        a = node.attrs
        self.group = int(a.get("group", 1))
        self.auto_pad = a.get("auto_pad", "NOTSET")
        self.kernel_shape = a.get("kernel_shape")
        self.strides = a.get("strides")
        self.dilations = a.get("dilations")
        self.pads = a.get("pads")
        self.packed = None
        self.bias = None
        self.act: Callable[[np.ndarray], Any] | None = None     # set by FusedConv
        self._epi_kind = (0, 0.0, 0.0)          # conv_jit.EPI_KINDS code (-1: none compiled)
        self._zero_bias: np.ndarray | None = None  # the late epilogue's (bias added before)
        # the compiled epilogue for the weight's compute dtype, loaded now (None: NumPy's)
        self._epi_fast = None
        if node.constant_inputs.get(1) is not None:
            self._epi_fast = conv_jit.epilogue_kernel(
                compute_dtype(np.asarray(node.constant_inputs[1]).dtype))
        self._geo: dict[tuple[int, ...], _Geometry] = {}
        # per (input shape, dtype, bias given, threads): the compiled path's call with its
        # checks and choices made once (_bind); a small conv's Python around its kernel
        # otherwise costs as much as the kernel
        self._bound: dict[tuple[Any, ...], Callable[[np.ndarray, ThreadPool], np.ndarray]] = {}
        w = node.constant_inputs.get(1)
        if w is not None:
            w = np.asarray(w)
            self.packed = _Packed(w, self.group, compute_dtype(w.dtype))
        # [jit hooks] compiled kernels (nn/conv_jit.py), chosen once per session: depthwise, and
        # dense/grouped (im2col, BLAS and the epilogue in one call per thread)
        self._jit = self._gemm = None
        if w is not None:
            wc = w.astype(compute_dtype(w.dtype), copy=False)
            self._jit = conv_jit.conv_kernel(wc, self.group)
            self._gemm = conv_jit.gemm_conv_kernel(wc, self.group)
        b = node.constant_inputs.get(2)
        if b is not None:
            b = np.asarray(b)
            self.bias = b.astype(compute_dtype(b.dtype))

    def _geometry(self, spatial: tuple[int, ...], kernel: tuple[int, ...]) -> _Geometry:
        geo = self._geo.get(spatial)
        if geo is None:
            nd = len(spatial)
            if len(kernel) != nd or any(k < 1 for k in kernel):
                raise SpecError("input W shape", list(kernel), f"expected a kernel of "
                                f"{nd} dims >= 1 for an input of {nd} spatial axes")
            if self.kernel_shape and tuple(self.kernel_shape) != kernel:
                raise ValueError(f"kernel_shape {self.kernel_shape} does not match the weight "
                                 f"{kernel}")
            geo = _Geometry(spatial, kernel, list(self.strides or [1] * nd),
                            list(self.dilations or [1] * nd), self.pads, self.auto_pad)
            self._geo[spatial] = geo   # a benign race: every thread computes the same value
        return geo

    def fuse_epilogue(self, act: Callable[[np.ndarray], Any] | None, name: str | None = None,
                      params: tuple[float, float] = (0.0, 0.0)) -> None:
        """FusedConv: apply ``act`` (in place; ONNX op ``name`` with ``params``, FusedConv's
        activation_params) after the bias and the optional Z that ``__call__`` then takes
        as a fourth input, slice by slice while in cache; compiled for the activations of
        conv_jit.EPI_KINDS."""
        self.act = act
        kind = 0 if act is None else conv_jit.EPI_KINDS.get(name, -1) if name else -1
        self._epi_kind = (kind, float(params[0]), float(params[1]))

    # -- writing into a caller's array (plan/inplace.py: Concat inputs written in place) --
    def output_channels(self) -> int | None:
        """The output's channels, fixed for the session when the weight is constant."""
        return self.packed.M if self.packed is not None else None

    def output_shape(self, x: np.ndarray, *rest: Any) -> tuple[int, ...]:
        """For a constant weight (output_channels() is not None)."""
        pk = self.packed
        return (x.shape[0], pk.M) + tuple(self._geometry(tuple(x.shape[2:]), pk.kernel).out)

    def __call__(self, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None,
                 z: np.ndarray | None = None, out: np.ndarray | None = None,
                 ctx: Any = None) -> np.ndarray:
        """The convolution; with ``out`` (the output's shape and dtype, C-contiguous or a
        slice of channels of a C-contiguous array) written into it: by the compiled GemmConv
        directly, else copied."""
        pool = SERIAL if ctx is None else ctx.thread_pool
        if z is None and out is None:
            run = self._bound.get((x.shape, x.dtype, b is None, pool.threads))
            if run is not None:
                return run(x, pool)
        if out is not None:
            y = self._conv(x, w, b, z, out, pool)
            if y is not out:
                np.copyto(out, y)
            return out
        return self._conv(x, w, b, z, None, pool)

    def _conv(self, x: np.ndarray, w: np.ndarray, b: np.ndarray | None,
              z: np.ndarray | None, out: np.ndarray | None, pool: ThreadPool) -> np.ndarray:
        dt = x.dtype
        cdt = compute_dtype(dt)
        pk = self.packed
        if pk is None:
            pk = _Packed(w, self.group, cdt)
        nd = x.ndim - 2
        geo = self._geometry(tuple(x.shape[2:]), pk.kernel)
        strides = list(self.strides or [1] * nd)
        dil = list(self.dilations or [1] * nd)
        if x.shape[1] != pk.Cg * self.group:
            raise SpecError("input X shape", list(x.shape), f"has {x.shape[1]} channels; the "
                            f"weight expects {pk.Cg} per group x group {self.group}")
        if b is not None and tuple(b.shape) != (pk.M,):
            raise SpecError("input B shape", list(b.shape), f"expected ({pk.M},), one value "
                            f"per output channel")
        if x.shape[0] == 0 or 0 in geo.out or pk.M == 0:     # nothing to compute
            return np.zeros((x.shape[0], pk.M) + tuple(geo.out), dt)
        act = self.act
        bias = None
        if b is not None:
            bias = self.bias if self.bias is not None else b.astype(cdt, copy=False)
        if (pk is self.packed and pk.algo == "gemm" and geo.no_pad and out is None
                and self._epi_fast is not None and self._epi_kind[0] >= 0
                and all(k == 1 for k in pk.kernel) and x.dtype == pk.w.dtype
                and not any(s != 1 for s in strides)
                and x.shape[0] * pk.M * pk.Cg * math.prod(geo.out) <= _TINY_MACS):
            y = self._tiny_1x1(x, bias, z)
            if y is not None:
                if z is None:
                    self._bind(x, b, pool, lambda xx, _p: self._tiny_1x1(xx, bias, None))
                return y
        if (pk is self.packed and pk.algo == "gemm" and out is None and nd in (1, 2)
                and self._epi_fast is not None and self._epi_kind[0] >= 0
                and x.dtype == pk.w.dtype and min(geo.begin) >= 0 and min(geo.end) >= 0
                and x.shape[0] * pk.w.size * math.prod(geo.out) <= _TINY_COLS_MACS):
            y = self._tiny_cols(x, bias, z, geo, strides, dil)
            if y is not None:
                if z is None:
                    self._bind(x, b, pool, lambda xx, _p: self._tiny_cols(xx, bias, None, geo,
                                                                           strides, dil))
                return y
        if (self._gemm is not None and pk is self.packed and nd in (1, 2)
                and self._epi_kind[0] >= 0 and min(geo.begin) >= 0
                and np.dtype(cdt) == self._gemm.w.dtype
                and (z is None or tuple(z.shape) == (x.shape[0], pk.M) + tuple(geo.out))):
            kind, alpha, beta = self._epi_kind
            if z is None and out is None and x.dtype == dt:
                run = self._gemm.bind(x.shape, x.dtype, bias, kind, alpha, beta, strides, dil,
                                      list(geo.begin), list(geo.out), pool.threads)
                if run is not None:
                    shape = (x.shape[0], pk.M) + tuple(geo.out)
                    self._bind(x, b, pool, lambda xx, p: run(xx, p).reshape(shape))
            into = None
            if out is not None and out.dtype == self._gemm.w.dtype:
                # (N, M, L): a view where out is contiguous or a slice of channels of a
                # contiguous array (conv_jit.GemmConv takes both)
                into = out.reshape(x.shape[0], pk.M, -1)
                if not np.may_share_memory(into, out):     # reshape had to copy
                    into = None
            y = self._gemm(x, bias, z, kind, alpha, beta, strides, dil, list(geo.begin),
                           list(geo.out), into, pool)
            if into is not None:
                return out
            y = y.reshape((x.shape[0], pk.M) + tuple(geo.out))
            return y if y.dtype == dt else y.astype(dt)
        if self._jit is not None and pk is self.packed:   # [jit hook]: bias added inside
            if z is None and out is None and x.dtype == cdt:
                self._bind_depthwise(x, b, bias, strides, dil, geo, pool)
            y = self._jit(x.astype(cdt, copy=False), bias, strides, dil, geo.begin, geo.out,
                          pool)
            if y is not None:    # None: a shape the NumPy path does faster
                if self._late_epilogue(y, z):
                    return y if y.dtype == dt else y.astype(dt)
                return self._finish(y, None, z, act, dt)
        n = x.shape[0]
        zf = None
        if z is not None and tuple(z.shape) == (n, pk.M) + tuple(geo.out):
            zf = np.ascontiguousarray(z, dtype=cdt).reshape(n, pk.M, -1)
        # a Z the slices cannot take (broadcast) is added after, and the activation with it
        late = z is not None and zf is None
        epi = None
        if bias is not None or zf is not None or (act is not None and not late):
            kind, alpha, beta = self._epi_kind
            if late:
                act, kind = None, 0
            fast = self._epi_fast if kind >= 0 and self._epi_fast is not None else None
            if fast is not None and np.dtype(cdt) != self.packed.w.dtype:
                fast = None
            epi = _Epilogue(bias, zf, act, fast, kind, alpha, beta, pk.M, np.dtype(cdt))
            act = self.act
        y, done = conv_nd(x.astype(cdt, copy=False), pk, self.group, strides, dil, geo, epi,
                          pool)
        if done:
            bias = None
            if zf is not None:
                z = None
            if not late:
                act = None
        return self._finish(y, bias, z, act, dt)

    def _bind(self, x: np.ndarray, b: np.ndarray | None, pool: ThreadPool,
              run: Callable[[np.ndarray, ThreadPool], np.ndarray]) -> None:
        """Keep ``run`` as the call for inputs like ``x`` (its shape and dtype; the bias
        given or not: a given one is the constant self.bias) in ``pool``'s sessions."""
        if (self.packed is not None and (b is None or self.bias is not None)
                and len(self._bound) < _MAX_BOUND):
            self._bound[(x.shape, x.dtype, b is None, pool.threads)] = run

    def _bind_depthwise(self, x: np.ndarray, b: np.ndarray | None, bias: np.ndarray | None,
                        strides: list[int], dil: list[int], geo: _Geometry,
                        pool: ThreadPool) -> None:
        """The compiled depthwise kernel's call for inputs like ``x``, and the activation
        after it in the compiled epilogue, prepared once (see _late_epilogue)."""
        kind, alpha, beta = self._epi_kind
        fast = self._epi_fast
        if kind < 0 or (kind > 0 and (fast is None or x.dtype != self.packed.w.dtype)):
            return
        run = self._jit.bind(x.shape, x.dtype, bias, strides, dil, list(geo.begin),
                             list(geo.out), pool.threads)
        if run is None:
            return
        if kind == 0:
            self._bind(x, b, pool, run)
            return
        n, m = x.shape[0], self.packed.M
        zero = np.zeros(m, x.dtype)
        t = x.dtype.type
        a, be = t(alpha), t(beta)

        def act(xx: np.ndarray, p: ThreadPool) -> np.ndarray:
            y = run(xx, p)
            y3 = y.reshape(n, m, -1)
            for i in range(n):
                fast(y3, i, 0, y3.shape[2], 0, m, zero, y3, False, kind, a, be)
            return y
        self._bind(x, b, pool, act)

    def _tiny_1x1(self, x: np.ndarray, bias: np.ndarray | None,
                  z: np.ndarray | None) -> np.ndarray | None:
        """A small 1x1 conv (an SE block's on one pixel, a head on 7x7): one matmul and
        the compiled epilogue (bias, residual, activation in one pass), ~5 us where the
        compiled conv's call took ~25 (its dispatch over two dozen arguments)."""
        n, c = x.shape[:2]
        pk = self.packed
        shape = (n, pk.M) + x.shape[2:]
        if z is not None and tuple(z.shape) != shape:
            return None
        y = np.matmul(pk.w, x.reshape(n, c, -1))
        return self._tiny_epilogue(y, bias, z, shape)

    def _tiny_cols(self, x: np.ndarray, bias: np.ndarray | None, z: np.ndarray | None,
                   geo: _Geometry, strides: list[int], dil: list[int]) -> np.ndarray | None:
        """A small dense conv of any kernel, stride, dilation and padding (a streaming
        detector's convs over one 32 ms chunk): the columns as one strided view of the
        padded input, copied once, one matmul and the epilogue. The compiled GemmConv's
        call costs ~25-30 us of argument dispatch on these, and a conv of one input
        channel (an STFT as a 1->258 conv of 256 taps) fell to the depthwise kernel's
        per-tap loops at ~130 us; this path takes 5-15 us on them."""
        pk = self.packed
        n, c = x.shape[:2]
        shape = (n, pk.M) + tuple(geo.out)
        if z is not None and tuple(z.shape) != shape:
            return None
        nd = len(geo.out)
        if nd == 1:
            # one gather through indices made once per input length: pad, im2col and copy
            # in one step (as_strided and the general padding cost ~10 us here)
            taps = geo.taps
            (pb,), (pe,) = geo.begin, geo.end
            if taps is None:
                taps = (np.arange(pk.kernel[0])[:, None] * dil[0]
                        + np.arange(geo.out[0])[None, :] * strides[0])
                geo.taps = taps
            if pb or pe:
                xp = np.zeros((n, c, x.shape[2] + pb + pe), x.dtype)
                xp[:, :, pb:pb + x.shape[2]] = x
            else:
                xp = x
            cols = xp[:, :, taps]
        else:
            xp = pad_spatial(x, geo.begin, geo.end)
            st = xp.strides
            cols = np.lib.stride_tricks.as_strided(
                xp, (n, c) + pk.kernel + tuple(geo.out),
                st[:2] + tuple(st[2 + i] * dil[i] for i in range(nd))
                + tuple(st[2 + i] * strides[i] for i in range(nd)), writeable=False)
        y = np.matmul(pk.w, cols.reshape(n, pk.w.shape[1], -1))
        return self._tiny_epilogue(y, bias, z, shape)

    def _tiny_epilogue(self, y: np.ndarray, bias: np.ndarray | None, z: np.ndarray | None,
                       shape: tuple[int, ...]) -> np.ndarray:
        """Bias, residual and activation on a tiny path's (N, M, L) product: a bias alone
        by one NumPy add (the compiled epilogue's call costs more on a few columns)."""
        pk = self.packed
        n = y.shape[0]
        dt = y.dtype
        kind, alpha, beta = self._epi_kind
        if z is None and kind == 0:
            if bias is not None:
                y += bias.astype(dt, copy=False)[:, None]
            return y.reshape(shape)
        b = bias if bias is not None and bias.dtype == dt else None
        if b is None:
            zero = self._zero_bias
            if zero is None or zero.shape[0] != pk.M or zero.dtype != dt:
                zero = self._zero_bias = np.zeros(pk.M, dt)
            b = zero if bias is None else np.ascontiguousarray(bias, dtype=dt)
        zz = y if z is None else np.ascontiguousarray(z, dtype=dt).reshape(y.shape)
        t = dt.type
        for i in range(n):
            self._epi_fast(y, i, 0, y.shape[2], 0, pk.M, b, zz, z is not None, kind, t(alpha),
                           t(beta))
        return y.reshape(shape)

    def _late_epilogue(self, y: np.ndarray, z: np.ndarray | None) -> bool:
        """The residual and activation of the depthwise kernel's output (its bias is in)
        through the compiled epilogue, one pass per image in place (MobileNets' HardSwish
        after every depthwise conv took four NumPy passes and a temporary); False where it
        does not apply (then _finish does it)."""
        kind, alpha, beta = self._epi_kind
        fast = self._epi_fast
        if fast is None or kind < 0 or (kind == 0 and z is None) or not y.flags.c_contiguous \
                or y.dtype != self.packed.w.dtype or (z is not None and z.shape != y.shape):
            return False
        n, m = y.shape[0], y.shape[1]
        y3 = y.reshape(n, m, -1)
        zz = y3 if z is None else np.ascontiguousarray(z, dtype=y.dtype).reshape(y3.shape)
        zero = self._zero_bias
        if zero is None or zero.shape[0] != m or zero.dtype != y.dtype:
            zero = self._zero_bias = np.zeros(m, y.dtype)
        t = y.dtype.type
        for i in range(n):
            fast(y3, i, 0, y3.shape[2], 0, m, zero, zz, z is not None, kind, t(alpha), t(beta))
        return True

    @staticmethod
    def _finish(y: np.ndarray, bias: np.ndarray | None, z: np.ndarray | None, act: Any,
                dt: np.dtype) -> np.ndarray:
        """The epilogue parts not applied yet, over the whole output."""
        nd = y.ndim - 2
        if bias is not None:
            if y.flags.c_contiguous:
                y += bias.reshape((-1,) + (1,) * nd)
            else:   # a cropped view (depthwise): the add makes the contiguous copy
                y = y + bias.reshape((-1,) + (1,) * nd)
        elif not y.flags.c_contiguous:
            y = np.ascontiguousarray(y)
        if z is not None:
            y += z
        if act is not None:
            y = act(y)
        return y if y.dtype == dt else y.astype(dt)
