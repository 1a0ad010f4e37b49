"""Activations: Relu, Sigmoid, Tanh, the ELU family, Softplus, Gelu, Swish, SwiGLU, PRelu...

Formulas of several steps run in float32 for float16 and the ml_dtypes floats (fewer
roundings, and NumPy's half loops convert per op anyway), then cast back once. The first
step of each formula allocates a fresh array; later steps work in place on it.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.elementwise import as_array, erf, work_dtype

_ndarray = np.ndarray


def float_kernel(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """Run ``fn`` on a float32/float64 array of rank >= 1 and cast the result back.

    ``fn`` may work in place on arrays it created, never on its argument.
    """

    @functools.wraps(fn)
    def kernel(x: np.ndarray, *args: Any, **attrs: Any) -> np.ndarray:
        dt = x.dtype
        wd = work_dtype(dt)
        w = x.astype(wd) if wd != dt else x
        if w.ndim == 0:
            return fn(w.reshape(1), *args, **attrs).reshape(()).astype(dt, copy=False)
        r = fn(w, *args, **attrs)
        return r.astype(dt, copy=False) if r.dtype != dt else r

    return kernel


# exp's argument capped below its overflow, instead of an np.errstate per call (~2-5 us, most
# of a small input's cost): below -88 the float32 result is ~6e-39 instead of a smaller
# denormal or 0 (onnxruntime gives 0 already below about -18)
_EXP_CAP = {np.dtype(np.float32): 88.0, np.dtype(np.float64): 709.0}
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def sigmoid_(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) into a new array."""
    t = np.negative(x)
    cap = _EXP_CAP.get(t.dtype)
    if cap is None:
        with np.errstate(over="ignore"):   # exp overflows to inf exactly where 1/(1+inf) = 0
            np.exp(t, out=t)
    else:
        np.minimum(t, cap, out=t)          # NaN stays NaN
        np.exp(t, out=t)
    np.add(t, 1, out=t)
    return np.reciprocal(t, out=t)


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(x, 0)   # log(1 + exp(x)) without overflow


@CPU.kernel("Relu", since=1)
def relu(x: np.ndarray, *, consumed_inputs: Any = None) -> np.ndarray:
    if x.dtype.itemsize == 2 and x.dtype.kind in "fV":
        # float16/bfloat16: NumPy's half max is a slow scalar loop; on the int16 view every
        # negative float (sign bit set) is a negative integer, so integer max with 0 is Relu
        return as_array(np.maximum(x.view(np.int16), np.int16(0))).view(x.dtype)
    r = np.maximum(x, 0)   # a Python 0 keeps x's dtype (a weak scalar); no scalar to make
    return r if type(r) is _ndarray else np.asarray(r)


@CPU.kernel("Tanh", since=1)
def tanh(x: np.ndarray, *, consumed_inputs: Any = None) -> np.ndarray:
    if x.dtype.kind == "V":
        return as_array(np.tanh(x.astype(np.float32))).astype(x.dtype)
    return as_array(np.tanh(x))


@float_kernel
def _sigmoid_any(x: np.ndarray) -> np.ndarray:
    return sigmoid_(x)


@CPU.kernel("Sigmoid", since=1)
def sigmoid(x: np.ndarray, *, consumed_inputs: Any = None) -> np.ndarray:
    dt = x.dtype
    if (dt is _F32 or dt is _F64) and x.ndim:   # no widening or 0-d reshape to do
        return sigmoid_(x)
    return _sigmoid_any(x)


@CPU.kernel("LeakyRelu", since=1)
@float_kernel
def leaky_relu(x: np.ndarray, *, alpha: float = 0.01, consumed_inputs: Any = None) -> np.ndarray:
    t = np.multiply(x, x.dtype.type(alpha))
    if 0.0 <= alpha <= 1.0:   # then max(x, alpha*x) picks the right branch on both sides
        return np.maximum(t, x, out=t)
    return np.where(x < 0, t, x)


@CPU.kernel("Elu", since=1)
@float_kernel
def elu(x: np.ndarray, *, alpha: float = 1.0, consumed_inputs: Any = None) -> np.ndarray:
    t = np.minimum(x, 0)   # expm1 only of the negative part: no overflow
    np.expm1(t, out=t)
    t *= alpha
    t += np.maximum(x, 0)   # a sum, not a select: no data-dependent branches
    return t


@CPU.kernel("Selu", since=1)
@float_kernel
def selu(x: np.ndarray, *, alpha: float = 1.67326319217681884765625,
         gamma: float = 1.05070102214813232421875, consumed_inputs: Any = None) -> np.ndarray:
    t = np.minimum(x, 0)
    np.expm1(t, out=t)
    t *= alpha
    t += np.maximum(x, 0)
    t *= gamma
    return t


@CPU.kernel("Celu", since=12)
@float_kernel
def celu(x: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
    t = np.minimum(x, 0)
    t /= alpha
    np.expm1(t, out=t)
    t *= alpha
    t += np.maximum(x, 0)
    return t


@CPU.kernel("HardSigmoid", since=1)
@float_kernel
def hard_sigmoid(x: np.ndarray, *, alpha: float = 0.2, beta: float = 0.5,
                 consumed_inputs: Any = None) -> np.ndarray:
    t = np.multiply(x, alpha)
    t += beta
    return np.clip(t, 0, 1, out=t)


@CPU.kernel("HardSwish", since=14)
@float_kernel
def hard_swish(x: np.ndarray) -> np.ndarray:
    t = np.multiply(x, 1.0 / 6.0)
    t += 0.5
    np.clip(t, 0, 1, out=t)
    t *= x
    return t


@CPU.kernel("Softplus", since=1)
@float_kernel
def softplus(x: np.ndarray) -> np.ndarray:
    return _softplus(x)


@CPU.kernel("Softsign", since=1)
@float_kernel
def softsign(x: np.ndarray) -> np.ndarray:
    t = np.absolute(x)
    t += 1
    return np.divide(x, t, out=t)


@CPU.kernel("ThresholdedRelu", since=10)
@float_kernel
def thresholded_relu(x: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
    return np.where(x > alpha, x, x.dtype.type(0))


@CPU.kernel("Shrink", since=9)
def shrink(x: np.ndarray, *, bias: float = 0.0, lambd: float = 0.5) -> np.ndarray:
    dt = x.dtype
    w = x.astype(np.float64) if dt.kind in "iu" else x.astype(work_dtype(dt), copy=False)
    r = np.where(w < -lambd, w + bias, np.where(w > lambd, w - bias, 0))
    return as_array(r).astype(dt, copy=False)


@CPU.kernel("Mish", since=18)
@float_kernel
def mish(x: np.ndarray) -> np.ndarray:
    t = _softplus(x)
    np.tanh(t, out=t)
    t *= x
    return t


_SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))


@CPU.kernel("Gelu", since=20)
@float_kernel
def gelu(x: np.ndarray, *, approximate: str = "none") -> np.ndarray:
    if approximate == "tanh":
        t = np.multiply(x, x)
        t *= 0.044715
        t += 1.0
        t *= x
        t *= _SQRT_2_OVER_PI
        np.tanh(t, out=t)
    elif approximate == "none":
        t = erf(np.multiply(x, np.sqrt(0.5, dtype=x.dtype)))
    else:
        raise ValueError(f"Gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    t += 1.0
    t *= x
    t *= 0.5
    return t


@CPU.kernel("Swish", since=24)
@float_kernel
def swish(x: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
    t = sigmoid_(x * x.dtype.type(alpha) if alpha != 1.0 else x)
    t *= x
    return t


@CPU.kernel("SwiGLU", since=28)
@float_kernel
def swiglu(a: np.ndarray, b: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
    if a.shape != b.shape and a.size != b.size:
        raise ValueError(f"SwiGLU: A {a.shape} and B {b.shape} must have the same shape")
    t = sigmoid_(a * a.dtype.type(alpha) if alpha != 1.0 else a)
    t *= a
    t *= b.astype(t.dtype, copy=False).reshape(t.shape)
    return t


# -- PRelu ------------------------------------------------------------------------------

def _prelu(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    # min(x, 0) * slope + max(x, 0): the same as a select on x < 0, without the branches
    r = as_array(np.minimum(x, x.dtype.type(0)))
    if np.broadcast_shapes(r.shape, slope.shape) != r.shape:
        raise ValueError(f"PRelu: slope {slope.shape} does not broadcast to X {x.shape}")
    r *= slope
    r += np.maximum(x, x.dtype.type(0))
    return r


@CPU.kernel("PRelu", since=7)
def prelu(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "V":
        return _prelu(x.astype(np.float32), slope.astype(np.float32)).astype(x.dtype)
    return _prelu(x, slope)


@CPU.kernel("PRelu", since=1)
def prelu_v1(x: np.ndarray, slope: np.ndarray, *, consumed_inputs: Any = None) -> np.ndarray:
    # before opset 7 a 1-D slope of length C is shared over the channel axis (1) of NCHW
    if slope.ndim == 1 and slope.size > 1 and x.ndim >= 2 and slope.shape[0] == x.shape[1]:
        slope = slope.reshape((-1,) + (1,) * (x.ndim - 2))
    return _prelu(x, slope)
