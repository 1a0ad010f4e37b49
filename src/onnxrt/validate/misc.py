"""Matrix products, attention and GELU: flags, head counts and the shapes the compiled
kernels index."""

from __future__ import annotations

from typing import Any

from onnxrt.validate import SpecError, Shapes, rule

__all__ = []

MS = "com.microsoft"


def _flag(attrs: dict[str, Any], name: str) -> int:
    v = int(attrs.get(name, 0))
    if v not in (0, 1):
        raise SpecError(f"attribute {name}", v, "expected 0 or 1")
    return v


@rule("Gemm", inputs=(0, 1))
@rule("FusedGemm", domain=MS, inputs=(0, 1))
def gemm(node: Any, shapes: Shapes) -> None:
    ta, tb = _flag(node.attrs, "transA"), _flag(node.attrs, "transB")
    a, b = shapes[0], shapes[1]
    for s, what in ((a, "A"), (b, "B")):
        if s is not None and len(s) != 2:
            raise SpecError(f"input {what} shape", list(s), "expected a matrix (rank 2)")
    if a is not None and b is not None:
        k1, k2 = a[0 if ta else 1], b[1 if tb else 0]
        if k1 is not None and k2 is not None and k1 != k2:
            raise SpecError("input B shape", list(b), f"its inner dim {k2} does not match "
                            f"A's {k1} (A {list(a)}, transA {ta}, transB {tb})")


@rule("MatMul", "MatMulInteger", inputs=(0, 1))
def matmul(node: Any, shapes: Shapes) -> None:
    a, b = shapes[0], shapes[1]
    for s, what in ((a, "A"), (b, "B")):
        if s is not None and len(s) == 0:
            raise SpecError(f"input {what} shape", [], "expected rank >= 1")
    if a is not None and b is not None:
        k1 = a[-1]
        k2 = b[0] if len(b) == 1 else b[-2]
        if k1 is not None and k2 is not None and k1 != k2:
            raise SpecError("input B shape", list(b), f"its inner dim {k2} does not match "
                            f"A's last dim {k1} (A {list(a)})")


@rule("Attention", domain=MS, inputs=(0, 1, 2))
def attention(node: Any, shapes: Shapes) -> None:
    a = node.attrs
    n = int(a.get("num_heads", 0))
    if n < 1:
        raise SpecError("attribute num_heads", a.get("num_heads"), "must be >= 1")
    _flag(a, "unidirectional")
    sizes = a.get("qkv_hidden_sizes")
    xs, ws, bs = shapes[0], shapes[1], shapes[2]
    if xs is not None and len(xs) != 3:
        raise SpecError("input shape", list(xs), "expected (batch, sequence, hidden)")
    if ws is not None and len(ws) != 2:
        raise SpecError("input weights shape", list(ws), "expected (hidden, 3 x hidden)")
    if xs is not None and ws is not None and None not in (xs[2], ws[0]) and xs[2] != ws[0]:
        raise SpecError("input weights shape", list(ws), f"its first dim does not match the "
                        f"input's hidden size {xs[2]}")
    total = ws[1] if ws is not None and len(ws) == 2 else None
    if sizes:
        sizes = [int(v) for v in sizes]
        if len(sizes) != 3 or any(v < 1 or v % n for v in sizes) or sizes[0] != sizes[1]:
            raise SpecError("attribute qkv_hidden_sizes", sizes, f"expected three positive "
                            f"sizes, Q's equal to K's, each divisible by num_heads {n}")
        if total is not None and sum(sizes) != total:
            raise SpecError("attribute qkv_hidden_sizes", sizes, f"they sum to "
                            f"{sum(sizes)}, the weights give {total} columns")
    elif total is not None and (total % 3 or (total // 3) % n):
        raise SpecError("input weights shape", list(ws), f"expected 3 x hidden columns with "
                        f"hidden divisible by num_heads {n}")
    if bs is not None and total is not None and (len(bs) != 1 or bs[0] not in (None, total)):
        raise SpecError("input bias shape", list(bs), f"expected ({total},)")


@rule("MultiHeadAttention", "GroupQueryAttention", domain=MS, inputs=(0,))
def mha(node: Any, shapes: Shapes) -> None:
    n = int(node.attrs.get("num_heads", 0))
    if n < 1:
        raise SpecError("attribute num_heads", node.attrs.get("num_heads"), "must be >= 1")
    kv = node.attrs.get("kv_num_heads")
    if kv is not None and (int(kv) < 1 or n % int(kv)):
        raise SpecError("attribute kv_num_heads", kv, f"must be >= 1 and divide num_heads {n}")


@rule("Gelu", inputs=(0,))
def gelu(node: Any, shapes: Shapes) -> None:
    ap = node.attrs.get("approximate", "none")
    if ap not in ("none", "tanh"):
        raise SpecError("attribute approximate", ap, "expected 'none' or 'tanh'")


@rule("BiasGelu", "FastGelu", domain=MS, inputs=(0, 1))
def bias_gelu(node: Any, shapes: Shapes) -> None:
    xs, bs = shapes[0], shapes[1]
    if xs is not None and bs is not None:
        if len(xs) == 0 or (len(bs) == 1 and None not in (bs[0], xs[-1]) and bs[0] != xs[-1]):
            raise SpecError("input bias shape", list(bs), f"expected one value per element "
                            f"of the input's last axis ({list(xs)})")
