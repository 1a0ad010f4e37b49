"""ORT_PARALLEL: run independent branches of a plan concurrently on a thread pool.

NumPy releases the GIL inside BLAS and most array loops, so independent branches (the
towers of an Inception block, the Q/K/V projections of attention) overlap. The calling
thread schedules; a step with nothing else ready runs inline, so chains pay little.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from dataclasses import dataclass
from typing import Any

from onnxrt.errors import Fail, OnnxRuntimeError, RunCanceled
from onnxrt.plan.plan import GraphPlan

__all__ = ["ParallelInfo", "parallel_info", "execute_plan_parallel"]


@dataclass(frozen=True)
class ParallelInfo:
    deps: tuple[int, ...]                    # number of steps each step waits for
    dependents: tuple[tuple[int, ...], ...]  # steps that wait for each step
    readers: tuple[tuple[int, int], ...]     # (slot, number of reading steps) for freeable
    reads: tuple[tuple[int, ...], ...]       # freeable slots each step reads (unique)


def parallel_info(plan: GraphPlan) -> ParallelInfo:
    producer: dict[int, int] = {}
    for i, st in enumerate(plan.steps):
        for s in st.outs:
            producer[s] = i
    freeable = {s for st in plan.steps for s in st.free}
    deps, dependents = [], [[] for _ in plan.steps]
    count: dict[int, int] = {}
    reads = []
    for i, st in enumerate(plan.steps):
        before = sorted({producer[s] for s in st.ins if s in producer})
        deps.append(len(before))
        for j in before:
            dependents[j].append(i)
        mine = tuple(sorted({s for s in st.ins if s in freeable}))
        reads.append(mine)
        for s in mine:
            count[s] = count.get(s, 0) + 1
    return ParallelInfo(tuple(deps), tuple(tuple(d) for d in dependents),
                        tuple(count.items()), tuple(reads))


def _run_step(step: Any, vals: list[Any], ctx: Any, plan: GraphPlan) -> None:
    fn, ins, outs, mode, _ = step.as_tuple()
    args = [vals[s] for s in ins]
    prof = ctx.profiler
    t0 = time.perf_counter_ns() if prof is not None else 0
    res = fn(*args, ctx=ctx) if mode & 6 else fn(*args)   # MODE_CTX or MODE_POOL
    if mode & 1:
        for s, v in zip(outs, res):
            vals[s] = v
    else:
        vals[outs[0]] = res
    if prof is not None:
        prof.node_event(step, args, [vals[s] for s in outs], t0, plan)


def execute_plan_parallel(plan: GraphPlan, inputs: list[Any], outer: dict[str, Any] | None,
                          ctx: Any, pool: cf.ThreadPoolExecutor, info: ParallelInfo
                          ) -> list[Any]:
    vals = list(plan.initial)
    for slot, v in zip(plan.input_slots, inputs):
        vals[slot] = v
    if plan.outer_slots and outer is not None:
        for name, slot in zip(plan.outer_names, plan.outer_slots):
            vals[slot] = outer[name]
    remaining = list(info.deps)
    left = dict(info.readers)
    ready = [i for i, d in enumerate(remaining) if d == 0]
    in_flight: dict[cf.Future[None], int] = {}
    steps = plan.steps

    def finish(i: int) -> None:
        for s in info.reads[i]:
            left[s] -= 1
            if left[s] == 0:
                vals[s] = None
        for d in info.dependents[i]:
            remaining[d] -= 1
            if remaining[d] == 0:
                ready.append(d)

    current = -1
    try:
        while ready or in_flight:
            ctx.check_terminate()
            while len(ready) > 1:
                i = ready.pop()
                in_flight[pool.submit(_run_step, steps[i], vals, ctx, plan)] = i
            if ready:  # one more: run it here rather than wait idle
                current = ready.pop()
                _run_step(steps[current], vals, ctx, plan)
                finish(current)
                current = -1
                if not in_flight:
                    continue
            if in_flight:
                done, _ = cf.wait(list(in_flight), return_when=cf.FIRST_COMPLETED,
                                  timeout=None if not ready else 0)
                for fut in done:
                    current = in_flight.pop(fut)
                    fut.result()
                    finish(current)
                    current = -1
    except (RunCanceled, OnnxRuntimeError):
        _drain(in_flight)
        raise
    except Exception as e:
        _drain(in_flight)
        node = steps[current].node if current >= 0 else None
        where = (f"{node.op_type} node. Name:'{node.name}' (provider {steps[current].provider})"
                 if node is not None else "a node")
        raise Fail(f"Non-zero status code returned while running {where} Status Message: "
                   f"{type(e).__name__}: {e}") from e
    return [vals[s] for s in plan.output_slots]


def _drain(in_flight: dict[cf.Future[None], int]) -> None:
    for fut in in_flight:
        fut.cancel()
    cf.wait(list(in_flight))
