"""The memory plan in call order: what a generated wrapper walks (§7.5, Listing 8.1).

A codegen's `call(args)` runs the schedule's kernels in order: before each kernel its
allocations and reuses, after it its releases. `plan_calls` lists exactly that, one `PlanCall`
per call: one kernel, or a run of consecutive kernels that one generated function runs
(stax-cpu's parallel regions: all their allocations before the call, all releases after).
Both wrappers (stax-cpu, stax-gpu) and stax-cpu's region planner walk this list; what each
event becomes (a line of Python, a comment, nothing) stays with the codegen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .schedule import FREE, REUSE, MemoryPlan, Schedule


@dataclass(frozen=True)
class PlanCall:
    """One call of the wrapper: schedule kernels `steps` (consecutive), the plan's ALLOC and REUSE
    events of those steps (`before` the call, in plan order) and their FREE events (`after` it)."""

    steps: range
    before: tuple
    after: tuple


def plan_calls(schedule: Schedule, regions: Mapping[int, int] | None = None) -> list[PlanCall]:
    """The memory plan of `schedule` per call, in order. `regions`: first step -> number of
    consecutive kernels one call runs (steps not covered run one kernel per call)."""
    before: dict[int, list] = {}
    after: dict[int, list] = {}
    for e in schedule.memory.events:
        (after if e.kind == FREE else before).setdefault(e.step, []).append(e)
    out, step, n = [], 0, len(schedule.kernels)
    while step < n:
        steps = range(step, step + max(1, (regions or {}).get(step, 1)))
        out.append(PlanCall(steps, tuple(e for s in steps for e in before.get(s, ())),
                            tuple(e for s in steps for e in after.get(s, ()))))
        step = steps.stop
    return out


def donors(plan: MemoryPlan) -> frozenset:
    """Buffers whose storage a later buffer takes over (`buf5 = buf2; del buf2  # reuse`): their
    release is the reuse line, never a `del` of their own."""
    return frozenset(e.reuses for e in plan.events if e.kind == REUSE)
