"""The vectorized kernel form: which loop to vectorize (`plan_vector`) and the body emitter.

The vector loop walks W lanes at a time (strip-mining, §8.1). Values that do not
depend on that loop stay scalar and are broadcast where a vector op needs them
(Listing 7.1's `Vectorized<float>(tmp1)`); contiguous accesses are vector loads and
stores, any other access (strided, indirect, masked) a lane loop. A reduction over
the vector loop keeps a vector accumulator combined by `vec_reduce_all` afterwards
(horizontal); a reduction whose innermost *pointwise* loop is the contiguous one
keeps one accumulator per lane and stores them as a vector (vertical).
"""

from __future__ import annotations

from dataclasses import dataclass

from stax.ir import Constant, IndexValue, Load, Op, walk
from stax.ir import dtypes as dt
from stax.ir.index_printer import to_c

from . import cpp_ops as co
from .cpp_ops import VTYPE, vtype
from .loops import NodeLoops, c_var, linear_coeffs, loop_var
from .panels import panel_blocks
from .prefetch import row_ahead

# reductions with a vector accumulator (accumulators.VEC_ACC); bool values: any/all only
VEC_REDUCTIONS = ("sum", "prod", "max", "min", "argmax", "argmin", "any", "all",
                  "welford_mean", "welford_m2", "welford_count")
# independent vector accumulators of a horizontal reduction loop: hides the combine's latency
# (at most UNROLL accumulator chains per group, counting the group's reductions)
UNROLL = 4
UNROLL_BIG_BODY = 2  # bodies of more than BIG_BODY value nodes: less code to compile
BIG_BODY = 12
# short loops (Example 7.1's 128-float rows) keep one accumulator, as Listing 7.1: the latency is
# small next to the row's other costs there
UNROLL_MIN_BLOCKS = 16
# where(a <cmp> b, x, y) selects on the comparison's own mask when its lanes are as wide as x's
# (_where_on_compare); through `vbool` (char lanes) GCC narrows and widens the mask lane by lane
COMPARE = {name: row.compare for name, row in co.OP_TABLE.items() if row.compare}
LANE_BYTES = {"stax::vec::vfloat": 4, "stax::vec::vint32": 4, "stax::vec::vdouble": 8, "stax::vec::vint64": 8}


@dataclass(frozen=True)
class VecPlan:
    dim: int  # loop position vectorized
    lanes: int
    vertical: bool  # a pointwise loop vectorized around reduction loops
    tail: bool  # the loop size is not a multiple of lanes
    tile_dim: int | None = None  # 2-D tiled form (§8.2): the other tiled loop
    tile: int = 0  # tile edge (elements)
    unroll: int = 1  # horizontal reductions: blocks per step of the main loop, one accumulator each
    scan: bool = False  # scans along the vector loop: in-vector prefix, then the running carry
    panel: int = 1  # vertical reductions: blocks of W outputs reduced in one walk of the rows (panels.py)


def _body_ok(nl: NodeLoops) -> bool:
    for n in walk(nl.node.body.value):
        if n.dtype.name not in VTYPE:
            return False
        if isinstance(n, Op):  # bool (mask) operands only where the op's row allows them (where: the condition)
            ok = co.OP_TABLE[n.name].bool_args
            if any(a.dtype.is_bool for a in n.args[ok:]):
                return False
    return nl.node.layout.dtype.name in VTYPE


def _strided_partner(group: list[NodeLoops], dim: int, start: int) -> int | None:
    """A loop along which an access that is strided along `dim` is contiguous (transpose-like)."""
    x = loop_var(dim)
    n = len(group[0].sizes)
    for nl in group:
        accesses = [nl.store_index()] + [nl.index(m.index) for m in walk(nl.node.body.value) if isinstance(m, Load)]
        for idx in accesses:
            co_ = linear_coeffs(idx, [loop_var(k) for k in range(n)])
            if co_ is None or co_.get(x, 0) in (0, 1):
                continue
            for k in range(start, n):
                if k != dim and co_.get(loop_var(k), 0) == 1:
                    return k
    return None


def gathers_along(nl: NodeLoops, n: Load, x) -> bool:
    """Whether an indirect load's index values change along loop `x`: each lane reads its own row (an
    embedding vectorized over tokens), a checked lane read each; else the row is one for all lanes."""
    return any(isinstance(m, (Load, IndexValue)) and nl.index(m.index).has(x)
               for _, v, _ in n.indirect for m in walk(v))


def access_score(group: list[NodeLoops], dim: int) -> int:
    """Bytes accessed contiguously along loop `dim` minus bytes that would need lane loops, per
    innermost iteration (a reduction's store happens once per output, not per iteration). A gather
    along `dim` also costs its int64 index, checked lane by lane: an embedding's layer norm vectorized
    over the tokens instead of along the row gathered every element (5x slower)."""
    x = loop_var(dim)
    score = 0
    for nl in group:
        accesses = [] if nl.is_reduction and not nl.is_scan else [(nl.store_index(), nl.node.layout.dtype, None)]
        accesses += [(nl.index(n.index), n.dtype, n) for n in walk(nl.node.body.value) if isinstance(n, Load)]
        for idx, d, load in accesses:
            if load is not None and load.indirect and gathers_along(nl, load, x):
                score -= d.itemsize + 8
                continue
            co_ = linear_coeffs(idx, [x])
            c = None if co_ is None else co_.get(x, 0)
            if c == 1:
                score += d.itemsize
            elif c != 0:
                score -= d.itemsize
    return score


def _static(n) -> bool:
    return isinstance(n, int) or bool(getattr(n, "is_Integer", False))


def _below(n, lanes: int) -> bool:
    """A loop of `n` shorter than one vector (a symbolic size: not known to be, vectorize with a tail)."""
    return _static(n) and int(n) < lanes


def _ragged(n, lanes: int) -> bool:
    """Whether the loop may end in a partial vector (a symbolic size may: always a tail)."""
    return not _static(n) or int(n) % lanes != 0


def plan_vector(group: list[NodeLoops], start: int, vector_bytes: int, tile: bool = True) -> VecPlan | None:
    """The vector form for a group of nodes sharing loops from `start`, or None (scalar form).

    Pointwise groups may vectorize any loop (the one with the most contiguous bytes) and
    tile it with a loop along which the remaining strided accesses are contiguous. Symbolic sizes
    (dynamic shapes): no tiles, every vector loop has its tail, no unrolling."""
    head = group[0]
    n = len(head.sizes)
    if not all(_static(s) for s in head.sizes):
        tile = False
    if vector_bytes == 0 or n == 0 or n - 1 < start:
        return None
    if not all(_body_ok(nl) for nl in group):
        return None
    reds = [nl for nl in group if nl.is_reduction]
    if any(nl.is_scan for nl in group):
        return _scan_plan(group, start, vector_bytes // 4)
    if reds and (head.nred == 0 or any(not vector_reduction(nl) for nl in reds)):
        return None
    lanes = vector_bytes // 4
    if tile and not reds and n - start >= 2:
        dim = max(range(start, n), key=lambda k: (access_score(group, k), k))
        partner = _strided_partner(group, dim, start)
        if partner is None and dim != n - 1:
            partner = n - 1
        if partner is not None and head.sizes[dim] >= lanes:
            edge = max(2 * lanes, 16)
            return VecPlan(dim, lanes, False, head.sizes[dim] % edge != 0 or head.sizes[dim] % lanes != 0,
                           partner, edge)
    cands = [n - 1]
    if head.nred and head.npoint and head.npoint - 1 >= start:
        cands.append(head.npoint - 1)
    dim = max(cands, key=lambda k: (access_score(group, k), k))
    if _below(head.sizes[dim], lanes):
        return None
    vertical = dim != n - 1
    unroll = 1
    if reds and not vertical and _static(head.sizes[dim]) and head.sizes[dim] > UNROLL_MIN_BLOCKS * lanes:
        nodes = sum(1 for nl in group for _ in walk(nl.node.body.value))
        unroll = UNROLL if nodes <= BIG_BODY else UNROLL_BIG_BODY
        chains = len({nl.node.body.value if nl.accumulate.startswith("welford") else nl.node.name for nl in reds})
        while unroll > 1 and chains * unroll > UNROLL:  # several reductions are independent chains already
            unroll //= 2
    panel = panel_blocks(group, dim, lanes, vector_bytes) if reds and vertical and start < head.npoint else 1
    return VecPlan(dim, lanes, vertical, _ragged(head.sizes[dim], lanes), unroll=unroll, panel=panel)


# scans with an in-vector prefix (stax::vec::scan_<op>): the index scans and logcumsumexp stay scalar
VEC_SCANS = {"cumsum": "add", "cumprod": "mul", "cummax": "max", "cummin": "min"}


def _scan_plan(group: list[NodeLoops], start: int, lanes: int) -> VecPlan | None:
    """Scans only, along a loop their reads and writes are contiguous on (cumsum(-1)): W steps at a
    time — the inclusive prefix of W values in registers (log2 W shifts), then the running carry."""
    head = group[0]
    n = len(head.sizes)
    if any(not nl.is_scan or nl.accumulate not in VEC_SCANS or nl.node.body.value.dtype.is_bool for nl in group):
        return None
    dim = n - 1  # the scan axis runs last
    if dim < start or _below(head.sizes[dim], lanes) or access_score(group, dim) <= 0:
        return None
    return VecPlan(dim, lanes, False, _ragged(head.sizes[dim], lanes), scan=True)


def vector_reduction(nl: NodeLoops) -> bool:
    """Has this reduction a vector accumulator for its value dtype? (bool values: any/all only;
    Welford: floating values; arg reductions: 32-bit values — 64-bit value and index vectors are
    twice the machine's width and cost more compile time than they save)"""
    rtype, d = nl.accumulate, nl.node.body.value.dtype
    if rtype not in VEC_REDUCTIONS:
        return False
    if d.is_bool:
        return rtype in ("any", "all")
    if rtype in ("argmax", "argmin"):
        return dt.compute_dtype(d).itemsize == 4
    return not (rtype.startswith("welford") and not d.is_floating)


def _positive_literal(n: Op) -> int | None:
    """An integer floordiv / remainder by a positive literal (a max pool's flat index: k // 3, k % 3)."""
    if n.name not in ("floordiv", "remainder") or not n.dtype.is_integer or n.dtype.is_bool:
        return None
    b = n.args[1]
    if not isinstance(b, Constant) or not b.dtype.is_integer or b.dtype.is_bool or not n.args[0].dtype.is_integer:
        return None
    return int(b.value) if 0 < int(b.value) < 2**62 else None


def _vector_load(d: dt.DType) -> str:
    """The prelude function reading W contiguous elements of dtype `d` as a vector."""
    return {"float16": "stax::vec::load_f16", "bfloat16": "stax::vec::load_bf16",
            "bool": "stax::vec::load_bool"}.get(d.name, f"stax::vec::loadu<{vtype(d)}>")


class VecBody:
    """Emits node values with loop `dim` vectorized; uniform subtrees go through `scalar`."""

    def __init__(self, ctx, lines, cse: dict, plan: VecPlan, scalar, hoisted: tuple | None = None,
                 preloaded: dict | None = None):
        self.ctx, self.lines, self.cse, self.plan, self.scalar = ctx, lines, cse, plan, scalar
        self.preloaded = preloaded or {}  # Load node -> vector already in registers (transposed tiles)
        self.x = loop_var(plan.dim)
        self.lane = c_var("l")
        # (lines before the vector loop, their broadcast cache): `scalar` then writes every uniform
        # value there, so their broadcasts go there too (GCC does not hoist loads out of loops in
        # OpenMP-outlined functions: the pointers' __restrict__ is lost when they are captured)
        self.hoisted = hoisted

    # values: names[id] = (c_name, is_vector)
    def value(self, nl: NodeLoops, root, known: dict | None = None) -> tuple[str, bool]:
        """`root` in this scope; `known`: names of nodes already computed in an enclosing one."""
        names: dict[int, tuple[str, bool]] = dict(known or {})
        snames: dict[int, str] = {k: v for k, (v, is_vec) in names.items() if not is_vec}
        for n in walk(root):
            if id(n) in names:
                continue
            if not self._varying(nl, n, names):
                s = self.scalar.node(nl, n, snames)
                snames[id(n)] = s
                names[id(n)] = (s, False)
            else:
                names[id(n)] = (self._vnode(nl, n, names), True)
        return names[id(root)]

    def invariant(self, nl: NodeLoops, root, loop_vars: set) -> dict:
        """Emit here every node of `root` that reads no index of `loop_vars` (the reduction loops
        about to open inside this scope): {id: (name, is_vector)} for `value(known=)` there.
        A pooling window's batch norm + ReLU inlined into its max is then computed once per
        output vector, not once per window element (GCC hoists none of it: loads in OpenMP
        outlined loops lose their pointers' __restrict__)."""
        inside: set[int] = set()
        picked = []
        for n in walk(root):
            if (isinstance(n, (Load, IndexValue)) and nl.index(n.index).free_symbols & loop_vars) or any(
                    id(c) in inside for c in n.children()):
                inside.add(id(n))
            elif not isinstance(n, Constant):
                picked.append(n)
        names: dict[int, tuple[str, bool]] = {}
        for n in picked:  # in walk order: operands first
            names[id(n)] = self.value(nl, n, names)
        return names

    def _varying(self, nl, n, names) -> bool:
        if isinstance(n, Constant):
            return False
        if isinstance(n, (Load, IndexValue)) and nl.index(n.index).has(self.x):
            return True
        return any(names[id(c)][1] for c in n.children())

    def vec(self, name: str, is_vec: bool, d: dt.DType) -> str:
        """`name` as a vector of dtype `d` (broadcasting a scalar once per scope)."""
        if is_vec:
            return name
        key = ("B", name, d)
        lines, cse = self.hoisted if self.hoisted is not None else (self.lines, self.cse)
        got = cse.get(key)
        if got is None:
            got = self.ctx.tmp()
            fn = "stax::vec::bcast_bool" if d.is_bool else f"stax::vec::bcast<{vtype(d)}>"
            lines(f"const {vtype(d)} {got} = {fn}({name});")
            cse[key] = got
        return got

    def _define(self, key, d: dt.DType, expr: str) -> str:
        got = self.cse.get(key)
        if got is None:
            got = self.ctx.tmp()
            self.lines(f"const {vtype(d)} {got} = {expr};")
            self.cse[key] = got
        return got

    def _lane(self, e) -> str:
        return to_c(e.xreplace({self.x: self.x + self.lane}))

    def _vnode(self, nl: NodeLoops, n, names) -> str:
        if isinstance(n, Load):
            return self.preloaded.get(n) or self._load(nl, n, names)
        if isinstance(n, IndexValue):
            t = self.ctx.tmp()
            ct = co.compute_ctype(n.dtype)
            self.lines(f"{vtype(n.dtype)} {t};")
            self.lines(f"for (int64_t l = 0; l < {self.plan.lanes}; ++l) {t}[l] = static_cast<{ct}>("
                       f"{self._lane(nl.index(n.index))});")
            return t
        assert isinstance(n, Op)
        if n.name == "where":
            fused = self._where_on_compare(n, names)
            if fused is not None:
                return fused
        by = _positive_literal(n)
        if by is not None:
            a = self.vec(*names[id(n.args[0])], n.args[0].dtype)
            return self._define(("VB", n.name, a, by, n.dtype), n.dtype, f"stax::vec::{n.name}_by<{by}LL>({a})")
        args = [self.vec(*names[id(a)], a.dtype) for a in n.args]
        expr = co.vector_expr(n.name, args, [a.dtype for a in n.args], n.dtype)
        return self._define(("VO", n.name, tuple(args), n.dtype), n.dtype, expr)

    def _where_on_compare(self, n: Op, names) -> str | None:
        """where(a <cmp> b, x, y) as `(a <cmp> b) ? x : y` on the vector comparison's mask, when
        a, b, x and y have lanes of one width (ReLU's backward: where(x <= 0, 0, g))."""
        cond = n.args[0]
        if not (isinstance(cond, Op) and cond.name in COMPARE and names[id(cond)][1]):
            return None
        widths = {LANE_BYTES.get(vtype(a.dtype)) for a in (*cond.args, *n.args[1:])}
        if len(widths) != 1 or None in widths:
            return None
        a, b, x, y = (self.vec(*names[id(v)], v.dtype) for v in (*cond.args, *n.args[1:]))
        expr = f"stax::vec::select(({a} {COMPARE[cond.name]} {b}), {x}, {y})"
        return self._define(("VW", cond.name, a, b, x, y, n.dtype), n.dtype, expr)

    def _prefetch_ahead(self, n: Load, idx) -> int:
        """Elements ahead to prefetch a contiguous load (prefetch.py), 0 for none."""
        ctx = self.ctx
        if not ctx.prefetch or n.buffer in ctx.local:
            return 0
        if ctx.prefetch_row is None:
            return ctx.prefetch // n.dtype.itemsize
        if n.buffer not in ctx.in_ptrs:  # written in this kernel: its next rows are not there yet
            return 0
        return row_ahead(idx, ctx.prefetch_row, n.dtype.itemsize)

    def _load(self, nl: NodeLoops, n: Load, names) -> str:
        ptr = self.ctx.ptr(n.buffer)
        idx = self.ctx.localize(n.buffer, nl.index(n.index))
        lin = linear_coeffs(idx, [self.x])
        if not n.indirect and n.mask is None and lin is not None and lin.get(self.x, 0) == 1:
            base = to_c(idx)
            fn = _vector_load(n.dtype)
            ahead = self._prefetch_ahead(n, idx)
            if ahead and ("VL", n.buffer, idx, n.dtype) not in self.cse:
                # a compute-heavy loop keeps the memory busy only if it asks for its data ahead
                self.lines(f"__builtin_prefetch({ptr} + {base} + {ahead}, 0, 0);")
            return self._define(("VL", n.buffer, idx, n.dtype), n.dtype, f"{fn}({ptr} + {base})")
        if (n.indirect and n.mask is None and lin is not None and lin.get(self.x, 0) == 1
                and not any(names[id(v)][1] for _, v, _ in n.indirect)):
            return self._row_load(nl, n, idx, names)
        # lane loop: strided, indirect or masked reads
        key = ("VG", n.buffer, idx, n.dtype, tuple(names[id(c)] for c in n.children()), repr(n.other))
        if key in self.cse:
            return self.cse[key]
        t = self.ctx.tmp()
        self.cse[key] = t
        self.lines(f"{vtype(n.dtype)} {t};")
        with self.lines.block(f"for (int64_t l = 0; l < {self.plan.lanes}; ++l)"):
            lane_idx = idx.xreplace({self.x: self.x + self.lane})
            guard = None
            if n.mask is not None:
                m, mv = names[id(n.mask)]
                guard = f"{m}[l]" if mv else m
                other = co.literal(n.other, n.dtype)
                self.lines(f"{t}[l] = {'-' if n.dtype.is_bool else ''}({other});")
                cm = self.lines.block(f"if ({guard})")
                cm.__enter__()
            for sym, v, bound in n.indirect:
                load_id = len(self.ctx.index_loads)
                self.ctx.index_loads.append(f"{n.buffer} (read by {nl.node.name})")
                vn, vv = names[id(v)]
                s = self.ctx.tmp()
                self.lines(f"const int64_t {s} = stax::check_index(static_cast<int64_t>({vn}{'[l]' if vv else ''}), "
                           f"{to_c(bound)}, err, {load_id});")
                lane_idx = lane_idx.xreplace({sym: c_var(s)})
            val = co.load_expr(n.dtype, f"{ptr}[{to_c(lane_idx)}]")
            self.lines(f"{t}[l] = {'-' if n.dtype.is_bool else ''}({val});")
            if guard is not None:
                cm.__exit__(None, None, None)
        return t

    def _row_load(self, nl: NodeLoops, n: Load, idx, names) -> str:
        """An indirect read whose index values are the same in every lane, contiguous along the vector
        loop (an embedding row read along its columns): each index checked once per block, then one
        plain vector load instead of W checked lane reads."""
        subs = {}
        for sym, v, bound in n.indirect:
            load_id = len(self.ctx.index_loads)
            self.ctx.index_loads.append(f"{n.buffer} (read by {nl.node.name})")
            s = self.ctx.tmp()
            self.lines(f"const int64_t {s} = stax::check_index(static_cast<int64_t>({names[id(v)][0]}), "
                       f"{to_c(bound)}, err, {load_id});")
            subs[sym] = c_var(s)
        idx = idx.xreplace(subs)
        return self._define(("VL", n.buffer, idx, n.dtype), n.dtype,
                            f"{_vector_load(n.dtype)}({self.ctx.ptr(n.buffer)} + {to_c(idx)})")

    def store(self, nl: NodeLoops, name: str, is_vec: bool, first: str | None = None) -> None:
        """`first`: store lanes `first`.. only (the overlapped last block of a vertical reduction:
        the lanes before it belong to the previous block)."""
        d = nl.node.layout.dtype
        v = self.vec(name, is_vec, d)
        ptr = self.ctx.ptr(nl.node.name)
        idx = self.ctx.localize(nl.node.name, nl.store_index())
        lin = linear_coeffs(idx, [self.x])
        if first is None and lin is not None and lin.get(self.x, 0) == 1:
            plain = "stax::vec::stream" if nl.node.name in self.ctx.streaming else "stax::vec::storeu"
            fn = {"float16": "stax::vec::store_f16", "bfloat16": "stax::vec::store_bf16",
                  "bool": "stax::vec::store_bool"}.get(d.name, plain)
            self.lines(f"{fn}({ptr} + {to_c(idx)}, {v});")
            return
        val = f"({v}[l] != 0)" if d.is_bool else co.store_expr(d, f"{v}[l]")
        self.lines(f"for (int64_t l = {first or 0}; l < {self.plan.lanes}; ++l) {ptr}[{self._lane(idx)}] = {val};")
