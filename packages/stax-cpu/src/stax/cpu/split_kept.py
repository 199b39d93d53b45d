"""A reduction with kept dims split over its reduced loop (the threads would otherwise idle).

Algorithm 8.1 parallelizes a reduction over its kept (output) loops. When those give the threads
unequal shares — batch-norm statistics of an NHWC tensor with 16 channels are one vector block of
outputs, so one thread reduces all 50176 rows while the other waits — each thread instead reduces
one contiguous range of the first reduced loop for every output, stores its partial states per
output, and after a barrier the outputs are combined (worksharing over the outputs, partials in
thread order: deterministic for a thread count).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import cpp_ops as co
from .accumulators import Accumulator
from .frame import Lines
from .loops import parallel_depth
from .nests import Nest
from .vec_body import plan_vector

# reductions whose partial states combine by `AccEmitter.combine_partial` from one stored value
KEPT_SPLIT_REDUCTIONS = frozenset({"sum", "prod", "max", "min", *co.WELFORD})
MAX_IMBALANCE = 1.15  # busiest thread's share / the even share (Algorithm 8.1's ceil(q/P) / (q/P)) above which
MAX_PARTIALS = 8192  # per-thread partial states (outputs x threads) kept on the kernel's stack


@dataclass
class KeptSplit:
    """While a kept-dims split is emitted: where each thread stores its partial states."""

    tag: str
    kept: int  # outputs: the product of the kept loops
    index: str  # C expression of the output's linear index in the kept loop variables
    accs: list | None = None  # the accumulators of the first store (names of the partial arrays by position)
    declared: set = field(default_factory=set)

    def array(self, pos: int) -> str:
        return f"part_{self.tag}_{pos}"


def _imbalance(nest: Nest, plan, threads: int, min_chunk: int) -> float:
    """ceil(q/P) / (q/P) for the q work units Algorithm 8.1 gives the threads over the kept loops
    (a panel of vector blocks of outputs is one unit; no parallel loop: one unit)."""
    head = nest.groups[0][0]
    kept = head.sizes[: head.npoint]
    depth = parallel_depth(kept, nest.total(), threads, min_chunk)
    q = 1
    for k in range(depth):
        vector = plan is not None and plan.vertical and plan.dim == k
        q *= -(-kept[k] // (plan.lanes * plan.panel)) if vector else kept[k]
    return math.ceil(q / threads) / (q / threads)


def wants_kept_split(nest: Nest, threads: int, min_chunk: int, vector_bytes: int, tile: bool) -> bool:
    """Kept dims, every node a combinable reduction, an unbalanced kept-loop schedule, and at least
    `min_chunk` iterations per thread of work; a vector form only along the innermost kept loop
    (lanes = adjacent outputs) or along the reduced loops. Static sizes only."""
    if threads <= 1 or nest.outer or len(nest.groups) != 1:
        return False
    group = nest.groups[0]
    head = group[0]
    if not head.npoint or head.npoint >= len(head.sizes) or not all(isinstance(n, int) for n in head.sizes):
        return False
    if any(nl.is_scan or not nl.is_reduction or nl.accumulate not in KEPT_SPLIT_REDUCTIONS for nl in group):
        return False
    kept = math.prod(head.sizes[: head.npoint])
    if kept * threads > MAX_PARTIALS or head.sizes[head.npoint] < 2 * threads:
        return False
    if head.total() / threads < min_chunk:
        return False
    plan = plan_vector(group, 0, vector_bytes, tile)
    if plan is not None and (plan.tile_dim is not None or (plan.vertical and plan.dim != head.npoint - 1)):
        return False
    return _imbalance(nest, plan, threads, min_chunk) > MAX_IMBALANCE


def splits_kept(em, nest: Nest) -> bool:
    return not em.ctx.graph.size_vars and wants_kept_split(nest, em.threads, em.min_chunk, em.vector_bytes, em.tile)


def thread_range(lines: Lines, t: str, n, step: int) -> None:
    """This thread's range [{t}_lo, {t}_hi) of a loop of `n` split over the threads, aligned to `step`
    (the vector step: only the last range has a ragged end); {t}_tid, {t}_nth its id and the count."""
    lines(f"const int64_t {t}_tid = omp_get_thread_num(), {t}_nth = omp_get_num_threads();")
    lines(f"const int64_t {t}_chunk = (({n} + {t}_nth - 1) / {t}_nth + {step - 1}) / {step} * {step};")
    lines(f"const int64_t {t}_lo = std_min({t}_tid * {t}_chunk, {n}), {t}_hi = std_min({t}_lo + {t}_chunk, {n});")


def _linear(sizes, npoint: int) -> str:
    expr = "x0"
    for k in range(1, npoint):
        expr = f"({expr}) * {sizes[k]} + x{k}"
    return expr


def emit_split_kept(em, lines: Lines, nest: Nest, in_region: bool) -> None:
    group = nest.groups[0]
    head = group[0]
    npoint, sizes = head.npoint, head.sizes
    n = sizes[npoint]
    plan = plan_vector(group, 0, em.vector_bytes, em.tile)
    step = plan.lanes * plan.unroll if plan is not None and plan.dim == npoint else 1
    t = em.ctx.tmp("split")
    ks = KeptSplit(t, math.prod(sizes[:npoint]), _linear(sizes, npoint))
    if not in_region:
        lines(f"#pragma omp parallel num_threads({em.threads})")
    with lines.block(""):
        thread_range(lines, t, n, step)
        em.bounds, em.split_tid, em.kept_split = {npoint: (f"{t}_lo", f"{t}_hi")}, f"{t}_tid", ks
        try:
            em.emit_group(lines, group, 0)
        finally:
            em.bounds, em.split_tid, em.kept_split = {}, None, None
        lines("#pragma omp barrier")
        lines("#pragma omp for" + (f" collapse({npoint})" if npoint > 1 else ""))
        stack: list = []
        em.open_loops(lines, sizes, 0, npoint, stack)
        _combine(em, lines, ks, f"{t}_nth")
        em.close_loops(stack, len(stack))


def store_partials(em, lines: Lines, accs: list[Accumulator], vector: bool) -> None:
    """This thread's partial state of each output (W adjacent outputs at once in the vertical form)."""
    ks: KeptSplit = em.kept_split
    if ks.accs is None:
        ks.accs = accs
    for pos, a in enumerate(accs):
        if a.shared:
            continue
        name = ks.array(pos)
        if name not in ks.declared:
            ks.declared.add(name)
            em.prologue.append(f"{a.acc_ctype} {name}[{em.threads * ks.kept}];")
        at = f"{em.split_tid} * {ks.kept} + {ks.index}"
        if not vector:
            lines(f"{name}[{at}] = {a.acc};")
        elif a.nl.accumulate in co.WELFORD:
            lines(f"{a.vacc}.store_lanes({name} + ({at}));")
        else:
            lines(f"stax::vec::storeu({name} + ({at}), {a.vacc});")


def _combine(em, lines: Lines, ks: KeptSplit, nth: str) -> None:
    owner: dict[str, Accumulator] = {}
    combined: dict[str, Accumulator] = {}
    for pos, a in enumerate(ks.accs):
        if a.shared:
            continue
        owner[a.acc] = a
        c = Accumulator(a.nl, em.ctx.tmp("tmp_acc"))
        name = ks.array(pos)
        lines(f"{a.acc_ctype} {c.acc} = {name}[{ks.index}];")
        with lines.block(f"for (int64_t t = 1; t < {nth}; ++t)"):
            em.accs.combine_partial(lines, c, f"{name}[t * {ks.kept} + {ks.index}]", None)
        combined[a.acc] = c
    for a in ks.accs:
        em.store(lines, a.nl, em.accs.result(Accumulator(a.nl, combined[a.acc].acc)))
