"""Index normalization for dependence comparison (§7.1, Prop 7.2).

Two accesses are the same dependence when they touch the same address at the same
point of the (row-major flattened) iteration space. `normalize_index` rewrites an
index over loop variables into one canonical form that depends only on that address
sequence, so equal accesses written differently compare equal:

  * size-1 loop dimensions are dropped (their variable is 0);
  * the index is written as an affine map over a mixed-radix split of the flattened
    iteration, offset + sum(stride_k * c_k); adjacent dimensions are merged when the
    outer stride equals size * stride of the inner one (loop coalescing), so
    128*i0 + i1 over (64, 128) becomes c0 over {c0: 8192};
  * trailing dimensions the index does not use are dropped: reading buf1 at i0 inside
    a (64, 128) loop gives c0 over {c0: 64}, equal to buf1's write index — the prefix
    rule of Prop 7.2 (the consumer has an inner dimension the producer does not).

FloorDiv/ModularIndexing terms (views) are resolved exactly, block by block of the
variables they couple. The canonical form is a function of the block's values only
(the coarsest mixed-radix split of an affine map is unique), so any exact route gives
the same answer, and the cheap one is tried first:

  1. symbolically (large blocks): the block's variables are written as digits of one
     flat index F and the range-aware simplifier folds the view composition; when what
     is left is a sum of digits of F on one divisibility chain, it is affine in those
     digits, whatever the size of the grid;
  2. otherwise the block is evaluated exactly on its (bounded) grid, a chunk at a time
     in int32 when the value ranges allow, rejecting early when the first chunk already
     shows that no affine split exists, and the values are split into digits.

With symbolic sizes (dynamic shapes) an affine index has strides and an offset in the size
symbols (`s1*i0 + i1` over (s0, s1)); it is put in the same canonical form, dimensions merged
only where the strides chain for every value of the symbols (`sizevars.provably_equal`), so
`c0 over {c0: s0*s1}` here: equal forms are equal address sequences at every binding.

What cannot be resolved (indirect symbols, non-affine maps, huge coupled grids, views over
symbolic sizes the simplifier cannot fold) keeps its expression with renamed variables: such
forms never equal an affine one, so the comparison stays conservative (unequal means "do not fuse").
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import sympy

from .affine import affine_coefficients, affine_parts  # noqa: F401  (affine_coefficients: public here first)
from .index import FloorDiv, ModularIndexing, sympify, var
from .index_printer import evaluate
from .interpreter import index_grid
from .simplify import simplify_index
from .sizevars import SizeVar, canonical_size, provably_equal, size_symbols

# Largest grid (points) evaluated to resolve FloorDiv/ModularIndexing couplings.
MAX_EVAL_POINTS = 1 << 20
# Grid points evaluated per step: temporaries stay in cache and freed buffers are reused.
CHUNK_POINTS = 1 << 15
# Blocks from this many points are first folded symbolically (about 1-3 ms of sympy, flat
# in the size); smaller ones evaluate faster than that (about 20 ns a point in int32).
SYMBOLIC_MIN_POINTS = 1 << 17
# The flat index of a coupled block (a name no loop variable uses).
_FLAT = sympy.Symbol("_stax_flat", integer=True, nonnegative=True)
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class NormalizedIndex:
    """A canonical index: `offset + sum(stride * c_k)` over `sizes`, or a kept expression.

    `dims` holds (size, stride) pairs outer to inner when the map is affine;
    `expr` is set instead when it could not be put in affine form (compare
    conservatively). Equality and hashing are structural. With symbolic sizes, sizes,
    strides and the offset may be expressions in size symbols (expanded: one spelling
    per value); `numel()` is then not an int: use `numel_expr()`.
    """

    offset: int = 0
    dims: tuple = ()
    expr: sympy.Expr | None = None
    expr_sizes: tuple = ()

    def __hash__(self) -> int:  # dependences are hashed constantly during fusion: compute once
        return self._hash

    @functools.cached_property
    def _hash(self) -> int:
        return hash((self.offset, self.dims, self.expr, self.expr_sizes))

    @property
    def is_affine(self) -> bool:
        return self.expr is None

    @functools.cached_property
    def sizes(self) -> tuple:
        return tuple(s for s, _ in self.dims) if self.expr is None else self.expr_sizes

    @property
    def strides(self) -> tuple:
        return tuple(t for _, t in self.dims)

    @property
    def vars(self) -> tuple:
        return tuple(var("c", k) for k in range(len(self.sizes)))

    @property
    def ranges(self) -> dict:
        """{c0: size0, ...} in loop order (outer first)."""
        return dict(zip(self.vars, self.sizes))

    @property
    def index(self) -> sympy.Expr:
        if self.expr is not None:
            return self.expr
        return _affine_expr(self.offset, self.dims)

    def numel(self) -> int:
        return self._numel

    @functools.cached_property
    def _numel(self) -> int:
        n = 1
        for s in self.sizes:
            n *= int(s)
        return n

    @functools.cached_property
    def is_static(self) -> bool:
        return all(sympify(s).is_Integer for s in self.sizes)

    def numel_expr(self):
        """Elements of the canonical iteration: an int when static, else an expression in size symbols."""
        return self._numel if self.is_static else canonical_size(sympy.Mul(*self.sizes))

    def addresses(self) -> np.ndarray:
        """The address sequence over the canonical iteration, row-major (for tests/debugging)."""
        sizes = [int(s) for s in self.sizes]
        env = index_grid(self.vars, sizes)
        return np.broadcast_to(np.asarray(evaluate(self.index, env), dtype=np.int64), tuple(sizes)).reshape(-1)

    def __str__(self) -> str:
        return _format(self)


@functools.lru_cache(maxsize=4096)
def _format(n: NormalizedIndex) -> str:
    ranges = ", ".join(f"{v}: {s}" for v, s in zip(n.vars, n.sizes))
    return f"{n.index} over {{{ranges}}}"


@functools.lru_cache(maxsize=4096)
def _affine_expr(offset: int, dims: tuple) -> sympy.Expr:
    e = sympify(offset)
    for k, (_, stride) in enumerate(dims):
        e = e + sympify(stride) * var("c", k)
    return e


def normalize_index(index, var_ranges, max_eval: int = MAX_EVAL_POINTS) -> NormalizedIndex:
    """Canonical form of `index` over loop variables `var_ranges`.

    `var_ranges` is a mapping or sequence of (symbol, size) pairs in loop order,
    outer first (pointwise variables, then reduction variables).
    """
    pairs = tuple(var_ranges.items()) if isinstance(var_ranges, Mapping) else tuple(tuple(p) for p in var_ranges)
    return _normalize_input(index, pairs, max_eval)


@functools.lru_cache(maxsize=65536)
def _normalize_input(index, pairs: tuple, max_eval: int) -> NormalizedIndex:
    return _normalize(sympify(index), tuple((v, sympify(s)) for v, s in pairs), max_eval)


@functools.lru_cache(maxsize=65536)
def _normalize(index: sympy.Expr, pairs: tuple, max_eval: int) -> NormalizedIndex:
    if not all(s.is_Integer for _, s in pairs):
        return _normalize_symbolic(index, pairs)
    sizes_all = [int(s) for _, s in pairs]
    if any(s == 0 for s in sizes_all):
        return _kept(index, pairs)
    zero = {v for v, s in pairs if int(s) == 1}
    vars_ = [v for v, s in pairs if int(s) != 1]
    sizes = [int(s) for _, s in pairs if int(s) != 1]
    pos = {v: k for k, v in enumerate(vars_)}
    split = _split_terms(index, pos, zero)  # linear size-1 terms are just skipped: no substitution
    if zero and (split is _RESPLIT or split is _FOREIGN or split[0] is None):
        index = index.xreplace({v: sympy.Integer(0) for v in zero})  # the size-1 variables are 0
        zero = ()
        split = _split_terms(index, pos)
    if split is _FOREIGN or split[0] is None:
        if split is _FOREIGN and size_symbols(index):  # static loops, symbolic strides or offset
            return _normalize_symbolic(index, pairs)
        return _kept(index, tuple(zip(vars_, map(sympy.Integer, sizes))))
    linear, const, nonlinear = split
    blocks = _coupled_blocks(len(vars_), nonlinear)
    dims: list[tuple[int, int]] = []
    for lo, hi in blocks:
        terms = [t for t, (a, b) in nonlinear if lo <= a and b <= hi]
        if lo == hi and not terms:
            dims.append((sizes[lo], linear.get(lo, 0)))
            continue
        digits = _block_digits(vars_[lo : hi + 1], sizes[lo : hi + 1], linear, pos, terms, max_eval)
        if digits is None:
            if zero:
                index = index.xreplace({v: sympy.Integer(0) for v in zero})
            return _kept(index, tuple(zip(vars_, map(sympy.Integer, sizes))))
        base, block_dims = digits
        const += base
        dims.extend(block_dims)
    return NormalizedIndex(const, _canonical_dims(dims))


_RESPLIT = "resplit"  # a size-1 variable occurs inside a non-linear term: substitute 0 first
_FOREIGN = "foreign"  # a symbol that is not a loop variable (symbolic or indirect)


def _split_terms(index, pos, zero=frozenset()):
    """Linear coefficients {position: int}, constant, and non-linear terms with their var span.

    Finer than stax.ir.affine.affine_parts on purpose: each non-linear term keeps the span of
    loop positions it couples, which the block-by-block resolution below needs.

    Linear terms of the `zero` (size-1) variables are dropped; _RESPLIT or _FOREIGN
    when the index needs the substitution first or is not over the loop variables.
    """
    linear: dict[int, int] = {}
    const = 0
    nonlinear = []
    for term in sympy.Add.make_args(index):
        coeff, rest = term.as_coeff_Mul()
        if rest == 1:
            if not coeff.is_Integer:
                return None, 0, []
            const += int(coeff)
        elif rest.is_Symbol and rest in zero:
            continue
        elif rest.is_Symbol and coeff.is_Integer:
            k = pos.get(rest)
            if k is None:
                return _FOREIGN
            linear[k] = linear.get(k, 0) + int(coeff)
        else:
            syms = term.free_symbols
            if zero and not syms.isdisjoint(zero):
                return _RESPLIT
            ks = [pos.get(s) for s in syms]
            if None in ks:
                return _FOREIGN
            nonlinear.append((term, (min(ks), max(ks))))
    return linear, const, nonlinear


def _coupled_blocks(n: int, nonlinear) -> list[tuple[int, int]]:
    """Consecutive runs of loop positions that non-linear terms couple together."""
    spans = sorted(span for _, span in nonlinear)
    blocks, k, j = [], 0, 0
    while k < n:
        hi = k
        while j < len(spans) and spans[j][0] <= hi:
            hi = max(hi, spans[j][1])
            j += 1
        blocks.append((k, hi))
        k = hi + 1
    return blocks


def _block_digits(vars_, sizes, linear, pos, terms, max_eval):
    """(base, [(size, stride), ...]) of a coupled block in row-major order, or None if not affine."""
    npoints = 1
    for s in sizes:
        npoints *= s
    expr = sympy.Add(*terms, *(sympy.Integer(linear.get(pos[v], 0)) * v for v in vars_))
    if npoints >= SYMBOLIC_MIN_POINTS:  # the proof holds whatever the size: also past max_eval
        digits = _flat_digits(expr, vars_, sizes)
        if digits is not None:
            return digits
    if npoints > max_eval:
        return None
    tree = _IntTree(expr, dict(zip(vars_, sizes)))
    if not tree.ok:  # something the fixed-width paths do not cover: the general evaluator decides
        return _reference_digits(expr, vars_, sizes)
    return tree.grid_digits(expr, vars_, sizes)


def _reference_digits(expr, vars_, sizes):
    try:
        values = np.asarray(evaluate(expr, index_grid(vars_, sizes)))
    except (NotImplementedError, TypeError, KeyError, ZeroDivisionError):
        return None
    if values.dtype.kind not in "iu":
        return None
    return affine_digits(np.broadcast_to(values.astype(np.int64), tuple(sizes)).reshape(-1))


def _flat_digits(expr, vars_, sizes):
    """The block's digits proven symbolically, or None (then it is evaluated).

    With F the row-major flat index of the block, var_k = (F // inner_k) % size_k;
    substituting and simplifying over 0 <= F < N folds the reshapes of a view chain.
    A remainder sum(c * (F // d) % m) whose digit bounds d, d*m divide one another in
    a chain is affine in the digits between consecutive bounds.
    """
    sub, inner = {}, 1
    for k in range(len(vars_) - 1, -1, -1):
        sub[vars_[k]] = FloorDiv(_FLAT, inner) if k == 0 else ModularIndexing(_FLAT, inner, sizes[k])
        inner *= sizes[k]
    return _chain_digits(simplify_index(expr, {_FLAT: inner}, subs=sub), inner)


def _chain_digits(e, n: int):
    """(base, dims) when `e` is a constant plus digits of _FLAT over [0, n) on one divisibility chain."""
    base, digits = 0, []
    for term in sympy.Add.make_args(e):
        coeff, rest = term.as_coeff_Mul()
        if not coeff.is_Integer:
            return None
        if rest == 1:
            base += int(coeff)
            continue
        if rest == _FLAT:
            d, m = 1, None
        elif isinstance(rest, FloorDiv) and rest.args[0] == _FLAT and rest.args[1].is_Integer:
            d, m = int(rest.args[1]), None
        elif isinstance(rest, ModularIndexing) and rest.args[0] == _FLAT and all(a.is_Integer for a in rest.args[1:]):
            d, m = int(rest.args[1]), int(rest.args[2])
        else:
            return None
        if d <= 0 or (m is not None and m <= 0):
            return None
        if d >= n:  # F // d == 0 on the whole block
            continue
        digits.append((int(coeff), d, None if m is None or d * m >= n else d * m))
    bounds = sorted({1, n}.union(*((d,) if top is None else (d, top) for _, d, top in digits)))
    if any(b % a for a, b in zip(bounds, bounds[1:])):
        return None
    at = {b: k for k, b in enumerate(bounds)}
    strides = [0] * (len(bounds) - 1)
    for c, d, top in digits:  # (F // d) % (top / d) == sum of the chain digits between d and top
        for k in range(at[d], at[n] if top is None else at[top]):
            strides[k] += c * (bounds[k] // d)
    return base, [(bounds[k + 1] // bounds[k], strides[k]) for k in range(len(strides) - 1, -1, -1)]


class _IntTree:
    """An index expression checked for exact fixed-width numpy evaluation on a grid.

    Every node gets integer bounds; `ok` when all nodes are integer arithmetic,
    FloorDiv or ModularIndexing by positive constants and no partial result can
    leave int64, and `dtype` is int32 when none can leave int32 (numpy divides
    int32 several times faster).
    """

    def __init__(self, expr, ranges: dict):
        self.ranges = ranges
        self.bounds: dict = {}
        self.peak = 0
        self.ok = self._bound(expr) is not None and self.peak <= _INT64_MAX
        self.dtype = np.int32 if self.peak <= _INT32_MAX else np.int64

    def _bound(self, e):
        if e in self.bounds:
            return self.bounds[e]
        r = self._bound_new(e)
        self.bounds[e] = r
        if r is not None:
            self.peak = max(self.peak, abs(r[0]), abs(r[1]))
        return r

    def _bound_new(self, e):
        if e.is_Integer:
            return int(e), int(e)
        if e.is_Symbol:
            s = self.ranges.get(e)
            return None if s is None else (0, s - 1)
        args = [self._bound(a) for a in e.args]
        if any(a is None for a in args):
            return None
        if e.is_Add:
            self.peak = max(self.peak, sum(max(-lo, hi) for lo, hi in args))
            return sum(lo for lo, _ in args), sum(hi for _, hi in args)
        if e.is_Mul:
            lo, hi = args[0]
            for a, b in args[1:]:
                ends = (lo * a, lo * b, hi * a, hi * b)
                lo, hi = min(ends), max(ends)
                self.peak = max(self.peak, -lo, hi)
            return lo, hi
        consts = [int(a) if (a.is_Integer and int(a) > 0) else 0 for a in e.args[1:]]
        if isinstance(e, FloorDiv) and consts[0]:
            d = consts[0]
            return args[0][0] // d, args[0][1] // d
        if isinstance(e, ModularIndexing) and consts[0] and consts[1]:
            d, m = consts
            lo, hi = args[0][0] // d, args[0][1] // d
            self.peak = max(self.peak, max(-lo, hi) + m)  # q - (q // m) * m
            return (lo, hi) if (lo >= 0 and hi < m) else (0, m - 1)
        return None

    def evaluate(self, e, env: dict, memo: dict):
        """Exact values of `e` on `env` (arrays of self.dtype, or Python ints for fixed coordinates)."""
        r = memo.get(e)
        if r is not None:
            return r
        if e.is_Integer:
            r = int(e)
        elif e.is_Symbol:
            r = env[e]
        elif e.is_Add:
            vals = [self.evaluate(a, env, memo) for a in e.args]
            const = sum(v for v in vals if isinstance(v, int))
            arrays = [v for v in vals if not isinstance(v, int)]
            r = arrays[0] if arrays else const
            for v in arrays[1:]:
                r = r + v
            if arrays and const:
                r = r + const
        elif e.is_Mul:
            r = 1
            for a in e.args:
                r = r * self.evaluate(a, env, memo)
        else:
            lo, hi = self.bounds[e.args[0]]
            d = int(e.args[1])
            if lo >= 0 and hi < d:
                r = 0
            else:
                r = self.evaluate(e.args[0], env, memo)
                if d != 1:
                    r = r // d
                if isinstance(e, ModularIndexing):
                    m = int(e.args[2])
                    if not (lo // d >= 0 and hi // d < m):
                        r = r - (r // m) * m
        memo[e] = r
        return r

    def grid_digits(self, expr, vars_, sizes):
        """Evaluate the block chunk by chunk in row-major order and split it into digits."""
        n = len(sizes)
        j, inner = n - 1, 1  # dims after j fit in one chunk; dim j is cut into rows
        while j > 0 and inner * sizes[j] <= CHUNK_POINTS:
            inner *= sizes[j]
            j -= 1
        rows = max(1, CHUNK_POINTS // inner)
        env = index_grid(vars_[j + 1 :], sizes[j + 1 :], self.dtype)
        env = {v: a.reshape((1,) * (j + 1) + a.shape) for v, a in env.items()}
        total = 1
        for s in sizes:
            total *= s
        out = np.empty(total, dtype=self.dtype)
        at = 0
        for outer in np.ndindex(*sizes[:j]):
            env.update((vars_[k], int(x)) for k, x in enumerate(outer))
            for a in range(0, sizes[j], rows):
                b = min(a + rows, sizes[j])
                env[vars_[j]] = np.arange(a, b, dtype=self.dtype).reshape((1,) * j + (b - a,) + (1,) * (n - j - 1))
                shape = (1,) * j + (b - a,) + tuple(sizes[j + 1 :])
                block = np.asarray(self.evaluate(expr, env, {}), dtype=self.dtype)
                out[at : at + (b - a) * inner] = np.broadcast_to(block, shape).reshape(-1)
                if at == 0 and (b - a) * inner < total and _prefix_rejects(out[: (b - a) * inner], total):
                    return None
                at += (b - a) * inner
        return affine_digits(out)


def _prefix_rejects(f: np.ndarray, total: int) -> bool:
    """True when the first len(f) of `total` values already rule out an affine digit split.

    Replays `affine_digits` on what is known: a break in the first differences fixes
    the innermost digit exactly as on the full sequence, so a digit that does not
    divide the length, or a complete row off its line, fails the full split too.
    """
    f = f.astype(np.int64)
    while len(f) > 1 and total > 1:
        step = f[1] - f[0]
        breaks = np.nonzero(np.diff(f) != step)[0]
        if not len(breaks):
            return False
        r = int(breaks[0]) + 1
        if total % r:
            return True
        rows = f[: len(f) // r * r].reshape(-1, r)
        if not np.array_equal(rows, rows[:, :1] + step * np.arange(r, dtype=np.int64)):
            return True
        f, total = rows[:, 0], total // r
    return False


def affine_digits(values: np.ndarray):
    """(offset, [(size, stride), ...]) with values[x] = offset + sum(stride * digit), or None.

    The split is the unique coarsest one: the innermost digit ends where the
    first difference changes, then the row starts are split recursively.
    """
    f = np.asarray(values, dtype=np.int64).reshape(-1)
    base = int(f[0])
    dims: list[tuple[int, int]] = []
    while len(f) > 1:
        step = f[1] - f[0]
        breaks = np.nonzero(np.diff(f) != step)[0]
        r = int(breaks[0]) + 1 if len(breaks) else len(f)
        if len(f) % r:
            return None
        rows = f.reshape(-1, r)
        if not np.array_equal(rows, rows[:, :1] + step * np.arange(r, dtype=np.int64)):
            return None
        dims.insert(0, (r, int(step)))
        f = rows[:, 0]
    return base, dims


def _canonical_dims(dims) -> tuple:
    """Merge coalescible neighbours, drop size-1 and unused trailing dimensions."""
    out: list[tuple[int, int]] = []
    for size, stride in dims:
        if size == 1:
            continue
        out.append((size, stride))
        while len(out) >= 2 and out[-2][1] == out[-1][0] * out[-1][1]:
            (s0, _), (s1, t1) = out[-2], out[-1]
            out[-2:] = [(s0 * s1, t1)]
    while out and out[-1][1] == 0:
        out.pop()
    return tuple(out)


def _normalize_symbolic(index, pairs) -> NormalizedIndex:
    """An index over symbolic sizes: affine (after the range-aware simplifier) with strides and an offset
    in size symbols only, in canonical dims; anything else is kept (compares unequal: conservative)."""
    zero = {v: sympy.Integer(0) for v, s in pairs if s == 1}
    if zero:
        index = index.xreplace(zero)
    live = [(v, s) for v, s in pairs if s != 1]
    vars_ = [v for v, _ in live]
    parts = affine_parts(index, vars_)
    if parts.nonlinear:
        parts = affine_parts(simplify_index(index, dict(live)), vars_)
    if parts.nonlinear or not all(isinstance(x, SizeVar) for x in parts.rest.free_symbols):
        return _kept(index, pairs)
    dims = _canonical_dims_symbolic([(s, parts.stride(v)) for v, s in live])
    return NormalizedIndex(canonical_size(parts.rest), dims)


def _canonical_dims_symbolic(dims) -> tuple:
    """`_canonical_dims` where sizes and strides may be expressions: merge only where provably chained."""
    out: list = []
    for size, stride in dims:
        size, stride = canonical_size(size), canonical_size(stride)
        if size == 1:
            continue
        out.append((size, stride))
        while len(out) >= 2 and provably_equal(out[-2][1], out[-1][0] * out[-1][1]):
            (s0, _), (s1, t1) = out[-2], out[-1]
            out[-2:] = [(canonical_size(s0 * s1), t1)]
    while out and out[-1][1] == 0:
        out.pop()
    return tuple(out)


def _kept(index, pairs) -> NormalizedIndex:
    """Conservative form: drop size-1 and unused trailing variables, rename to c0, c1, ..."""
    pairs = [(v, s) for v, s in pairs if not (s.is_Integer and int(s) == 1)]
    index = index.xreplace({v: sympy.Integer(0) for v, s in pairs if s.is_Integer and int(s) == 1})
    used = index.free_symbols
    while pairs and pairs[-1][0] not in used:
        pairs.pop()
    ren = {v: var("c", k) for k, (v, _) in enumerate(pairs)}
    return NormalizedIndex(expr=index.xreplace(ren), expr_sizes=tuple(s for _, s in pairs))
