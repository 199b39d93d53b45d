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

Split: sum, prod, max, min, any, all (each combines with itself), and the welford
outputs of one accumulator (mean and m2 per chunk, combined by Chan's formula: chunks
are equal, so no counts travel). Left whole: argmax/argmin (index pairs), scans,
kernels where a reduction feeds another node inside the loop (softmax), and
reductions whose length has no divisor giving chunks of at least split_min_chunk.

Column reductions (the loads walk the kept dims with stride 1: a bias gradient's sum
over the rows of (rows, channels)) take COLUMN_OUTPUTS outputs per program, so their
unsplit grid has n / 64 programs: the rule counts programs, not outputs, and their
partials are laid out (S, kept dims) so that the partial kernel stays coalesced.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from stax.ir import ComputedBuffer, Graph, Layout, Load, Pointwise, Reduction, const, map_indices, op, walk
from stax.ir import dtypes as dt
from stax.ir.index import FloorDiv, ModularIndexing, as_int, pointwise_vars, reduction_vars
from stax.ir.ops import WELFORD_OUTPUTS
from stax.ir.simplify import simplify_index
from stax.sched import Kernel, MemoryEvent, MemoryPlan, Schedule
from stax.sched.policy import splittable
from stax.sched.schedule import ALLOC, EXTERN, FREE, FUSED, REDUCTION

from .config import GpuConfig
from .indexing import along_x

log = logging.getLogger("stax.gpu")

SPLITTABLE = ("sum", "prod", "max", "min", "any", "all")
EXACT_IN_STORAGE = ("max", "min", "any", "all")  # partials stored in a half type lose nothing
DEFAULT_SMS = 132  # H200
COLUMN_OUTPUTS = 64  # outputs one program of a column reduction takes (heuristics' first outer XBLOCK)


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


def split_factor(n: int, r: int, config: GpuConfig, sms: int, per_program: int = 1) -> int:
    """Chunks S per output row (1: do not split). The rule, with p = ceil(n / per_program) the
    programs of the unsplit kernel (a column reduction's program takes per_program outputs, a row
    reduction's one): split when p < max_outputs (2 x SMs) and one program walks at least
    split_min_rnumel elements (r x min(n, per_program)); S is the largest divisor of r with
    S <= target_programs / p (4 x SMs) and chunks r / S >= split_min_chunk."""
    max_out = config.split_max_outputs if config.split_max_outputs is not None else 2 * sms
    programs = -(-n // per_program)
    walked = r * min(n, per_program)
    if not config.split_reductions or n < 1 or programs >= max_out or walked < config.split_min_rnumel:
        return 1
    target = config.split_target_programs if config.split_target_programs is not None else 4 * sms
    limit = min(target // programs, r // max(config.split_min_chunk, 1))
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


def _column(reds: list) -> bool:
    """The reductions read along their kept dims (column sums: along_x, as the planner decides)."""
    def reads(nd):
        xs, rs = pointwise_vars(len(nd.body.ranges)), reduction_vars(len(nd.body.reduction_ranges))
        return ((ld.index, xs, rs) for ld in walk(nd.body.value) if isinstance(ld, Load))

    return along_x(r for nd in reds for r in reads(nd))


def _plan_split(schedule: Schedule, kernel: Kernel, config: GpuConfig, sms: int):
    """(S, chunk, reductions, loop nodes, epilogue nodes, column) if `kernel` should be split, else None."""
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
    welford = [nd for nd in reds if nd.body.reduction_type in WELFORD_OUTPUTS]
    if len({nd.body.value for nd in welford}) > 1:  # (one accumulator per kernel: the scheduler's CSE)
        return None
    for nd in reds:
        body = nd.body
        if body.reduction_type not in SPLITTABLE + WELFORD_OUTPUTS or body.dtype != body.value.dtype:
            return None
        if dt.compute_dtype(body.dtype) != body.dtype and body.reduction_type not in EXACT_IN_STORAGE:
            return None
    others = [nd for nd in nodes if not isinstance(nd.body, Reduction)]
    loop = [nd for nd in others if _prod(nd.body.ranges) == n * r]
    epilogue = [nd for nd in others if _prod(nd.body.ranges) == n and nd not in loop]
    if len(loop) + len(epilogue) != len(others):
        return None
    column = not loop and _column(reds)  # (a node over n*r elements is planned in row order)
    s = split_factor(n, r, config, sms, COLUMN_OUTPUTS if column else 1)
    if s == 1 or not all(splittable([as_int(x) for x in nd.body.ranges], n * s) for nd in loop):
        return None
    red_names = {nd.name for nd in reds}
    row_names = {nd.name for nd in epilogue}
    for nd in reds + loop:  # the loop must need nothing the final kernel computes
        if _reads(nd) & (red_names | row_names):
            return None
    return s, r // s, reds, loop, epilogue, column


def _unique(name: str, taken: set) -> str:
    out, k = name, 0
    while out in taken:
        k += 1
        out = f"{name}{k}"
    taken.add(out)
    return out


def _partial_and_final(nd: ComputedBuffer, s: int, chunk: int, name: str,
                       column: bool = False) -> tuple[ComputedBuffer, ComputedBuffer]:
    """Partial reduction over (ranges..., S) of chunks of `chunk`, and the combine of the S partials.
    A column reduction's partials are (S, ranges...): the kept dims stay innermost, so neighbouring
    lanes of the partial kernel still read neighbouring elements."""
    body = nd.body
    ranges = [as_int(x) for x in body.ranges]
    rsizes = [as_int(x) for x in body.reduction_ranges]
    pv = pointwise_vars(len(ranges) + 1)
    q, kept = (pv[0], pv[1:]) if column else (pv[-1], pv[:-1])
    (r0,) = reduction_vars(1)
    flat = q * chunk + r0
    subs = {}
    for j, v in enumerate(reduction_vars(len(rsizes))):
        stride = _prod(rsizes[j + 1 :])
        subs[v] = FloorDiv(flat, stride) if j == 0 else ModularIndexing(flat, stride, rsizes[j])
    subs |= dict(zip(pointwise_vars(len(ranges)), kept))
    p_ranges = (s, *ranges) if column else (*ranges, s)
    span = dict(zip(pv, p_ranges)) | {r0: chunk}
    value = map_indices(body.value, lambda e: simplify_index(e.xreplace(subs), span))
    p_layout = Layout.contiguous(p_ranges, body.dtype, nd.layout.device)
    partial = ComputedBuffer(name, p_layout, Reduction(p_ranges, (chunk,), body.reduction_type, value), nd.origins)
    own = pointwise_vars(len(ranges))
    read = Load(name, p_layout.index((r0, *own) if column else (*own, r0)), body.dtype)
    final = ComputedBuffer(nd.name, nd.layout, Reduction(tuple(ranges), (s,), body.reduction_type, read), nd.origins)
    return partial, final


def _welford_split(nodes: list, s: int, chunk: int, taken: set, column: bool) -> tuple[list, list]:
    """(partials, finals) of the welford outputs of one accumulator. The partials are Welford's mean
    and m2 over each chunk; every chunk holds `chunk` values, so the combine needs no counts (Chan's
    formula for equal groups): mean = sum(mean_q) / S, m2 = sum(m2_q + chunk * (mean_q - mean)^2),
    a sum and a sum that reads it (a dependent reduction, in registers in the final kernel); the
    count is the constant S * chunk."""
    by = {nd.body.reduction_type: nd for nd in nodes}
    base = nodes[0]

    def own(kind: str) -> ComputedBuffer:  # an output the graph does not use but the combine needs
        name = _unique(f"{base.name}_{kind.removeprefix('welford_')}", taken)
        return ComputedBuffer(name, base.layout, replace(base.body, reduction_type=kind), base.origins)

    dtype = base.body.dtype
    ranges = tuple(base.body.ranges)
    mean = by.get("welford_mean") or own("welford_mean")
    pm, fm = _partial_and_final(mean, s, chunk, _unique(f"{mean.name}_part", taken), column)
    partials = [pm]
    finals = [replace(fm, body=Reduction(ranges, (s,), "sum", op("truediv", fm.body.value, const(s, dtype))))]
    if "welford_m2" in by:
        m2 = by["welford_m2"]
        p2, f2 = _partial_and_final(m2, s, chunk, _unique(f"{m2.name}_part", taken), column)
        d = op("sub", fm.body.value, Load(mean.name, mean.layout.index(pointwise_vars(len(ranges))), dtype))
        value = op("add", f2.body.value, op("mul", const(chunk, dtype), op("mul", d, d)))
        partials.append(p2)
        finals.append(replace(f2, body=Reduction(ranges, (s,), "sum", value)))
    if "welford_count" in by:
        count = by["welford_count"]
        finals.append(replace(count, body=Pointwise(ranges, const(s * chunk, dtype))))
    return partials, finals


def _split_nodes(reds: list, s: int, chunk: int, taken: set, column: bool) -> tuple[list, list, dict]:
    """(partial nodes, final nodes in dependence order, {reduction name: the nodes that take its place
    in the graph}) of one split kernel."""
    partials, finals, place = [], [], {}
    for nd in reds:
        if nd.body.reduction_type not in WELFORD_OUTPUTS:
            p, f = _partial_and_final(nd, s, chunk, _unique(f"{nd.name}_part", taken), column)
            partials.append(p)
            finals.append(f)
            place[nd.name] = [p, f]
    welford = [nd for nd in reds if nd.body.reduction_type in WELFORD_OUTPUTS]
    if welford:
        ps, fs = _welford_split(welford, s, chunk, taken, column)
        partials += ps
        finals += fs
        place.update({nd.name: [] for nd in welford})
        place[welford[0].name] = ps + fs
    return partials, finals, place


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
    place: dict[str, list] = {}  # reduction name -> the nodes that take its place in the graph
    all_partials: list = []
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
        s, chunk, reds, loop, epilogue, column = plan
        partials, finals, where = _split_nodes(reds, s, chunk, taken, column)
        place.update(where)
        all_partials += partials
        added_bytes += sum(p.layout.nbytes() for p in partials)
        n = _prod(reds[0].body.ranges)
        in_loop = {nd.name for nd in loop}
        first = [p.name for p in partials] + [nm for nm in kern.nodes if nm in in_loop]
        second = [f.name for f in finals] + [nd.name for nd in epilogue]
        late[k] = set(second).union(*(_reads(nd) for nd in epilogue))
        kind = lambda names: FUSED if len(names) > 1 else REDUCTION  # noqa: E731
        node_type = lambda names: "FusedSchedulerNode" if len(names) > 1 else "SchedulerNode"  # noqa: E731
        kernels.append(Kernel(f"{kern.name}_split", kind(first), tuple(first), ((n * s,), (chunk,)), node_type(first)))
        step_of[k] = len(kernels)
        kernels.append(Kernel(kern.name, kind(second), tuple(second), ((n,) if n > 1 else (), (s,)), node_type(second)))
        extra_free += [MemoryEvent(step_of[k], FREE, p.name) for p in partials]
        log.info("split reduction %s: %d outputs x %d -> %d partials of %d%s (%s)", kern.name, n, s * chunk, n * s,
                 chunk, " (columns)" if column else "", ", ".join(nd.name for nd in reds))
    nodes = []
    for nd in graph.nodes:
        nodes += place.get(nd.name, [nd])
    new_graph = Graph(graph.inputs, tuple(nodes), graph.outputs)
    events = []
    for ev in schedule.memory.events:
        # allocations before a split kernel happen before its first half; frees after the
        # half that reads the buffer last
        first_half = plans[ev.step] is not None and (ev.kind != FREE or ev.buffer not in late[ev.step])
        step = step_of[ev.step] - first_half
        events.append(replace(ev, step=step))
    allocs = []  # partials: allocated before the first half, freed after the second
    for partial in all_partials:
        first_step = next(i for i, kk in enumerate(kernels) if partial.name in kk.nodes)
        allocs.append(MemoryEvent(first_step, ALLOC, partial.name))
    events = sorted(events + allocs + extra_free, key=lambda e: (e.step, e.kind == FREE))
    mem = schedule.memory
    memory = MemoryPlan(tuple(events), mem.peak_bytes + added_bytes, mem.lower_bound_bytes, mem.arena_bytes,
                        mem.offsets)
    return Schedule(new_graph, tuple(kernels), memory, schedule.fusion_log)


__all__ = ["split_reductions", "split_factor", "device_sms", "SPLITTABLE"]
