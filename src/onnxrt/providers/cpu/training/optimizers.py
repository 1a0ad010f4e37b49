"""ai.onnx.preview.training optimizers: Adagrad, Momentum, Adam (one update step).

Gradient is not implemented: it needs automatic differentiation of the graph.
"""

from __future__ import annotations

import numpy as np

from onnxrt.providers.cpu import CPU

_DOMAIN = "ai.onnx.preview.training"


def _split(tensors: tuple[np.ndarray, ...], parts: int, op: str) -> list[tuple]:
    if len(tensors) % parts:
        raise ValueError(f"{op} expects {parts} groups of equally many tensors after R and T, "
                         f"got {len(tensors)} tensors")
    n = len(tensors) // parts
    return [tensors[i * n:(i + 1) * n] for i in range(parts)]


def _scalars(r: np.ndarray, t: np.ndarray) -> tuple[float, int]:
    return float(np.asarray(r).reshape(())), int(np.asarray(t).reshape(()))


@CPU.kernel("Adagrad", since=1, domain=_DOMAIN, host_inputs=(0, 1))
def adagrad(r, t, *tensors, decay_factor=0.0, epsilon=1e-6, norm_coefficient=0.0):
    rate, step = _scalars(r, t)
    xs, gs, hs = _split(tensors, 3, "Adagrad")
    lr = rate / (1.0 + step * decay_factor)
    x_new, h_new = [], []
    for x, g, h in zip(xs, gs, hs):
        gr = norm_coefficient * x + g
        hn = h + gr * gr
        x_new.append((x - lr * gr / (np.sqrt(hn) + epsilon)).astype(x.dtype, copy=False))
        h_new.append(hn.astype(h.dtype, copy=False))
    return tuple(x_new + h_new)


@CPU.kernel("Momentum", since=1, domain=_DOMAIN, host_inputs=(0, 1))
def momentum(r, t, *tensors, alpha, beta, mode, norm_coefficient):
    rate, step = _scalars(r, t)
    if isinstance(mode, bytes):
        mode = mode.decode()
    if mode not in ("standard", "nesterov"):
        raise ValueError(f"Momentum mode must be 'standard' or 'nesterov', got {mode!r}")
    xs, gs, vs = _split(tensors, 3, "Momentum")
    b = beta if step > 0 else 1.0
    x_new, v_new = [], []
    for x, g, v in zip(xs, gs, vs):
        gr = norm_coefficient * x + g
        vn = alpha * v + b * gr
        upd = vn if mode == "standard" else gr + alpha * vn
        x_new.append((x - rate * upd).astype(x.dtype, copy=False))
        v_new.append(vn.astype(v.dtype, copy=False))
    return tuple(x_new + v_new)


@CPU.kernel("Adam", since=1, domain=_DOMAIN, host_inputs=(0, 1))
def adam(r, t, *tensors, alpha=0.9, beta=0.999, epsilon=1e-6, norm_coefficient=0.0,
         norm_coefficient_post=0.0):
    rate, step = _scalars(r, t)
    xs, gs, vs, hs = _split(tensors, 4, "Adam")
    if step > 0:
        rate = rate * np.sqrt(1.0 - beta ** step) / (1.0 - alpha ** step)
    x_new, v_new, h_new = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs):
        gr = norm_coefficient * x + g
        vn = alpha * v + (1.0 - alpha) * gr
        hn = beta * h + (1.0 - beta) * gr * gr
        xn = (1.0 - norm_coefficient_post) * (x - rate * vn / (np.sqrt(hn) + epsilon))
        x_new.append(xn.astype(x.dtype, copy=False))
        v_new.append(vn.astype(v.dtype, copy=False))
        h_new.append(hn.astype(h.dtype, copy=False))
    return tuple(x_new + v_new + h_new)
