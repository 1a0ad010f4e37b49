"""The driver: runs the registered rules (``passes/rules/``, one file each, registered where
they are defined) on a graph by optimization level.

Basic rules repeat until nothing changes (folding exposes eliminations and the other way
round); the rules above basic run once each, in their registered order. Dead nodes are
removed first and after every rule that changed the graph.
"""

from __future__ import annotations

import importlib
import pkgutil

import onnx

from onnxrt.framework.kernel_lookup import KernelLookup, evaluate_node
from onnxrt.ir.graph import Graph
from onnxrt.ir.shapes import infer_types
from onnxrt.passes import rules as _rules
from onnxrt.passes.dead_nodes import eliminate_dead
from onnxrt.passes.registry import BASIC, RULES, Rule

__all__ = ["optimize", "optimize_graph", "rule_names"]

_MAX_ROUNDS = 4


def _load_rules() -> None:
    for mod in pkgutil.iter_modules(_rules.__path__, prefix=_rules.__name__ + "."):
        importlib.import_module(mod.name)


_load_rules()


def rule_names() -> list[str]:
    """Every registered rule, in the order the driver runs them (onnxruntime's names)."""
    return [r.name for r in RULES]


def optimize(model: onnx.ModelProto, level: int, disabled: frozenset[str] = frozenset(),
             kernels: KernelLookup | None = None) -> tuple[onnx.ModelProto, list[str]]:
    """The optimized model and the names of the passes that changed it (the caller's model
    is not modified); ``kernels`` evaluate constant folding (without, only Constant nodes
    and shapes fold). Sessions run ``optimize_graph`` on their graph instead."""
    if level <= 0 or not model.graph.node:
        return model, []
    g = Graph(model)
    infer_types(g)
    applied = optimize_graph(g, level, disabled, kernels)
    return g.to_model(), applied


def _run(g: Graph, r: Rule) -> bool:
    if r.ops is None:
        return bool(r.apply(g))
    changed = False
    ops = r.ops
    for n in list(g.nodes):
        if n.op_type in ops and r.apply(g, n):
            changed = True
    return changed


def optimize_graph(g: Graph, level: int, disabled: frozenset[str] = frozenset(),
                   kernels: KernelLookup | None = None) -> list[str]:
    """Rewrite ``g`` in place by the rules of ``level``; the names of those that changed
    it. ``kernels``: the session's host kernels, which constant folding evaluates nodes
    with."""
    if level <= 0 or not g.nodes:
        return []
    if "ConstantFolding" in disabled:   # onnxruntime folds shapes inside ConstantFolding
        disabled = disabled | {"ShapeFolding"}
    if kernels is not None:
        opsets = g.opsets
        g.evaluate = lambda node, args, types: evaluate_node(kernels, node, opsets, args,
                                                             types)
    applied: list[str] = []
    basic = [r for r in RULES if r.level == BASIC and r.name not in disabled]
    above = [r for r in RULES if BASIC < r.level <= level and r.name not in disabled]

    def run(r: Rule) -> bool:
        if _run(g, r):
            if r.name not in applied:
                applied.append(r.name)
            if eliminate_dead(g) and "DeadNodeElimination" not in applied:
                applied.append("DeadNodeElimination")
            return True
        return False

    try:
        if eliminate_dead(g):
            applied.append("DeadNodeElimination")
        for _ in range(_MAX_ROUNDS):
            if not any([run(r) for r in basic]):
                break
        for r in above:
            run(r)
    finally:
        g.evaluate = None
    g.prune_consts()
    return applied
