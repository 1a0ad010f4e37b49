"""The pass list as data: every rewrite rule registers itself where it is defined.

A rule is what onnxruntime's RewriteRule states and nothing more: a name (onnxruntime's, so
``disabled_optimizers`` lists written for onnxruntime keep working), the optimization
level it belongs to, the op types whose nodes it is tried on (None: once on the whole
graph), and ``apply(graph, node) -> bool`` that checks its condition on the node's
neighbourhood and rewrites the graph when it holds (True when it did). ``order`` places it
among the rules of its level: an earlier fusion makes the next one's pattern (Conv+BN
before Conv+activation, MatMul+Add before Gemm+activation, LayerNorm before
SkipLayerNorm).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from onnxrt.errors import InvalidArgument

__all__ = ["Rule", "rule", "RULES", "BASIC", "EXTENDED", "LAYOUT"]

BASIC, EXTENDED, LAYOUT = 1, 2, 3


@dataclass(frozen=True)
class Rule:
    name: str
    level: int
    order: int
    ops: frozenset[str] | None
    apply: Callable[..., bool]


RULES: list[Rule] = []


def rule(name: str, level: int, *, order: int,
         ops: tuple[str, ...] | None) -> Callable[[Callable[..., bool]], Callable[..., bool]]:
    """Register the decorated ``apply`` as the rule ``name`` (a second rule of one name
    fails at import)."""

    def deco(fn: Callable[..., bool]) -> Callable[..., bool]:
        if any(r.name == name for r in RULES):
            raise InvalidArgument(f"graph rule {name!r} registered twice")
        RULES.append(Rule(name, level, order, None if ops is None else frozenset(ops), fn))
        RULES.sort(key=lambda r: (r.level, r.order))
        return fn

    return deco
