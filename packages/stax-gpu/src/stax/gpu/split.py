"""Split reductions: a reduction kernel with few outputs and a long reduction becomes
two kernels, partial reductions over S chunks (n_out * S programs) and a final combine.

One program per output row walks the whole row alone: log_softmax+nll's mean over
16384 gathered losses ran on one SM, latency-bound. Splitting spreads the row over
the device; the final kernel combines the S partials per output (deterministic, no
atomics) and runs the kernel's row-level epilogue.

Why here and not at lowering time: the split factor depends on the device (its SM
count) and on what the scheduler fused (the whole kernel's output count decides,
and its epilogue nodes must move to the final kernel), and CPU graphs must not change.
So stax.gpu rewrites the Schedule before planning: the graph gets one partial buffer
per reduction (sizes + (S,), contiguous), each reduction reads its partials, and
the kernel becomes [pointwise-in-loop nodes + partials] then [finals + epilogue].

Split: sum, prod, max, min, any, all (each combines with itself). Left whole:
welford_* (needs a (mean, m2, count) pair combine), argmax/argmin (index pairs),
scans, kernels where a reduction feeds another node inside the loop (softmax), and
reductions whose length has no divisor giving chunks of at least split_min_chunk.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from stax.ir import ComputedBuffer, Graph, Layout, Load, Pointwise, Reduction, map_indices, walk
from stax.ir import dtypes as dt
from stax.ir.index import FloorDiv, ModularIndexing, as_int, pointwise_vars, reduction_vars
from stax.ir.simplify import simplify_index
from stax.sched import Kernel, MemoryEvent, MemoryPlan, Schedule
from stax.sched.policy import splittable
from stax.sched.schedule import ALLOC, EXTERN, FREE, FUSED, REDUCTION

from .config import GpuConfig

log = logging.getLogger("stax.gpu")

SPLITTABLE = ("sum", "prod", "max", "min", "any", "all")
EXACT_IN_STORAGE = ("max", "min", "any", "all")  # partials stored in a half type lose nothing
DEFAULT_SMS = 132  # H200


def device_sms(config: GpuConfig) -> int:
    """SM count of the target: the config's, else the current cuda device's, else an H200's."""
    if config.num_sms:
        return config.num_sms
    if not config.interpret:
        try:
            import torch

            if torch.cuda.is_available():
                return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
        except Exception:  # noqa: BLE001 - no device info: the default
            pass
    return DEFAULT_SMS


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= int(x)
    return out


def split_factor(n: int, r: int, config: GpuConfig, sms: int) -> int:
    """Chunks S per output row (1: do not split). The rule: split when n < max_outputs
    (2 x SMs) and r >= split_min_rnumel; S is the largest divisor of r with
    S <= target_programs / n (4 x SMs) and chunks r / S >= split_min_chunk."""
    max_out = config.split_max_outputs if config.split_max_outputs is not None else 2 * sms
    if not config.split_reductions or n < 1 or n >= max_out or r < config.split_min_rnumel:
        return 1
    target = config.split_target_programs if config.split_target_programs is not None else 4 * sms
    limit = min(target // n, r // max(config.split_min_chunk, 1))
    best = 1
    d = 1
    while d * d <= r:
        if r % d == 0:
            for s in (d, r // d):
                if s <= limit and s > best:
                    best = s
        d += 1
    return best if best >= 2 else 1


def _reads(node: ComputedBuffer) -> set:
    return {ld.buffer for ld in walk(node.body.value) if isinstance(ld, Load)}


def _plan_split(schedule: Schedule, kernel: Kernel, config: GpuConfig, sms: int):
    """(S, chunk, reductions, loop nodes, epilogue nodes) if `kernel` should be split, else None."""
    if kernel.kind == EXTERN:
        return None
    nodes = [schedule.graph.node(nm) for nm in kernel.nodes]
    if not all(isinstance(nd, ComputedBuffer) and isinstance(nd.body, (Pointwise, Reduction)) for nd in nodes):
        return None
    reds = [nd for nd in nodes if isinstance(nd.body, Reduction)]
    if not reds:
        return None
    shapes = {(_prod(nd.body.ranges), _prod(nd.body.reduction_ranges)) for nd in reds}
    if len(shapes) != 1:
        return None
    n, r = shapes.pop()
    for nd in reds:
        body = nd.body
        if body.reduction_type not in SPLITTABLE or body.dtype != body.value.dtype:
            return None
        if dt.compute_dtype(body.dtype) != body.dtype and body.reduction_type not in EXACT_IN_STORAGE:
            return None
    s = split_factor(n, r, config, sms)
    if s == 1:
        return None
    loop, epilogue = [], []
    for nd in nodes:
        if isinstance(nd.body, Reduction):
            continue
        numel = _prod(nd.body.ranges)
        if numel == n * r and splittable([as_int(x) for x in nd.body.ranges], n * s):
            loop.append(nd)
        elif numel == n:
            epilogue.append(nd)
        else:
            return None
    red_names = {nd.name for nd in reds}
    row_names = {nd.name for nd in epilogue}
    for nd in reds + loop:  # the loop must need nothing the final kernel computes
        if _reads(nd) & (red_names | row_names):
            return None
    return s, r // s, reds, loop, epilogue


def _unique(name: str, taken: set) -> str:
    out, k = name, 0
    while out in taken:
        k += 1
        out = f"{name}{k}"
    taken.add(out)
    return out


def _partial_and_final(nd: ComputedBuffer, s: int, chunk: int, name: str) -> tuple[ComputedBuffer, ComputedBuffer]:
    """Partial reduction over (ranges..., S) of chunks of `chunk`, and the combine of the S partials."""
    body = nd.body
    ranges = [as_int(x) for x in body.ranges]
    rsizes = [as_int(x) for x in body.reduction_ranges]
    pv = pointwise_vars(len(ranges) + 1)
    q = pv[-1]
    (r0,) = reduction_vars(1)
    flat = q * chunk + r0
    subs = {}
    for j, v in enumerate(reduction_vars(len(rsizes))):
        stride = _prod(rsizes[j + 1 :])
        subs[v] = FloorDiv(flat, stride) if j == 0 else ModularIndexing(flat, stride, rsizes[j])
    span = dict(zip(pv, ranges + [s])) | {r0: chunk}
    value = map_indices(body.value, lambda e: simplify_index(e.xreplace(subs), span))
    p_layout = Layout.contiguous(tuple(ranges) + (s,), body.dtype, nd.layout.device)
    partial = ComputedBuffer(name, p_layout, Reduction(tuple(ranges) + (s,), (chunk,), body.reduction_type, value),
                             nd.origins)
    read = Load(name, p_layout.index(tuple(pv[:-1]) + (r0,)), body.dtype)
    final = ComputedBuffer(nd.name, nd.layout, Reduction(tuple(ranges), (s,), body.reduction_type, read), nd.origins)
    return partial, final


def split_reductions(schedule: Schedule, config: GpuConfig, sms: int | None = None) -> Schedule:
    """`schedule` with every qualifying reduction kernel split in two (see the module doc);
    the same object when none qualifies."""
    if not config.split_reductions or schedule.graph.size_vars:
        return schedule  # (symbolic shapes: S must divide the row length; not split yet)
    sms = sms or device_sms(config)
    plans = {k: _plan_split(schedule, kern, config, sms) for k, kern in enumerate(schedule.kernels)}
    if not any(plans.values()):
        return schedule
    graph = schedule.graph
    taken = {i.name for i in graph.inputs} | {nd.name for nd in graph.nodes}
    replaced: dict[str, tuple] = {}  # reduction name -> (partial, final)
    kernels, step_of = [], {}  # step_of: old step -> new step of its (last) kernel
    late: dict[int, set] = {}  # split step -> buffers the final kernel writes or reads
    extra_free: list[MemoryEvent] = []
    added_bytes = 0
    for k, kern in enumerate(schedule.kernels):
        plan = plans[k]
        if plan is None:
            step_of[k] = len(kernels)
            kernels.append(kern)
            continue
        s, chunk, reds, loop, epilogue = plan
        for nd in reds:
            replaced[nd.name] = _partial_and_final(nd, s, chunk, _unique(f"{nd.name}_part", taken))
            added_bytes += replaced[nd.name][0].layout.nbytes()
        n = _prod(reds[0].body.ranges)
        in_loop = {nd.name for nd in loop}
        first = [replaced[nm][0].name if nm in replaced else nm for nm in kern.nodes if nm in replaced or nm in in_loop]
        second = [nd.name for nd in reds] + [nd.name for nd in epilogue]
        late[k] = set(second).union(*(_reads(nd) for nd in epilogue))
        kind = lambda names: FUSED if len(names) > 1 else REDUCTION  # noqa: E731
        node_type = lambda names: "FusedSchedulerNode" if len(names) > 1 else "SchedulerNode"  # noqa: E731
        kernels.append(Kernel(f"{kern.name}_split", kind(first), tuple(first), ((n * s,), (chunk,)), node_type(first)))
        step_of[k] = len(kernels)
        kernels.append(Kernel(kern.name, kind(second), tuple(second), ((n,) if n > 1 else (), (s,)), node_type(second)))
        extra_free += [MemoryEvent(step_of[k], FREE, replaced[nd.name][0].name) for nd in reds]
        log.info("split reduction %s: %d outputs x %d -> %d partials of %d (%s)", kern.name, n, s * chunk, n * s,
                 chunk, ", ".join(nd.name for nd in reds))
    nodes = []
    for nd in graph.nodes:
        if nd.name in replaced:
            nodes += list(replaced[nd.name])
        else:
            nodes.append(nd)
    new_graph = Graph(graph.inputs, tuple(nodes), graph.outputs)
    events = []
    for ev in schedule.memory.events:
        # allocations before a split kernel happen before its first half; frees after the
        # half that reads the buffer last
        first_half = plans[ev.step] is not None and (ev.kind != FREE or ev.buffer not in late[ev.step])
        step = step_of[ev.step] - first_half
        events.append(replace(ev, step=step))
    allocs = []  # partials: allocated before the first half, freed after the second
    for partial, _ in replaced.values():
        first_step = next(i for i, kk in enumerate(kernels) if partial.name in kk.nodes)
        allocs.append(MemoryEvent(first_step, ALLOC, partial.name))
    events = sorted(events + allocs + extra_free, key=lambda e: (e.step, e.kind == FREE))
    mem = schedule.memory
    memory = MemoryPlan(tuple(events), mem.peak_bytes + added_bytes, mem.lower_bound_bytes, mem.arena_bytes,
                        mem.offsets)
    return Schedule(new_graph, tuple(kernels), memory, schedule.fusion_log)


__all__ = ["split_reductions", "split_factor", "device_sms", "SPLITTABLE"]
