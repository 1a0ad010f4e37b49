"""Run a GraphPlan: one tight loop over prebound steps."""

from __future__ import annotations

import time
from typing import Any

from onnxrt.errors import Fail, OnnxRuntimeError, RunCanceled, RuntimeException
from onnxrt.framework.kernel import RunContext
from onnxrt.plan.plan import GraphPlan

__all__ = ["RunContext", "execute_plan"]


def execute_plan(plan: GraphPlan, inputs: list[Any] | tuple[Any, ...],
                 outer: dict[str, Any] | None, ctx: RunContext) -> list[Any]:
    vals = list(plan.initial)
    for slot, v in zip(plan.input_slots, inputs):
        vals[slot] = v
    if plan.outer_slots:
        if outer is None:
            raise RuntimeException(f"graph {plan.name!r} needs outer-scope values "
                                   f"{list(plan.outer_names)} and none were given")
        for name, slot in zip(plan.outer_names, plan.outer_slots):
            vals[slot] = outer[name]
    ro = ctx.run_options
    prof = ctx.profiler
    i = 0
    try:
        if prof is None and ro is None:
            # the plain loop: one- and two-input steps unpacked (plan.quick_steps); in the
            # other steps ``o`` is the call mode (plan.call_mode)
            for arity, fn, a, b, o, free in plan.quick_steps:
                if arity == 1:
                    vals[o] = fn(vals[a])
                elif arity == 2:
                    vals[o] = fn(vals[a], vals[b])
                elif arity == 3:
                    vals[o] = fn(vals[a], ctx=ctx)
                elif arity == 4:
                    vals[o] = fn(vals[a], vals[b], ctx=ctx)
                elif o == 0:
                    vals[b[0]] = fn(*[vals[s] for s in a])
                elif o == 1:
                    for s, v in zip(b, fn(*[vals[s] for s in a])):
                        vals[s] = v
                elif o == 2:
                    vals[b[0]] = fn(*[vals[s] for s in a], ctx=ctx)
                else:
                    for s, v in zip(b, fn(*[vals[s] for s in a], ctx=ctx)):
                        vals[s] = v
                if free:
                    for s in free:
                        vals[s] = None
                i += 1
        else:
            for fn, ins, outs, mode, free in plan.fast_steps:
                if ro is not None and ro.terminate:
                    raise RunCanceled("Exiting due to terminate flag being set to true.")
                t0 = time.perf_counter_ns() if prof is not None else 0
                args = [vals[s] for s in ins]
                if mode == 0:
                    vals[outs[0]] = fn(*args)
                elif mode == 1:
                    for s, v in zip(outs, fn(*args)):
                        vals[s] = v
                elif mode == 2:
                    vals[outs[0]] = fn(*args, ctx=ctx)
                else:
                    for s, v in zip(outs, fn(*args, ctx=ctx)):
                        vals[s] = v
                if prof is not None:
                    prof.node_event(plan.steps[i], args, [vals[s] for s in outs], t0, plan)
                for s in free:
                    vals[s] = None
                i += 1
    except RunCanceled:
        raise
    except OnnxRuntimeError as e:
        # an error from inside a subgraph or function body: say which node holds it
        step = plan.steps[i] if i < len(plan.steps) else None
        if step is not None and step.mode & 2:
            raise type(e)(f"{e} (inside {step.node.op_type} node '{step.node.name}' of "
                          f"graph '{plan.name}')") from e
        raise
    except Exception as e:  # a kernel failed: name the node, its op and the provider
        step = plan.steps[i]
        node = step.node
        raise Fail(
            f"Non-zero status code returned while running {node.op_type} node. "
            f"Name:'{node.name}' (op {_op_id(node)}, provider {step.provider}) "
            f"Status Message: {type(e).__name__}: {e}") from e
    return [vals[s] for s in plan.output_slots]


def _op_id(node: Any) -> str:
    dom = node.domain or "ai.onnx"
    return f"{dom}::{node.op_type}-{node.since_version}"
