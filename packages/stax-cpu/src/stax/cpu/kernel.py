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
from stax.ir import Constant, Graph, IndexValue, Load, Op, Reduction, walk
from stax.ir import dtypes as dt
from stax.ir.index import as_int
from stax.ir.index_printer import to_c
from stax.sched.schedule import Kernel

from . import cpp_ops as co
from .loops import NodeLoops, linear_coeffs, loop_var, parallel_depth
from .nests import Nest, dense_extent, plan_nests
from .vec_body import HORIZONTAL, VecBody, VecPlan, plan_vector, vtype


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


def _sym(name: str):
    return sympy.Symbol(name, integer=True, nonnegative=True)


@dataclass
class Accumulator:
    nl: NodeLoops
    acc: str
    idx: str | None = None
    shared: bool = False  # reuses another node's Welford accumulator
    vacc: str | None = None  # vector accumulator (vectorized form)

    @property
    def body(self) -> Reduction:
        return self.nl.node.body

    @property
    def acc_ctype(self) -> str:
        if self.nl.accumulate in ("any", "all"):
            return "bool"
        if self.nl.accumulate in co.WELFORD:
            return "stax::Welford"
        return _ctype(self.body.value.dtype)


class KernelEmitter:
    """Emits loops and bodies for the nests of one kernel (the scalar form)."""

    def __init__(self, ctx: KernelContext, threads: int, min_chunk: int, vector_bytes: int = 0, tile: bool = True):
        self.ctx, self.threads, self.min_chunk = ctx, threads, min_chunk
        self.vector_bytes = vector_bytes
        self.tile = tile
        self.vectorized = False

    # ---- loops ----
    def open_loops(self, lines: Lines, sizes, start: int, stop: int, stack) -> None:
        for k in range(start, stop):
            cm = lines.block(f"for (int64_t x{k} = 0; x{k} < {sizes[k]}; x{k} += 1)")
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

    def emit_nest(self, lines: Lines, nest: Nest, depth: int, in_region: bool) -> None:
        for nl in nest.node_loops():
            kind = ("scan " if nl.is_scan else "reduction ") + nl.accumulate if nl.is_reduction else "pointwise"
            lines(f"// {nl.node.name}: {kind} over {nl.sizes}")
        collapse = f" collapse({depth})" if depth > 1 else ""
        if depth > 0:
            lines("#pragma omp for" + collapse if in_region else
                  f"#pragma omp parallel for{collapse} num_threads({self.threads})")
            self._nest_body(lines, nest)
        elif in_region:
            lines("#pragma omp single")
            with lines.block(""):
                self._nest_body(lines, nest)
        else:
            self._nest_body(lines, nest)

    def _nest_body(self, lines: Lines, nest: Nest) -> None:
        stack: list = []
        self.open_loops(lines, nest.sizes, 0, nest.outer, stack)
        for nl in nest.node_loops():
            lb = self.ctx.local.get(nl.node.name)
            if lb is not None:
                lines(f"{lb.ctype} {lb.name}[{lb.extent}];  // {nl.node.name}: kernel-local")
        for group in nest.groups:
            self.emit_group(lines, group, nest.outer)
        self.close_loops(stack, len(stack))

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

    def emit_scalar_group(self, lines: Lines, group: list[NodeLoops], start: int) -> None:
        head = group[0]
        if start:
            lines(f"// {', '.join(nl.node.name for nl in group)}")
        stack: list = []
        self.open_loops(lines, head.sizes, start, head.npoint, stack)
        accs, shared = [], {}
        for nl in group:
            if nl.is_reduction:
                key = ("W", nl.node.body.value) if nl.accumulate in co.WELFORD else None
                if key is not None and key in shared:  # mean/m2/count of one value: one accumulator
                    accs.append(Accumulator(nl, shared[key].acc, shared=True))
                    continue
                accs.append(self.init_acc(lines, nl))
                if key is not None:
                    shared[key] = accs[-1]
        stack_r: list = []
        self.open_loops(lines, head.sizes, max(start, head.npoint), len(head.sizes), stack_r)
        cse: dict = {}
        body = ScalarBody(self.ctx, lines, cse)
        acc_of = {a.nl.node.name: a for a in accs}
        for nl in group:
            v = body.value(nl, nl.node.body.value)
            if nl.is_reduction:
                a = acc_of[nl.node.name]
                if not a.shared:
                    self.update_acc(lines, a, v)
                if nl.is_scan:  # inclusive scan: the running value at every step
                    self.store(lines, nl, self.acc_result(a))
            else:
                self.store(lines, nl, v)
        self.close_loops(stack_r, len(stack_r))
        for a in accs:
            if not a.nl.is_scan:
                self.store(lines, a.nl, self.acc_result(a))
        self.close_loops(stack, len(stack))

    # ---- the vectorized form ----
    def _block(self, lines: Lines, plan: VecPlan, size: int, full, tail) -> None:
        """Loop `plan.dim` in blocks of W lanes: full blocks vectorized, the ragged end by `tail`."""
        k, w = plan.dim, plan.lanes
        with lines.block(f"for (int64_t x{k} = 0; x{k} < {size}; x{k} += {w})"):
            if not plan.tail:
                full()
                return
            with lines.block(f"if (x{k} + {w} <= {size})"):
                full()
            with lines.block("else"):
                lines(f"const int64_t x{k}_tail = x{k};")
                with lines.block(f"for (int64_t x{k} = x{k}_tail; x{k} < {size}; x{k} += 1)"):
                    tail()

    def emit_tiled_group(self, lines: Lines, group: list[NodeLoops], start: int, plan: VecPlan) -> None:
        """§8.2: loops `dim` and `tile_dim` walk TxT tiles (outer loops in order, so the parallel
        pragma still applies); inside a tile, `tile_dim` then the vectorized `dim` innermost."""
        head = group[0]
        sizes, v, t, edge = head.sizes, plan.dim, plan.tile_dim, plan.tile
        stack: list = []
        for k in range(start, len(sizes)):
            step, name = (edge, f"x{k}_t") if k in (v, t) else (1, f"x{k}")
            cm = lines.block(f"for (int64_t {name} = 0; {name} < {sizes[k]}; {name} += {step})")
            cm.__enter__()
            stack.append(cm)

        def end(k):
            return f"x{k}_t + {edge}" if sizes[k] % edge == 0 else f"std_min(x{k}_t + {edge}, {sizes[k]})"

        lines(f"const int64_t x{v}_end = {end(v)};")
        cm = lines.block(f"for (int64_t x{t} = x{t}_t; x{t} < {end(t)}; x{t} += 1)")
        cm.__enter__()
        stack.append(cm)
        w = plan.lanes
        with lines.block(f"for (int64_t x{v} = x{v}_t; x{v} < x{v}_end; x{v} += {w})"):
            def full():
                body = VecBody(self.ctx, lines, {}, plan, ScalarBody(self.ctx, lines, {}))
                for nl in group:
                    body.store(nl, *body.value(nl, nl.node.body.value))

            if not plan.tail:
                full()
            else:
                with lines.block(f"if (x{v} + {w} <= x{v}_end)"):
                    full()
                with lines.block("else"):
                    lines(f"const int64_t x{v}_tail = x{v};")
                    with lines.block(f"for (int64_t x{v} = x{v}_tail; x{v} < x{v}_end; x{v} += 1)"):
                        self._scalar_bodies(lines, group, [])
        self.close_loops(stack, len(stack))

    def emit_vector_group(self, lines: Lines, group: list[NodeLoops], start: int, plan: VecPlan) -> None:
        head = group[0]
        n, npoint = len(head.sizes), head.npoint
        stack: list = []
        if not plan.vertical:
            self.open_loops(lines, head.sizes, start, min(npoint, plan.dim), stack)
            accs = [self.init_acc(lines, nl, vector=plan) for nl in group if nl.is_reduction]
            stack_r: list = []
            self.open_loops(lines, head.sizes, max(start, npoint), plan.dim, stack_r)

            def full():
                body = VecBody(self.ctx, lines, {}, plan, ScalarBody(self.ctx, lines, {}))
                for nl in group:
                    name, is_vec = body.value(nl, nl.node.body.value)
                    if nl.is_reduction:
                        a = next(a for a in accs if a.nl is nl)
                        v = body.vec(name, is_vec, nl.node.body.value.dtype)
                        comb = co.REDUCTION_TABLE[nl.accumulate].vector_combine
                        lines(f"{a.vacc} = {comb.format(x=a.vacc, y=v)};")
                    else:
                        body.store(nl, name, is_vec)

            def tail():
                self._scalar_bodies(lines, group, accs)

            self._block(lines, plan, head.sizes[plan.dim], full, tail)
            self.close_loops(stack_r, len(stack_r))
            for a in accs:
                red = HORIZONTAL[a.nl.accumulate]
                self.update_acc(lines, a, f"stax::vec::vec_reduce_all(stax::vec::{red}{{}}, {a.vacc})")
                self.store(lines, a.nl, self.acc_result(a))
            self.close_loops(stack, len(stack))
            return
        # vertical: W adjacent outputs, each with its own lane of a vector accumulator
        self.open_loops(lines, head.sizes, start, plan.dim, stack)

        def vfull():
            accs = [self.init_acc(lines, nl, vector=plan, scalar=False) for nl in group]
            inner: list = []
            self.open_loops(lines, head.sizes, npoint, n, inner)
            body = VecBody(self.ctx, lines, {}, plan, ScalarBody(self.ctx, lines, {}))
            for nl, a in zip(group, accs):
                name, is_vec = body.value(nl, nl.node.body.value)
                v = body.vec(name, is_vec, nl.node.body.value.dtype)
                comb = co.REDUCTION_TABLE[nl.accumulate].vector_combine
                lines(f"{a.vacc} = {comb.format(x=a.vacc, y=v)};")
            self.close_loops(inner, len(inner))
            for nl, a in zip(group, accs):
                body.store(nl, a.vacc, True)

        def vtail():
            accs = [self.init_acc(lines, nl) for nl in group]
            inner: list = []
            self.open_loops(lines, head.sizes, npoint, n, inner)
            self._scalar_bodies(lines, group, accs)
            self.close_loops(inner, len(inner))
            for a in accs:
                self.store(lines, a.nl, self.acc_result(a))

        self._block(lines, plan, head.sizes[plan.dim], vfull, vtail)
        self.close_loops(stack, len(stack))

    def _scalar_bodies(self, lines: Lines, group: list[NodeLoops], accs) -> None:
        body = ScalarBody(self.ctx, lines, {})
        for nl in group:
            v = body.value(nl, nl.node.body.value)
            if nl.is_reduction:
                self.update_acc(lines, next(a for a in accs if a.nl is nl), v)
            else:
                self.store(lines, nl, v)

    # ---- reductions ----
    def init_acc(self, lines: Lines, nl: NodeLoops, vector: VecPlan | None = None, scalar: bool = True
                 ) -> Accumulator:
        a = Accumulator(nl, self.ctx.tmp("tmp_acc"))
        rtype = nl.accumulate
        vdt = nl.node.body.value.dtype
        if vector is not None:
            a.vacc = a.acc + "_vec"
            ident = co.identity_literal(rtype, vdt)
            lines(f"{vtype(vdt)} {a.vacc} = stax::vec::bcast<{vtype(vdt)}>({ident});")
            if not scalar:
                return a
        if rtype in co.WELFORD:
            lines(f"stax::Welford {a.acc};")
            return a
        ident = {"any": "false", "all": "true"}.get(rtype) or co.identity_literal(rtype, vdt)
        lines(f"{a.acc_ctype} {a.acc} = {ident};")
        if co.accumulator_row(rtype).arg:
            a.idx = a.acc + "_idx"
            lines(f"int64_t {a.idx} = 0;")
        return a

    def update_acc(self, lines: Lines, a: Accumulator, v: str) -> None:
        row = co.accumulator_row(a.nl.accumulate)
        ri = to_c(a.nl.reduction_linear_index()) if row.arg else ""
        lines(row.update.format(acc=a.acc, v=v, idx=a.idx, ri=ri))

    @staticmethod
    def acc_result(a: Accumulator) -> str:
        rtype = a.nl.accumulate
        if rtype in co.WELFORD:
            get = {"welford_mean": "get_mean", "welford_m2": "get_m2", "welford_count": "get_count"}[rtype]
            ct = _ctype(a.body.value.dtype)
            return co.round_expr(a.body.value.dtype, f"static_cast<{ct}>({a.acc}.{get}())")
        return a.idx if a.idx else a.acc

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


def _signature(ctx: KernelContext) -> str:
    params = []
    for buf, p in ctx.in_ptrs.items():
        params.append(f"const {co.storage_ctype(ctx.graph.buffer_layout(buf).dtype)}* __restrict__ {p}")
    for buf, p in ctx.out_ptrs.items():
        params.append(f"{co.storage_ctype(ctx.graph.buffer_layout(buf).dtype)}* __restrict__ {p}")
    params.append("int64_t* __restrict__ err")
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


def emit_kernel(kernel: Kernel, graph: Graph, threads: int, min_chunk: int = 512, merge: bool = True,
                vector_bytes: int = 0, escaping: set | None = None, tile: bool = True,
                stream_bytes: int | None = None, huge_bytes: int | None = None) -> KernelSource:
    """C++ source of one kernel of the schedule (vectorized where `vector_bytes` allows).

    `escaping`: buffers read outside this kernel (or graph outputs); the others may become
    kernel-local (None: every buffer escapes)."""
    nests = plan_nests(kernel, graph, merge=merge)
    ctx = KernelContext(kernel.name, graph)
    if escaping is not None:
        ctx.local = _local_buffers(nests, escaping)
    if stream_bytes is not None:
        ctx.streaming = frozenset(b for b in kernel.nodes
                                  if b not in ctx.local and graph.buffer_layout(b).nbytes() >= stream_bytes)
    written = list(kernel.nodes)
    for name in kernel.nodes:
        for ld in (n for n in walk(graph.node(name).body.value) if isinstance(n, Load)):
            if ld.buffer not in written and ld.buffer not in ctx.in_ptrs:
                ctx.in_ptrs[ld.buffer] = f"in_ptr{len(ctx.in_ptrs)}"
    ctx.out_ptrs = {b: f"out_ptr{k}" for k, b in enumerate(b for b in written if b not in ctx.local)}
    if huge_bytes is not None:
        ctx.huge = tuple((ctx.out_ptrs[b], graph.buffer_layout(b).nbytes()) for b in ctx.out_ptrs
                         if graph.buffer_layout(b).nbytes() >= huge_bytes)
    emitter = KernelEmitter(ctx, threads, min_chunk, vector_bytes, tile)
    depths = [emitter.nest_depth(n) for n in nests]
    body = Lines(1)
    for ptr, nbytes in ctx.huge:
        body(f"stax::advise_huge({ptr}, {nbytes});")
    streams = bool(ctx.streaming)  # decided per store; the fence below is cheap when unused
    region = (len(nests) > 1 or streams) and any(depths)
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
    code = f"{_signature(ctx)}\n{{\n{body.text()}\n    return (int)err[0];\n}}\n"
    params = tuple(ctx.in_ptrs) + tuple(ctx.out_ptrs)
    return KernelSource(kernel.name, code, params, tuple(ctx.index_loads), emitter.vectorized,
                        tuple(ctx.local))
