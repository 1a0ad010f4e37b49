"""Basic eliminations: dead nodes, Identity and inference Dropout, no-op and lossless Cast
chains, Transpose pairs, Reshape of Reshape, Unsqueeze then Squeeze of the same axes."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as TP

from onnxrt.ir.graph import Graph, attr

__all__ = ["eliminate_dead", "eliminate_identity", "eliminate_dropout", "eliminate_casts",
           "fuse_transposes", "fuse_reshapes", "eliminate_unsqueeze_squeeze"]


def _onnx(n: onnx.NodeProto, op: str) -> bool:
    return n.op_type == op and n.domain in ("", "ai.onnx")


def eliminate_dead(g: Graph) -> bool:
    """Nodes none of whose outputs is read (ONNX nodes have no side effects)."""
    changed = False
    while True:
        # one set lookup per output (a consumers() call each made this ~5% of creating a
        # session of 100,000 small nodes)
        read, outs = g.read_names(), set(g.output_names)
        dead = [n for n in g.nodes
                if not any(o and (o in read or o in outs) for o in n.output)]
        if not dead:
            return changed
        g.remove(dead)
        changed = True


def _bypass(g: Graph, n: onnx.NodeProto, src: str, out: str,
            chain: tuple[onnx.NodeProto, ...] = ()) -> bool:
    """Remove ``n``, which passes ``src`` through as ``out`` (``chain``: the nodes between
    ``src`` and ``n``, removed too when nothing else reads them)."""
    if g.can_bypass(out):
        g.replace_uses(out, src)
        g.remove([n])
        return True
    # out is a graph output: let src's producer write it directly, if nothing else reads src
    p = g.producer(src)
    inside = {id(n)} | {id(c) for c in chain}
    if (p is None or not g.is_output(out) or g.is_output(src) or not g.can_bypass(src)
            or src in g.input_names):
        return False
    for v in [src] + [o for c in chain for o in c.output if o]:
        if g.is_output(v) or any(id(c) not in inside for c in g.consumers(v)):
            return False
    for i, o in enumerate(p.output):
        if o == src:
            p.output[i] = out
    g.remove([n, *chain])
    g.touch()
    return True


def eliminate_identity(g: Graph) -> bool:
    changed = False
    for n in list(g.nodes):
        if _onnx(n, "Identity") and n.input and n.input[0]:
            if g.elem_type(n.input[0]) == 0 and n.input[0] not in g.consts:
                # a sequence or optional Identity: fine to bypass as well, types are equal
                pass
            changed |= _bypass(g, n, n.input[0], n.output[0])
    return changed


def eliminate_dropout(g: Graph) -> bool:
    changed = False
    for n in list(g.nodes):
        if not _onnx(n, "Dropout") or not n.input or not n.input[0]:
            continue
        if len(n.output) > 1 and n.output[1] and (g.consumers(n.output[1])
                                                  or g.is_output(n.output[1])):
            continue   # the mask is used
        if len(n.input) > 2 and n.input[2]:
            t = g.const(n.input[2])
            if t is None or bool(np.asarray(t).reshape(-1)[0]):
                continue   # training mode, or not known to be off
        if g.opset < 7 and attr(n, "is_test", 0) == 0:
            continue       # Dropout-1/6 without is_test scale in training mode
        changed |= _bypass(g, n, n.input[0], n.output[0])
    return changed


# element types a value can round-trip through without loss (to -> set of from types)
_WIDER = {
    TP.DOUBLE: {TP.FLOAT, TP.FLOAT16, TP.BFLOAT16, TP.INT8, TP.UINT8, TP.INT16, TP.UINT16,
                TP.INT32, TP.UINT32, TP.BOOL},
    TP.FLOAT: {TP.FLOAT16, TP.BFLOAT16, TP.INT8, TP.UINT8, TP.INT16, TP.UINT16, TP.BOOL},
    TP.INT64: {TP.INT8, TP.UINT8, TP.INT16, TP.UINT16, TP.INT32, TP.UINT32, TP.BOOL},
    TP.INT32: {TP.INT8, TP.UINT8, TP.INT16, TP.UINT16, TP.BOOL},
    TP.INT16: {TP.INT8, TP.UINT8, TP.BOOL},
}


def eliminate_casts(g: Graph) -> bool:
    """Cast to the type a value already has; Cast(Cast(x, wider), back to x's type)."""
    changed = False
    for n in list(g.nodes):
        if not _onnx(n, "Cast") or len(n.input) != 1:
            continue
        to = attr(n, "to", 0)
        src = n.input[0]
        t_src = g.elem_type(src)
        if t_src and t_src == to and attr(n, "saturate", 1) == 1:
            changed |= _bypass(g, n, src, n.output[0])
            continue
        p = g.producer(src)
        if p is None or not _onnx(p, "Cast") or not p.input:
            continue
        x = p.input[0]
        t_x = g.elem_type(x)
        mid = attr(p, "to", 0)
        if t_x and t_x == to and t_x in _WIDER.get(mid, ()):
            if _bypass(g, n, x, n.output[0], (p,)):
                changed = True
    return changed


def fuse_transposes(g: Graph) -> bool:
    """Transpose(Transpose(x, p1), p2) -> Transpose(x, p1[p2]) or x when that is identity."""
    changed = False
    for n in list(g.nodes):
        if not _onnx(n, "Transpose"):
            continue
        p = g.producer(n.input[0])
        if p is None or not _onnx(p, "Transpose"):
            continue
        p1, p2 = attr(p, "perm"), attr(n, "perm")
        if p1 is None or p2 is None or len(p1) != len(p2):
            continue
        perm = [p1[i] for i in p2]
        if perm == list(range(len(perm))):
            if _bypass(g, n, p.input[0], n.output[0], (p,)):
                changed = True
            continue
        del n.attribute[:]
        n.attribute.append(onnx.helper.make_attribute("perm", perm))
        n.input[0] = p.input[0]
        g.touch()
        changed = True
    return changed


def fuse_reshapes(g: Graph) -> bool:
    """Reshape(x) to x's own static shape -> x; Reshape(Reshape(x, s1), s2) -> Reshape(x, s2)
    when s2 is constant and has no 0 that would copy a dimension of the intermediate shape."""
    changed = False
    for n in list(g.nodes):
        if not _onnx(n, "Reshape") or len(n.input) < 2:
            continue
        s_in = g.shape(n.input[0])
        if s_in is not None and all(isinstance(d, int) for d in s_in) and \
                _reshaped(s_in, g.const(n.input[1]), attr(n, "allowzero", 0)) == tuple(s_in):
            if _bypass(g, n, n.input[0], n.output[0]):   # a reshape to its own shape
                changed = True
                continue
        p = g.producer(n.input[0])
        if p is None or not _onnx(p, "Reshape") or len(p.input) < 2:
            continue
        s2 = g.const(n.input[1])
        if s2 is None or (attr(n, "allowzero", 0) == 0 and np.any(np.asarray(s2) == 0)):
            continue
        n.input[0] = p.input[0]
        g.touch()
        changed = True
    return changed


def _reshaped(s_in: tuple[int, ...], target: np.ndarray | None,
              allowzero: int) -> tuple[int, ...] | None:
    """The output shape of Reshape(static s_in, constant target), or None."""
    if target is None:
        return None
    t = [int(v) for v in np.asarray(target).reshape(-1)]
    if not allowzero:
        t = [s_in[i] if v == 0 and i < len(s_in) else v for i, v in enumerate(t)]
    if t.count(-1) > 1:
        return None
    if -1 in t:
        rest = int(np.prod([v for v in t if v != -1], dtype=np.int64))
        total = int(np.prod(s_in, dtype=np.int64))
        if rest == 0 or total % rest:
            return None
        t[t.index(-1)] = total // rest
    return tuple(t)


def _axes(g: Graph, n: onnx.NodeProto) -> list[int] | None:
    a = attr(n, "axes")
    if a is not None:
        return list(a)
    if len(n.input) > 1 and n.input[1]:
        v = g.const(n.input[1])
        return None if v is None else [int(i) for i in np.asarray(v).reshape(-1)]
    return None


def eliminate_unsqueeze_squeeze(g: Graph) -> bool:
    """Squeeze(Unsqueeze(x, axes), axes) -> x."""
    changed = False
    for n in list(g.nodes):
        if not _onnx(n, "Squeeze"):
            continue
        p = g.producer(n.input[0])
        if p is None or not _onnx(p, "Unsqueeze"):
            continue
        a1, a2 = _axes(g, p), _axes(g, n)
        if a1 is None or a2 is None:
            continue
        r = g.rank(p.input[0])
        if r is None:
            if any(a < 0 for a in a1 + a2):
                continue
            same = sorted(a1) == sorted(a2)
        else:
            out_rank = r + len(a1)
            same = sorted(a % out_rank for a in a1) == sorted(a % out_rank for a in a2)
        if same:
            changed |= _bypass(g, n, p.input[0], n.output[0], (p,))
    return changed
