"""The frozen execution plan: a flat list of prebound steps over integer value slots."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from onnxrt.framework.kernel import NodeInfo

__all__ = ["Step", "GraphPlan", "NONE_SLOT", "SINK_SLOT", "MODE_SINGLE", "MODE_MULTI",
           "MODE_CTX", "MODE_POOL", "call_mode", "SubgraphRunner"]

NONE_SLOT = 0   # always holds None: absent optional inputs read it
SINK_SLOT = 1   # absent optional outputs are written here and never read

MODE_SINGLE = 0  # one output, no run context
MODE_MULTI = 1   # several outputs (a tuple), no run context
MODE_CTX = 2     # flag: the kernel takes ``ctx=`` (added to the two above)
MODE_POOL = 4    # flag: the kernel takes ``ctx=`` for the session's thread pool, and runs
                 # without it too (so it may be folded at session creation)


def call_mode(mode: int) -> int:
    """How the executor calls a step: bit 0 several outputs, bit 1 with ``ctx=``."""
    return (mode & MODE_MULTI) | (MODE_CTX if mode & (MODE_CTX | MODE_POOL) else 0)


@dataclass(frozen=True)
class Step:
    fn: Callable[..., Any]
    ins: tuple[int, ...]
    outs: tuple[int, ...]
    mode: int
    free: tuple[int, ...]
    node: NodeInfo
    provider: str

    def as_tuple(self) -> tuple[Any, ...]:
        return (self.fn, self.ins, self.outs, self.mode, self.free)


@dataclass
class GraphPlan:
    """One graph (the main graph, a subgraph body, or a function body) ready to run.

    ``initial`` is the slot list every run starts from: constants already placed in it.
    ``outer_names``/``outer_slots``: values a subgraph reads from enclosing scopes.
    """

    name: str
    n_slots: int
    initial: list[Any]
    input_names: tuple[str, ...]
    input_slots: tuple[int, ...]
    output_names: tuple[str, ...]
    output_slots: tuple[int, ...]
    steps: list[Step]
    outer_names: tuple[str, ...] = ()
    outer_slots: tuple[int, ...] = ()
    input_types: tuple[Any, ...] = ()
    output_types: tuple[Any, ...] = ()
    slot_names: list[str] = field(default_factory=list)
    output_devices: tuple[Any, ...] = ()
    # prebound forms of ``steps`` for the executor's loops: (fn, ins, outs, call mode, free),
    # and (arity, fn, a, b, out, free) for the plain loop, single-output steps of one or two
    # inputs unpacked (arity 1 or 2; 3 or 4 when they take ``ctx=``) and the others as
    # (0, fn, ins, outs, call mode, free)
    fast_steps: tuple[tuple[Any, ...], ...] = ()
    quick_steps: tuple[tuple[Any, ...], ...] = ()

    def freeze(self) -> "GraphPlan":
        self.fast_steps = tuple((s.fn, s.ins, s.outs, call_mode(s.mode), s.free)
                                for s in self.steps)
        quick = []
        for fn, ins, outs, mode, free in self.fast_steps:
            if mode in (MODE_SINGLE, MODE_CTX) and len(ins) in (1, 2):
                arity = len(ins) + (2 if mode == MODE_CTX else 0)
                quick.append((arity, fn, ins[0], ins[-1], outs[0], free))
            else:
                quick.append((0, fn, ins, outs, mode, free))
        self.quick_steps = tuple(quick)
        return self


class SubgraphRunner:
    """A planned nested graph (If branch, Loop or Scan body) that control-flow kernels run.

    ``run(inputs, outer, ctx)``: ``inputs`` by position, ``outer`` a mapping from the names
    in ``outer_names`` to values of enclosing scopes, ``ctx`` the caller's run context.
    """

    def __init__(self, plan: GraphPlan, execute: Callable[..., list[Any]]) -> None:
        self.plan = plan
        self._execute = execute
        self.input_names = plan.input_names
        self.output_names = plan.output_names
        self.outer_names = plan.outer_names
        self.input_types = plan.input_types
        self.output_types = plan.output_types

    def run(self, inputs: list[Any], outer: dict[str, Any] | None, ctx: Any) -> list[Any]:
        return self._execute(self.plan, inputs, outer, ctx)

    def __repr__(self) -> str:
        return f"SubgraphRunner({self.plan.name!r}, {len(self.plan.steps)} steps)"
