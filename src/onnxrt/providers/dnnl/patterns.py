"""Subgraphs the oneDNN provider runs as one primitive: GELU written out with Erf,
x * 0.5 * (1 + erf(x / sqrt(2))), as exporters write it at opsets without a Gelu op, is
oneDNN's ``gelu_erf`` eltwise, and its tanh form (GPT-2's) ``gelu_tanh``. The graph passes
that fuse them into com.microsoft Gelu run only at the extended level, which sessions with
this provider do not reach.

The matchers work on both the partitioner's node views (to claim Erf only inside the
pattern) and the program's NodeProtos, through the small ``Nodes`` adapter."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Nodes", "Gelu", "match_gelu_erf", "match_gelu_tanh", "match_gelu"]


@dataclass
class Nodes:
    """How to walk a graph: the producer and consumers of a value, a value as a constant
    scalar (None when it is not one), and a node's inputs and outputs."""

    producer: Callable[[str], Any]
    consumers: Callable[[str], list[Any]]
    scalar: Callable[[str], float | None]
    ins: Callable[[Any], list[str]]
    outs: Callable[[Any], list[str]]


@dataclass
class Gelu:
    x: str              # the input
    y: str              # the value the pattern ends in
    nodes: list[Any]    # its nodes
    alg: str            # oneDNN's eltwise algorithm: gelu_erf or gelu_tanh


def _near(v: float | None, want: float) -> bool:
    return v is not None and abs(v - want) <= 1e-4 * abs(want)


def _only(g: Nodes, value: str, op: str) -> Any:
    users = g.consumers(value)
    return users[0] if len(users) == 1 and users[0].op_type == op else None


def _other(g: Nodes, n: Any, value: str) -> str | None:
    ins = g.ins(n)
    if len(ins) != 2 or ins[0] == ins[1] or value not in ins:
        return None
    return ins[1] if ins[0] == value else ins[0]


def match_gelu(g: Nodes, n: Any) -> Gelu | None:
    """The GELU pattern around an Erf or Tanh node, or None."""
    if n.op_type == "Erf":
        return match_gelu_erf(g, n)
    return match_gelu_tanh(g, n) if n.op_type == "Tanh" else None


def match_gelu_erf(g: Nodes, erf: Any) -> Gelu | None:
    """The GELU pattern around ``erf``, or None. Accepted tails after 1 + erf(...):
    (x * a) * 0.5, (0.5 * a) * x, and (x * 0.5) * a, factors in either order."""
    if erf.op_type != "Erf":
        return None
    d = g.producer(g.ins(erf)[0])
    if d is None or d.op_type not in ("Div", "Mul") or len(g.consumers(g.outs(d)[0])) != 1:
        return None
    a0, a1 = g.ins(d)[:2]
    if d.op_type == "Div" and _near(g.scalar(a1), math.sqrt(2)):
        x = a0
    elif d.op_type == "Mul" and _near(g.scalar(a1), 1 / math.sqrt(2)):
        x = a0
    elif d.op_type == "Mul" and _near(g.scalar(a0), 1 / math.sqrt(2)):
        x = a1
    else:
        return None
    tail = _tail(g, x, g.outs(erf)[0])
    return None if tail is None else Gelu(x, tail[0], [d, erf] + tail[1], "gelu_erf")


def match_gelu_tanh(g: Nodes, tanh: Any) -> Gelu | None:
    """0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))) around ``tanh`` (x^3 as
    Pow(x, 3)), with the tails ``match_gelu_erf`` accepts; or None."""
    if tanh.op_type != "Tanh":
        return None
    s = g.producer(g.ins(tanh)[0])
    if s is None or s.op_type != "Mul" or len(g.consumers(g.outs(s)[0])) != 1:
        return None
    k = math.sqrt(2 / math.pi)
    a = _other_const(g, s, k)
    add = g.producer(a) if a is not None else None
    if add is None or add.op_type != "Add" or len(g.consumers(a)) != 1:
        return None
    for x, cube in (g.ins(add)[:2], g.ins(add)[1::-1]):
        m = g.producer(cube)
        p = g.producer(_other_const(g, m, 0.044715) or "") if m is not None and \
            m.op_type == "Mul" and len(g.consumers(cube)) == 1 else None
        if p is not None and p.op_type == "Pow" and g.ins(p)[0] == x and \
                _near(g.scalar(g.ins(p)[1]), 3.0) and len(g.consumers(g.outs(p)[0])) == 1:
            tail = _tail(g, x, g.outs(tanh)[0])
            if tail is not None:
                return Gelu(x, tail[0], [p, m, add, s, tanh] + tail[1], "gelu_tanh")
    return None


def _other_const(g: Nodes, n: Any, want: float) -> str | None:
    """The input of two-input ``n`` that is not the constant ``want``, if one is."""
    ins = g.ins(n)
    if len(ins) != 2:
        return None
    if _near(g.scalar(ins[1]), want):
        return ins[0]
    return ins[1] if _near(g.scalar(ins[0]), want) else None


def _tail(g: Nodes, x: str, inner: str) -> tuple[str, list[Any]] | None:
    """1 + ``inner`` times x times 0.5, in the orders exporters write: the value it ends
    in and its nodes."""
    add = _only(g, inner, "Add")
    if add is None or not _near(g.scalar(_other(g, add, inner) or ""), 1.0):
        return None
    m1 = _only(g, g.outs(add)[0], "Mul")
    if m1 is None:
        return None
    other = _other(g, m1, g.outs(add)[0])
    if other is None:
        return None
    if other == x or _near(g.scalar(other), 0.5):
        m2 = _only(g, g.outs(m1)[0], "Mul")
        want = 0.5 if other == x else None
        last = _other(g, m2, g.outs(m1)[0]) if m2 is not None else None
        if last is None or (want is not None and not _near(g.scalar(last), want)) or \
                (want is None and last != x):
            return None
        return g.outs(m2)[0], [add, m1, m2]
    h = g.producer(other)
    if h is None or h.op_type != "Mul" or len(g.consumers(other)) != 1:
        return None
    half = _other(g, h, x)
    if half is None or not _near(g.scalar(half), 0.5):
        return None
    return g.outs(m1)[0], [add, h, m1]
