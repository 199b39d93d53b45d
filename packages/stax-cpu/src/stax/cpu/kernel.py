"""Schedule Kernel -> one `extern "C"` C++ function (scalar, vectorized or tiled form).

The function takes one pointer per buffer (in_ptrK read-only, out_ptrK written, as in
Listing 7.1) and an error array; it returns the error code (0: fine). Nests of one
kernel share one OpenMP parallel region with a `#pragma omp for` each; the parallel
depth of each nest comes from Algorithm 8.1.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

import sympy
from stax.ir import Constant, Graph, IndexValue, Load, Op, walk
from stax.ir import dtypes as dt
from stax.ir.index import as_int
from stax.ir.index_printer import to_c
from stax.sched.schedule import Kernel

from . import cpp_ops as co
from .accumulators import AccEmitter, Accumulator
from .loops import NodeLoops, linear_coeffs, loop_var, parallel_depth
from .nests import Nest, dense_extent, plan_nests
from .tiles import emit_tiled_group
from .vec_body import VEC_SCANS, VecBody, VecPlan, plan_vector, vtype


class Lines:
    """Indented C++ lines."""

    def __init__(self, depth: int = 0):
        self.out: list[str] = []
        self.depth = depth

    def __call__(self, text: str) -> None:
        self.out.append("    " * self.depth + text)

    @contextmanager
    def block(self, head: str):
        self(head + " {" if head else "{")
        self.depth += 1
        yield
        self.depth -= 1
        self("}")

    def text(self) -> str:
        return "\n".join(self.out)


@dataclass
class KernelContext:
    """Per-kernel naming: buffer pointers, temporaries, and the ids of bounds-checked loads."""

    name: str
    graph: Graph
    in_ptrs: dict = field(default_factory=dict)
    out_ptrs: dict = field(default_factory=dict)
    index_loads: list = field(default_factory=list)
    counter: int = 0
    local: dict = field(default_factory=dict)  # buffer -> LocalBuffer (kernel-local scratch)
    streaming: frozenset = frozenset()  # outputs large enough for non-temporal vector stores
    huge: tuple = ()  # (pointer, bytes) of outputs advised to use transparent huge pages
    prefetch: int = 0  # bytes ahead to prefetch contiguous vector loads of memory buffers (0: none)

    def ptr(self, buf: str) -> str:
        if buf in self.local:
            return self.local[buf].name
        return self.out_ptrs.get(buf) or self.in_ptrs[buf]

    def localize(self, buf: str, index):
        """A kernel-local buffer is indexed within the current outer iteration's block."""
        lb = self.local.get(buf)
        return index if lb is None else lb.rebase(index)

    def tmp(self, prefix: str = "tmp") -> str:
        self.counter += 1
        return f"{prefix}{self.counter - 1}"


@dataclass(frozen=True)
class LocalBuffer:
    """An intermediate written and read only inside one outer-loop-fused nest: instead of a
    buffer in memory it is a per-iteration array (a row of softmax's exp) that stays in L1."""

    name: str
    ctype: str
    extent: int
    outer_zero: dict  # outer loop vars -> 0
    base: int  # constant part of the producer's store index

    def rebase(self, index):
        return index.xreplace(self.outer_zero) - self.base


def _ctype(d: dt.DType) -> str:
    return co.compute_ctype(d)


class ScalarBody:
    """Emits a node's value DAG as scalar C++ statements; CSE over one loop scope via `cse`."""

    def __init__(self, ctx: KernelContext, lines: Lines, cse: dict):
        self.ctx, self.lines, self.cse = ctx, lines, cse

    def _define(self, key, ctype: str, expr: str) -> str:
        name = self.cse.get(key)
        if name is None:
            name = self.ctx.tmp()
            self.lines(f"const {ctype} {name} = {expr};")
            self.cse[key] = name
        return name

    def value(self, nl: NodeLoops, root) -> str:
        names: dict[int, str] = {}
        for n in walk(root):
            names[id(n)] = self._node(nl, n, names)
        return names[id(root)]

    def _load(self, nl: NodeLoops, n: Load, names) -> str:
        mask = names[id(n.mask)] if n.mask is not None else None
        key = ("L", n.buffer, nl.index(n.index), n.dtype, tuple(names[id(v)] for _, v, _ in n.indirect), mask,
               repr(n.other))
        if key in self.cse:
            return self.cse[key]
        ctype = _ctype(n.dtype)
        out = self.ctx.tmp()
        self.cse[key] = out
        if mask is not None:  # masked-off lanes read nothing (no bounds check) and yield `other`
            self.lines(f"{ctype} {out} = {co.literal(n.other, n.dtype)};")
            cm = self.lines.block(f"if ({mask})")
            cm.__enter__()
        index = self.ctx.localize(n.buffer, nl.index(n.index))
        for sym, v, bound in n.indirect:
            load_id = len(self.ctx.index_loads)
            self.ctx.index_loads.append(f"{n.buffer} (read by {nl.node.name})")
            t = self.ctx.tmp()
            self.lines(
                f"const int64_t {t} = stax::check_index(static_cast<int64_t>({names[id(v)]}), "
                f"{as_int(bound)}, err, {load_id});"
            )
            index = index.xreplace({sym: _sym(t)})
        expr = co.load_expr(n.dtype, f"{self.ctx.ptr(n.buffer)}[{to_c(index)}]")
        if mask is not None:
            self.lines(f"{out} = {expr};")
            cm.__exit__(None, None, None)
        else:
            self.lines(f"const {ctype} {out} = {expr};")
        return out

    def _node(self, nl: NodeLoops, n, names) -> str:
        if isinstance(n, Constant):
            return co.literal(n.value, n.dtype)
        if isinstance(n, IndexValue):
            idx = to_c(nl.index(n.index))
            return self._define(("I", idx, n.dtype), _ctype(n.dtype), f"static_cast<{_ctype(n.dtype)}>({idx})")
        if isinstance(n, Load):
            return self._load(nl, n, names)
        if isinstance(n, Op):
            args = [names[id(a)] for a in n.args]
            if n.name == "to_dtype":
                expr = co.convert(n.args[0].dtype, n.dtype, args[0])
            else:
                row = co.OP_TABLE[n.name]
                expr = row.scalar.format(**dict(zip("abc", args)), T=_ctype(n.dtype))
                if co.is_half(n.dtype) and not row.exact:
                    expr = co.round_expr(n.dtype, expr)
            return self._define(("O", n.name, tuple(args), n.dtype), _ctype(n.dtype), expr)
        raise TypeError(f"unknown value node {type(n).__name__}")


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


def _intra_reads(group: list[NodeLoops]):
    """Loads of buffers that an earlier node of the same group writes."""
    written: set = set()
    for nl in group:
        for n in walk(nl.node.body.value):
            if isinstance(n, Load) and n.buffer in written:
                yield n
        written.add(nl.node.name)


def _sym(name: str):
    return sympy.Symbol(name, integer=True, nonnegative=True)


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

    # ---- loops ----
    def _range(self, k: int, sizes) -> tuple[str, str]:
        return self.bounds.get(k, ("0", str(sizes[k])))

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
        return parallel_depth(ranges, nest.total(), self.threads, self.min_chunk)

    def splits(self, nest: Nest) -> bool:
        """A full reduction (Algorithm 8.1 finds no loop outside the reduced dims) with at least
        `min_chunk` iterations per thread: its outermost reduction loop is split over the threads."""
        if self.threads <= 1 or nest.outer or len(nest.groups) != 1:
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
        if self.splits(nest):
            self.emit_split(lines, nest, in_region)
            return
        collapse = f" collapse({depth})" if depth > 1 else ""
        wait = " nowait" if nowait and in_region else ""
        if depth > 0:
            lines("#pragma omp for" + collapse + wait if in_region else
                  f"#pragma omp parallel for{collapse} num_threads({self.threads})")
            self._nest_body(lines, nest)
        elif in_region:
            lines("#pragma omp single" + wait)
            with lines.block(""):
                self._nest_body(lines, nest)
        else:
            self._nest_body(lines, nest)

    def _nest_body(self, lines: Lines, nest: Nest) -> None:
        stack: list = []
        self.open_loops(lines, nest.sizes, 0, nest.outer, stack)
        for nl in nest.node_loops():
            lb = self.ctx.local.get(nl.node.name)
            if isinstance(lb, LocalBuffer):  # (chunk buffers of a region are declared by their chunk loop)
                lines(f"{lb.ctype} {lb.name}[{lb.extent}];  // {nl.node.name}: kernel-local")
        for group in nest.groups:
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
            lines(f"const int64_t {t}_tid = omp_get_thread_num(), {t}_nth = omp_get_num_threads();")
            lines(f"const int64_t {t}_chunk = (({n} + {t}_nth - 1) / {t}_nth + {step - 1}) / {step} * {step};")
            lines(f"const int64_t {t}_lo = std_min({t}_tid * {t}_chunk, {n}), {t}_hi = std_min({t}_lo + {t}_chunk, {n});")
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
        self._scalar_bodies(lines, group, accs)
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
    def _blocks(lines: Lines, plan: VecPlan, lo: str, hi: str, full, tail) -> None:
        k, w = plan.dim, plan.lanes
        with lines.block(f"for (int64_t x{k} = {lo}; x{k} < {hi}; x{k} += {w})"):
            if not plan.tail:
                full()
                return
            with lines.block(f"if (x{k} + {w} <= {hi})"):
                full()
            with lines.block("else"):
                lines(f"const int64_t x{k}_tail = x{k};")
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
            lane = to_c(ri.xreplace({x: x + _sym("l")}))
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
                body.store(nl, p, True)

        self._block(lines, plan, head.sizes, full, lambda: self._scalar_bodies(lines, group, accs))
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

            mark, pre = len(lines.out), Lines(lines.depth)
            # nothing is hoisted when a value read from a node of this group is written inside the loop,
            # or when the loop is one of several collapsed parallel loops (they must nest perfectly)
            intra = any(_intra_reads(group)) or _hoist_point(lines.out, mark) is None
            hoisted = None if intra else (pre, {}, ScalarBody(self.ctx, pre, {}))
            self._block(lines, plan, head.sizes,
                        lambda: self._vector_bodies(lines, group, plan, accs, store, hoisted),
                        lambda: self._scalar_bodies(lines, group, accs),
                        (lambda j: self._vector_bodies(lines, group, plan, sets[j], store, hoisted)) if copies > 1
                        else None)
            if hoisted is not None:  # loop-invariant scalars and their broadcasts, computed once
                at = _hoist_point(lines.out, mark)
                lines.out[at:at] = pre.out
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

        def vfull():
            accs = self.init_accs(lines, group, vector=True, scalar=False)
            known = None
            if not any(_intra_reads(group)):  # what the reduction loops do not change, computed once
                outer = VecBody(self.ctx, lines, {}, plan, ScalarBody(self.ctx, lines, {}))
                red = {loop_var(k) for k in range(npoint, n)}
                known = {nl.node.name: outer.invariant(nl, nl.node.body.value, red) for nl in group}
            inner: list = []
            self.open_loops(lines, head.sizes, npoint, n, inner)
            self._vector_bodies(lines, group, plan, accs, None, known=known)
            self.close_loops(inner, len(inner))
            body = VecBody(self.ctx, lines, {}, plan, ScalarBody(self.ctx, lines, {}))
            for a in accs:
                body.store(a.nl, self.accs.vresult(a), True)

        def vtail():
            accs = self.init_accs(lines, group)
            inner: list = []
            self.open_loops(lines, head.sizes, npoint, n, inner)
            self._scalar_bodies(lines, group, accs)
            self.close_loops(inner, len(inner))
            self.finish(lines, accs)

        self._block(lines, plan, head.sizes, vfull, vtail)
        self.close_loops(stack, len(stack))

    def _scalar_bodies(self, lines: Lines, group: list[NodeLoops], accs) -> None:
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
            if nl.is_scan:  # inclusive scan: the running value at every step
                self.store(lines, nl, self.accs.result(a))

    def store(self, lines: Lines, nl: NodeLoops, v: str) -> None:
        d = nl.node.layout.dtype
        ptr = self.ctx.ptr(nl.node.name)
        idx = self.ctx.localize(nl.node.name, nl.store_index())
        lines(f"{ptr}[{to_c(idx)}] = {co.store_expr(d, v)};")


@dataclass(frozen=True)
class KernelSource:
    name: str
    code: str
    params: tuple  # buffer names in argument order (in_ptrs then out_ptrs)
    index_loads: tuple  # load id -> description, for IndexError messages
    vectorized: bool = False  # needs the vector prelude
    local: tuple = ()  # buffers that became kernel-local (the wrapper allocates nothing for them)
    kernels: tuple = ()  # schedule kernels this function runs, in order (a region); () = just `name`
    err_slots: int = 1  # error records [code, a, b, c] in `err`, one per kernel of a region


def signature(ctx: KernelContext, roots: dict | None = None, err_name: str = "err") -> str:
    """The C function's parameters: pointers that share storage (an in-place reuse, or a region's
    reuse, roots: buffer -> its storage) are not `__restrict__`."""
    roots = roots or {}
    count: dict = {}
    for b in (*ctx.in_ptrs, *ctx.out_ptrs):
        count[roots.get(b, b)] = count.get(roots.get(b, b), 0) + 1
    params = []
    for b, p in (*ctx.in_ptrs.items(), *ctx.out_ptrs.items()):
        const = "const " if b in ctx.in_ptrs else ""
        restrict = " __restrict__" if count[roots.get(b, b)] == 1 else ""
        params.append(f"{const}{co.storage_ctype(ctx.graph.buffer_layout(b).dtype)}*{restrict} {p}")
    params.append(f"int64_t* __restrict__ {err_name}")
    return f'extern "C" int {ctx.name}({", ".join(params)})'


LOCAL_BYTES = 128 << 10  # largest kernel-local block (per thread, on the stack)


def _local_buffers(nests: list[Nest], escaping: set) -> dict:
    out = {}
    for nest in nests:
        if not nest.outer:
            continue
        outer = [loop_var(k) for k in range(nest.outer)]
        for nl in nest.node_loops():
            name = nl.node.name
            if name in escaping:
                continue
            S = nl.store_index()
            pv = [loop_var(k) for k in range(len(nl.sizes))]
            coeffs = linear_coeffs(S, pv)
            base = S.xreplace({v: sympy.Integer(0) for v in pv})
            if coeffs is None or not base.is_Integer:
                continue
            inner = {v: c for v, c in coeffs.items() if v not in outer}
            extent = dense_extent(inner, dict(zip(pv, nl.sizes)))
            d = nl.node.layout.dtype
            # one element per outer iteration (a row statistic) stays a buffer, as in Example 7.1
            if extent is None or extent <= 1 or extent * d.itemsize > LOCAL_BYTES:
                continue
            out[name] = LocalBuffer(f"local_{name}", co.storage_ctype(d), max(extent, 1),
                                    {v: sympy.Integer(0) for v in outer}, int(base))
    return out


def bind_pointers(ctx: KernelContext, graph: Graph, written: list, stream_bytes: int | None,
                  huge_bytes: int | None) -> None:
    """The C function's pointers: in_ptrN per buffer read but not written here, out_ptrN per
    written buffer that is not kernel-local; which outputs get streaming stores / huge pages."""
    if stream_bytes is not None:
        ctx.streaming = frozenset(b for b in written
                                  if b not in ctx.local and graph.buffer_layout(b).nbytes() >= stream_bytes)
    for name in written:
        for ld in (n for n in walk(graph.node(name).body.value) if isinstance(n, Load)):
            if ld.buffer not in written and ld.buffer not in ctx.in_ptrs:
                ctx.in_ptrs[ld.buffer] = f"in_ptr{len(ctx.in_ptrs)}"
    ctx.out_ptrs = {b: f"out_ptr{k}" for k, b in enumerate(b for b in written if b not in ctx.local)}
    if huge_bytes is not None:
        ctx.huge = tuple((ctx.out_ptrs[b], graph.buffer_layout(b).nbytes()) for b in ctx.out_ptrs
                         if graph.buffer_layout(b).nbytes() >= huge_bytes)


def emit_kernel(kernel: Kernel, graph: Graph, threads: int, min_chunk: int = 512, merge: bool = True,
                vector_bytes: int = 0, escaping: set | None = None, tile: bool = True,
                stream_bytes: int | None = None, huge_bytes: int | None = None,
                roots: dict | None = None) -> KernelSource:
    """C++ source of one kernel of the schedule (vectorized where `vector_bytes` allows).

    `escaping`: buffers read outside this kernel (or graph outputs); the others may become
    kernel-local (None: every buffer escapes). `roots`: buffer -> its storage (regions.storage_roots)."""
    nests = plan_nests(kernel, graph, merge=merge)
    ctx = KernelContext(kernel.name, graph)
    if escaping is not None:
        ctx.local = _local_buffers(nests, escaping)
    bind_pointers(ctx, graph, list(kernel.nodes), stream_bytes, huge_bytes)
    emitter = KernelEmitter(ctx, threads, min_chunk, vector_bytes, tile)
    depths = [emitter.nest_depth(n) for n in nests]
    body = Lines(1)
    for ptr, nbytes in ctx.huge:
        body(f"stax::advise_huge({ptr}, {nbytes});")
    streams = bool(ctx.streaming)  # decided per store; the fence below is cheap when unused
    region = (len(nests) > 1 or streams) and any(d or emitter.splits(n) for n, d in zip(nests, depths))
    if region:
        body(f"#pragma omp parallel num_threads({threads})")
        with body.block(""):
            for nest, d in zip(nests, depths):
                emitter.emit_nest(body, nest, d, in_region=True)
            if streams:
                body("__builtin_ia32_sfence();  // order this thread's streaming stores")
    else:
        for nest, d in zip(nests, depths):
            emitter.emit_nest(body, nest, d, in_region=False)
        if streams:
            body("__builtin_ia32_sfence();")
    head = "".join(f"    {decl}\n" for decl in dict.fromkeys(emitter.prologue))  # before any parallel region
    code = f"{signature(ctx, roots)}\n{{\n{head}{body.text()}\n    return (int)err[0];\n}}\n"
    params = tuple(ctx.in_ptrs) + tuple(ctx.out_ptrs)
    return KernelSource(kernel.name, code, params, tuple(ctx.index_loads), emitter.vectorized,
                        tuple(ctx.local))
