"""Element-wise ops, activations, comparisons, logic, Where, Cast, Clip and friends on
torch tensors."""

from __future__ import annotations


import numpy as np
import torch
import torch.nn.functional as F

from onnxrt.ir.dtypes import np_dtype
from onnxrt.providers.torch.convert import torch_dtype
from onnxrt.providers.torch.registry import ALL, BOOL, FLOAT, IDX, INT, NUM, TORCH

K = TORCH.kernel


def _unary(op: str, since: int, fn, dtypes=FLOAT) -> None:
    def kernel(x, *, consumed_inputs=None):
        return fn(x)

    kernel.__name__ = op.lower()
    TORCH.register(op, kernel, since=since, dtypes=dtypes)


for _op, _since, _fn, _dt in (
        ("Abs", 6, torch.abs, NUM), ("Neg", 6, torch.neg, FLOAT | INT - {np.dtype(np.uint8)}),
        ("Sqrt", 6, torch.sqrt, FLOAT), ("Exp", 6, torch.exp, FLOAT),
        ("Log", 6, torch.log, FLOAT), ("Tanh", 6, torch.tanh, FLOAT),
        ("Sigmoid", 6, torch.sigmoid, FLOAT), ("Relu", 6, torch.relu, FLOAT | INT),
        ("Floor", 6, torch.floor, FLOAT), ("Ceil", 6, torch.ceil, FLOAT),
        ("Reciprocal", 6, torch.reciprocal, FLOAT), ("Sin", 7, torch.sin, FLOAT),
        ("Cos", 7, torch.cos, FLOAT), ("Tan", 7, torch.tan, FLOAT),
        ("Asin", 7, torch.asin, FLOAT), ("Acos", 7, torch.acos, FLOAT),
        ("Atan", 7, torch.atan, FLOAT), ("Sinh", 9, torch.sinh, FLOAT),
        ("Cosh", 9, torch.cosh, FLOAT), ("Asinh", 9, torch.asinh, FLOAT),
        ("Acosh", 9, torch.acosh, FLOAT), ("Atanh", 9, torch.atanh, FLOAT),
        ("Erf", 9, torch.erf, FLOAT), ("Sign", 9, torch.sign, NUM),
        ("Round", 11, torch.round, FLOAT), ("IsNaN", 9, torch.isnan, FLOAT),
        ("Not", 1, torch.logical_not, BOOL), ("BitwiseNot", 18, torch.bitwise_not, INT),
        ("Softsign", 1, F.softsign, FLOAT), ("HardSwish", 14, F.hardswish, FLOAT),
        ("Mish", 18, F.mish, FLOAT)):
    _unary(_op, _since, _fn, _dt)


@K("Softplus", since=1, dtypes=FLOAT)
def softplus(x):
    # torch's softplus switches to the identity above a threshold; ONNX has no threshold
    return torch.logaddexp(x, torch.zeros((), dtype=x.dtype, device=x.device))


@K("IsInf", since=10, dtypes=FLOAT)
def isinf(x, *, detect_negative=1, detect_positive=1):
    if detect_negative and detect_positive:
        return torch.isinf(x)
    if detect_positive:
        return torch.isposinf(x)
    if detect_negative:
        return torch.isneginf(x)
    return torch.zeros_like(x, dtype=torch.bool)


@K("LeakyRelu", since=6, dtypes=FLOAT)
def leaky_relu(x, *, alpha=0.01):
    return F.leaky_relu(x, alpha)


@K("Elu", since=6, dtypes=FLOAT)
def elu(x, *, alpha=1.0):
    return F.elu(x, alpha)


@K("Celu", since=12, dtypes=FLOAT)
def celu(x, *, alpha=1.0):
    return F.celu(x, alpha)


@K("Selu", since=6, dtypes=FLOAT)
def selu(x, *, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875):
    return gamma * torch.where(x > 0, x, alpha * torch.expm1(x))


@K("HardSigmoid", since=6, dtypes=FLOAT)
def hard_sigmoid(x, *, alpha=0.2, beta=0.5):
    return torch.clamp(x * alpha + beta, 0, 1)


@K("ThresholdedRelu", since=10, dtypes=FLOAT)
def thresholded_relu(x, *, alpha=1.0):
    return torch.where(x > alpha, x, torch.zeros((), dtype=x.dtype, device=x.device))


@K("Gelu", since=20, dtypes=FLOAT)
def gelu(x, *, approximate="none"):
    return F.gelu(x, approximate=approximate)


@K("PRelu", since=7, dtypes=FLOAT)
def prelu(x, slope):
    return torch.where(x >= 0, x, x * slope)


@K("Clip", since=11, dtypes=NUM)
def clip(x, lo=None, hi=None):
    if lo is not None and hi is not None:
        # ONNX: min applied first, then max (when lo > hi the result is hi)
        return torch.minimum(torch.maximum(x, lo), hi)
    if lo is not None:
        return torch.maximum(x, lo)
    if hi is not None:
        return torch.minimum(x, hi)
    return x


@K("Clip", since=6, until=10, dtypes=FLOAT)
def clip_v6(x, *, min=-3.4028234663852886e38, max=3.4028234663852886e38):  # noqa: A002
    return torch.clamp(x, min, max)


# -- binary arithmetic ----------------------------------------------------------------------

def _div(a, b):
    if a.is_floating_point():
        return a / b
    return torch.div(a, b, rounding_mode="trunc")  # integer division truncates, like C


for _op, _fn, _dt in (("Add", torch.add, NUM), ("Sub", torch.sub, NUM),
                      ("Mul", torch.mul, NUM), ("Div", _div, NUM)):
    TORCH.register(_op, _fn, since=7, dtypes=_dt)


@K("Pow", since=7, dtypes=NUM)
def pow_(a, b):
    if not a.is_floating_point() and b.is_floating_point():
        return torch.pow(a.to(b.dtype), b).to(a.dtype)
    return torch.pow(a, b.to(a.dtype) if b.dtype != a.dtype else b).to(a.dtype)


@K("Mod", since=10, dtypes=NUM)
def mod(a, b, *, fmod=0):
    return torch.fmod(a, b) if fmod else torch.remainder(a, b)


for _op, _fn in (("And", torch.logical_and), ("Or", torch.logical_or),
                 ("Xor", torch.logical_xor)):
    TORCH.register(_op, _fn, since=7, dtypes=BOOL)
for _op, _fn in (("BitwiseAnd", torch.bitwise_and), ("BitwiseOr", torch.bitwise_or),
                 ("BitwiseXor", torch.bitwise_xor)):
    TORCH.register(_op, _fn, since=18, dtypes=INT | BOOL)
for _op, _fn, _since in (("Equal", torch.eq, 7), ("Less", torch.lt, 7),
                         ("Greater", torch.gt, 7), ("LessOrEqual", torch.le, 12),
                         ("GreaterOrEqual", torch.ge, 12)):
    TORCH.register(_op, _fn, since=_since, dtypes=ALL)


@K("BitShift", since=11, dtypes=INT)
def bitshift(a, b, *, direction):
    return a << b if direction == "LEFT" else a >> b


def _variadic(fn):
    def kernel(*xs):
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return out
    return kernel


TORCH.register("Max", _variadic(torch.maximum), since=8, dtypes=NUM)
TORCH.register("Min", _variadic(torch.minimum), since=8, dtypes=NUM)
TORCH.register("Sum", _variadic(torch.add), since=8, dtypes=FLOAT)


@K("Mean", since=8, dtypes=FLOAT)
def mean(*xs):
    return _variadic(torch.add)(*xs) / len(xs)


@K("Where", since=9, dtypes=ALL)
def where(c, a, b):
    return torch.where(c, a, b)


# -- identity, cast, shape -------------------------------------------------------------------

@K("Identity", since=1, dtypes=ALL)
def identity(x):
    return x


@K("Cast", since=6, dtypes=ALL)
def cast(x, *, to, saturate=1):
    return x.to(torch_dtype(np_dtype(to)))


@K("CastLike", since=15, dtypes=ALL)
def cast_like(x, like, *, saturate=1):
    return x.to(like.dtype)


@K("Shape", since=1, dtypes=ALL)
def shape(x, *, start=0, end=None):
    dims = list(x.shape)[start:end] if end is not None else list(x.shape)[start:]
    return torch.tensor(dims, dtype=torch.int64, device=x.device)


@K("Size", since=1, dtypes=ALL)
def size(x):
    return torch.tensor(x.numel(), dtype=torch.int64, device=x.device)


@K("Dropout", since=12, dtypes=ALL | IDX, host_inputs=(1, 2), needs_node=True)
def dropout(x, ratio=None, training_mode=None, *, seed=0, node=None):
    # inference only: the capability check leaves training-mode nodes to the CPU provider
    if node.output_present(1):
        return x, torch.ones_like(x, dtype=torch.bool)
    return (x,)


@K("Dropout", since=1, until=11, dtypes=ALL, needs_node=True)
def dropout_v1(x, *, ratio=0.5, is_test=0, consumed_inputs=None, node=None):
    if node.output_present(1):
        return x, torch.ones_like(x, dtype=torch.bool)
    return (x,)


