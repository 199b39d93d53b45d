"""Regions: consecutive kernels of a graph in one C++ function and one OpenMP parallel region (§8.5).

Entering and leaving a parallel region costs every loop its overhead o (§8.4); kernels with no
extern call between them can share one. `plan_regions` groups them, left to right, as long as the
memory the wrapper holds during the call (every allocation of the group made before it, every
release after it) stays within the peak of calling them one by one (+ PEAK_SLACK). In a region each loop nest is
a `#pragma omp for`, with `nowait` unless a later nest before the next barrier reads or overwrites
its storage (buffers sharing storage through the memory plan's reuses count as one). Adjacent
nests may be chunked together (localize.py). Each kernel keeps its own error record.
"""

from __future__ import annotations

import collections
import logging
from contextlib import contextmanager
from dataclasses import dataclass, field

from stax.ir import ComputedBuffer, Graph, Load, Pointwise, Reduction, body_roots, walk
from stax.ir.graph import Scan
from stax.sched.plan_walk import plan_calls
from stax.sched.schedule import ALLOC, FUSED, OUTER_LOOP_FUSED, POINTWISE, REDUCTION, REUSE, Kernel, Schedule

from .emitter import KernelEmitter
from .frame import KernelContext, KernelSource, Lines, LocalBuffer, bind_pointers, local_buffers, signature
from .localize import Chunking, chunk_buffers, emit_chunked, plan_chunking
from .loops import node_loops, parallel_depth
from .nests import Nest, plan_nests, share_groups
from .split_kept import wants_kept_split

log = logging.getLogger("stax.cpu")

MERGEABLE = (POINTWISE, REDUCTION, FUSED, OUTER_LOOP_FUSED)
ERR_SLOT = 4  # int64 per error record: code, three details
PEAK_SLACK = 64 << 10  # a region may hold this much more than one-by-one calls (scalars, row statistics)


def mergeable(kernel: Kernel, graph: Graph) -> bool:
    """Loop-nest kernels (not extern calls, not scatters or other special forms)."""
    return kernel.kind in MERGEABLE and all(
        isinstance(n, ComputedBuffer) and isinstance(n.body, Pointwise | Reduction | Scan)
        for n in (graph.node(b) for b in kernel.nodes))


def storage_roots(schedule: Schedule) -> dict[str, str]:
    """Buffer -> a name for its storage: a buffer that reuses another's storage shares its root."""
    parent: dict[str, str] = {}

    def find(b: str) -> str:
        while parent.get(b, b) != b:
            b = parent[b]
        return b

    for e in schedule.memory.events:
        if e.kind == REUSE:
            parent[find(e.buffer)] = find(e.reuses)
    names = [i.name for i in schedule.graph.inputs] + [n.name for n in schedule.graph.nodes]
    return {b: find(b) for b in names}


def reused(schedule: Schedule) -> set[str]:
    return {b for e in schedule.memory.events if e.kind == REUSE for b in (e.buffer, e.reuses)}


def reads_of(graph: Graph, names) -> set[str]:
    """The buffers the nodes `names` read (their bodies' loads, an extern's inputs)."""
    out: set[str] = set()
    for name in names:
        node = graph.node(name)
        if isinstance(node, ComputedBuffer):
            for root in body_roots(node.body):
                out.update(n.buffer for n in walk(root) if isinstance(n, Load))
        else:
            out.update(node.inputs)
    return out


class EscapingBuffers:
    """`escaping(kernel)`: the buffers something outside `kernel` reads (other kernels, the graph's
    outputs). Each kernel's reads are walked once per schedule, not once per pair of kernels (ViT-tiny's
    120 kernels: 14k body walks, 1.1 s of its 2.1 s of C++ generation)."""

    def __init__(self, schedule: Schedule):
        g = schedule.graph
        self.outputs = frozenset(g.outputs)
        self.reads = {k.name: reads_of(g, k.nodes) for k in schedule.kernels}
        self.readers = collections.Counter(b for r in self.reads.values() for b in r)  # kernels reading each

    def __call__(self, kernel) -> set:
        own = self.reads[kernel.name]
        return set(self.outputs) | {b for b, n in self.readers.items() if n > (b in own)}


def wrapper_peak(schedule: Schedule, spans: list[tuple[int, int]], local: set) -> int:
    """Bytes the wrapper holds at its fullest when kernels [a, b] of each span (the spans cover the
    schedule in order) run in one call: the plan's allocations of the span before it, its releases
    after it (inputs included; stax.sched.plan_walk's order)."""
    g = schedule.graph
    size = {b: g.size_vars.nbytes(g.buffer_layout(b)) for b in [i.name for i in g.inputs] + [n.name for n in g.nodes]}
    live = {i.name for i in g.inputs}
    cur = sum(size[b] for b in live)
    peak = cur
    outputs = set(g.outputs)
    for call in plan_calls(schedule, {a: b - a + 1 for a, b in spans}):
        for e in call.before:
            if e.kind == ALLOC and e.buffer not in local and e.buffer not in live:
                live.add(e.buffer)
                cur += size[e.buffer]
            elif e.kind == REUSE and e.reuses in live:
                live.discard(e.reuses)
                cur -= size[e.reuses]
                if e.buffer not in local:
                    live.add(e.buffer)
                    cur += size[e.buffer]
        peak = max(peak, cur)
        for e in call.after:
            if e.buffer in live and e.buffer not in outputs:
                live.discard(e.buffer)
                cur -= size[e.buffer]
    return peak


@dataclass
class Unit:
    """What one worksharing construct runs: one nest, or a chunked producer/consumer pair."""

    steps: tuple  # indices into Region.nests
    chunking: Chunking | None = None
    reads: set = field(default_factory=set)  # storage roots
    writes: set = field(default_factory=set)


@dataclass
class Region:
    name: str
    kernels: tuple  # Kernel, in schedule order
    first: int  # schedule index of kernels[0]
    nests: list  # (kernel position in region, Nest), in order
    units: list
    local: dict  # buffer -> LocalBuffer / ChunkBuffer

    @property
    def last(self) -> int:
        return self.first + len(self.kernels) - 1


class RegionPlanner:
    """Plans regions and their chunked pairs for one schedule (nests computed once per kernel)."""

    def __init__(self, schedule: Schedule, *, merge: bool, vector_bytes: int, tile: bool, threads: int,
                 localize: bool, localize_bytes: int, escaping_of: EscapingBuffers, min_chunk: int = 512):
        self.schedule, self.g = schedule, schedule.graph
        self.merge, self.vector_bytes, self.tile, self.threads = merge, vector_bytes, tile, threads
        self.min_chunk = min_chunk
        self.localize, self.localize_bytes = localize, localize_bytes
        self.escaping_of = escaping_of
        self.roots = storage_roots(schedule)
        self.reused = reused(schedule)
        self._nests: dict[str, list[Nest]] = {}
        self._local: dict[str, dict] = {}
        self._regions: dict[tuple[int, int], Region] = {}
        self.kernel_reads = [(k, escaping_of.reads[k.name]) for k in schedule.kernels]

    def nests(self, k: Kernel) -> list[Nest]:
        if k.name not in self._nests:
            self._nests[k.name] = plan_nests(k, self.g, merge=self.merge)
        return self._nests[k.name]

    def _rw(self, nest: Nest, local: dict) -> tuple[set, set]:
        names = [nl.node.name for nl in nest.node_loops()]
        reads = {self.roots[b] for b in reads_of(self.g, names) if b not in local}
        writes = {self.roots[b] for b in names if b not in local}
        return reads, writes

    def region(self, first: int, count: int) -> Region:
        key = (first, count)
        if key not in self._regions:
            self._regions[key] = self._region(first, count)
        return self._regions[key]

    def kernel_local(self, k: Kernel) -> dict:
        """Kernel-local arrays of `k` (with symbolic sizes, those of a constant extent: local_buffers)."""
        if k.name not in self._local:
            self._local[k.name] = local_buffers(self.nests(k), self.escaping_of(k))
        return self._local[k.name]

    def _region(self, first: int, count: int) -> Region:
        kernels = tuple(self.schedule.kernels[first:first + count])
        nests = [(p, n) for p, k in enumerate(kernels) for n in self.nests(k)]
        local: dict = {}
        for k in kernels:
            local.update(self.kernel_local(k))
        units: list[Unit] = []
        j = 0
        while j < len(nests):
            ch = self._chunking(kernels, nests, j, local) if self.localize and j + 1 < len(nests) else None
            if ch is not None:
                units.append(Unit((j, j + 1), ch))
                local.update(chunk_buffers(ch, self.g))
                j += 2
            else:
                units.append(Unit((j,)))
                j += 1
        for u in units:
            for s in u.steps:
                r, w = self._rw(nests[s][1], local)
                u.reads |= r
                u.writes |= w
        name = kernels[0].name if count == 1 else f"region{first}"
        return Region(name, kernels, first, nests, units, local)

    def _chunking(self, kernels, nests, j: int, local: dict) -> Chunking | None:
        (kp, prod), (kc, cons) = nests[j], nests[j + 1]
        if wants_kept_split(cons, self.threads, self.min_chunk, self.vector_bytes, self.tile):
            return None  # its reduced loop runs on every thread (split_kept.py), as without regions: same bits
        pw = [nl.node.name for nl in prod.node_loops()]
        cnames = [nl.node.name for nl in cons.node_loops()]
        creads = reads_of(self.g, cnames)
        pr, pwr = self._rw(prod, local)
        if {self.roots[b] for b in cnames} & (pr | pwr):
            return None  # the consumer overwrites what the producer reads or writes
        shared = [b for b in pw if b in creads]
        for b in creads:  # a read of the producer's storage under another name: not provable
            if self.roots[b] in pwr and b not in pw:
                return None
        region_names = {k.name for k in kernels}
        outside = set().union(*[r for k, r in self.kernel_reads if k.name not in region_names])
        nest_reads = [reads_of(self.g, [nl.node.name for nl in n.node_loops()]) for _, n in nests] if shared else []
        in_region_readers = {b: sum(1 for r in nest_reads if b in r) for b in shared}
        locals_ = [b for b in shared
                   if b not in self.g.outputs and b not in self.reused and b not in outside and b not in local
                   and in_region_readers[b] == 1]
        ch = None
        for p in (prod, self._rows_kept(prod)):  # merged loops first; else loop 0 kept apart (ragged rows)
            if p is not None and ch is None:
                ch = plan_chunking(p, cons, locals_, set(shared) - set(locals_), positions=(j, j + 1),
                                   vector_bytes=self.vector_bytes, tile=self.tile,
                                   target_bytes=self.localize_bytes, threads=self.threads)
        if ch is not None:
            names = "+".join(dict.fromkeys(kernels[p].name for p in (kp, kc)))
            saved = sum(self.g.buffer_layout(b).nbytes() for b, *_ in ch.local)
            log.debug("localize %s into %s: %d of %d rows per chunk, %d KiB scratch per thread; %d B never allocated",
                      ", ".join(b for b, *_ in ch.local), names, ch.chunk_rows, ch.rows, ch.scratch_bytes() >> 10,
                      saved)
        return ch

    def _rows_kept(self, nest: Nest) -> Nest | None:
        """The nest with its loop 0 not merged into the next (None if that changes nothing)."""
        if nest.outer or len(nest.groups) != 1:
            return None
        nls = [node_loops(nl.node, protect=1, merge=self.merge) for nl in nest.node_loops()]
        groups = share_groups(nls)
        if len(groups) != 1 or nls[0].sizes == nest.groups[0][0].sizes:
            return None
        return Nest(0, groups)

    def plan(self, regions: bool) -> list[Region]:
        """Greedy, left to right; a kernel joins the open region unless that raises the peak."""
        ks = self.schedule.kernels
        out: list[tuple[int, int]] = []  # (first, count) of mergeable runs; others are (i, 0)
        kernel_local = set()  # per-iteration arrays of outer-loop-fused kernels (any grouping)
        for k in ks:
            if mergeable(k, self.g):
                kernel_local |= set(self.kernel_local(k))
        base = wrapper_peak(self.schedule, [(i, i) for i in range(len(ks))], kernel_local)
        i = 0
        while i < len(ks):
            if not mergeable(ks[i], self.g):
                out.append((i, 0))
                i += 1
                continue
            count = 1
            while regions and i + count < len(ks) and mergeable(ks[i + count], self.g):
                trial = self.region(i, count + 1)
                spans = [(a, a + max(c, 1) - 1) for a, c in out] + [(i, i + count)]
                spans += [(s, s) for s in range(i + count + 1, len(ks))]
                if wrapper_peak(self.schedule, spans, kernel_local | set(trial.local)) > base + PEAK_SLACK:
                    log.debug("%s not joined to the region of %s: the wrapper's peak would rise",
                              ks[i + count].name, ks[i].name)
                    break
                count += 1
            out.append((i, count))
            i += count
        return [self.region(a, c) for a, c in out if c]


def _barriers(units: list[Unit], splits: list[bool]) -> list[bool]:
    """nowait per unit: no later unit before the next barrier touches its data."""
    nowait = [True] * len(units)
    pr: set = set()
    pw: set = set()
    for u, unit in enumerate(units):
        if u and not splits[u - 1]:
            if unit.reads & pw or unit.writes & (pr | pw):
                nowait[u - 1] = False
                pr, pw = set(), set()
        elif u:
            pr, pw = set(), set()  # a split reduction ends with a barrier
        pr |= unit.reads
        pw |= unit.writes
    return nowait


def emit_region(region: Region, graph: Graph, threads: int, min_chunk: int, *, vector_bytes: int, tile: bool,
                stream_bytes: int | None, huge_bytes: int | None, roots: dict) -> KernelSource:
    """One `extern "C"` function running the region's kernels; err holds one record per kernel."""
    ctx = KernelContext(region.name, graph, sizes=tuple(r.symbol.name for r in graph.size_vars.rows))
    ctx.local = dict(region.local)
    bind_pointers(ctx, graph, [b for k in region.kernels for b in k.nodes], stream_bytes, huge_bytes)
    em = KernelEmitter(ctx, threads, min_chunk, vector_bytes, tile)
    nests = region.nests
    depth = [em.nest_depth(n) for _, n in nests]
    split = [em.splits(n) for _, n in nests]

    def chunk_parallel(u: Unit) -> bool:
        p, c = (nests[s][1] for s in u.steps)
        return parallel_depth([u.chunking.chunks], p.total() + c.total(), threads, min_chunk) > 0

    par = [chunk_parallel(u) if u.chunking else bool(depth[u.steps[0]] or split[u.steps[0]]) for u in region.units]
    usplit = [not u.chunking and split[u.steps[0]] for u in region.units]
    in_region = any(par)
    nowait = _barriers(region.units, usplit)
    several = len(region.kernels) > 1

    @contextmanager
    def err_of(pos: int):
        if not several:
            yield
            return
        k = region.kernels[pos]
        with body.block(""):
            body(f"int64_t* const err = err_all + {ERR_SLOT * pos};  // {k.name}: {k.node_type} {k.kind}")
            yield

    body = Lines(1)
    for ptr, nbytes in ctx.huge:
        body(f"stax::advise_huge({ptr}, {nbytes});")
    region_cm = None
    if in_region:
        body(f"#pragma omp parallel num_threads({threads})")
        region_cm = body.block("")
        region_cm.__enter__()
    for u, unit in enumerate(region.units):
        if unit.chunking is not None:
            ch = unit.chunking
            (kp, prod), (kc, cons) = (nests[s] for s in unit.steps)
            names = "+".join(dict.fromkeys(region.kernels[p].name for p in (kp, kc)))
            body(f"// localize {', '.join(b for b, *_ in ch.local)} into {names}: "
                 f"{ch.chunk_rows} of {ch.rows} rows per chunk")
            serial = in_region and not par[u]
            if serial:
                body("#pragma omp single" + (" nowait" if nowait[u] else ""))
            with body.block(""):
                emit_chunked(em, body, ch, cons, par[u], nowait[u], lambda _p=kp: err_of(_p),
                             lambda _c=kc: err_of(_c))
            continue
        pos, nest = nests[unit.steps[0]]
        with err_of(pos):
            em.emit_nest(body, nest, depth[unit.steps[0]], in_region, nowait=nowait[u])
    if in_region:
        if ctx.streaming:
            body("__builtin_ia32_sfence();  // order this thread's streaming stores")
        region_cm.__exit__(None, None, None)
    elif ctx.streaming:
        body("__builtin_ia32_sfence();")
    slots = len(region.kernels) if several else 1
    err_name = "err_all" if several else "err"
    head = "".join(f"    {decl}\n" for decl in dict.fromkeys(em.prologue))
    ret = " | ".join(f"{err_name}[{ERR_SLOT * k}]" for k in range(slots))
    comment = ("".join(f"// {k.name}: {k.node_type} {k.kind} ({', '.join(k.nodes)})\n" for k in region.kernels)
               if several else "")
    code = (f"{comment}{signature(ctx, roots, err_name)}\n{{\n{head}{body.text()}\n"
            f"    return (int)({ret});\n}}\n")
    params = tuple(ctx.in_ptrs) + tuple(ctx.out_ptrs)
    return KernelSource(region.name, code, params, tuple(ctx.index_loads), em.vectorized, tuple(ctx.local),
                        tuple(k.name for k in region.kernels), slots, size_params=ctx.sizes)


__all__ = ["LocalBuffer", "Region", "RegionPlanner", "emit_region", "mergeable", "wrapper_peak"]
