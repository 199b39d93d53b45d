"""Schedule -> KernelPlans: what each Triton kernel computes, on which axes, what it stores.

On a GPU a kernel is a grid of program instances over a flat `xindex` (rows, or
elements for pointwise kernels), each walking a flat `r0_index` (the reduction or
scan axis). A node of a kernel plays one role: a reduction or a scan over (n, r), a
pointwise node over n*r elements that runs inside the r loop ('xr'), or a pointwise
node over n elements that runs once per row ('x') — element-count compatibility as
in Def 7.2. Each node's loop variables become digits of xindex / r0_index (after
merging dimensions every access walks contiguously), shared by all nodes when their
loop structures agree, so equal accesses print equally and CSE across nodes works.
A buffer is stored only if it is a graph output or read outside its kernel; inside
the kernel its value stays in registers (GPU materialization, Example 7.2).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import sympy
from stax.ir import ComputedBuffer, ExternKernel, IndexValue, Load, Reduction, Scan, walk
from stax.ir.affine import affine_parts
from stax.ir.index import pointwise_vars, reduction_vars
from stax.ir.index_printer import parenthesize
from stax.ir.simplify import coalesce_loops, memory_order, simplify_index
from stax.ir.sizevars import provably_equal
from stax.ir.value_ranges import index_fits_int32
from stax.sched.schedule import EXTERN

from .config import GpuConfig
from .indexing import along_x, texpr
from .symbolic import SymbolicUnsupported, hint, is_static, size, symbols_of, upper_bound

log = logging.getLogger("stax.gpu")

REDUCTION, SCAN, XR, X = "reduction", "scan", "xr", "x"
POINTWISE_FORM, TILED_FORM, REDUCTION_FORM, EXTERN_FORM = "pointwise", "pointwise2d", "reduction", "extern"
INT32_LIMIT = 2**31 - 1 - 2**16  # room for one block past the end of the last row


@dataclass(frozen=True)
class AxisVar:
    """A digit of a flat program index: (base // divisor) % modulus (no modulus: outermost).
    Symbolic sizes: divisor, modulus and size are sympy expressions in the size symbols."""

    name: str
    base: str  # 'xindex', 'yindex' or 'r0_index'
    divisor: int | sympy.Expr
    modulus: int | sympy.Expr | None
    size: int | sympy.Expr

    @property
    def symbol(self) -> sympy.Symbol:
        return sympy.Symbol(self.name, integer=True, nonnegative=True)

    @property
    def axis(self) -> str:
        return self.base[0]

    def definition(self) -> str:
        e = self.base if self.divisor == 1 else f"{self.base} // {_operand(self.divisor)}"
        if self.modulus is None:
            return e
        return f"({e}) % {_operand(self.modulus)}" if self.divisor != 1 else f"{e} % {_operand(self.modulus)}"


def _operand(n) -> str:
    """A digit's divisor or modulus as a Triton operand: an int, or a size expression in parentheses."""
    return str(n) if isinstance(n, int) else parenthesize(texpr(n))


@dataclass
class NodePlan:
    node: ComputedBuffer
    role: str
    subs: dict  # node loop variable -> expression over AxisVar symbols
    reads: frozenset  # buffers the body loads


@dataclass
class KernelPlan:
    index: int
    name: str  # schedule kernel name
    form: str
    nodes: list = field(default_factory=list)
    xnumel: int | sympy.Expr = 1  # symbolic shapes: expressions in the size symbols
    ynumel: int | sympy.Expr = 1
    rnumel: int | sympy.Expr = 1
    axis_vars: list = field(default_factory=list)
    stores: tuple = ()  # buffers written to memory, node order
    loads: tuple = ()  # buffers read from memory (graph inputs or other kernels' outputs)
    index_dtype: str = "int32"
    outer: bool = False  # reduction walks memory with stride 1 along x rather than r
    extern: ExternKernel | None = None
    size_ranges: dict = field(default_factory=dict)  # size symbol -> ValueRange (the graph's size_vars)
    size_hints: dict = field(default_factory=dict)  # size symbol -> its hint (estimates only)
    size_args: tuple = ()  # names of the size symbols the kernel takes as int arguments

    @property
    def ranges(self) -> dict:
        return {**self.size_ranges, **{v.symbol: v.size for v in self.axis_vars}}

    @property
    def symbolic(self) -> bool:
        """Do the kernel's element counts or indices use size symbols (then they are arguments)?"""
        return bool(self.size_args) or not all(map(is_static, (self.xnumel, self.ynumel, self.rnumel)))

    @property
    def empty(self) -> bool:
        """A generated kernel with no output element (a diagonal past the end, a (3, 0) tensor):
        nothing to launch; its buffers are allocated empty."""
        return self.form != EXTERN_FORM and is_static(self.xnumel * self.ynumel) and self.xnumel * self.ynumel == 0

    def producer(self, buffer: str) -> NodePlan | None:
        for p in self.nodes:
            if p.node.name == buffer:
                return p
        return None

    def simplify(self, expr) -> sympy.Expr:
        return simplify_index(expr, self.ranges)


def _prod(xs):
    """The product of sizes: an int when all are static, else a sympy expression."""
    xs = [size(x) for x in xs]
    out = 1
    for x in xs:
        out = out * x
    return size(out)


def _nonzero(n) -> bool:
    return not is_static(n) or int(n) != 0


def node_index_exprs(node: ComputedBuffer) -> list:
    """Every index the body evaluates (loads, masks, iota) plus the write index."""
    out = []
    for n in walk(node.body.value):
        if isinstance(n, (Load, IndexValue)):
            out.append(n.index)
    out.append(node.layout.index(pointwise_vars(len(node.layout.sizes))))
    return out


def _dims(node: ComputedBuffer, role: str, n: int, r: int) -> tuple[list, list, dict]:
    """(x dims, r dims, split) with dims as lists of (loop var, size), outer first, size-1
    dims included. A pointwise node shares a kernel with an (n, r) reduction when a prefix
    of its dims has n elements, possibly splitting one dim d = a*b (GpuPolicy.splittable,
    group_norm's (4, 6, 8) as 8 rows of 24): then `split` maps d's loop variable to
    b*hi + lo, hi an x dim and lo an r dim."""
    body = node.body
    pv = list(zip(pointwise_vars(len(body.ranges)), (size(s) for s in body.ranges)))
    if isinstance(body, Reduction):
        rv = list(zip(reduction_vars(len(body.reduction_ranges)), (size(s) for s in body.reduction_ranges)))
        return pv, rv, {}
    if isinstance(body, Scan):
        return [d for k, d in enumerate(pv) if k != body.axis], [pv[body.axis]], {}
    if role == X:
        return pv, [], {}
    acc = 1
    for k, (v, s) in enumerate(pv):
        if provably_equal(acc, n) and provably_equal(_prod(s for _, s in pv[k:]), r):
            return pv[:k], pv[k:], {}
        if not all(isinstance(x, int) for x in (n, acc, s)):
            acc = _prod((acc, s))  # (splitting a dim needs its factors: static sizes only)
            continue
        if n % acc == 0 and s % (n // acc) == 0 and 1 < n // acc < s:
            a = n // acc
            hi = sympy.Symbol(f"_{v.name}_hi", integer=True, nonnegative=True)
            lo = sympy.Symbol(f"_{v.name}_lo", integer=True, nonnegative=True)
            return pv[:k] + [(hi, a)], [(lo, s // a)] + pv[k + 1 :], {v: (s // a) * hi + lo}
        acc *= s
    if provably_equal(acc, n) and provably_equal(r, 1):
        return pv, [], {}
    if not all(is_static(s) for _, s in pv) or not is_static(n):
        raise SymbolicUnsupported(f"a pointwise node ({node.name}) split into a reduction's rows")
    raise NotImplementedError(
        f"stax-gpu: pointwise node {node.name} over {[s for _, s in pv]} cannot be split into "
        f"{n} rows of {r} elements to share a kernel with a reduction (Def 7.2)"
    )


def _numels(node: ComputedBuffer) -> tuple[int, int | None]:
    body = node.body
    if isinstance(body, Reduction):
        return _prod(body.ranges), _prod(body.reduction_ranges)
    if isinstance(body, Scan):
        sizes = [size(s) for s in body.ranges]
        return _prod(s for k, s in enumerate(sizes) if k != body.axis), sizes[body.axis]
    return _prod(body.ranges), None


class _AxisTable:
    """Allocates AxisVars (x0, x1, r0_2, ...) once per distinct digit of a flat index."""

    def __init__(self):
        self.vars: list[AxisVar] = []
        self.by_key: dict = {}

    def digits(self, base: str, sizes: list) -> list[sympy.Symbol]:
        out = []
        for j, s in enumerate(sizes):
            divisor = _prod(sizes[j + 1 :])
            modulus = None if j == 0 else size(s)
            key = (base, divisor, modulus)
            if key not in self.by_key:
                prefix = {"xindex": "x", "yindex": "y", "r0_index": "r0_"}[base]
                v = AxisVar(f"{prefix}{len(self.vars)}", base, divisor, modulus, size(s))
                self.by_key[key] = v
                self.vars.append(v)
            out.append(self.by_key[key].symbol)
        return out


def _coalesce(dims: list, exprs: list, prefix: str):
    """Merge contiguous neighbours (size-1 dims dropped): (sizes, reindex old var -> new var expr)."""
    if not dims:
        return [], {}, exprs, []
    merge = coalesce_loops([s for _, s in dims], exprs, [v for v, _ in dims], new_prefix=prefix)
    return list(merge.sizes), dict(merge.reindex), list(merge.exprs), list(merge.vars)


def contiguous_dim(expr, new_vars) -> int | None:
    """Position of the dimension an affine access walks with stride 1, if any."""
    parts = affine_parts(sympy.expand(expr), new_vars)
    for k, v in enumerate(new_vars):
        if parts.stride(v) == 1:
            return k
    return None


def plan_kernel(schedule, k: int, config: GpuConfig, stored: set | None = None) -> KernelPlan:
    """`stored`: buffers some later use reads from memory (None: all), whose writes order the loops."""
    kernel = schedule.kernels[k]
    graph = schedule.graph
    if kernel.kind == EXTERN:
        (name,) = kernel.nodes
        return KernelPlan(k, kernel.name, EXTERN_FORM, extern=graph.node(name))
    nodes = [graph.node(nm) for nm in kernel.nodes]
    for nd in nodes:
        if not isinstance(nd, ComputedBuffer):
            raise TypeError(f"stax-gpu: kernel {kernel.name} mixes an extern node {nd.name} with computed nodes")
    numels = [_numels(nd) for nd in nodes]
    shaped = [(n, r) for n, r in numels if r is not None]
    if shaped:
        n, r = shaped[0]
        if any(not (provably_equal(a, n) and provably_equal(b, r)) for a, b in shaped):
            raise NotImplementedError(f"stax-gpu: kernel {kernel.name} fuses reductions/scans of different shapes "
                                      f"{shaped}")
    else:
        n, r = numels[0][0], 1
    roles = []
    for nd, (nn, rr) in zip(nodes, numels):
        if rr is not None:
            roles.append(SCAN if isinstance(nd.body, Scan) else REDUCTION)
        elif shaped and provably_equal(nn, n * r) and not provably_equal(r, 1):
            roles.append(XR)
        elif provably_equal(nn, n):
            roles.append(X)
        else:
            raise NotImplementedError(
                f"stax-gpu: kernel {kernel.name}: node {nd.name} has {nn} elements, incompatible with ({n}, {r})"
            )
    form = REDUCTION_FORM if shaped else POINTWISE_FORM
    plan = KernelPlan(k, kernel.name, form, xnumel=n, rnumel=r if shaped else 1,
                      size_ranges=graph.size_vars.value_ranges, size_hints=graph.size_vars.hints)
    # A node with no element (a (0, 3) tensor, or an 'xr' node of rows of 0 elements) is never
    # computed nor stored: it takes no part in the axes (its sizes could not be split into the
    # kernel's rows, nor its 0-sized dims divided), its loop variables are 0. With no row at all
    # (n == 0) the whole kernel is empty (KernelPlan.empty: not generated, not launched).
    live = [j for j, nd in enumerate(nodes) if _nonzero(n) and _nonzero(_prod(nd.body.ranges))]
    dims = [_dims(nodes[j], roles[j], n, r) for j in live]
    if live:
        _assign_axes(plan, [nodes[j] for j in live], [roles[j] for j in live], dims, config, stored)
    by_node = {p.node.name: p for p in plan.nodes}
    plan.nodes = [by_node.get(nd.name) or NodePlan(nd, role, _zero_subs(nd), _reads(nd))
                  for nd, role in zip(nodes, roles)]
    plan.size_args = _size_args(plan) if graph.size_vars else ()
    return plan


def _size_args(plan: KernelPlan) -> tuple:
    """Names of the size symbols a kernel's source may print (its digits, indices, indirect bounds; its
    element counts are arguments of their own): each becomes an int argument of the kernel, in name order."""
    exprs = [x for v in plan.axis_vars for x in (v.divisor, v.modulus, v.size) if x is not None]
    for p in plan.nodes:
        exprs += [e.xreplace(p.subs) for e in node_index_exprs(p.node)]
        exprs += [b for n in walk(p.node.body.value) if isinstance(n, Load) for _, _, b in n.indirect]
    return tuple(sorted((s.name for s in symbols_of(exprs)), key=lambda n: (len(n), n)))


def _reads(node: ComputedBuffer) -> frozenset:
    return frozenset(ld.buffer for ld in walk(node.body.value) if isinstance(ld, Load))


def _zero_subs(node: ComputedBuffer) -> dict:
    """Every loop variable of a node without elements at 0 (it has no point to run at)."""
    body = node.body
    vs = list(pointwise_vars(len(body.ranges)))
    if isinstance(body, Reduction):
        vs += reduction_vars(len(body.reduction_ranges))
    return {v: sympy.Integer(0) for v in vs}


def _write_order(X: list, writes: list) -> list[int]:
    """Positions of the dims X, outer to inner, in the memory order of the first affine write:
    a pointwise kernel whose output is laid out otherwise than its logical dims (eager's
    strides for x.t().exp() are (1, n)) walks that output with stride 1 (a logical order
    would store, and here also load, with stride n on every lane)."""
    orders = (memory_order(w, X) for w in writes)
    return next((o for o in orders if o is not None), list(range(len(X))))


def _assign_axes(plan: KernelPlan, nodes, roles, dims, config: GpuConfig, stored: set | None = None) -> None:
    table = _AxisTable()
    sig = {(tuple(s for _, s in xd if s != 1), tuple(s for _, s in rd if s != 1)) for xd, rd, _ in dims}
    xsigs = {a for a, _ in sig}
    rsigs = {b for _, b in sig if b}
    joint = len(xsigs) == 1 and len(rsigs) <= 1
    subs_list = []
    if joint:
        # Rename every node's dims to shared symbols, then merge on the union of accesses.
        X = [sympy.Symbol(f"_X{j}", integer=True, nonnegative=True) for j in range(len(next(iter(xsigs))))]
        R = [sympy.Symbol(f"_R{j}", integer=True, nonnegative=True) for j in range(len(next(iter(rsigs), ())))]
        renames, all_exprs = [], []
        for nd, (xd, rd, cut) in zip(nodes, dims):
            ren = _rename([v for v, s in xd], [s for v, s in xd], X)
            ren.update(_rename([v for v, s in rd], [s for v, s in rd], R))
            ren = _unsplit(ren, cut)
            renames.append(ren)
            all_exprs += [e.xreplace(ren) for e in node_index_exprs(nd)]
        xsizes = list(next(iter(xsigs)))
        rsizes = list(next(iter(rsigs), ()))
        if plan.form in (POINTWISE_FORM, REDUCTION_FORM) and config.write_order and len(X) > 1:
            # a reduction orders its kept dims by what it stores too: a channels-last max pool's
            # (n, c, h, w) outputs in logical order made every lane of its stores and loads step by C
            writes = [node_index_exprs(nd)[-1].xreplace(ren) for nd, ren, role in zip(nodes, renames, roles)
                      if (stored is None or nd.name in stored) and (plan.form == POINTWISE_FORM or role == REDUCTION)]
            order = _write_order(X, writes)
            X, xsizes = [X[j] for j in order], [xsizes[j] for j in order]
        xs, xre, exprs, xvars = _coalesce(list(zip(X, xsizes)), all_exprs, "c") if X else ([], {}, all_exprs, [])
        rs, rre, exprs, rvars = _coalesce(list(zip(R, rsizes)), exprs, "d") if R else ([], {}, exprs, [])
        split = _tile_split(plan, xvars, exprs, xs, config)
        axis_map = {}
        if split is not None:
            axis_map.update(zip(xvars[:split], table.digits("yindex", xs[:split])))
            axis_map.update(zip(xvars[split:], table.digits("xindex", xs[split:])))
            plan.form = TILED_FORM
            plan.ynumel, plan.xnumel = _prod(xs[:split]), _prod(xs[split:])
        else:
            axis_map.update(zip(xvars, table.digits("xindex", xs)))
        axis_map.update(zip(rvars, table.digits("r0_index", rs)))
        for ren in renames:
            subs_list.append({v: e.xreplace(xre).xreplace(rre).xreplace(axis_map) for v, e in ren.items()})
    else:
        for nd, (xd, rd, cut) in zip(nodes, dims):
            exprs = [e.xreplace(cut) for e in node_index_exprs(nd)]
            xs, xre, exprs, xvars = _coalesce(xd, exprs, "c") if xd else ([], {}, exprs, [])
            rs, rre, exprs, rvars = _coalesce(rd, exprs, "d") if rd else ([], {}, exprs, [])
            axis_map = dict(zip(xvars, table.digits("xindex", xs)))
            axis_map.update(zip(rvars, table.digits("r0_index", rs)))
            subs = {v: sympy.Integer(0) for v, s in xd + rd if s == 1}
            subs.update({v: e.xreplace(axis_map) for v, e in {**xre, **rre}.items()})
            subs_list.append(_unsplit(subs, cut))
    plan.axis_vars = table.vars
    for nd, role, subs in zip(nodes, roles, subs_list):
        plan.nodes.append(NodePlan(nd, role, subs, _reads(nd)))
    plan.index_dtype = _index_dtype(plan, config)
    plan.outer = _is_outer(plan)


def _unsplit(subs: dict, cut: dict) -> dict:
    """Substitutions of a node's own loop variables, from those of its dims (where _dims
    split a variable into hi/lo digits, compose the split with their substitutions)."""
    if not cut:
        return subs
    parts = {s for e in cut.values() for s in e.free_symbols}
    out = {v: e for v, e in subs.items() if v not in parts}
    out.update({v: e.xreplace(subs) for v, e in cut.items()})
    return out


def _rename(vars_, sizes, targets) -> dict:
    """Map the size>1 vars of one node onto shared symbols; size-1 vars become 0."""
    out, j = {}, 0
    for v, s in zip(vars_, sizes):
        if s == 1:
            out[v] = sympy.Integer(0)
        else:
            out[v] = targets[j]
            j += 1
    return out


def _tile_split(plan: KernelPlan, xvars, exprs, xs, config: GpuConfig) -> int | None:
    """For pointwise kernels whose accesses disagree on the contiguous dimension
    (a transpose), split the dims into (y | x) so both sides get coalesced tiles."""
    if plan.form != POINTWISE_FORM or not config.tile_2d or len(xvars) < 2:
        return None
    contig = {contiguous_dim(e, xvars) for e in exprs}
    inner = {c for c in contig if c is not None and c != len(xvars) - 1}
    if not inner or (len(xvars) - 1) not in contig:
        return None
    split = max(inner) + 1
    ynumel, xnumel = _prod(xs[:split]), _prod(xs[split:])
    if hint(ynumel, plan.size_hints) < 16 or hint(xnumel, plan.size_hints) < 16:
        return None  # (symbolic sizes: judged at the hints; their tiles run on a 1-D grid, no y limit)
    if is_static(ynumel) and ynumel > 65535 * 16:
        return None
    return split


def _index_dtype(plan: KernelPlan, config: GpuConfig) -> str:
    """int32 only where every index, element count and storage size provably fits: symbolic sizes are
    bounded by their ranges (dynamo's usually have no upper bound: those kernels index in int64)."""
    if config.index_dtype != "auto":
        return config.index_dtype
    sr = plan.size_ranges
    total = plan.xnumel * plan.ynumel * (plan.rnumel if _nonzero(plan.rnumel) else 1)
    if upper_bound(total, sr) > INT32_LIMIT or upper_bound(plan.xnumel, sr) > INT32_LIMIT:
        return "int64"
    ranges = plan.ranges
    for p in plan.nodes:
        if upper_bound(p.node.layout.storage_size_expr(), sr) > INT32_LIMIT:
            return "int64"
        for n in walk(p.node.body.value):
            if not isinstance(n, (Load, IndexValue)):
                continue
            local = dict(ranges)
            if isinstance(n, Load):
                local.update({s: size(b) for s, _, b in n.indirect})
            if not index_fits_int32(plan.simplify(n.index.xreplace(p.subs)), local):
                return "int64"
        write = p.node.layout.index(pointwise_vars(len(p.node.layout.sizes)))
        if not index_fits_int32(plan.simplify(write.xreplace(p.subs)), ranges):
            return "int64"
    return "int32"


def _is_outer(plan: KernelPlan) -> bool:
    """True when the reduction's loads are contiguous along x rather than r (column sums)."""
    if plan.form != REDUCTION_FORM:
        return False
    xs = [v.symbol for v in plan.axis_vars if v.axis == "x"]
    rs = [v.symbol for v in plan.axis_vars if v.axis == "r"]
    return along_x((plan.simplify(ld.index.xreplace(p.subs)), xs, rs) for p in plan.nodes
                   if p.role in (REDUCTION, SCAN) for ld in walk(p.node.body.value) if isinstance(ld, Load))


def _read_elsewhere(schedule) -> set:
    """Buffers the caller or a kernel other than their producer's reads (those are stored)."""
    home = {name: k for k, kernel in enumerate(schedule.kernels) for name in kernel.nodes}
    out = set(schedule.graph.outputs)
    for k, kernel in enumerate(schedule.kernels):
        for name in kernel.nodes:
            nd = schedule.graph.node(name)
            reads = nd.inputs if isinstance(nd, ExternKernel) else {
                ld.buffer for ld in walk(nd.body.value) if isinstance(ld, Load)}
            out.update(b for b in reads if home.get(b, k) != k)
    return out


def plan_kernels(schedule, config: GpuConfig) -> list[KernelPlan]:
    """Plan every kernel, then decide which buffers each kernel must store."""
    stored = _read_elsewhere(schedule)
    plans = [plan_kernel(schedule, k, config, stored) for k in range(len(schedule.kernels))]
    for plan in plans:
        if plan.form == EXTERN_FORM:
            continue
        own = {p.node.name for p in plan.nodes}
        plan.stores = tuple(p.node.name for p in plan.nodes if p.node.name in stored)
        loads = []
        for p in plan.nodes:
            for ld in walk(p.node.body.value):
                if isinstance(ld, Load) and ld.buffer not in own and ld.buffer not in loads:
                    loads.append(ld.buffer)
        plan.loads = tuple(loads)
        kept = own - set(plan.stores)
        if kept:
            log.debug("%s keeps %s in registers", plan.name, ", ".join(sorted(kept)))
    return plans


