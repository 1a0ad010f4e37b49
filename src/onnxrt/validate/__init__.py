"""Checks of every node's attributes and input shapes against the ONNX spec, made before any
kernel sees them: a model is untrusted input, and the compiled kernels do not check bounds.

One module per op family registers its rules where it defines them (``@rule(op, ...)``). A
rule is ``fn(node, shapes)``: ``node`` has ``name``, ``op_type``, ``domain``,
``since_version`` and ``attrs`` (schema defaults filled in); ``shapes`` (``Shapes``) gives
the input shapes as far as they are known. A rule raises ``SpecError`` naming the attribute
(or input) and its value; it checks what it can and skips what is not known yet.

When the rules run:

* ``check_model`` at session creation, on the model as loaded (before the graph passes, so
  every optimization level refuses the same models), with the shapes the model declares
  (graph inputs, value_info, initializers, Constant nodes);
* ``check_node`` when the planner prepares a node (attributes substituted into function
  bodies, shapes known by then), raising ``Fail`` like onnxruntime's graph resolution;
* at run time, where shapes were not known at creation: ``guard`` wraps a function kernel in
  a check made once per new combination of input shapes; the class kernels of the
  convolution and pooling families check their shapes where they compute their geometry
  (once per input shape), before any compiled call.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from onnxrt.errors import Fail

__all__ = ["SpecError", "Shapes", "rule", "rules_for", "check_node", "check_model", "guard",
           "error_for", "check_shapes"]

_RULES: dict[tuple[str, str], list[Callable[..., None]]] = {}
_FAMILIES = ("window", "norm", "axes", "misc")
_LOADED: list[bool] = []


class SpecError(ValueError):
    """An attribute or input shape the ONNX spec does not allow. Inside a kernel at run
    time it surfaces as onnxruntime's ``Fail`` naming the node (execute/executor.py)."""

    def __init__(self, what: str, value: Any, why: str) -> None:
        self.what, self.value, self.why = what, value, why
        super().__init__(f"{what} = {_show(value)} is invalid: {why}")


def _show(v: Any) -> str:
    if isinstance(v, bytes):
        v = v.decode(errors="replace")
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, tuple):
        v = list(v)
    s = repr(v)
    return s if len(s) <= 120 else s[:117] + "..."


class Shapes:
    """Input shapes as far as known: per input a tuple of dims (int, or None where the
    dim is symbolic or unknown), or None where not even the rank is known or the input is
    absent."""

    __slots__ = ("dims", "absent")

    def __init__(self, dims: Sequence[Any], absent: Iterable[int] = ()) -> None:
        self.dims = list(dims)
        self.absent = frozenset(absent)     # optional inputs the node leaves out

    def __getitem__(self, i: int) -> tuple[int | None, ...] | None:
        return self.dims[i] if i < len(self.dims) else None

    def rank(self, i: int) -> int | None:
        d = self[i]
        return None if d is None else len(d)

    def static(self, i: int) -> tuple[int, ...] | None:
        """The shape of input ``i`` when every dim is known."""
        d = self[i]
        if d is None or any(v is None for v in d):
            return None
        return d  # type: ignore[return-value]

    def complete(self, needed: Iterable[int]) -> bool:
        return all(self.static(i) is not None for i in needed
                   if i < len(self.dims) and i not in self.absent)

    @staticmethod
    def of_arrays(args: Sequence[Any]) -> "Shapes":
        return Shapes([None if a is None or not hasattr(a, "shape") else tuple(a.shape)
                       for a in args])


def rule(*ops: str, domain: str = "", inputs: Sequence[int] = ()) -> Callable:
    """Register ``fn(node, shapes)`` as a rule of ``ops`` (in ``domain``). ``inputs``: the
    inputs whose shapes it reads (a function kernel whose shapes were not all known at
    session creation is checked again at run time)."""

    def deco(fn: Callable[..., None]) -> Callable[..., None]:
        fn.shape_inputs = tuple(inputs)  # type: ignore[attr-defined]
        for op in ops:
            _RULES.setdefault((domain, op), []).append(fn)
        return fn

    return deco


def rules_for(domain: str, op_type: str) -> Sequence[Callable[..., None]]:
    """The rules of ``domain::op_type`` (an empty tuple for most ops: one dict lookup per
    node when a session is created)."""
    if not _LOADED:
        for fam in _FAMILIES:
            importlib.import_module(f"onnxrt.validate.{fam}")
        _LOADED.append(True)
    return _RULES.get((domain, op_type), ()) if domain != "ai.onnx" else \
        _RULES.get(("", op_type), ())


def error_for(node: Any, e: SpecError) -> Fail:
    """onnxruntime's error for a node refused at session creation."""
    dom = node.domain or "ai.onnx"
    return Fail(f"Node ({node.name}) Op ({node.op_type}) [{dom}::{node.op_type}-"
                f"{node.since_version}] {e}")


def check_node(node: Any, shapes: Shapes) -> bool:
    """Run ``node``'s rules; True when every shape a rule reads was known (nothing left for
    run time). Raises ``Fail`` naming the node, the op, the attribute and its value."""
    done = True
    for fn in rules_for(node.domain, node.op_type):
        try:
            fn(node, shapes)
        except SpecError as e:
            raise error_for(node, e) from None
        if not shapes.complete(fn.shape_inputs):
            done = False
    return done


def check_shapes(node: Any, args: Sequence[Any]) -> None:
    """``node``'s shape rules on the arrays of one call (class kernels call this once per
    new input shape); a SpecError surfaces as ``Fail`` naming the node."""
    shapes = Shapes.of_arrays(args)
    for r in rules_for(node.domain, node.op_type):
        if r.shape_inputs:
            r(node, shapes)


def guard(node: Any, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` checked against ``node``'s shape rules once per combination of input shapes
    (for function kernels whose input shapes were not known at session creation)."""
    rules = [r for r in rules_for(node.domain, node.op_type) if r.shape_inputs]
    if not rules:
        return fn
    seen: set[tuple[Any, ...]] = set()

    def checked(*args: Any, **kw: Any) -> Any:
        try:    # ~0.3 us a call; absent optional inputs (None) take the slower form
            key = tuple([a.shape for a in args])
        except AttributeError:
            key = tuple(getattr(a, "shape", None) for a in args)
        if key not in seen:
            shapes = Shapes.of_arrays(args)
            for r in rules:
                r(node, shapes)     # a SpecError: the executor names the node
            seen.add(key)           # a benign race: every thread adds the same key
        return fn(*args, **kw)

    checked.unguarded = fn  # type: ignore[attr-defined]
    return checked


def check_model(model: Any) -> None:
    """The rules of every node in the model's graphs (subgraphs included), with the shapes
    the model declares. Nodes of ops without rules cost one dict lookup."""
    from onnxrt.validate.model import check_graphs

    rules_for("", "")
    check_graphs(model, _RULES)
