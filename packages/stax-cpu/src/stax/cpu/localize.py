"""Localized intermediates (compute_at): a buffer written by one loop nest and read only by the
next one, in chunks of rows, through a per-thread scratch array instead of memory.

Example 7.2 on the CPU materializes exp into buf1, then reduces its rows: 32 MiB written and read
back. When the consumer's row loop reads, for rows [a, b), only the flat range [a*K, b*K) of what
the producer writes (producer loop 0 outermost, its stores dense), both loops are strip-mined over
the same chunks of R rows: each thread runs the producer then the consumer per chunk, and the
buffer becomes one chunk of scratch (about `CpuConfig.localize_bytes`, so it stays in L1).
Everything here is proved from the index expressions or the pair is left alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import sympy
from stax.ir import Load, walk

from . import cpp_ops as co
from .loops import NodeLoops, linear_coeffs, loop_var
from .nests import Nest, dense_extent
from .prefetch import PREFETCH_BYTES
from .vec_body import plan_vector

MAX_SCRATCH = 512 << 10  # largest chunk scratch (bytes, per thread, on the stack)


@dataclass(frozen=True)
class ChunkBuffer:
    """The scratch of one chunk: storage index `base` (a C variable set per chunk) is element 0."""

    name: str
    ctype: str
    extent: int
    base: sympy.Symbol

    def rebase(self, index):
        return index - self.base


@dataclass(frozen=True)
class Chunking:
    """Producer nest `producer` and consumer nest `consumer` (positions in the region) run per chunk
    of `chunk_rows` of the consumer's `rows`; the producer's loop 0 covers `num/den` iterations per
    row. `local`: buffer -> (first storage index, elements per row) of the scratch arrays."""

    producer: int
    consumer: int
    rows: int
    chunk_rows: int
    num: int
    den: int
    local: tuple  # ((buffer, base, row_elems, itemsize), ...)
    prod_nest: Nest | None = field(default=None, compare=False)  # the producer's loops as chunked

    @property
    def chunks(self) -> int:
        return -(-self.rows // self.chunk_rows)

    def scratch_bytes(self) -> int:
        return sum(self.chunk_rows * k * size for _, _, k, size in self.local)


def _int(e) -> int | None:
    e = sympy.sympify(e)
    return int(e) if e.is_Integer else None


def _producer_store(nl: NodeLoops):
    """(base, elements, elements per iteration of loop 0) if the node's stores cover
    [base, base + elements) densely with loop 0 outermost; else None."""
    S = nl.store_index()
    pv = [loop_var(k) for k in range(len(nl.sizes))]
    cs = linear_coeffs(S, pv)
    base = _int(S.xreplace({v: sympy.Integer(0) for v in pv}))
    if cs is None or base is None or not nl.sizes:
        return None
    total = dense_extent(cs, dict(zip(pv, nl.sizes)))
    # (a zero-element node stores nothing: no loop 0 to chunk, and its index may not use loop 0)
    if not total or total != nl.total() or cs.get(pv[0], 0) * nl.sizes[0] != total:
        return None
    return base, total, cs[pv[0]]


def _row_elems(cons: Nest, buf: str, base: int) -> int | None:
    """K if every read of `buf` in `cons` at row x0 stays inside [base + K*x0, base + K*(x0+1))."""
    got = None
    for nl in cons.node_loops():
        cv = [loop_var(k) for k in range(len(nl.sizes))]
        for ld in (n for n in walk(nl.node.body.value) if isinstance(n, Load) and n.buffer == buf):
            if ld.indirect or ld.mask is not None:
                return None
            L = nl.index(ld.index)
            cl = linear_coeffs(L, cv)
            l0 = _int(L.xreplace({v: sympy.Integer(0) for v in cv}))
            if cl is None or l0 is None:
                return None
            K = cl.get(cv[0], 0)
            if K <= 0 or (got is not None and K != got):
                return None
            lo = hi = l0 - base
            for v, s in zip(cv[1:], nl.sizes[1:]):
                c = cl.get(v, 0) * (s - 1)
                lo, hi = lo + min(0, c), hi + max(0, c)
            if lo < 0 or hi > K - 1:
                return None
            got = K
    return got


def _rows(cons: Nest) -> int | None:
    """The consumer's row loop: its loop 0, pointwise and shared by all its nodes."""
    if cons.outer:
        return cons.sizes[0]
    if len(cons.groups) != 1 or cons.groups[0][0].npoint < 1:
        return None
    return cons.groups[0][0].sizes[0]


def _step(group: list[NodeLoops], vector_bytes: int, tile: bool, start: int = 0) -> int | None:
    """Iterations of loop 0 a chunk of the group must be a multiple of (its vector step when loop
    0 is the vector loop); None for the tiled form, whose loops ignore chunk bounds."""
    plan = plan_vector(group, start, vector_bytes, tile)
    if plan is None:
        return 1
    if plan.tile_dim is not None:
        return None
    return plan.lanes * plan.unroll if plan.dim == 0 else 1


def plan_chunking(prod: Nest, cons: Nest, locals_: list[str], reads_ok: set, *, positions: tuple[int, int],
                  vector_bytes: int, tile: bool, target_bytes: int, threads: int) -> Chunking | None:
    """Chunk the pair if every buffer of `prod` that `cons` reads is row-local (`locals_` become
    scratch; `reads_ok` are the other ones `cons` reads, which stay in memory). The caller has
    checked that `cons` writes nothing `prod` touches."""
    if prod.outer or len(prod.groups) != 1 or not locals_:
        return None
    group = prod.groups[0]
    if any(nl.is_reduction for nl in group) or not group[0].sizes:  # (a 0-d producer: nothing to chunk)
        return None
    rows = _rows(cons)
    if rows is None or rows < 2:
        return None
    step_p = _step(group, vector_bytes, tile)
    step_c = 1 if cons.outer else _step(cons.groups[0], vector_bytes, tile)
    if step_p is None or step_c is None:
        return None
    sizes0 = group[0].sizes[0]
    if (sizes0 * rows) == 0:
        return None
    g = math.gcd(sizes0, rows)
    num, den = sizes0 // g, rows // g  # producer loop-0 iterations per row = num/den
    # rows per chunk R: R*num/den an integer multiple of step_p, R a multiple of step_c
    r0 = math.lcm(den * step_p // math.gcd(num, den * step_p) if num else 1, step_c)
    written = {nl.node.name: nl for nl in group}
    local = []
    per_row = 0
    for buf in list(locals_) + sorted(reads_ok):
        nl = written[buf]
        st = _producer_store(nl)
        if st is None:
            return None
        base, total, _ = st
        K = _row_elems(cons, buf, base)
        if K is None or K * rows != total:
            return None
        if buf in locals_:
            size = nl.node.layout.dtype.itemsize
            local.append((buf, base, K, size))
            per_row += K * size
    if per_row == 0 or r0 * per_row > MAX_SCRATCH or r0 > rows:
        return None
    R = max(r0, target_bytes // per_row // r0 * r0)
    R = min(R, max(r0, rows // (2 * threads) // r0 * r0))  # keep >= 2 chunks per thread where rows allow
    return Chunking(positions[0], positions[1], rows, R, num, den, tuple(local), prod)


def chunk_buffers(ch: Chunking, graph) -> dict:
    """The ChunkBuffer of each localized buffer (for KernelContext.local)."""
    out = {}
    for buf, _, K, _ in ch.local:
        d = graph.buffer_layout(buf).dtype
        out[buf] = ChunkBuffer(f"local_{buf}", co.storage_ctype(d), ch.chunk_rows * K,
                               sympy.Symbol(f"lbase_{buf}", integer=True))
    return out


def emit_chunked(em, lines, ch: Chunking, cons: Nest, parallel: bool, nowait: bool, err_prod, err_cons) -> None:
    """The chunk loop: per chunk of rows, the producer's iterations of those rows (into the
    scratch), then the consumer's rows. `err_prod()` / `err_cons()` open the blocks where `err`
    is the record of the producer's / consumer's kernel."""
    ctx, prod = em.ctx, ch.prod_nest
    t = ctx.tmp("chunk")
    for buf, *_ in ch.local:
        cb = ctx.local[buf]
        lines(f"alignas(64) {cb.ctype} {cb.name}[{cb.extent}];  // {buf}: {ch.chunk_rows} rows per chunk")
    if parallel:
        lines("#pragma omp for" + (" nowait" if nowait else ""))
    with lines.block(f"for (int64_t {t} = 0; {t} < {ch.chunks}; {t} += 1)"):
        lines(f"const int64_t {t}_lo = {t} * {ch.chunk_rows}, {t}_hi = std_min({t}_lo + {ch.chunk_rows}, {ch.rows});")
        for buf, base, K, _ in ch.local:
            lines(f"const int64_t {ctx.local[buf].base} = {base} + {t}_lo * {K};")

        def scaled(v: str) -> str:
            e = f"{v} * {ch.num}" if ch.num != 1 else v
            return f"({e}) / {ch.den}" if ch.den != 1 else e

        with err_prod():
            for nl in prod.node_loops():
                lines(f"// {nl.node.name}: pointwise over {nl.sizes}, this chunk")
            em.bounds = {0: (scaled(f"{t}_lo"), scaled(f"{t}_hi"))}
            ctx.prefetch = PREFETCH_BYTES
            try:
                em.emit_group(lines, prod.groups[0], 0)
            finally:
                em.bounds, ctx.prefetch = {}, 0
        with err_cons():
            for nl in cons.node_loops():
                kind = ("reduction " + nl.accumulate) if nl.is_reduction else "pointwise"
                lines(f"// {nl.node.name}: {kind} over {nl.sizes}, rows of this chunk")
            em.bounds = {0: (f"{t}_lo", f"{t}_hi")}
            try:
                em.nest_body(lines, cons)
            finally:
                em.bounds = {}
