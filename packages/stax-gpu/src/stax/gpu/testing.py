"""Hand-built Schedules: pick the kernels yourself, get a valid memory plan.

For tests and benchmarks that need a particular fusion (a GPU policy's choice)
independent of stax.sched's fusion heuristics. The memory plan is the simple one:
allocate a buffer before its kernel, free it after its last reader (inputs too,
outputs never), with optional reuse of freed buffers of identical layout.
"""

from __future__ import annotations

from stax.ir import ComputedBuffer, ExternKernel, Graph, Load, Reduction, Scan, walk
from stax.sched import Kernel, MemoryEvent, MemoryPlan, Schedule
from stax.sched.schedule import ALLOC, EXTERN, FREE, FUSED, POINTWISE, REDUCTION, REUSE

from .symbolic import size


def _reads(node) -> set:
    if isinstance(node, ExternKernel):
        return set(node.inputs)
    return {n.buffer for n in walk(node.body.value) if isinstance(n, Load)}


def _group(node: ComputedBuffer) -> tuple:
    body = node.body
    sizes = [size(s) for s in body.ranges]  # (symbolic shapes: size expressions)
    if isinstance(body, Reduction):
        return tuple(s for s in sizes if s != 1), tuple(size(s) for s in body.reduction_ranges if size(s) != 1)
    if isinstance(body, Scan):
        rest = tuple(s for k, s in enumerate(sizes) if k != body.axis and s != 1)
        return rest, (sizes[body.axis],)
    return tuple(s for s in sizes if s != 1), ()


def build_schedule(graph: Graph, groups: list[list[str]] | None = None, reuse: bool = False) -> Schedule:
    """A Schedule running `groups` (lists of node names) as kernels in order; default:
    one kernel per node. `reuse` turns on same-layout reuse of freed buffers."""
    groups = groups if groups is not None else [[n.name for n in graph.nodes]]
    kernels = []
    for k, names in enumerate(groups):
        nodes = [graph.node(n) for n in names]
        if len(nodes) == 1 and isinstance(nodes[0], ExternKernel):
            kernels.append(Kernel(f"kernel{k}", EXTERN, tuple(names), ((), ()), "ExternKernelSchedulerNode"))
            continue
        shaped = [nd for nd in nodes if isinstance(nd.body, (Reduction, Scan))]
        group = _group(shaped[0] if shaped else nodes[0])
        kind = FUSED if len(nodes) > 1 else (REDUCTION if shaped else POINTWISE)
        node_type = "FusedSchedulerNode" if len(nodes) > 1 else "SchedulerNode"
        kernels.append(Kernel(f"kernel{k}", kind, tuple(names), group, node_type))
    return Schedule(graph, tuple(kernels), memory_plan(graph, groups, reuse))


def memory_plan(graph: Graph, groups: list[list[str]], reuse: bool = False) -> MemoryPlan:
    last: dict[str, int] = {}
    for step, names in enumerate(groups):
        for n in names:
            for b in _reads(graph.node(n)):
                last[b] = step
    outputs = set(graph.outputs)
    events, free_pool = [], []
    for step, names in enumerate(groups):
        for n in names:
            lay = graph.node(n).layout
            match = next((b for b in free_pool if graph.buffer_layout(b).storage_size_expr() == lay.storage_size_expr()
                          and graph.buffer_layout(b).dtype == lay.dtype), None) if reuse else None
            if match is not None:
                free_pool.remove(match)
                events.append(MemoryEvent(step, REUSE, n, match))
            else:
                events.append(MemoryEvent(step, ALLOC, n))
        for b, s in last.items():
            if s == step and b not in outputs:
                events.append(MemoryEvent(step, FREE, b))
                if b not in {i.name for i in graph.inputs}:
                    free_pool.append(b)
        for n in names:  # written but never read and not an output
            if n not in last and n not in outputs:
                events.append(MemoryEvent(step, FREE, n))
    return MemoryPlan(tuple(events))
