"""Kernels and the registry that holds them.

A kernel is registered where it is defined::

    @CPU.kernel("Softmax", since=13)
    def softmax(x, *, axis=-1): ...

Inputs are positional (``None`` for an absent optional input); attributes are keyword-only,
with the ONNX schema's defaults filled in by the planner, never restated by the kernel.
A kernel that must prepare once per session is a class: ``__init__(self, node: NodeInfo)``
and ``__call__(self, *inputs)``.

What a kernel gets of its session at run time comes in the run context (``RunContext``),
passed as the keyword ``ctx=`` to kernels that ask for it:

- ``threads=True``: the kernel splits its work over the session's intra-op threads,
  ``ctx.thread_pool`` (framework/parallel.py, onnxruntime's ``GetOperatorThreadPool()``).
  It must also run without a context (``ctx=None``, then ``parallel.SERIAL``): constant
  folding calls it at session creation.
- ``context=True``: the kernel needs the run itself (the run options, the profiler, nested
  graphs run through ``ctx``: If, Loop, Scan); it is never folded.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import numpy as np

__all__ = ["KernelDef", "KernelRegistry", "NodeInfo", "RunContext"]


class RunContext:
    """Per-run state handed to the kernels that ask for it (``ctx=``): the run options,
    the profiler hook, the nesting depth of subgraphs, and the session's intra-op thread
    pool (``thread_pool``, a framework/parallel.py ``ThreadPool``)."""

    __slots__ = ("run_options", "profiler", "depth", "thread_pool")

    def __init__(self, run_options: Any = None, profiler: Any = None, depth: int = 0,
                 thread_pool: Any = None) -> None:
        self.run_options = run_options
        self.profiler = profiler
        self.depth = depth
        if thread_pool is None:
            from onnxrt.framework.parallel import SERIAL
            thread_pool = SERIAL
        self.thread_pool = thread_pool

    def check_terminate(self) -> None:
        ro = self.run_options
        if ro is not None and ro.terminate:
            from onnxrt.errors import RunCanceled

            raise RunCanceled("Exiting due to terminate flag being set to true.")


@dataclass(frozen=True)
class NodeInfo:
    """What a kernel may know about its node when it is prepared (once per session).

    ``attrs`` holds every attribute with the schema's defaults filled in; ``constant_inputs``
    maps input positions to the initializer or constant values known at session creation;
    ``subgraphs`` maps graph attributes to runnable subgraphs (see ``plan.SubgraphRunner``);
    ``implicit_inputs`` names outer-scope values the node's subgraphs read: they arrive after
    the node's own inputs.
    """

    name: str
    op_type: str
    domain: str
    since_version: int
    opset: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    constant_inputs: dict[int, Any] = field(default_factory=dict)
    input_types: tuple[Any, ...] = ()    # onnx.TypeProto or None per input, where known
    output_types: tuple[Any, ...] = ()   # onnx.TypeProto or None per output, where known
    subgraphs: dict[str, Any] = field(default_factory=dict)
    implicit_inputs: tuple[str, ...] = ()
    provider: str = "CPUExecutionProvider"

    @property
    def num_inputs(self) -> int:
        return len(self.inputs)

    @property
    def num_outputs(self) -> int:
        return len(self.outputs)

    def output_present(self, i: int) -> bool:
        """Whether optional output ``i`` is wanted (present and named)."""
        return i < len(self.outputs) and bool(self.outputs[i])

    def input_present(self, i: int) -> bool:
        return i < len(self.inputs) and bool(self.inputs[i])


@dataclass(frozen=True)
class KernelDef:
    """One registered kernel: an op, a domain, an inclusive since-version range."""

    op_type: str
    domain: str
    since: int
    until: int | None
    impl: Callable[..., Any]
    is_class: bool
    dtypes: frozenset[np.dtype] | None = None
    host_inputs: frozenset[int] = frozenset()
    needs_node: bool = False
    context: bool = False
    threads: bool = False       # takes ``ctx=`` for the session's thread pool, foldable
    inplace: tuple[tuple[int, int], ...] = ()
    accepted_attrs: frozenset[str] | None = None  # None: accepts any keyword

    def describe(self) -> str:
        upto = f"..{self.until}" if self.until is not None else "+"
        dom = self.domain or "ai.onnx"
        return f"{dom}::{self.op_type}({self.since}{upto})"


def _accepted_keywords(fn: Callable[..., Any]) -> frozenset[str] | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    names = set()
    for p in sig.parameters.values():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            return None
        if p.kind is inspect.Parameter.KEYWORD_ONLY:
            names.add(p.name)
    names.discard("node")
    names.discard("ctx")
    return frozenset(names)


class KernelRegistry:
    """Per-provider kernels keyed by (domain, op_type) with inclusive since-version ranges.

    A kernel registered with ``since=N`` and no ``until`` covers every schema version from N
    up to the next kernel registered for the same op. Duplicates and overlaps fail at import.
    """

    def __init__(self, name: str = "") -> None:
        self.name = name
        self._defs: dict[tuple[str, str], list[KernelDef]] = {}

    # -- registration -------------------------------------------------------------------
    def kernel(
        self,
        op_type: str | Iterable[str],
        since: int = 1,
        until: int | None = None,
        *,
        domain: str = "",
        dtypes: Iterable[Any] | None = None,
        host_inputs: Iterable[int] = (),
        needs_node: bool = False,
        context: bool = False,
        threads: bool = False,
        inplace: Iterable[tuple[int, int]] = (),
    ) -> Callable[[Any], Any]:
        """Decorator registering a function or class as the kernel of one or more ops."""
        ops = (op_type,) if isinstance(op_type, str) else tuple(op_type)

        def deco(impl: Any) -> Any:
            for op in ops:
                self.register(op, impl, since=since, until=until, domain=domain, dtypes=dtypes,
                              host_inputs=host_inputs, needs_node=needs_node, context=context,
                              threads=threads, inplace=inplace)
            return impl

        return deco

    def register(
        self,
        op_type: str,
        impl: Any,
        since: int = 1,
        until: int | None = None,
        *,
        domain: str = "",
        dtypes: Iterable[Any] | None = None,
        host_inputs: Iterable[int] = (),
        needs_node: bool = False,
        context: bool = False,
        threads: bool = False,
        inplace: Iterable[tuple[int, int]] = (),
    ) -> KernelDef:
        if domain == "ai.onnx":
            domain = ""
        is_class = inspect.isclass(impl)
        accepted = None if is_class else _accepted_keywords(impl)
        kd = KernelDef(
            op_type=op_type,
            domain=domain,
            since=int(since),
            until=None if until is None else int(until),
            impl=impl,
            is_class=is_class,
            dtypes=None if dtypes is None else frozenset(np.dtype(d) for d in dtypes),
            host_inputs=frozenset(host_inputs),
            needs_node=needs_node,
            context=context,
            threads=threads,
            inplace=tuple(inplace),
            accepted_attrs=accepted,
        )
        lst = self._defs.setdefault((domain, op_type), [])
        for other in lst:
            if other.since == kd.since:
                raise ValueError(f"kernel {kd.describe()} registered twice in {self.name!r} "
                                 f"({other.impl!r} and {impl!r})")
        lst.append(kd)
        lst.sort(key=lambda k: k.since)
        # explicit ranges must not overlap the next kernel's start
        for a, b in zip(lst, lst[1:]):
            if a.until is not None and a.until >= b.since:
                raise ValueError(f"kernels {a.describe()} and {b.describe()} overlap "
                                 f"in {self.name!r}")
        return kd

    # -- lookup -------------------------------------------------------------------------
    def lookup(self, domain: str, op_type: str, version: int) -> KernelDef | None:
        """The kernel covering schema version ``version`` of ``domain::op_type``, if any."""
        if domain == "ai.onnx":
            domain = ""
        lst = self._defs.get((domain, op_type))
        if not lst:
            return None
        found = None
        for kd in lst:
            if kd.since <= version:
                found = kd
            else:
                break
        if found is None:
            return None
        if found.until is not None and version > found.until:
            return None
        return found

    def versions(self, domain: str, op_type: str) -> list[KernelDef]:
        return list(self._defs.get(("" if domain == "ai.onnx" else domain, op_type), ()))

    def __contains__(self, key: tuple[str, str]) -> bool:
        d, op = key
        return ("" if d == "ai.onnx" else d, op) in self._defs

    def __iter__(self) -> Iterator[KernelDef]:
        for lst in self._defs.values():
            yield from lst

    def __len__(self) -> int:
        return sum(len(v) for v in self._defs.values())
