"""Sliding-window ops: the Conv family and the pools.

The spec: ``kernel_shape``, ``strides`` and ``dilations`` >= 1 with one value per spatial
axis, ``pads`` >= 0 with two per axis, ``group`` >= 1 dividing the output channels, the
input's channels = the weight's channels x ``group``, and a (padded) input at least as long
as the dilated kernel on every axis. Pools also need each pad smaller than the kernel
(onnxruntime refuses the others: a window of padding only has no value).
"""

from __future__ import annotations

from typing import Any

from onnxrt.validate import SpecError, Shapes, rule

__all__ = ["window_geometry", "AUTO_PADS"]

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
MS = "com.microsoft"


def _ints(attrs: dict[str, Any], name: str) -> list[int] | None:
    v = attrs.get(name)
    if v is None:
        return None
    try:
        return [int(x) for x in v]
    except TypeError:
        raise SpecError(f"attribute {name}", v, "expected a list of integers") from None


def _auto_pad(attrs: dict[str, Any]) -> str:
    a = attrs.get("auto_pad", "NOTSET") or "NOTSET"
    if isinstance(a, bytes):
        a = a.decode(errors="replace")
    if a not in AUTO_PADS:
        raise SpecError("attribute auto_pad", a, f"expected one of {', '.join(AUTO_PADS)}")
    return a


def _flag(attrs: dict[str, Any], name: str) -> None:
    v = attrs.get(name)
    if v is not None and int(v) not in (0, 1):
        raise SpecError(f"attribute {name}", v, "expected 0 or 1")


def _per_axis(attrs: dict[str, Any], name: str, nd: int | None, count: int, least: int
              ) -> list[int] | None:
    v = _ints(attrs, name)
    if v is None:
        return None
    if nd is not None and len(v) != count * nd:
        raise SpecError(f"attribute {name}", v,
                        f"expected {count * nd} values ({count} per spatial axis, {nd} axes)")
    bad = [x for x in v if x < least]
    if bad:
        raise SpecError(f"attribute {name}", v, f"every value must be >= {least}")
    return v


def _spatial_rank(attrs: dict[str, Any], shapes: Shapes, w: int | None) -> int | None:
    k = attrs.get("kernel_shape")
    if k is not None:
        return len(k)
    if w is not None and shapes.rank(w) is not None:
        return max(shapes.rank(w) - 2, 0)
    r = shapes.rank(0)
    return None if r is None else max(r - 2, 0)


def window_geometry(attrs: dict[str, Any], shapes: Shapes, w: int | None, pool: bool) -> None:
    """The rules shared by every windowed op; ``w`` is the weight's input index (None for
    pools, whose kernel is ``kernel_shape``)."""
    auto_pad = _auto_pad(attrs)
    for f in ("ceil_mode", "count_include_pad", "storage_order"):
        _flag(attrs, f)
    nd = _spatial_rank(attrs, shapes, w)
    kernel = _per_axis(attrs, "kernel_shape", nd, 1, 1)
    if pool and kernel is None:
        raise SpecError("attribute kernel_shape", None, "the pools require it")
    strides = _per_axis(attrs, "strides", nd, 1, 1)
    dil = _per_axis(attrs, "dilations", nd, 1, 1)
    pads = _per_axis(attrs, "pads", nd, 2, 0)
    xs = shapes[0]
    if xs is not None and len(xs) < 3:
        raise SpecError("input X shape", list(xs), "expected (N, C, D1, ...) with at least "
                        "one spatial axis")
    if xs is not None and nd is not None and len(xs) != nd + 2:
        raise SpecError("input X shape", list(xs), f"expected {nd} spatial axes as "
                        f"kernel_shape (or the weight) has")
    ws = shapes[w] if w is not None else None
    if ws is not None:
        if len(ws) < 3 or (xs is not None and len(ws) != len(xs)):
            raise SpecError("input W shape", list(ws), "expected (M, C/group, k1, ...) with "
                            "the input's rank")
        wk = list(ws[2:])
        if any(k is not None and k < 1 for k in wk):
            raise SpecError("input W shape", list(ws), "every kernel dim must be >= 1")
        if kernel is not None and all(k is not None for k in wk) and wk != kernel:
            raise SpecError("attribute kernel_shape", kernel,
                            f"does not match the weight's kernel {wk}")
        if kernel is None and all(k is not None for k in wk):
            kernel = wk   # type: ignore[assignment]
    if pool and pads is not None and kernel is not None:
        for i, k in enumerate(kernel):
            if pads[i] >= k or pads[i + len(kernel)] >= k:
                raise SpecError("attribute pads", pads, f"each pad must be smaller than the "
                                f"kernel ({kernel}): a window would hold padding only")
    if xs is None or kernel is None:
        return
    nd = len(kernel)
    for i in range(nd):
        n = xs[2 + i]
        if n is None:
            continue
        d = dil[i] if dil else 1
        ext = (kernel[i] - 1) * d + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            continue
        padded = n + ((pads[i] + pads[i + nd]) if pads and auto_pad == "NOTSET" else 0)
        s = strides[i] if strides else 1
        span = padded - ext
        o = (-(-span // s) if attrs.get("ceil_mode") else span // s) + 1
        if o < 0:   # 0 is an empty output, as onnxruntime gives
            raise SpecError("attribute kernel_shape" if w is None else "input W shape",
                            kernel, f"the dilated kernel ({ext}) is longer than the padded "
                            f"input ({padded}) along spatial axis {i}: the output size "
                            f"would be {o}")


def _channels(attrs: dict[str, Any], shapes: Shapes, w: int, transpose: bool) -> None:
    group = int(attrs.get("group", 1))
    if group < 1:
        raise SpecError("attribute group", group, "must be >= 1")
    xs, ws = shapes[0], shapes[w]
    if ws is None or len(ws) < 2:
        return
    c = xs[1] if xs is not None and len(xs) > 1 else None
    if transpose:
        # W (C, M/group, k...): C divisible by group, the input's channels C
        if ws[0] is not None and ws[0] % group:
            raise SpecError("attribute group", group, f"does not divide the weight's input "
                            f"channels {ws[0]}")
        if c is not None and ws[0] is not None and c != ws[0]:
            raise SpecError("input X shape", list(xs), f"has {c} channels, the weight "
                            f"{ws[0]}")
        return
    if ws[0] is not None and ws[0] % group:
        raise SpecError("attribute group", group, f"does not divide the weight's output "
                        f"channels {ws[0]}")
    if c is not None and ws[1] is not None and c != ws[1] * group:
        raise SpecError("input X shape", list(xs), f"has {c} channels; the weight expects "
                        f"{ws[1]} per group x group {group} = {ws[1] * group}")


def _bias(shapes: Shapes, b: int, w: int, transpose: bool, group: int) -> None:
    bs, ws = shapes[b], shapes[w]
    if bs is None:
        return
    if len(bs) != 1:
        raise SpecError("input B shape", list(bs), "expected one value per output channel")
    if ws is None or len(ws) < 2:
        return
    m = ws[1] * group if transpose and ws[1] is not None else (None if transpose else ws[0])
    if m is not None and bs[0] is not None and bs[0] != m:
        raise SpecError("input B shape", list(bs), f"expected {m} values (one per output "
                        f"channel)")


@rule("Conv", "ConvInteger", inputs=(0, 1, 2))
def conv(node: Any, shapes: Shapes) -> None:
    window_geometry(node.attrs, shapes, 1, False)
    _channels(node.attrs, shapes, 1, False)
    if node.op_type == "Conv":
        _bias(shapes, 2, 1, False, int(node.attrs.get("group", 1)))


@rule("FusedConv", "NhwcFusedConv", domain=MS, inputs=(0, 1, 2))
def fused_conv(node: Any, shapes: Shapes) -> None:
    if node.op_type == "NhwcFusedConv":     # channels last: only the attributes
        window_geometry(node.attrs, Shapes([]), None, False)
        return
    conv(node, shapes)


@rule("QLinearConv", inputs=(0, 3))
def qlinear_conv(node: Any, shapes: Shapes) -> None:
    s = Shapes([shapes[0], shapes[3]])
    window_geometry(node.attrs, s, 1, False)
    _channels(node.attrs, s, 1, False)


@rule("ConvTranspose", inputs=(0, 1, 2))
def conv_transpose(node: Any, shapes: Shapes) -> None:
    a = node.attrs
    _auto_pad(a)
    nd = _spatial_rank(a, shapes, 1)
    kernel = _per_axis(a, "kernel_shape", nd, 1, 1)
    strides = _per_axis(a, "strides", nd, 1, 1)
    dil = _per_axis(a, "dilations", nd, 1, 1)
    _per_axis(a, "pads", nd, 2, 0)
    opad = _per_axis(a, "output_padding", nd, 1, 0)
    oshape = _ints(a, "output_shape")
    if oshape is not None and any(v < 0 for v in oshape):
        raise SpecError("attribute output_shape", oshape, "every value must be >= 0")
    if opad is not None:
        for i, p in enumerate(opad):
            s = strides[i] if strides else 1
            if p >= s:      # onnxruntime's bound (the spec's text allows the dilation too)
                raise SpecError("attribute output_padding", opad, "each value must be "
                                "smaller than the stride of its axis")
    xs, ws = shapes[0], shapes[1]
    if xs is not None and len(xs) < 3:
        raise SpecError("input X shape", list(xs), "expected (N, C, D1, ...)")
    if ws is not None and (len(ws) < 3 or (xs is not None and len(ws) != len(xs))):
        raise SpecError("input W shape", list(ws), "expected (C, M/group, k1, ...) with the "
                        "input's rank")
    if ws is not None and kernel is not None and all(k is not None for k in ws[2:]) \
            and list(ws[2:]) != kernel:
        raise SpecError("attribute kernel_shape", kernel, f"does not match the weight's "
                        f"kernel {list(ws[2:])}")
    _channels(a, shapes, 1, True)
    _bias(shapes, 2, 1, True, int(a.get("group", 1)))


@rule("MaxPool", "AveragePool", "LpPool", inputs=(0,))
def pool(node: Any, shapes: Shapes) -> None:
    window_geometry(node.attrs, shapes, None, True)
    if node.op_type == "LpPool" and float(node.attrs.get("p", 2)) <= 0:
        raise SpecError("attribute p", node.attrs.get("p"), "must be > 0")


@rule("QLinearAveragePool", domain=MS, inputs=(0,))
def qlinear_pool(node: Any, shapes: Shapes) -> None:
    window_geometry(node.attrs, Shapes([shapes[0]] if not node.attrs.get("channels_last")
                                       else []), None, True)


@rule("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", inputs=(0,))
def global_pool(node: Any, shapes: Shapes) -> None:
    xs = shapes[0]
    if xs is not None and len(xs) < 2:
        raise SpecError("input X shape", list(xs), "expected (N, C, ...)")
    if node.op_type == "GlobalLpPool" and float(node.attrs.get("p", 2)) <= 0:
        raise SpecError("attribute p", node.attrs.get("p"), "must be > 0")


@rule("MaxUnpool", inputs=(0, 1))
def max_unpool(node: Any, shapes: Shapes) -> None:
    a = node.attrs
    nd = _spatial_rank(a, shapes, None)
    kernel = _per_axis(a, "kernel_shape", nd, 1, 1)
    if kernel is None:
        raise SpecError("attribute kernel_shape", None, "MaxUnpool requires it")
    _per_axis(a, "strides", nd, 1, 1)
    _per_axis(a, "pads", nd, 2, 0)
    xs, ix = shapes[0], shapes[1]
    if xs is not None and ix is not None and len(xs) == len(ix) and all(
            a is not None and b is not None for a, b in zip(xs, ix)) and tuple(xs) != tuple(ix):
        raise SpecError("input I shape", list(ix), f"must equal the input's {list(xs)}")

