"""The loop emitter of stax-cpu: a kernel's nests as C++ loops in scalar, vectorized or tiled form.

`KernelEmitter` opens the loops of each nest (OpenMP worksharing per Algorithm 8.1's parallel
depth, split full reductions over the threads), picks per group of nodes the scalar form, the
vector form (vec_body: horizontal or vertical reductions, scans) or the tiled form (tiles.py), and
stores results. tiles.py and localize.py drive it through `nest_body`, `emit_group` and
`scalar_bodies`.
"""

from __future__ import annotations

from stax.ir import Load, walk
from stax.ir import dtypes as dt
from stax.ir.index_printer import to_c
from stax.ir.value_ranges import bound_index

from . import cpp_ops as co
from .accumulators import AccEmitter, Accumulator
from .cpp_ops import vtype
from .frame import KernelContext, Lines, LocalBuffer
from .loop_pieces import Piece, loop_pieces
from .loops import NodeLoops, c_var, linear_coeffs, loop_var, parallel_depth
from .nests import Nest
from .panels import emit_panels
from .prefetch import PREFETCH_BYTES, computes_heavily
from .scalar_body import ScalarBody
from .split_kept import emit_split_kept, splits_kept, store_partials, thread_range
from .tiles import emit_tiled_group
from .vec_body import VEC_SCANS, VecBody, VecPlan, plan_vector


def _hoist_point(out: list[str], mark: int) -> int | None:
    """Where values invariant in the loop about to open at `mark` can go: at `mark`, or before the
    OpenMP pragma that parallelizes that loop; None if it is inside a collapsed loop nest."""
    k = mark
    while k > 0 and out[k - 1].lstrip().startswith("for ("):
        k -= 1
    prev = out[k - 1].lstrip() if k > 0 else ""
    if not prev.startswith("#pragma omp"):
        return mark
    if "collapse" in prev:
        return None
    return k - 1 if k == mark else mark


def _work_shared(out: list[str], mark: int) -> bool:
    """Whether the loop about to open at `mark` is one an OpenMP `for` pragma shares out (the pragma's
    own loop, or one of its `collapse(d)` loops): such a loop must stay one loop."""
    k, loops = mark, 0
    while k > 0 and out[k - 1].lstrip().startswith("for ("):
        k, loops = k - 1, loops + 1
    prev = out[k - 1].lstrip() if k > 0 else ""
    if not (prev.startswith("#pragma omp") and " for" in prev):
        return False
    depth = int(prev.split("collapse(", 1)[1].split(")", 1)[0]) if "collapse(" in prev else 1
    return loops < depth


def _intra_reads(group: list[NodeLoops]):
    """Loads of buffers that an earlier node of the same group writes."""
    written: set = set()
    for nl in group:
        for n in walk(nl.node.body.value):
            if isinstance(n, Load) and n.buffer in written:
                yield n
        written.add(nl.node.name)


class KernelEmitter:
    """Emits loops and bodies for the nests of one kernel (scalar, vectorized and tiled forms)."""

    def __init__(self, ctx: KernelContext, threads: int, min_chunk: int, vector_bytes: int = 0, tile: bool = True):
        self.ctx, self.threads, self.min_chunk = ctx, threads, min_chunk
        self.vector_bytes = vector_bytes
        self.tile = tile
        self.vectorized = False
        self.accs = AccEmitter(ctx)
        self.prologue: list[str] = []  # declarations before any parallel region (per-thread partials)
        # while a split reduction is emitted: this thread's bounds of loop 0, its id, the partials handed over
        self.bounds: dict = {}
        self.split_tid: str | None = None
        self.partials: list | None = None
        self.kept_split = None  # split_kept.KeptSplit while a reduction with kept dims is split

    # ---- loops ----
    def _range(self, k: int, sizes) -> tuple[str, str]:
        n = sizes[k]  # a symbolic size is a kernel argument: printed as C (s0, s0*s1)
        return self.bounds.get(k, ("0", str(n) if isinstance(n, int) else to_c(n)))

    def hint(self, n) -> int:
        """A loop size at the graph's size hints (decisions that are correct at any size: parallel depth)."""
        return n if isinstance(n, int) else self.ctx.graph.size_vars.hint(n)

    def open_loops(self, lines: Lines, sizes, start: int, stop: int, stack) -> None:
        for k in range(start, stop):
            lo, hi = self._range(k, sizes)
            cm = lines.block(f"for (int64_t x{k} = {lo}; x{k} < {hi}; x{k} += 1)")
            cm.__enter__()
            stack.append(cm)

    @staticmethod
    def close_loops(stack, n: int) -> None:
        for _ in range(n):
            stack.pop().__exit__(None, None, None)

    def nest_depth(self, nest: Nest) -> int:
        if nest.outer:
            ranges = nest.sizes
        else:
            head = nest.groups[0][0]
            ranges = head.sizes[: head.npoint]
        return parallel_depth([self.hint(r) for r in ranges], self.hint(nest.total()), self.threads, self.min_chunk)

    def splits(self, nest: Nest) -> bool:
        """Whether the nest's reduced loop is split over the threads: a full reduction, or one with
        kept dims whose outputs would give the threads unequal shares (split_kept.py)."""
        return self.splits_full(nest) or splits_kept(self, nest)

    def splits_full(self, nest: Nest) -> bool:
        """A full reduction (Algorithm 8.1 finds no loop outside the reduced dims) with at least
        `min_chunk` iterations per thread: its outermost reduction loop is split over the threads."""
        if self.threads <= 1 or nest.outer or len(nest.groups) != 1 or self.ctx.graph.size_vars:
            return False
        group = nest.groups[0]
        head = group[0]
        if head.npoint or not head.sizes or any(nl.is_scan or not nl.is_reduction for nl in group):
            return False
        return head.total() / self.threads >= self.min_chunk

    def emit_nest(self, lines: Lines, nest: Nest, depth: int, in_region: bool, nowait: bool = False) -> None:
        """`nowait`: inside a region, no barrier after this nest (no later loop before the next
        barrier reads or overwrites what it touches)."""
        for nl in nest.node_loops():
            kind = ("scan " if nl.is_scan else "reduction ") + nl.accumulate if nl.is_reduction else "pointwise"
            lines(f"// {nl.node.name}: {kind} over {nl.sizes}")
        if self.splits_full(nest):
            self.emit_split(lines, nest, in_region)
            return
        if splits_kept(self, nest):
            emit_split_kept(self, lines, nest, in_region)
            return
        collapse = f" collapse({depth})" if depth > 1 else ""
        wait = " nowait" if nowait and in_region else ""
        if depth > 0:
            lines("#pragma omp for" + collapse + wait if in_region else
                  f"#pragma omp parallel for{collapse} num_threads({self.threads})")
            self.nest_body(lines, nest)
        elif in_region:
            lines("#pragma omp single" + wait)
            with lines.block(""):
                self.nest_body(lines, nest)
        else:
            self.nest_body(lines, nest)

    def nest_body(self, lines: Lines, nest: Nest) -> None:
        stack: list = []
        self.open_loops(lines, nest.sizes, 0, nest.outer, stack)
        for nl in nest.node_loops():
            lb = self.ctx.local.get(nl.node.name)
            if isinstance(lb, LocalBuffer):  # (chunk buffers of a region are declared by their chunk loop)
                lines(f"{lb.ctype} {lb.name}[{lb.extent}];  // {nl.node.name}: kernel-local")
        for k, group in enumerate(nest.groups):
            if k and nest.outer and not self.ctx.prefetch and computes_heavily(group):  # fetch the next rows
                self.ctx.prefetch, self.ctx.prefetch_row = PREFETCH_BYTES, loop_var(nest.outer - 1)
                try:
                    self.emit_group(lines, group, nest.outer)
                finally:
                    self.ctx.prefetch, self.ctx.prefetch_row = 0, None
            else:
                self.emit_group(lines, group, nest.outer)
        self.close_loops(stack, len(stack))

    # ---- a full reduction split over the threads ----
    def emit_split(self, lines: Lines, nest: Nest, in_region: bool) -> None:
        """Each thread reduces one contiguous range of loop 0 into its own accumulators (aligned to
        the vector step, so only the last range has a ragged end) and stores them as partials; after
        a barrier one thread combines the partials in thread order: deterministic for a thread count."""
        group = nest.groups[0]
        n = group[0].sizes[0]
        plan = plan_vector(group, 0, self.vector_bytes, self.tile)
        step = plan.lanes * plan.unroll if plan is not None and plan.dim == 0 else 1
        t = self.ctx.tmp("split")
        if not in_region:
            lines(f"#pragma omp parallel num_threads({self.threads})")
        with lines.block(""):
            thread_range(lines, t, n, step)
            self.bounds, self.split_tid, self.partials = {0: (f"{t}_lo", f"{t}_hi")}, f"{t}_tid", []
            try:
                self.emit_group(lines, group, 0)
                accs = self.partials
            finally:
                self.bounds, self.split_tid, self.partials = {}, None, None
            lines("#pragma omp barrier")
            lines("#pragma omp single")
            with lines.block(""):
                combined: dict[str, Accumulator] = {}
                for a in accs:
                    if a.shared:
                        continue
                    c = Accumulator(a.nl, self.ctx.tmp("tmp_acc"))
                    lines(f"{a.acc_ctype} {c.acc} = part_{a.acc}[0];")
                    if a.idx:
                        c.idx = c.acc + "_idx"
                        lines(f"int64_t {c.idx} = part_{a.idx}[0];")
                    with lines.block(f"for (int64_t t = 1; t < {t}_nth; ++t)"):
                        self.accs.combine_partial(lines, c, f"part_{a.acc}[t]", f"part_{a.idx}[t]" if a.idx else None)
                    combined[a.acc] = c
                for a in accs:
                    c = combined[a.acc]
                    self.store(lines, a.nl, self.accs.result(Accumulator(a.nl, c.acc, c.idx)))

    def finish(self, lines: Lines, accs: list[Accumulator]) -> None:
        """Store the reductions' results, or (split reduction) this thread's partials."""
        if self.kept_split is not None:
            store_partials(self, lines, accs, vector=False)
            return
        if self.partials is None:
            for a in accs:
                self.store(lines, a.nl, self.accs.result(a))
            return
        for a in accs:
            self.partials.append(a)
            if a.shared:
                continue
            self.prologue.append(f"{a.acc_ctype} part_{a.acc}[{self.threads}];")
            lines(f"part_{a.acc}[{self.split_tid}] = {a.acc};")
            if a.idx:
                self.prologue.append(f"int64_t part_{a.idx}[{self.threads}];")
                lines(f"part_{a.idx}[{self.split_tid}] = {a.idx};")

    # ---- one group of nodes sharing loops from `start` on ----
    def emit_group(self, lines: Lines, group: list[NodeLoops], start: int) -> None:
        plan = plan_vector(group, start, self.vector_bytes, self.tile)
        if plan is None:
            self.emit_scalar_group(lines, group, start)
        elif plan.tile_dim is not None:
            self.vectorized = True
            self.emit_tiled_group(lines, group, start, plan)
        else:
            self.vectorized = True
            self.emit_vector_group(lines, group, start, plan)

    def init_accs(self, lines: Lines, group: list[NodeLoops], vector: bool = False, scalar: bool = True) -> list:
        """Accumulators of the group's reductions; Welford outputs of one value share one."""
        accs, shared = [], {}
        for nl in group:
            if not nl.is_reduction:
                continue
            key = ("W", nl.node.body.value) if nl.accumulate in co.WELFORD else None
            if key is not None and key in shared:  # mean/m2/count of one value: one accumulator
                accs.append(shared[key].share(nl))
                continue
            accs.append(self.accs.init(lines, nl, vector, scalar))
            if key is not None:
                shared[key] = accs[-1]
        return accs

    def emit_scalar_group(self, lines: Lines, group: list[NodeLoops], start: int) -> None:
        head = group[0]
        if start:
            lines(f"// {', '.join(nl.node.name for nl in group)}")
        stack: list = []
        self.open_loops(lines, head.sizes, start, head.npoint, stack)
        accs = self.init_accs(lines, group)
        stack_r: list = []
        self.open_loops(lines, head.sizes, max(start, head.npoint), len(head.sizes), stack_r)
        self.scalar_bodies(lines, group, accs)
        self.close_loops(stack_r, len(stack_r))
        self.finish(lines, [a for a in accs if not a.nl.is_scan])
        self.close_loops(stack, len(stack))

    # ---- the vectorized form ----
    def _block(self, lines: Lines, plan: VecPlan, sizes, full, tail, unrolled=None) -> None:
        """Loop `plan.dim` in blocks of W lanes: full blocks vectorized, the ragged end by `tail`.
        With `unrolled(j)` the main loop takes `plan.unroll` blocks per step (independent
        accumulators j), then single blocks up to the end."""
        k, w = plan.dim, plan.lanes
        lo, hi = self._range(k, sizes)
        if unrolled is not None and plan.unroll > 1:
            u = plan.unroll
            with lines.block(""):
                lines(f"int64_t x{k}_u = {lo};")
                with lines.block(f"for (; x{k}_u + {u * w} <= {hi}; x{k}_u += {u * w})"):
                    for j in range(u):
                        with lines.block(""):
                            lines(f"const int64_t x{k} = x{k}_u + {j * w};")
                            unrolled(j)
                if k in self.bounds or sizes[k] % (u * w):  # else no block is left over
                    self._blocks(lines, plan, f"x{k}_u", hi, full, tail)
            return
        self._blocks(lines, plan, lo, hi, full, tail)

    @staticmethod
    def _blocks(lines: Lines, plan: VecPlan, lo: str, hi: str, full, tail, overlap=None) -> None:
        """`overlap(first)`: the ragged end as the block that ends at `hi`, storing lanes `first`.."""
        k, w = plan.dim, plan.lanes
        with lines.block(f"for (int64_t x{k} = {lo}; x{k} < {hi}; x{k} += {w})"):
            if not plan.tail:
                full()
                return
            with lines.block(f"if (x{k} + {w} <= {hi})"):
                full()
            with lines.block("else"):
                lines(f"const int64_t x{k}_tail = x{k};")
                if overlap is not None:
                    with lines.block(""):
                        lines(f"const int64_t x{k} = {hi} - {w};")
                        overlap(f"x{k}_tail - x{k}")
                    return
                with lines.block(f"for (int64_t x{k} = x{k}_tail; x{k} < {hi}; x{k} += 1)"):
                    tail()

    def emit_tiled_group(self, lines: Lines, group: list[NodeLoops], start: int, plan: VecPlan) -> None:
        emit_tiled_group(self, lines, group, start, plan)

    def scalar_body(self, lines: Lines) -> ScalarBody:
        return ScalarBody(self.ctx, lines, {})

    def _vri(self, lines: Lines, a: Accumulator, plan: VecPlan) -> str | None:
        """Arg reductions: the vector of reduction indices of the W lanes."""
        if a.vidx is None:
            return None
        ri = a.nl.reduction_linear_index()
        x = loop_var(plan.dim)
        lin = linear_coeffs(ri, [x])
        t = self.ctx.tmp()
        if lin is not None:
            step = f" + stax::vec::iota64() * (int64_t){lin[x]}" if lin.get(x, 0) else ""
            lines(f"const stax::vec::vint64 {t} = stax::vec::bcast<stax::vec::vint64>((int64_t)({to_c(ri)})){step};")
        else:
            lines(f"stax::vec::vint64 {t};")
            lane = to_c(ri.xreplace({x: x + c_var("l")}))
            lines(f"for (int64_t l = 0; l < {plan.lanes}; ++l) {t}[l] = {lane};")
        return t

    def _vector_bodies(self, lines: Lines, group: list[NodeLoops], plan: VecPlan, accs: list, store,
                       hoisted: tuple | None = None, known: dict | None = None) -> None:
        """One block of W lanes: reductions update their vector accumulators, the rest `store`.
        `hoisted` = (lines before the loop, broadcast cache, scalar body writing there);
        `known` = per node, values computed before the reduction loops (VecBody.invariant)."""
        if hoisted is None:
            body = VecBody(self.ctx, lines, {}, plan, ScalarBody(self.ctx, lines, {}))
        else:
            body = VecBody(self.ctx, lines, {}, plan, hoisted[2], hoisted[:2])
        acc_of = {a.nl.node.name: a for a in accs}
        for nl in group:
            name, is_vec = body.value(nl, nl.node.body.value, (known or {}).get(nl.node.name))
            if not nl.is_reduction:
                store(body, nl, name, is_vec)
                continue
            a = acc_of[nl.node.name]
            if not a.shared:
                v = body.vec(name, is_vec, nl.node.body.value.dtype)
                self.accs.vupdate(lines, a, v, self._vri(lines, a, plan))

    def emit_vector_scan(self, lines: Lines, group: list[NodeLoops], start: int, plan: VecPlan) -> None:
        """Scans along the vector loop: per block, the inclusive prefix of the W values combined with
        the running value (the scalar accumulator, which the ragged tail continues), stored whole."""
        head = group[0]
        stack: list = []
        self.open_loops(lines, head.sizes, start, plan.dim, stack)
        accs = self.init_accs(lines, group)

        def full():
            body = VecBody(self.ctx, lines, {}, plan, ScalarBody(self.ctx, lines, {}))
            for nl, a in zip(group, accs):
                name, is_vec = body.value(nl, nl.node.body.value)
                v = body.vec(name, is_vec, nl.node.body.value.dtype)
                p = self.ctx.tmp()
                lines(f"const {vtype(nl.node.body.value.dtype)} {p} = stax::vec::scan_{VEC_SCANS[nl.accumulate]}"
                      f"({v}, {a.acc});")
                lines(f"{a.acc} = {p}[{plan.lanes - 1}];")
                out = dt.compute_dtype(nl.node.layout.dtype)
                conv = co.vector_convert(nl.node.body.value.dtype, out, p)
                if conv != p:  # Scan.out_dtype: each prefix rounded on its way to memory
                    p = self.ctx.tmp()
                    lines(f"const {vtype(out)} {p} = {conv};")
                body.store(nl, p, True)

        self._block(lines, plan, head.sizes, full, lambda: self.scalar_bodies(lines, group, accs))
        self.close_loops(stack, len(stack))

    def emit_vector_group(self, lines: Lines, group: list[NodeLoops], start: int, plan: VecPlan) -> None:
        if plan.scan:
            self.emit_vector_scan(lines, group, start, plan)
            return
        head = group[0]
        n, npoint = len(head.sizes), head.npoint
        stack: list = []
        if not plan.vertical:
            self.open_loops(lines, head.sizes, start, min(npoint, plan.dim), stack)
            copies = max(1, plan.unroll)
            sets = [self.init_accs(lines, group, vector=True, scalar=j == 0) for j in range(copies)]
            accs = sets[0]
            stack_r: list = []
            self.open_loops(lines, head.sizes, max(start, npoint), plan.dim, stack_r)

            def store(body, nl, name, is_vec):
                body.store(nl, name, is_vec)

            pieces = None
            if plan.dim not in self.bounds and self.kept_split is None and not _work_shared(lines.out, len(lines.out)):
                pieces = loop_pieces(group, plan, dict(self.ctx.graph.size_vars.value_ranges))
            for piece in pieces or [Piece(0, 0, group, plan)]:
                if pieces:
                    lines(f"// x{plan.dim} in [{piece.lo}, {piece.hi}): bodies specialized there (loop_pieces.py)")
                    self.bounds[plan.dim] = (str(piece.lo), str(piece.hi))
                try:
                    self._vector_piece(lines, piece.group, piece.plan, accs, sets, store)
                finally:
                    if pieces:
                        del self.bounds[plan.dim]
            self.close_loops(stack_r, len(stack_r))
            for j in range(1, copies):  # independent accumulators of the unrolled loop, in order
                for a, b in zip(accs, sets[j]):
                    if not a.shared:
                        self.accs.vmerge(lines, a, b)
            for a in accs:
                if not a.shared:
                    self.accs.finish_lanes(lines, a)
            self.finish(lines, accs)
            self.close_loops(stack, len(stack))
            return
        # vertical: W adjacent outputs, each with its own lane of a vector accumulator
        self.open_loops(lines, head.sizes, start, plan.dim, stack)
        if plan.panel > 1 and plan.dim not in self.bounds:  # P blocks of outputs per walk of the rows
            emit_panels(self, lines, group, plan)
            self.close_loops(stack, len(stack))
            return

        def vfull(first: str | None = None):
            accs = self.init_accs(lines, group, vector=True, scalar=False)
            known = None
            # what the reduction loops do not change, computed once: not where they may run no
            # iteration (an empty reduction reads nothing; its invariant loads may be out of bounds)
            if not any(_intra_reads(group)) and self._surely_nonempty(head.sizes[npoint:n]):
                outer = VecBody(self.ctx, lines, {}, plan, ScalarBody(self.ctx, lines, {}))
                red = {loop_var(k) for k in range(npoint, n)}
                known = {nl.node.name: outer.invariant(nl, nl.node.body.value, red) for nl in group}
            inner: list = []
            self.open_loops(lines, head.sizes, npoint, n, inner)
            self._vector_bodies(lines, group, plan, accs, None, known=known)
            self.close_loops(inner, len(inner))
            self.store_vertical(lines, plan, accs, first)

        def vtail():
            accs = self.init_accs(lines, group)
            inner: list = []
            self.open_loops(lines, head.sizes, npoint, n, inner)
            self.scalar_bodies(lines, group, accs)
            self.close_loops(inner, len(inner))
            self.finish(lines, accs)

        if self._overlaps(plan, head.sizes):
            self._blocks(lines, plan, *self._range(plan.dim, head.sizes), vfull, vtail, overlap=vfull)
        else:
            self._block(lines, plan, head.sizes, vfull, vtail)
        self.close_loops(stack, len(stack))

    def store_vertical(self, lines: Lines, plan: VecPlan, accs: list, first: str | None = None) -> None:
        """The W outputs of a vertical block (lanes from `first` on), or this thread's partials of them."""
        if self.kept_split is not None:
            store_partials(self, lines, accs, vector=True)
            return
        body = VecBody(self.ctx, lines, {}, plan, ScalarBody(self.ctx, lines, {}))
        for a in accs:
            body.store(a.nl, self.accs.vresult(a), True, first)

    def _vector_piece(self, lines: Lines, group: list[NodeLoops], plan: VecPlan, accs, sets, store) -> None:
        """The horizontal vector loop (or one piece of it): blocks of W lanes, their ragged end."""
        mark, pre = len(lines.out), Lines(lines.depth)
        # nothing is hoisted when a value read from a node of this group is written inside the loop,
        # or when the loop is one of several collapsed parallel loops (they must nest perfectly)
        intra = any(_intra_reads(group)) or _hoist_point(lines.out, mark) is None
        # ... or when the loop may run no iteration (its invariant loads may be out of bounds then)
        intra = intra or not self._surely_nonempty([group[0].sizes[plan.dim]])
        hoisted = None if intra else (pre, {}, ScalarBody(self.ctx, pre, {}))
        self._block(lines, plan, group[0].sizes,
                    lambda: self._vector_bodies(lines, group, plan, accs, store, hoisted),
                    lambda: self.scalar_bodies(lines, group, accs),
                    (lambda j: self._vector_bodies(lines, group, plan, sets[j], store, hoisted)) if len(sets) > 1
                    else None)
        if hoisted is not None:  # loop-invariant scalars and their broadcasts, computed once
            at = _hoist_point(lines.out, mark)
            lines.out[at:at] = pre.out

    def _surely_nonempty(self, sizes) -> bool:
        """Whether every loop of these sizes runs at least once (a symbolic size: by its range)."""
        ranges = dict(self.ctx.graph.size_vars.value_ranges)
        return all(s > 0 if isinstance(s, int) else bound_index(s, ranges).lo >= 1 for s in sizes)

    def _overlaps(self, plan: VecPlan, sizes) -> bool:
        """The ragged end of a vertical reduction as one more full block ending at the loop's end (its
        first lanes recompute the previous block's last outputs, bit for bit, and are not stored):
        W-1 outputs in the scalar form each ran the whole reduction without vectors (72 NHWC channels:
        a third of the kernel's time in 8 scalar Welford chains)."""
        n = sizes[plan.dim]
        return plan.tail and isinstance(n, int) and n >= plan.lanes and plan.dim not in self.bounds

    def scalar_bodies(self, lines: Lines, group: list[NodeLoops], accs) -> None:
        body = ScalarBody(self.ctx, lines, {})
        acc_of = {a.nl.node.name: a for a in accs}
        for nl in group:
            v = body.value(nl, nl.node.body.value)
            if not nl.is_reduction:
                self.store(lines, nl, v)
                continue
            a = acc_of[nl.node.name]
            if not a.shared:
                self.accs.update(lines, a, v)
            if nl.is_scan:  # inclusive scan: the running value at every step (as Scan.out_dtype)
                src, out = (dt.compute_dtype(d) for d in (nl.node.body.value.dtype, nl.node.layout.dtype))
                self.store(lines, nl, co.convert(src, out, self.accs.result(a)))

    def store(self, lines: Lines, nl: NodeLoops, v: str) -> None:
        d = nl.node.layout.dtype
        ptr = self.ctx.ptr(nl.node.name)
        idx = self.ctx.localize(nl.node.name, nl.store_index())
        lines(f"{ptr}[{to_c(idx)}] = {co.store_expr(d, v)};")
