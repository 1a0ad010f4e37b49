"""FusedConv and FusedGemm: the CPU Conv and Gemm kernels followed by an activation applied
in place on their freshly allocated output (one pass over memory fewer)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from onnxrt.providers.cpu import CPU
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
    if name == "Elu":
        def elu(y: np.ndarray) -> np.ndarray:
            neg = y < 0
            e = np.expm1(y, where=neg, out=np.zeros_like(y))
            e *= y.dtype.type(alpha)
            np.copyto(y, e, where=neg)
            return y
        return elu
    raise ValueError(f"unsupported activation {name!r} (Relu, Sigmoid, Tanh, LeakyRelu, Clip, "
                     f"HardSigmoid, Elu are)")


def _owned(y: np.ndarray, inputs: tuple[Any, ...]) -> np.ndarray:
    """``y`` itself when it is a fresh writable array, else a copy (never write an input)."""
    if y.flags.writeable and y.flags.c_contiguous and all(
            y is not a and not np.may_share_memory(y, a) for a in inputs
            if isinstance(a, np.ndarray)):
        return y
    return np.array(y)


@CPU.kernel("FusedConv", since=1, domain=MS, needs_node=True)
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
        elif act == "Clip" and len(params) < 2:
            raise ValueError("FusedConv with Clip needs activation_params [min, max]")
        params += [0.0] * (2 - len(params))
        a.setdefault("group", 1)
        a.setdefault("auto_pad", "NOTSET")
        const = {i: v for i, v in node.constant_inputs.items() if i < 3}
        self.conv = Conv(dataclasses.replace(node, op_type="Conv", domain="", attrs=a,
                                             constant_inputs=const))
        self.act = activation_fn(act, params[0], params[1])

    def __call__(self, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None,
                 z: np.ndarray | None = None) -> np.ndarray:
        y = _owned(self.conv(x, w, b), (x, w, b, z))
        if z is not None:
            if y.dtype != z.dtype:
                raise TypeError(f"FusedConv: Z has type {z.dtype}, the output {y.dtype}")
            y += z
        if self.act is not None:
            y = self.act(y)
        return y


@CPU.kernel("FusedGemm", since=1, domain=MS, needs_node=True)
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

    def __call__(self, a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None) -> np.ndarray:
        y = _owned(self.gemm(a, b, c), (a, b, c))
        return self.act(y) if self.act is not None else y
