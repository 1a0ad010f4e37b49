"""The AttentionFusion rule (onnxruntime's name for it): multi-head attention into com.microsoft Attention (Q, K, V projected from one input by
constant weights: one packed QKV GEMM) or MultiHeadAttention (any Q, K, V).

The pattern, as PyTorch's TorchScript exporter (BERT, GPT-2's attention core) and the dynamo
exporter (scaled_dot_product_attention decomposed) write it, anchored at the Softmax::

    Q -> Reshape(B,S,N,H) -> Transpose(0,2,1,3) [-> Mul(s1)]  \\
    K -> Reshape(B,L,N,H) -> Transpose(0,2,3,1) [-> Mul(s2)]  -> MatMul [-> Div|Mul(c)]
      [-> Add(mask)] -> Softmax(-1) -> MatMul(., V -> Reshape -> Transpose(0,2,1,3))
      -> Transpose(0,2,1,3) -> Reshape(B,S,N*H)

Q, K and V are whatever produced them (MatMul+Add projections, Split of a packed QKV...).
The additive mask becomes ``attention_bias``; onnxruntime wants its third dimension to be the
query length, so a mask broadcast over queries (BERT's (B,1,1,L)) is expanded first.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper

from onnxrt.ir.graph import MS_DOMAIN, Graph, attr, same_dim
from onnxrt.passes.registry import EXTENDED, rule

__all__ = ["fuse_attention"]


def _is(n: onnx.NodeProto | None, op: str) -> bool:
    return n is not None and n.op_type == op and n.domain in ("", "ai.onnx")


def _prod(g: Graph, name: str, op: str, single_to: onnx.NodeProto | None = None
          ) -> onnx.NodeProto | None:
    p = g.producer(name) if name else None
    if not _is(p, op):
        return None
    if single_to is not None and not g.only_use(name, single_to):
        return None
    return p


def _perm(n: onnx.NodeProto) -> list[int] | None:
    p = attr(n, "perm")
    return None if p is None else list(p)


def _heads(g: Graph, t: onnx.NodeProto, r: onnx.NodeProto, kt: bool) -> tuple[int, int] | None:
    """(num_heads, head_size) of a head split Reshape -> Transpose."""
    s = g.shape(t.output[0])
    if s is not None and len(s) == 4:
        n, h = (s[1], s[2]) if kt else (s[1], s[3])
        if isinstance(n, int) and isinstance(h, int) and n > 0 and h > 0:
            return n, h
    tail = _shape_tail(g, r.input[1], 4, 2) if len(r.input) > 1 else None
    if tail is not None and tail[0] > 0 and tail[1] > 0:
        return tail[0], tail[1]
    return None


def _shape_tail(g: Graph, name: str, rank: int, k: int) -> list[int] | None:
    """The last ``k`` entries of a Reshape target of ``rank`` entries: a constant, or a
    Concat (shape subgraph of a dynamic export) whose trailing inputs are constants."""
    c = g.const(name)
    if c is not None:
        return [int(i) for i in c.reshape(-1)[-k:]] if c.size == rank else None
    cat = _prod(g, name, "Concat")
    if cat is None:
        return None
    parts = []
    for x in cat.input:
        s = g.shape(x)
        if s is None or len(s) != 1 or not isinstance(s[0], int):
            return None
        parts.append((x, s[0]))
    if sum(n for _, n in parts) != rank:
        return None
    vals: list[int] = []
    for x, n in reversed(parts):
        if len(vals) >= k:
            break
        c = g.const(x)
        if c is None:
            return None
        vals = [int(i) for i in c.reshape(-1)] + vals
    return vals[-k:]


def _split_heads(g: Graph, name: str, perm: list[int], user: onnx.NodeProto
                 ) -> tuple[str, int, int, list[onnx.NodeProto]] | None:
    """x for ``Transpose(Reshape(x, (B,S,N,H)), perm)`` -> (x, N, H, nodes)."""
    t = _prod(g, name, "Transpose", user)
    if t is None or _perm(t) != perm:
        return None
    r = _prod(g, t.input[0], "Reshape", t)
    if r is None or g.rank(r.input[0]) != 3:
        return None
    nh = _heads(g, t, r, perm == [0, 2, 3, 1])
    if nh is None:
        return None
    return r.input[0], nh[0], nh[1], [r, t]


def _scaled(g: Graph, name: str, user: onnx.NodeProto) -> tuple[str, float, list]:
    """Strip a Mul by a scalar constant: (input, factor, nodes)."""
    m = _prod(g, name, "Mul", user)
    if m is not None and len(m.input) == 2:
        for i in (0, 1):
            c = g.scalar(m.input[i])
            if c is not None:
                return m.input[1 - i], c, [m]
    return name, 1.0, []


def _softmax_last(g: Graph, sm: onnx.NodeProto) -> bool:
    axis = attr(sm, "axis", -1 if g.opset >= 13 else 1)
    return axis in (-1, 3)


@rule("AttentionFusion", EXTENDED, order=210, ops=("Softmax",))
def fuse_attention(g: Graph, sm: onnx.NodeProto) -> bool:
    return _is(sm, "Softmax") and _softmax_last(g, sm) and _fuse_one(g, sm)


def _fuse_one(g: Graph, sm: onnx.NodeProto) -> bool:
    if g.elem_type(sm.input[0]) != TP.FLOAT:
        return False
    nodes: list[onnx.NodeProto] = [sm]
    # -- probabilities @ V -> merge heads
    if not g.only_use(sm.output[0]):
        return False
    pv = g.consumers(sm.output[0])[0]
    if not _is(pv, "MatMul") or pv.input[0] != sm.output[0]:
        return False
    vs = _split_heads(g, pv.input[1], [0, 2, 1, 3], pv)
    if vs is None or not g.only_use(pv.output[0]):
        return False
    t_out = g.consumers(pv.output[0])[0]
    if not _is(t_out, "Transpose") or _perm(t_out) != [0, 2, 1, 3] or \
            not g.only_use(t_out.output[0]):
        return False
    r_out = g.consumers(t_out.output[0])[0]
    if not _is(r_out, "Reshape") or g.rank(r_out.output[0]) not in (3, None):
        return False
    v, nv, hv, v_nodes = vs
    out_shape = g.shape(r_out.output[0])
    tail = _shape_tail(g, r_out.input[1], 3, 1)
    if out_shape is not None and len(out_shape) == 3 and isinstance(out_shape[2], int):
        if out_shape[2] != nv * hv:
            return False
    elif tail is None or tail[0] not in (-1, nv * hv):
        return False
    nodes += [pv, t_out, r_out] + v_nodes
    # -- mask and scale
    x = sm.input[0]
    mask = None
    add = _prod(g, x, "Add", sm)
    if add is not None:
        for i in (0, 1):
            p = g.producer(add.input[i])
            if p is not None and p.op_type in ("MatMul", "Div", "Mul", "Where") and \
                    g.only_use(add.input[i], add):
                x, mask = add.input[i], add.input[1 - i]
                nodes.append(add)
                break
        else:
            return False
    causal = 0
    causal_slice = None
    wh = _prod(g, x, "Where", None)
    if wh is not None and g.only_use(x):
        # GPT-2: Where(tril(ones) slice of a constant buffer, scores, finfo.min); the slice
        # is a constant at static shapes, Slice nodes with computed ends at dynamic ones
        if not _is_causal(g, wh):
            causal_slice = _causal_slice(g, wh)
            if causal_slice is None:
                return False
        causal, x = 1, wh.input[1]
        nodes.append(wh)
    scale = 1.0
    d = _prod(g, x, "Div", None)
    if d is not None and g.only_use(x) and g.scalar(d.input[1]):
        scale, x = 1.0 / g.scalar(d.input[1]), d.input[0]
        nodes.append(d)
    elif _prod(g, x, "Mul") is not None and g.only_use(x):
        x, c, ms = _scaled(g, x, g.consumers(x)[0])
        scale *= c
        nodes += ms
    qk = _prod(g, x, "MatMul")
    if qk is None or not g.only_use(x):
        return False
    nodes.append(qk)
    qn, s1, m1 = _scaled(g, qk.input[0], qk)
    kn, s2, m2 = _scaled(g, qk.input[1], qk)
    scale *= s1 * s2
    nodes += m1 + m2
    qs = _split_heads(g, qn, [0, 2, 1, 3], m1[0] if m1 else qk)
    ks = _split_heads(g, kn, [0, 2, 3, 1], m2[0] if m2 else qk)
    if qs is None or ks is None:
        return False
    q, nq, hq, q_nodes = qs
    k, nk, hk, k_nodes = ks
    if not (nq == nk == nv) or hq != hk:
        return False
    nodes += q_nodes + k_nodes
    # every intermediate is read only inside the pattern
    inside = {id(n) for n in nodes}
    for n in nodes:
        if n is r_out:
            continue
        for o in n.output:
            if o and (g.is_output(o) or any(id(c) not in inside for c in g.consumers(o))):
                return False
    new_nodes: list[onnx.NodeProto] = []
    packed = _packed_projection(g, q, k, v, [q_nodes[0], k_nodes[0], v_nodes[0]])
    if causal_slice is not None:
        # the sliced buffer is the causal mask when it is (S, L) with S = L: self-attention
        # (Q and K from one input, or of one symbolic length) and ends of that length
        sq = g.shape(packed[0] if packed else q)
        sk = g.shape(packed[0] if packed else k)
        if sq is None or sk is None or len(sq) != 3 or len(sk) != 3 or \
                not same_dim(sq[1], sk[1]) or not all(same_dim(e, sq[1])
                                                       for e in causal_slice):
            return False
    if mask is not None:   # the query length comes from a value that stays in the graph
        mask = _attention_bias(g, mask, packed[0] if packed else q, nq, new_nodes)
        if mask is None:
            return False
    if packed is not None:
        x, ws, bs, proj = packed
        if len(ws) == 1:
            w_name, b_name = ws[0], bs[0]
        else:
            w_name = g.add_const(np.concatenate([g.const(w) for w in ws], axis=1),
                                 "qkv_weight")
            b_name = g.add_const(np.concatenate([g.const(b) for b in bs], axis=0),
                                 "qkv_bias")
        sizes = [nq * hq, nk * hk, nv * hv]
        att = helper.make_node(
            "Attention", [x, w_name, b_name] + (["", "", mask] if mask else []),
            [r_out.output[0]], name=g.fresh((sm.name or "attention") + "_attention"),
            domain=MS_DOMAIN, num_heads=nq, scale=float(scale), unidirectional=causal)
        if len(set(sizes)) > 1:
            att.attribute.append(helper.make_attribute("qkv_hidden_sizes", sizes))
        g.replace(nodes + proj, new_nodes + [att], r_out)
        g.uses_domain(MS_DOMAIN)
        return True
    ins = [q, k, v] + (["", "", mask] if mask else [])
    mha = helper.make_node("MultiHeadAttention", ins, [r_out.output[0]],
                           name=g.fresh((sm.name or "attention") + "_mha"), domain=MS_DOMAIN,
                           num_heads=nq, scale=float(scale), unidirectional=causal)
    g.replace(nodes, new_nodes + [mha], r_out)
    g.uses_domain(MS_DOMAIN)
    return True


def _is_causal(g: Graph, wh: onnx.NodeProto) -> bool:
    """Where(cond, scores, fill) keeps exactly the causal (lower-left) part of the scores:
    cond a constant tril of ones aligned at the end (query i sees keys up to L-S+i), fill a
    large negative number."""
    cond = g.const(wh.input[0])
    fill = g.scalar(wh.input[2])
    if cond is None or cond.dtype != np.bool_ or cond.ndim < 2 or fill is None or \
            fill > -1e4 or any(d != 1 for d in cond.shape[:-2]):
        return False
    sq, lk = cond.shape[-2:]
    tril = np.tril(np.ones((sq, lk), bool), k=lk - sq)
    return bool(np.array_equal(cond.reshape(sq, lk), tril))


def _causal_slice(g: Graph, wh: onnx.NodeProto) -> tuple[Any, Any] | None:
    """For Where(Slice(tril buffer)[, Slice], scores, fill) with the slices starting at 0 on
    the last two axes (GPT-2's ``bias[:, :, L - S:L, :L]`` at S = L): the ends (rows, cols) of
    the slice, as ints or symbols, for the caller to compare with the query length."""
    fill = g.scalar(wh.input[2])
    if fill is None or fill > -1e4:
        return None
    name, ends = wh.input[0], {}
    while True:
        sl = _prod(g, name, "Slice", None)
        if sl is None:
            break
        if len(sl.input) < 4 or not sl.input[3] or (len(sl.input) > 4 and sl.input[4] and (
                g.const(sl.input[4]) is None or np.any(g.const(sl.input[4]) != 1))):
            return None
        starts, stops, axes = (_sym_value(g, x) for x in sl.input[1:4])
        if axes is None or starts is None or stops is None or \
                not (len(axes) == len(starts) == len(stops)):
            return None
        for a, st, e in zip(axes, starts, stops):
            if not isinstance(a, int) or a not in (2, 3, -2, -1) or st != 0:
                return None
            a = a % 4
            if a in ends:
                return None
            ends[a] = e
        name = sl.input[0]
    cond = g.const(name)
    if cond is None or cond.dtype != np.bool_ or cond.ndim != 4 or \
            any(d != 1 for d in cond.shape[:2]) or cond.shape[2] != cond.shape[3]:
        return None
    m = cond.shape[2]
    if not np.array_equal(cond.reshape(m, m), np.tril(np.ones((m, m), bool))):
        return None
    if 2 not in ends or 3 not in ends:
        return None
    return ends[2], ends[3]


def _sym_value(g: Graph, name: str, depth: int = 0) -> list[Any] | None:
    """A small int vector computed from shapes, as ints and dim symbols: constants,
    Shape, Gather, Unsqueeze/Squeeze/Reshape/Cast/Identity of one element, Concat, and
    Sub/Add (symbols only where they cancel: L - L = 0)."""
    c = g.const(name)
    if c is not None:
        if c.dtype.kind not in "iu" or c.ndim > 1:
            return None
        return [int(v) for v in c.reshape(-1)]
    p = g.producer(name)
    if p is None or p.domain not in ("", "ai.onnx") or depth > 8:
        return None
    op = p.op_type
    if op == "Shape":
        s = g.shape(p.input[0])
        if s is None or any(d is None for d in s):
            return None
        r = len(s)
        st, en = int(attr(p, "start", 0)), attr(p, "end", None)
        st = min(max(st + r if st < 0 else st, 0), r)
        en = r if en is None else min(max(int(en) + r if int(en) < 0 else int(en), 0), r)
        return list(s[st:en])
    if op in ("Unsqueeze", "Squeeze", "Reshape", "Cast", "Identity"):
        v = _sym_value(g, p.input[0], depth + 1)
        return v if v is not None and len(v) == 1 else None
    if op == "Gather":
        v, i = _sym_value(g, p.input[0], depth + 1), g.const(p.input[1])
        if v is None or i is None or attr(p, "axis", 0) != 0 or i.dtype.kind not in "iu":
            return None
        try:
            return [v[int(j)] for j in i.reshape(-1)]
        except IndexError:
            return None
    if op == "Concat":
        out: list[Any] = []
        for x in p.input:
            v = _sym_value(g, x, depth + 1)
            if v is None:
                return None
            out += v
        return out
    if op in ("Sub", "Add"):
        a, b = (_sym_value(g, x, depth + 1) for x in p.input)
        if a is None or b is None or len(a) != 1 or len(b) != 1:
            return None
        if isinstance(a[0], int) and isinstance(b[0], int):
            return [a[0] - b[0] if op == "Sub" else a[0] + b[0]]
        if op == "Sub" and isinstance(a[0], str) and a[0] == b[0]:
            return [0]
        if b[0] == 0:
            return a
    return None


def _packed_projection(g: Graph, q: str, k: str, v: str, users: list[onnx.NodeProto]
                       ) -> tuple[str, list[str], list[str], list[onnx.NodeProto]] | None:
    """When Q, K and V are ``x @ W + b`` of one input with constant 2-D weights and 1-D
    biases, each read only by its head split: (x, weights, biases, projection nodes) for
    com.microsoft Attention's packed QKV weight."""
    split = _split_projection(g, q, k, v, users)
    if split is not None:
        return split
    xs, ws, bs, nodes = set(), [], [], []
    for name, user in zip((q, k, v), users):
        add = _prod(g, name, "Add", user)
        if add is None or len(add.input) != 2:
            return None
        for i in (0, 1):
            mm = _prod(g, add.input[i], "MatMul", add)
            b = add.input[1 - i]
            if mm is not None:
                break
        else:
            return None
        bv = g.const(b)
        w_shape = g.shape(mm.input[1])
        if bv is None or bv.ndim != 1 or bv.dtype != np.float32 or g.const(
                mm.input[1]) is None or w_shape is None or len(w_shape) != 2 or \
                w_shape[1] != bv.shape[0] or g.elem_type(mm.input[1]) != TP.FLOAT:
            return None
        xs.add(mm.input[0])
        ws.append(mm.input[1])
        bs.append(b)
        nodes += [mm, add]
    if len(xs) != 1 or len({g.shape(w)[0] for w in ws}) != 1:
        return None
    x = xs.pop()
    if g.rank(x) != 3:
        return None
    return x, ws, bs, nodes


def _split_projection(g: Graph, q: str, k: str, v: str, users: list[onnx.NodeProto]
                      ) -> tuple[str, list[str], list[str], list[onnx.NodeProto]] | None:
    """GPT-2's Conv1D: Q, K, V are the three equal parts of Split(x @ W + b, axis -1)."""
    sp = _prod(g, q, "Split")
    if sp is None or list(sp.output) != [q, k, v] or attr(sp, "axis", 0) not in (-1, 2):
        return None
    if any(not g.only_use(o, u) for o, u in zip((q, k, v), users)):
        return None
    sizes = attr(sp, "split")
    if sizes is None and len(sp.input) > 1 and sp.input[1]:
        c = g.const(sp.input[1])
        sizes = None if c is None else [int(i) for i in c]
    if sizes is not None and len(set(sizes)) != 1:
        return None
    add = _prod(g, sp.input[0], "Add", sp)
    if add is None or len(add.input) != 2:
        return None
    for i in (0, 1):
        mm = _prod(g, add.input[i], "MatMul", add)
        if mm is not None:
            b = add.input[1 - i]
            break
    else:
        return None
    bv, ws = g.const(b), g.shape(mm.input[1])
    if bv is None or bv.ndim != 1 or bv.dtype != np.float32 or g.const(mm.input[1]) is None \
            or ws is None or len(ws) != 2 or ws[1] != bv.shape[0] or bv.shape[0] % 3 or \
            g.rank(mm.input[0]) != 3 or g.elem_type(mm.input[1]) != TP.FLOAT:
        return None
    return mm.input[0], [mm.input[1]], [b], [mm, add, sp]


def _attention_bias(g: Graph, mask: str, q: str, heads: int,
                    new_nodes: list[onnx.NodeProto]) -> str | None:
    """The mask as onnxruntime's attention_bias (B|1, N|1, S, L): rank 4, expanded over the
    query axis when it is broadcast there."""
    if g.elem_type(mask) != TP.FLOAT:
        return None
    s = g.shape(mask)
    if s is None or len(s) != 4 or s[1] not in (1, heads):
        return None
    sq = g.shape(q)
    seq = sq[1] if sq is not None and len(sq) == 3 else None
    if s[2] != 1 or seq == 1:
        return mask
    if isinstance(seq, int):
        target = g.add_const(np.array([1, 1, seq, 1], np.int64), "attn_bias_shape")
    else:
        shp = g.fresh("attn_q_shape")
        seq_dim = g.fresh("attn_q_seq")
        target = g.fresh("attn_bias_shape")
        new_nodes += [
            helper.make_node("Shape", [q], [shp], name=shp),
            helper.make_node("Gather", [shp, g.add_const(np.array([1], np.int64), "one")],
                             [seq_dim], name=seq_dim, axis=0),
            helper.make_node("Concat", [g.add_const(np.array([1, 1], np.int64), "ones"),
                                        seq_dim, g.add_const(np.array([1], np.int64), "one")],
                             [target], name=target, axis=0)]
    out = g.fresh(mask + "_expanded")
    new_nodes.append(helper.make_node("Expand", [mask, target], [out], name=out))
    return out
