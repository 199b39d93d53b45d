"""Graph -> Schedule. PLACEHOLDER (foundation): one kernel per node, no fusion; the §7
pipeline replaces this module's body while keeping `schedule`'s signature."""

from __future__ import annotations

from stax.ir import ComputedBuffer, ExternKernel, Graph, Reduction, loads
from stax.ir.index import as_int

from .schedule import ALLOC, EXTERN, FREE, POINTWISE, REDUCTION, Kernel, MemoryEvent, MemoryPlan, Schedule


def _reads(node) -> list[str]:
    if isinstance(node, ExternKernel):
        return list(node.inputs)
    return sorted({ld.buffer for ld in loads(node.body.value)})


def schedule(graph: Graph, policy=None) -> Schedule:
    kernels = []
    for k, node in enumerate(graph.nodes):
        if isinstance(node, ExternKernel):
            kernels.append(Kernel(f"kernel{k}", EXTERN, (node.name,), ((), ()), "ExternKernelSchedulerNode"))
            continue
        body = node.body
        n = tuple(as_int(s) for s in body.ranges if as_int(s) != 1)
        r = tuple(as_int(s) for s in body.reduction_ranges if as_int(s) != 1)
        kind = REDUCTION if isinstance(body, Reduction) else POINTWISE
        kernels.append(Kernel(f"kernel{k}", kind, (node.name,), (n, r)))
    last_use: dict[str, int] = {}
    for step, node in enumerate(graph.nodes):
        for b in _reads(node):
            last_use[b] = step
    events = []
    outputs = set(graph.outputs)
    for step, node in enumerate(graph.nodes):
        if isinstance(node, ComputedBuffer):
            events.append(MemoryEvent(step, ALLOC, node.name))
        for b in _reads(node):
            if last_use[b] == step and b not in outputs:
                events.append(MemoryEvent(step, FREE, b))
    return Schedule(graph, tuple(kernels), MemoryPlan(tuple(events)), ())
