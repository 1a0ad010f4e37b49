"""FusedConv and FusedGemm: the CPU Conv and Gemm kernels followed by an activation applied
in place on their freshly allocated output (one pass over memory fewer). A depthwise 1x1
FusedConv with constant weights (BatchNormalization -> activation) runs as a per-channel
scale, shift and activation in one compiled pass."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.nn import conv_jit
from onnxrt.providers.cpu.nn.conv import Conv
from onnxrt.providers.cpu.nn.matmul import Gemm

__all__ = ["activation_fn"]

MS = "com.microsoft"


def _relu(y: np.ndarray) -> np.ndarray:
    return np.maximum(y, 0, out=y)


def _sigmoid(y: np.ndarray) -> np.ndarray:
    np.negative(y, out=y)
    with np.errstate(over="ignore"):
        np.exp(y, out=y)
    y += 1
    return np.reciprocal(y, out=y)


def _tanh(y: np.ndarray) -> np.ndarray:
    return np.tanh(y, out=y)


def activation_fn(name: str | None, alpha: float, beta: float,
                  gamma: float = 0.0) -> Callable[[np.ndarray], np.ndarray] | None:
    """An in-place activation on a float array, or None for none."""
    if not name:
        return None
    if name == "Relu":
        return _relu
    if name == "Sigmoid":
        return _sigmoid
    if name == "Tanh":
        return _tanh
    if name == "LeakyRelu":
        def leaky(y: np.ndarray) -> np.ndarray:
            return np.multiply(y, y.dtype.type(alpha), out=y, where=y < 0)
        return leaky
    if name == "Clip":
        def clip(y: np.ndarray) -> np.ndarray:
            return np.clip(y, y.dtype.type(alpha), y.dtype.type(beta), out=y)
        return clip
    if name == "HardSigmoid":
        def hard_sigmoid(y: np.ndarray) -> np.ndarray:
            y *= y.dtype.type(alpha)
            y += y.dtype.type(beta)
            return np.clip(y, 0, 1, out=y)
        return hard_sigmoid
    if name == "Silu":              # onnxrt's extension (passes/fusions.py): x * sigmoid(x)
        def silu(y: np.ndarray) -> np.ndarray:
            y *= _sigmoid(y.copy())
            return y
        return silu
    if name == "HardSwish":         # onnxrt's extension (passes/fusions.py)
        def hard_swish(y: np.ndarray) -> np.ndarray:
            g = y * y.dtype.type(alpha)
            g += y.dtype.type(beta)
            np.clip(g, 0, 1, out=g)
            y *= g
            return y
        return hard_swish
    if name == "Elu":
        def elu(y: np.ndarray) -> np.ndarray:
            neg = y < 0
            e = np.expm1(y, where=neg, out=np.zeros_like(y))
            e *= y.dtype.type(alpha)
            np.copyto(y, e, where=neg)
            return y
        return elu
    raise ValueError(f"unsupported activation {name!r} (Relu, Sigmoid, Tanh, LeakyRelu, Clip, "
                     f"HardSigmoid, HardSwish, Silu, Elu are)")


def _owned(y: np.ndarray, inputs: tuple[Any, ...]) -> np.ndarray:
    """``y`` itself when it is a fresh writable array, else a copy (never write an input)."""
    if y.base is None and y.flags.writeable and y.flags.c_contiguous and \
            not any(y is a for a in inputs):
        return y        # owns its memory: no input can share it
    if y.flags.writeable and y.flags.c_contiguous and all(
            y is not a and not np.may_share_memory(y, a) for a in inputs
            if isinstance(a, np.ndarray)):
        return y
    return np.array(y)


# -- per-channel affine: FusedConv as a depthwise 1x1 convolution ---------------------------
# BatchNormalization -> activation becomes such a FusedConv (passes.fusions.fuse_bn_activation):
# one pass over memory, y = act(x * scale[c] + shift[c]), compiled with numba where it is
# enabled (4x NumPy's three passes at 8x256x28x28), NumPy otherwise.

_ACT_CODES = {None: 0, "Relu": 1, "Clip": 2, "LeakyRelu": 3}
_AFFINE: list[Any] = []          # the compiled loop, once per process (empty: not loaded)
_AFFINE_LOCK = threading.Lock()


def _affine_loop(x: np.ndarray, s: np.ndarray, b: np.ndarray, y: np.ndarray, code: int,
                 p0: float, p1: float) -> None:
    """y[i, c, :] = act(x[i, c, :] * s[c] + b[c]) for the C = len(s) first channels of
    (N, *, P) arrays (x may be a joined array seen from its first channel, nn/jit.py
    _channels_of); the same products and sums as NumPy's x * s + b (no contraction into
    FMA), NaN kept as np.maximum keeps it.

    Preconditions (_ChannelAffine.applies): x and y (N, >= C, P), s and b (C,)."""
    n, p = x.shape[0], x.shape[2]
    c = s.shape[0]
    for i in range(n):
        for j in range(c):
            sj = s[j]
            bj = b[j]
            xr = x[i, j]
            yr = y[i, j]
            if code == 1:
                for k in range(p):
                    v = xr[k] * sj + bj
                    yr[k] = 0 if v < 0 else v
            elif code == 2:
                for k in range(p):
                    v = xr[k] * sj + bj
                    if v < p0:
                        v = p0
                    if v > p1:
                        v = p1
                    yr[k] = v
            elif code == 3:
                for k in range(p):
                    v = xr[k] * sj + bj
                    yr[k] = v * p0 if v < 0 else v
            else:
                for k in range(p):
                    yr[k] = xr[k] * sj + bj


def _affine_kernel() -> Any:
    """The compiled loop (loaded from numba's disk cache or compiled, once), or None where
    numba is missing or disabled (ONNXRT_JIT=0)."""
    from onnxrt.providers.cpu.nn import jit
    if not jit.enabled():
        return None
    if _AFFINE:
        return _AFFINE[0]
    with _AFFINE_LOCK:
        if not _AFFINE:
            try:
                import numba
                try:
                    fn = numba.njit(cache=True)(_affine_loop)
                except Exception:   # no writable cache location
                    fn = numba.njit(_affine_loop)
                x = np.zeros((1, 1, 1), np.float32)
                v = np.zeros(1, np.float32)
                fn(x, v, v, np.empty_like(x), 0, 0.0, 0.0)   # compile now, never in a run
            except Exception:
                fn = None
            _AFFINE.append(fn)
    return _AFFINE[0]


class _ChannelAffine:
    """A depthwise 1x1 FusedConv (stride 1, no padding) as a per-channel scale and shift."""

    def __init__(self, w: np.ndarray, b: np.ndarray | None, act: str | None,
                 params: list[float]) -> None:
        m = w.shape[0]
        self.m = m
        self.s = np.ascontiguousarray(w.reshape(m), dtype=np.float32)
        self.b = (np.zeros(m, np.float32) if b is None
                  else np.ascontiguousarray(np.asarray(b).reshape(m), dtype=np.float32))
        self.code = _ACT_CODES.get(act, -1)
        self.p0, self.p1 = float(params[0]), float(params[1])
        self.loop = _affine_kernel() if self.code >= 0 else None

    def applies(self, x: np.ndarray) -> bool:
        return x.dtype == np.float32 and x.ndim >= 3 and x.shape[1] == self.m

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """act(x * s + b) for ``applies(x)``; only the compiled codes are applied here."""
        if self.loop is not None:
            x3 = x.reshape(x.shape[0], self.m, -1)
            try:
                # a prefix of channels of a joined array (densenet's Concat chains written
                # in place beyond one image, plan/inplace.py) is read where it lies
                xs = conv_jit._channels_of(x3)
            except ValueError:
                xs = np.ascontiguousarray(x3)
            y = np.empty(x3.shape, np.float32)
            self.loop(xs, self.s, self.b, y, self.code, self.p0, self.p1)
            return y.reshape(x.shape)
        shape = (1, self.m) + (1,) * (x.ndim - 2)
        y = x * self.s.reshape(shape)
        y += self.b.reshape(shape)
        return y


def _channel_affine(a: dict[str, Any], node: Any) -> _ChannelAffine | None:
    """The per-channel form of a FusedConv whose weight is a constant (M, 1, 1, ...) with
    group M, 1x1 kernel, stride 1 and no padding; None for any other."""
    w = node.constant_inputs.get(1)
    if w is None or (node.num_inputs > 2 and node.inputs[2] and 2 not in node.constant_inputs):
        return None
    w = np.asarray(w)
    m = w.shape[0] if w.ndim >= 3 else 0
    if not m or w.dtype != np.float32 or int(a.get("group", 1)) != m or \
            any(d != 1 for d in w.shape[1:]):
        return None
    nd = w.ndim - 2
    if any(int(k) != 1 for k in a.get("kernel_shape") or [1] * nd) or \
            any(int(v) != 1 for v in a.get("strides") or [1] * nd) or \
            any(int(v) != 0 for v in a.get("pads") or [0] * 2 * nd):
        return None
    return w, node.constant_inputs.get(2)


@CPU.kernel("FusedConv", since=1, domain=MS, needs_node=True, threads=True)
class FusedConv:
    """Y = activation(Conv(X, W, B) + Z); attributes: Conv's plus ``activation`` and
    ``activation_params`` (LeakyRelu: alpha; Clip: min, max; HardSigmoid: alpha, beta)."""

    def __init__(self, node: Any) -> None:
        a = dict(node.attrs)
        act = a.pop("activation", None)
        params = list(a.pop("activation_params", None) or [])
        if act == "LeakyRelu":
            params = params or [0.01]
        elif act == "HardSigmoid":
            params = params or [0.2, 0.5]
        elif act == "HardSwish":
            params = params or [1.0 / 6.0, 0.5]
        elif act == "Clip" and len(params) < 2:
            raise ValueError("FusedConv with Clip needs activation_params [min, max]")
        params += [0.0] * (2 - len(params))
        a.setdefault("group", 1)
        a.setdefault("auto_pad", "NOTSET")
        const = {i: v for i, v in node.constant_inputs.items() if i < 3}
        self.conv = Conv(dataclasses.replace(node, op_type="Conv", domain="", attrs=a,
                                             constant_inputs=const))
        self.act = activation_fn(act, params[0], params[1])
        # bias, Z and the activation run inside Conv, band by band while in cache
        self.conv.fuse_epilogue(self.act, act, (params[0], params[1]))
        wb = _channel_affine(a, node)
        self.affine = None if wb is None else _ChannelAffine(wb[0], wb[1], act, params)
        # the activation still to apply after the per-channel path (none where its compiled
        # loop applied it)
        self.affine_act = None if self.affine is not None and \
            self.affine.loop is not None else self.act

    def output_channels(self) -> int | None:
        """Conv's protocol of writing into a caller's array (plan/inplace.py); off for the
        per-channel path."""
        return None if self.affine is not None else self.conv.output_channels()

    def output_shape(self, *inputs: Any) -> tuple[int, ...]:
        return self.conv.output_shape(*inputs)

    def __call__(self, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None,
                 z: np.ndarray | None = None, out: np.ndarray | None = None,
                 ctx: Any = None) -> np.ndarray:
        if self.affine is not None and z is None and self.affine.applies(x):
            y = self.affine(x)
            return self.affine_act(y) if self.affine_act is not None else y
        if z is not None and z.dtype != x.dtype:
            raise TypeError(f"FusedConv: Z has type {z.dtype}, the output {x.dtype}")
        return self.conv(x, w, b, z, out, ctx=ctx)


@CPU.kernel("FusedGemm", since=1, domain=MS, needs_node=True, threads=True)
class FusedGemm:
    """Y = activation(alpha * A' @ B' + beta * C); ``activation_alpha/beta/gamma`` are the
    activation's parameters."""

    def __init__(self, node: Any) -> None:
        a = node.attrs
        gemm_attrs = {"alpha": float(a.get("alpha", 1.0)), "beta": float(a.get("beta", 1.0)),
                      "transA": int(a.get("transA", 0)), "transB": int(a.get("transB", 0))}
        self.gemm = Gemm(dataclasses.replace(node, op_type="Gemm", domain="",
                                             attrs=gemm_attrs))
        act = a.get("activation")
        default_alpha = {"LeakyRelu": 0.01, "HardSigmoid": 0.2, "Elu": 1.0}.get(act, 0.0)
        self.act = activation_fn(act, float(a.get("activation_alpha", default_alpha)),
                                 float(a.get("activation_beta", 0.5)),
                                 float(a.get("activation_gamma", 0.0)))

    def __call__(self, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None,
                 ctx: Any = None) -> np.ndarray:
        y = _owned(self.gemm(a, b, c, ctx=ctx), (a, b, c))
        return self.act(y) if self.act is not None else y


@CPU.kernel("NhwcFusedConv", since=1, domain=MS, needs_node=True, threads=True)
class NhwcFusedConv:
    """FusedConv on channels-last tensors: X, Z and Y are (N, *spatial, C), W stays OIHW
    (onnxruntime registers it on ARM64 with float16 acceleration, where its layout
    transformer makes it; here float32 and float16 alike)."""

    def __init__(self, node: Any) -> None:
        self.conv = FusedConv(dataclasses.replace(node, op_type="FusedConv"))

    def __call__(self, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None,
                 z: np.ndarray | None = None, ctx: Any = None) -> np.ndarray:
        xc = np.ascontiguousarray(np.moveaxis(x, -1, 1))
        zc = None if z is None else np.ascontiguousarray(np.moveaxis(z, -1, 1))
        y = self.conv(xc, w, b, zc, ctx=ctx)
        return np.ascontiguousarray(np.moveaxis(y, 1, -1))
