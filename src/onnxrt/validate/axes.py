"""Ops whose attributes name axes or sizes: each axis inside the input's rank, block sizes
>= 1, ``k`` of TopK >= 0 (where the rank is known; at run time otherwise)."""

from __future__ import annotations

from typing import Any

from onnxrt.validate import SpecError, Shapes, rule
from onnxrt.validate.norm import axis_in

__all__ = []


def _rank(shapes: Shapes, i: int = 0) -> int | None:
    return shapes.rank(i)


@rule("Softmax", "LogSoftmax", "Hardmax", "ArgMax", "ArgMin", "Gather", "GatherElements",
      "ScatterElements", "Scatter", "Split", "TopK", "CumSum", "Compress", "LpNormalization",
      "ReverseSequence", inputs=(0,))
def single_axis(node: Any, shapes: Shapes) -> None:
    a = node.attrs
    r = _rank(shapes)
    if node.op_type == "ReverseSequence":
        for name in ("batch_axis", "time_axis"):
            if name in a:
                v = int(a[name])
                if v not in (0, 1):
                    raise SpecError(f"attribute {name}", v, "expected 0 or 1")
        return
    if node.op_type in ("Softmax", "LogSoftmax", "Hardmax") and r == 0:
        raise SpecError("input shape", [], "expected rank >= 1")
    if "axis" in a and a["axis"] is not None:
        if r == 0 and node.op_type in ("Gather", "GatherElements", "Split", "TopK"):
            raise SpecError("input shape", [], "expected rank >= 1")
        axis_in(a["axis"], r)


@rule("Flatten", inputs=(0,))
def flatten(node: Any, shapes: Shapes) -> None:
    axis_in(node.attrs.get("axis", 1), _rank(shapes), extra=1)


@rule("Concat", inputs=(0,))
def concat(node: Any, shapes: Shapes) -> None:
    if "axis" not in node.attrs:
        raise SpecError("attribute axis", None, "Concat requires it")
    ranks = {len(s) for s in shapes.dims if s is not None}
    if len(ranks) > 1:
        raise SpecError("input shapes", [list(s) if s is not None else None
                                         for s in shapes.dims], "expected one rank")
    if ranks:
        r = ranks.pop()
        if r == 0:
            raise SpecError("input shape", [], "expected rank >= 1")
        axis_in(node.attrs["axis"], r)


@rule("OneHot", inputs=(0,))
def one_hot(node: Any, shapes: Shapes) -> None:
    r = _rank(shapes)
    axis_in(node.attrs.get("axis", -1), None if r is None else r, extra=1)


@rule("DepthToSpace", "SpaceToDepth", inputs=(0,))
def block(node: Any, shapes: Shapes) -> None:
    b = int(node.attrs.get("blocksize", 0))
    if b < 1:
        raise SpecError("attribute blocksize", node.attrs.get("blocksize"), "must be >= 1")
    xs = shapes[0]
    if xs is not None and len(xs) != 4:
        raise SpecError("input shape", list(xs), "expected (N, C, H, W)")
    if xs is None:
        return
    if node.op_type == "DepthToSpace" and xs[1] is not None and xs[1] % (b * b):
        raise SpecError("attribute blocksize", b, f"its square does not divide the {xs[1]} "
                        f"channels")
    if node.op_type == "SpaceToDepth":
        for d in (2, 3):
            if xs[d] is not None and xs[d] % b:
                raise SpecError("attribute blocksize", b, f"does not divide the input's "
                                f"spatial dims {list(xs[2:])}")


@rule("Unsqueeze", "Squeeze", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
      "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
      "ReduceSumSquare", "Transpose", inputs=(0,))
def axes_list(node: Any, shapes: Shapes) -> None:
    a = node.attrs
    r = _rank(shapes)
    if node.op_type == "Transpose":
        perm = a.get("perm")
        if perm is None:
            return
        if sorted(int(p) for p in perm) != list(range(len(perm))):
            raise SpecError("attribute perm", perm, "expected a permutation of 0..rank-1")
        if r is not None and len(perm) != r:
            raise SpecError("attribute perm", perm, f"expected {r} values for an input of "
                            f"rank {r}")
        return
    axes = a.get("axes")
    if axes is None or r is None:
        return
    top = r + len(axes) if node.op_type == "Unsqueeze" else r
    seen = set()
    for v in axes:
        ax = axis_in(v, top, "axes")
        if ax in seen:
            raise SpecError("attribute axes", axes, "repeats an axis")
        seen.add(ax)
