"""Normalizations: epsilon finite and >= 0 (it keeps the division away from zero; a negative
one takes the square root of a negative variance, whose sign then depends on the summation
order), the normalized axis inside the input's rank, the scale and bias shapes."""

from __future__ import annotations

import math
from typing import Any

from onnxrt.validate import SpecError, Shapes, rule

__all__ = ["epsilon", "axis_in"]

MS = "com.microsoft"


def epsilon(attrs: dict[str, Any], name: str = "epsilon") -> None:
    if name not in attrs or attrs[name] is None:
        return
    e = float(attrs[name])
    if not math.isfinite(e) or e < 0:
        raise SpecError(f"attribute {name}", attrs[name], "must be a finite value >= 0")


def axis_in(value: Any, rank: int | None, name: str = "axis", extra: int = 0) -> int | None:
    """``value`` as an axis of a tensor of ``rank`` (``extra`` more positions allowed, as
    Flatten's ``axis`` = rank); None when the rank is unknown."""
    if rank is None:
        return None
    a = int(value)
    top = rank + extra
    if not -top <= a < top:
        raise SpecError(f"attribute {name}", value, f"expected a value in [{-top}, {top - 1}] "
                        f"for an input of rank {rank}")
    return a + top if a < 0 else a


def _trailing(shapes: Shapes, i: int, x_axes: tuple[int | None, ...] | None, what: str
              ) -> None:
    """Input ``i`` (scale, bias) must broadcast to the normalized axes' shape."""
    s = shapes[i]
    if s is None or x_axes is None:
        return
    if len(s) > len(x_axes):
        raise SpecError(f"input {what} shape", list(s), f"has more axes than the normalized "
                        f"shape {list(x_axes)}")
    for a, b in zip(reversed(s), reversed(x_axes)):
        if a is not None and b is not None and a != b and a != 1:
            raise SpecError(f"input {what} shape", list(s), f"does not broadcast to the "
                            f"normalized shape {list(x_axes)}")


@rule("LayerNormalization", inputs=(0, 1, 2))
@rule("LayerNormalization", "SimplifiedLayerNormalization", domain=MS, inputs=(0, 1, 2))
@rule("SimplifiedLayerNormalization", inputs=(0, 1))
def layer_norm(node: Any, shapes: Shapes) -> None:
    epsilon(node.attrs)
    xs = shapes[0]
    ax = axis_in(node.attrs.get("axis", -1), None if xs is None else len(xs))
    norm = None if ax is None else xs[ax:]
    _trailing(shapes, 1, norm, "Scale")
    if node.op_type == "LayerNormalization":
        _trailing(shapes, 2, norm, "B")


@rule("SkipLayerNormalization", "SkipSimplifiedLayerNormalization", domain=MS,
      inputs=(0, 1, 2, 3, 4))
def skip_layer_norm(node: Any, shapes: Shapes) -> None:
    epsilon(node.attrs)
    xs, sk = shapes[0], shapes[1]
    if xs is not None and len(xs) not in (2, 3):
        raise SpecError("input shape", list(xs), "expected rank 2 or 3")
    if xs is not None and sk is not None:
        if len(sk) > len(xs) or any(a is not None and b is not None and a != b and a != 1
                                    for a, b in zip(reversed(sk), reversed(xs))):
            raise SpecError("input skip shape", list(sk), f"does not broadcast to the "
                            f"input's {list(xs)}")
    last = None if xs is None else xs[-1:]
    simplified = node.op_type == "SkipSimplifiedLayerNormalization"
    names = ("gamma", "bias") if simplified else ("gamma", "beta", "bias")
    for i, what in zip((2, 3, 4), names):
        s = shapes[i]
        if s is not None and last is not None and (len(s) != 1 or (
                s[0] is not None and last[0] is not None and s[0] != last[0])):
            raise SpecError(f"input {what} shape", list(s), f"expected one value per element "
                            f"of the last axis ({last[0]})")


@rule("BatchNormalization", "InstanceNormalization", "RMSNormalization", inputs=(0,))
def batch_norm(node: Any, shapes: Shapes) -> None:
    epsilon(node.attrs)
    xs = shapes[0]
    if node.op_type == "RMSNormalization":
        axis_in(node.attrs.get("axis", -1), None if xs is None else len(xs))
    elif xs is not None and len(xs) < 2:
        raise SpecError("input X shape", list(xs), "expected (N, C, ...)")


@rule("GroupNormalization", inputs=(0,))
def group_norm(node: Any, shapes: Shapes) -> None:
    epsilon(node.attrs)
    g = int(node.attrs.get("num_groups", 0))
    if g < 1:
        raise SpecError("attribute num_groups", node.attrs.get("num_groups"), "must be >= 1")
    xs = shapes[0]
    if xs is not None and len(xs) >= 2 and xs[1] is not None and xs[1] % g:
        raise SpecError("attribute num_groups", g, f"does not divide the {xs[1]} channels")


@rule("LRN", inputs=(0,))
def lrn(node: Any, shapes: Shapes) -> None:
    size = int(node.attrs.get("size", 0))
    if size < 1:
        raise SpecError("attribute size", node.attrs.get("size"), "must be >= 1")


@rule("MeanVarianceNormalization", inputs=(0,))
def mvn(node: Any, shapes: Shapes) -> None:
    xs = shapes[0]
    axes = node.attrs.get("axes")
    if axes is not None and xs is not None:
        for a in axes:
            axis_in(a, len(xs), "axes")


@rule("LpNormalization", inputs=(0,))
def lp_norm(node: Any, shapes: Shapes) -> None:
    p = int(node.attrs.get("p", 2))
    if p not in (1, 2):
        raise SpecError("attribute p", p, "expected 1 or 2")
    xs = shapes[0]
    axis_in(node.attrs.get("axis", -1), None if xs is None else len(xs))
