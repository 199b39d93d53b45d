"""Range-aware index simplification and loop coalescing.

Views compose into FloorDiv/ModularIndexing chains; with the loop ranges known most
of them fold away (ModularIndexing(i, 1, n) -> i for 0 <= i < n, FloorDiv(i, n) -> 0,
m*FloorDiv(x, m) + ModularIndexing(x, 1, m) -> x, also inside a modulus where views
leave the coefficients reduced: ModularIndexing(2*FloorDiv(x, 1024) + ModularIndexing(x,
1, 1024), 1, 7) -> ModularIndexing(x, 1, 7) as 1024 = 2 mod 7). Dependence comparison (§7.2)
needs equal accesses to look equal, so every rule here is an exact integer identity
— never an approximation — and each is applied only when the ranges prove it.

Public: `simplify_index(expr, var_ranges)` and `coalesce_loops(sizes, exprs, vars)`
(merge adjacent loop dimensions that every expression walks contiguously, drop
size-1 dimensions). Canonical c0.. renaming for dependences lives in normalize.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import sympy

from .affine import affine_parts, contiguous
from .index import CeilDiv, FloorDiv, ModularIndexing, sympify, var
from .symbolic_digits import combine_symbolic_digits, digit_pair, has_size_symbol, symbolic_digit
from .value_ranges import IndexBounds, ValueRange, var_range_map

_ONE = sympy.Integer(1)
_ZERO = sympy.Integer(0)


def simplify_index(expr, var_ranges: Mapping | None = None, subs: Mapping | None = None) -> sympy.Expr:
    """An equal expression with FloorDiv/ModularIndexing folded using the loop ranges.

    `var_ranges` maps loop symbols to sizes (0 <= v < size) or ValueRanges;
    a variable of size 1 becomes 0. With `subs`, simplifies expr.xreplace(subs)
    (ranges then apply to the symbols of the replacements) without building the
    substituted expression first: sympy construction is most of the cost.
    """
    expr = sympify(expr)
    ranges = var_range_map(var_ranges)
    if not subs and _plain_affine(expr) and not any(r.is_point for r in ranges.values()):
        return expr  # nothing to fold: the common case, kept cheap
    sizes = {v: sympify(n) for v, n in (var_ranges or {}).items() if not isinstance(n, ValueRange)}
    return _Simplifier(ranges, subs, sizes).simp(expr)


def _plain_affine(e) -> bool:
    """Integer-coefficient sums of symbols: no FloorDiv/ModularIndexing/Min/Max to fold."""
    for t in sympy.Add.make_args(e):
        if t.is_Integer or t.is_Symbol:
            continue
        if t.is_Mul and len(t.args) == 2 and t.args[0].is_Integer and t.args[1].is_Symbol:
            continue
        return False
    return True


def _pos_int(e) -> int | None:
    return int(e) if (e.is_Integer and int(e) > 0) else None


def _terms(x) -> list[tuple[int | None, sympy.Expr]]:
    """Additive terms as (integer coefficient or None, rest)."""
    out = []
    for t in sympy.Add.make_args(x):
        c, rest = t.as_coeff_Mul()
        out.append((int(c), rest) if c.is_Integer else (None, t))
    return out


def _build(terms) -> sympy.Expr:
    return sympy.Add(*[(r if c == 1 or c is None else sympy.Integer(c) * r) for c, r in terms])


class _Simplifier:
    """One simplification run: memoized bottom-up rewriting under fixed ranges."""

    def __init__(self, ranges: dict, subs: Mapping | None = None, sizes: Mapping | None = None):
        self.bounds = IndexBounds(ranges)
        self.sizes = dict(sizes or {})  # loop var -> its size, symbolic or not (symbolic divisors' rules)
        self.subs = dict(subs or {})
        self.memo: dict = {}
        self.mod_memo: dict = {}

    def range(self, e) -> ValueRange:
        return self.bounds.bound(e)

    def simp(self, e):
        r = self.memo.get(e)
        if r is None:
            r = self._simp(e)
            self.memo[e] = r
        return r

    def _simp(self, e):
        if e.is_Integer or e.is_Rational:
            return e
        if e.is_Symbol:
            if e in self.subs:
                return self.simp(sympify(self.subs[e]))
            r = self.range(e)
            return sympy.Integer(r.lo) if (r.is_point and r.is_finite) else e
        args = [self.simp(a) for a in e.args]
        same = all(a is b for a, b in zip(args, e.args))
        if e.is_Add:
            e = e if same else sympy.Add(*args)
            if e.is_Add and any(_digit(t.as_coeff_Mul()[1]) for t in e.args):
                return self.combine_digits(e)
            if e.is_Add and has_size_symbol(e) and any(symbolic_digit(t) for t in e.args):
                return combine_symbolic_digits(e)  # (symbolic shapes: digits of loops merged over size symbols)
            return e
        if e.is_Mul:
            return e if same else sympy.Mul(*args)
        if isinstance(e, FloorDiv):
            return self.floordiv(*args)
        if isinstance(e, ModularIndexing):
            return self.modular(*args)
        if isinstance(e, CeilDiv):
            d = _pos_int(args[1])
            return self.floordiv(self.simp(args[0] + d - 1), args[1]) if d else CeilDiv(*args)
        if isinstance(e, (sympy.Min, sympy.Max)):
            return self.minmax(type(e), args)
        return e.func(*args)

    # ---- FloorDiv(x, d) = floor(x / d)
    def floordiv(self, x, d):
        dv = _pos_int(d)
        if dv is None:
            return self.floordiv_symbolic(x, d)
        if dv == 1:
            return x
        if x.is_Integer:
            return sympy.Integer(int(x) // dv)
        if isinstance(x, FloorDiv) and _pos_int(x.args[1]):
            return self.floordiv(x.args[0], sympy.Integer(int(x.args[1]) * dv))
        if isinstance(x, ModularIndexing) and _pos_int(x.args[1]) and _pos_int(x.args[2]):
            m = int(x.args[2])
            if m % dv == 0:  # ((z//a) % (k*d)) // d == (z//(a*d)) % k
                return self.modular(x.args[0], sympy.Integer(int(x.args[1]) * dv), sympy.Integer(m // dv))
        # floor((q*d + r) / d) == q + floor(r / d) for integer q
        quot, rest = [], []
        for c, t in _terms(x):
            (quot if (c is not None and c % dv == 0) else rest).append((c, t))
        q = _build([(c // dv, t) for c, t in quot])
        if not rest:
            return q
        r = _build(rest)
        return q + self._floordiv_rest(rest, r, dv)

    def _floordiv_rest(self, rest, r, dv: int):
        rr = self.range(r)
        if rr.is_finite and rr.lo // dv == rr.hi // dv:
            return sympy.Integer(int(rr.lo) // dv)
        # floor((g*Y + S) / (g*d')) == floor(Y / d') when 0 <= S < g
        cands = sorted({math.gcd(c, dv) for c, _ in rest if c is not None} - {1, dv}, reverse=True)
        for g in cands:
            big = [(c // g, t) for c, t in rest if c is not None and c % g == 0]
            small = [(c, t) for c, t in rest if c is None or c % g != 0]
            if big and small:
                sr = self.range(_build(small))
                if sr.lo >= 0 and sr.hi < g:
                    return self.floordiv(_build(big), sympy.Integer(dv // g))
        g = math.gcd(dv, *[c for c, _ in rest if c is not None]) if all(c is not None for c, _ in rest) else 1
        if g > 1:
            return FloorDiv(_build([(c // g, t) for c, t in rest]), sympy.Integer(dv // g))
        return FloorDiv(r, sympy.Integer(dv))

    # ---- ModularIndexing(x, d, m) = (x // d) % m
    def modular(self, x, d, m):
        if not (_pos_int(d) and _pos_int(m)):
            return self.modular_symbolic(x, d, m)
        # floor((x + d*m*K) / d) % m == floor(x / d) % m: x only matters modulo d*m
        return self.mod(self.floordiv(self.combine_digits_mod(x, int(d) * int(m)), d), int(m))

    def mod(self, y, mv: int):
        """y % mv for a positive integer modulus, in canonical ModularIndexing form."""
        if mv == 1:
            return _ZERO
        if y.is_Integer:
            return sympy.Integer(int(y) % mv)
        y = self.combine_digits_mod(y, mv)
        if y.is_Integer:
            return sympy.Integer(int(y) % mv)
        if isinstance(y, ModularIndexing) and _pos_int(y.args[2]) and int(y.args[2]) % mv == 0:
            y = ModularIndexing(y.args[0], y.args[1], sympy.Integer(mv))
        terms = [(c, t) for c, t in _terms(y) if not (c is not None and c % mv == 0)]
        if not terms:
            return _ZERO
        r = _build(terms)
        rr = self.range(r)
        if rr.is_finite and rr.lo // mv == rr.hi // mv:
            return r - sympy.Integer(int(rr.lo) // mv * mv)
        # (c*t) % m == ((c % m)*t) % m: coefficients and the constant into [0, m)
        reduced = [(c % mv if c is not None else c, t) for c, t in terms]
        if reduced != terms:
            return self.mod(_build([(c, t) for c, t in reduced if c != 0]), mv)
        if all(c is not None for c, _ in terms):
            g = math.gcd(mv, *[c for c, _ in terms])
            if g > 1:  # (g*r') % (g*m') == g * (r' % m')
                return g * self.mod(_build([(c // g, t) for c, t in terms]), mv // g)
            # (g*Y + S) % (g*m') == g*(Y % m') + S when 0 <= S < g
            for g in sorted({math.gcd(c, mv) for c, _ in terms} - {1, mv}, reverse=True):
                big = [(c // g, t) for c, t in terms if c % g == 0]
                small = [(c, t) for c, t in terms if c % g != 0]
                sr = self.range(_build(small))
                if big and sr.lo >= 0 and sr.hi < g:
                    return g * self.mod(_build(big), mv // g) + _build(small)
        if isinstance(r, ModularIndexing):
            return r if (_pos_int(r.args[2]) and int(r.args[2]) <= mv and rr.lo >= 0) else ModularIndexing(r, 1, mv)
        if isinstance(r, FloorDiv) and _pos_int(r.args[1]):
            return ModularIndexing(r.args[0], r.args[1], sympy.Integer(mv))
        return ModularIndexing(r, _ONE, sympy.Integer(mv))

    # ---- symbolic divisors (dynamic shapes): d, m positive expressions in size symbols
    def floordiv_symbolic(self, x, d):
        """floor((q*d + r) / d) == q + floor(r / d) for polynomial q, and floor(r / d) == 0 when
        0 <= r <= d - 1 is provable from the loop sizes: FloorDiv(s1*i0 + i1, s1) -> i0 over i1 < s1."""
        if not _positive_size(d):
            return FloorDiv(x, d)
        quot, rest = _split_multiples(x, d)
        if not quot:
            return sympy.Integer(0) if self.below(x, d) else FloorDiv(x, d)
        r = sympy.Add(*rest)
        return sympy.Add(*quot) + (sympy.Integer(0) if self.below(r, d) else FloorDiv(r, d))

    def modular_symbolic(self, x, d, m):
        """(x // d) % m with a symbolic d or m: multiples of m drop out, and a remainder provably in
        [0, m) is itself: ModularIndexing(s1*i0 + i1, 1, s1) -> i1 over i1 < s1."""
        if not (_positive_size(d) and _positive_size(m)):
            return ModularIndexing(x, d, m)
        y = self.floordiv(x, d) if d != 1 else x
        _, rest = _split_multiples(y, m)
        r = sympy.Add(*rest)
        if self.below(r, m):
            return r
        return ModularIndexing(x, d, m) if len(rest) == len(sympy.Add.make_args(y)) else ModularIndexing(r, 1, m)

    def below(self, r, d) -> bool:
        """0 <= r <= d - 1 at every point and for every value of the size symbols."""
        if self.range(r).lo < 0:
            return False
        hi = self.upper(r)
        return hi is not None and self.bounds.bound(sympy.expand(d - 1 - hi)).lo >= 0

    def upper(self, r):
        """A symbolic upper bound of `r`: c*(size - 1) for each term c*v (c >= 0), constants as they are."""
        out = []
        for t in sympy.Add.make_args(r):
            if not t.free_symbols & self.sizes.keys():
                out.append(t)
                continue
            c, v = _coeff_and_var(t, self.sizes)
            if v is None or self.bounds.bound(c).lo < 0:
                return None
            out.append(c * (self.sizes[v] - 1))
        return sympy.Add(*out)

    def minmax(self, fn, args):
        rs = [self.range(a) for a in args]
        keep = []
        for k, (a, r) in enumerate(zip(args, rs)):
            # a is dropped when another argument is never beyond it (of two equal points, the first stays)
            if fn is sympy.Min:
                dominated = any(o.hi <= r.lo and (o.hi < r.lo or r.hi > o.lo or j < k)
                                for j, o in enumerate(rs) if j != k)
            else:
                dominated = any(o.lo >= r.hi and (o.lo > r.hi or r.lo < o.hi or j < k)
                                for j, o in enumerate(rs) if j != k)
            if not dominated:
                keep.append(a)
        return keep[0] if len(keep) == 1 else fn(*keep)

    # ---- c*m*D(x, d*m, M) + c*D(x, d, m) == c*D(x, d, m*M), with D(x, d, None) = FloorDiv(x, d)
    def combine_digits(self, e, modulus: int | None = None):
        """Recombine digits of one base into a wider digit.

        With `modulus`, `e` only matters modulo it, so the outer digit's coefficient
        need only be congruent to c*m: views reduce coefficients modulo the size they
        index (1024*FloorDiv(x, 1024) mod 7 is written 2*FloorDiv(x, 1024)), and this
        lifts them back so that the digits of x recombine into x.
        """
        if not e.is_Add:
            return e
        while True:
            terms = _terms(e)
            digits = []
            for k, (c, t) in enumerate(terms):
                dg = _digit(t)
                if c is not None and dg is not None:
                    digits.append((k, c, dg))
            hit = digit_pair(digits, lambda ca, za, da, cb, zb, db, mb: (  # (za: the exact base)
                db * mb == da and _congruent(ca, cb * mb, modulus) and self.same_base(za, zb, da)))
            if hit is None:
                return e
            ka, kb, c, z, d, m = hit
            merged = (self.floordiv(z, sympy.Integer(d)) if m is None
                      else self.modular(z, sympy.Integer(d), sympy.Integer(m)))
            rest = [t for k, t in enumerate(terms) if k not in (ka, kb)]
            e = _build(rest) + c * merged
            if not e.is_Add:
                return e

    def same_base(self, za, zb, modulus: int) -> bool:
        """za == zb modulo `modulus`: then D(zb, d, m) == D(za, d, m) whenever d*m == modulus."""
        return za == zb or self.mod_form(za, modulus) == self.mod_form(zb, modulus)

    def mod_form(self, z, modulus: int):
        """An expression congruent to `z` modulo `modulus`: coefficients reduced, digits recombined."""
        key = (z, modulus)
        r = self.mod_memo.get(key)
        if r is None:
            terms = [(c % modulus if c is not None else None, t) for c, t in _terms(z)]
            r = self.combine_digits_mod(_build([(c, t) for c, t in terms if c != 0]), modulus)
            self.mod_memo[key] = r
        return r

    def combine_digits_mod(self, e, modulus: int):
        """`combine_digits` of a sum that only matters modulo `modulus` (cheap when nothing can merge)."""
        if not e.is_Add or sum(1 for t in e.args if _digit(t.as_coeff_Mul()[1])) < 2:
            return e
        return self.combine_digits(e, modulus)


def _positive_size(d) -> bool:
    """A divisor the symbolic rules may use: a product of positive integer symbols and integers >= 1."""
    return all(f.is_Integer and int(f) >= 1 or f.is_Symbol and f.is_positive and f.is_integer
               for f in sympy.Mul.make_args(d))


def _split_multiples(x, d) -> tuple[list, list]:
    """x's terms as (the quotients t / d of the terms d divides as polynomials, the other terms)."""
    quot, rest = [], []
    for t in sympy.Add.make_args(x):
        q = t / d
        if q.as_numer_denom()[1] == 1:
            quot.append(q)
        else:
            rest.append(t)
    return quot, rest


def _coeff_and_var(t, sizes):
    """(c, v) for a term c*v with v one loop variable of `sizes` and c free of loop variables, else (None, None)."""
    used = t.free_symbols & sizes.keys()
    if len(used) != 1:
        return None, None
    (v,) = used
    c = t / v
    if c.free_symbols & sizes.keys() or c.as_numer_denom()[1] != 1:
        return None, None
    return c, v


def _congruent(a: int, b: int, modulus: int | None) -> bool:
    return a == b if modulus is None else (a - b) % modulus == 0


def _digit(t):
    """(base, divisor, modulus or None) for FloorDiv / ModularIndexing / a plain base."""
    if isinstance(t, ModularIndexing) and all(_pos_int(a) for a in t.args[1:]):
        return t.args[0], int(t.args[1]), int(t.args[2])
    if isinstance(t, FloorDiv) and _pos_int(t.args[1]):
        return t.args[0], int(t.args[1]), None
    return None


# ---------------------------------------------------------------- loop coalescing


@dataclass(frozen=True)
class LoopMerge:
    """Result of `coalesce_loops`.

    `sizes`/`vars` are the new loop nest (outer to inner); `exprs` the rewritten
    expressions in the new vars; `groups[j]` lists the old dimension positions new
    dimension j covers (outer to inner); `reindex` maps each old var to its value
    in the new vars (0 for dropped size-1 dimensions).
    """

    sizes: tuple
    vars: tuple
    exprs: tuple
    groups: tuple
    reindex: dict


def _nonaffine(e) -> int:
    return sum(1 for s in sympy.preorder_traversal(e)
               if isinstance(s, (FloorDiv, ModularIndexing, CeilDiv, sympy.Min, sympy.Max)))


def memory_order(expr, vars_: Sequence) -> list[int] | None:
    """Positions of `vars_`, outer to inner, by the |stride| the affine index `expr` gives each (ties
    keep their order); None when `expr` is not affine in them. The code generators walk a pointwise
    node's loops in this order of its write, so an output with permuted strides is stored with stride 1."""
    aff = affine_parts(sympy.expand(sympy.sympify(expr)), vars_).linear
    if aff is None:
        return None
    return sorted(range(len(vars_)), key=lambda k: -_stride_size(aff.get(vars_[k], 0)))


_LARGE = 1024  # a symbolic stride is ordered by its value with every size symbol at this (a large size)


def _stride_size(c) -> int:
    """|c| for ordering loops: a symbolic stride (s0*s1, 3*s18) at large sizes. Only loop order depends
    on it, and every order is correct."""
    c = sympy.sympify(c)
    if c.is_Integer:
        return abs(int(c))
    return abs(int(c.xreplace({s: _LARGE for s in c.free_symbols})))


def coalesce_loops(sizes: Sequence, exprs: Sequence, vars_: Sequence, new_prefix: str = "c") -> LoopMerge:
    """Merge adjacent loop dimensions that every expression in `exprs` walks contiguously.

    Dimension k merges with the (already merged) inner group G when each expression
    reads var_k with stride |G| * stride(G) (affine case), or when rewriting both as
    digits of one merged variable makes no expression more complex (general case).
    Size-1 dimensions are dropped; zero-size nests are returned unmerged. With symbolic sizes
    only the affine rule applies (`_symbolic_merge`).
    """
    sizes = [sympify(s) for s in sizes]
    exprs = [sympify(e) for e in exprs]
    vars_ = list(vars_)
    if any(s.is_Integer and int(s) == 0 for s in sizes):
        return _identity_merge(sizes, exprs, vars_, new_prefix)
    if not all(s.is_Integer for s in sizes):
        return _symbolic_merge(sizes, exprs, vars_, new_prefix)
    keep = [k for k, s in enumerate(sizes) if int(s) != 1]
    zero = {vars_[k]: _ZERO for k, s in enumerate(sizes) if int(s) == 1}
    if zero:
        exprs = [e.xreplace(zero) for e in exprs]
    vset = set(vars_)
    parts = [affine_parts(e, vset) for e in exprs]
    affine = [p.linear for p in parts]
    full = dict(zip(vars_, sizes))
    base_cost = [0 if aff is not None else _nonaffine(simplify_index(e, full)) for e, aff in zip(exprs, affine)]
    groups: list[list[int]] = []
    for k in reversed(keep):
        if groups and _can_merge(k, groups[0], sizes, vars_, exprs, parts, base_cost):
            groups[0].insert(0, k)
        else:
            groups.insert(0, [k])
    new_vars = tuple(var(new_prefix, j) for j in range(len(groups)))
    reindex = dict(zero)
    new_sizes = []
    for j, g in enumerate(groups):
        total = 1
        for k in reversed(g):
            inner = total
            total *= int(sizes[k])
            reindex[vars_[k]] = _digit_of(new_vars[j], inner, int(sizes[k]), k == g[0])
        new_sizes.append(total)
    ranges = dict(zip(new_vars, new_sizes))
    new_exprs = []
    for e, aff in zip(exprs, affine):
        if aff is not None:
            new_exprs.append(_affine_rewrite(e, aff, groups, vars_, new_vars))
        else:
            new_exprs.append(simplify_index(e.xreplace(reindex), ranges))
    return LoopMerge(tuple(new_sizes), new_vars, tuple(new_exprs), tuple(tuple(g) for g in groups), reindex)


def _digit_of(v, inner, size, outermost: bool):
    if outermost:
        return FloorDiv(v, inner) if inner != 1 else v
    return ModularIndexing(v, inner, size)


def _affine_rewrite(e, aff, groups, vars_, new_vars):
    """Rewrite an affine expression: each group contributes stride(innermost) * new var."""
    out = [sympy.Integer(c) * t if c is not None else t for c, t in _terms(e) if not (t.is_Symbol and t in aff)]
    for j, g in enumerate(groups):
        c = aff.get(vars_[g[-1]], 0)
        if c:
            out.append(sympy.Integer(c) * new_vars[j])
    return sympy.Add(*out)


def _can_merge(k, group, sizes, vars_, exprs, parts, base_cost) -> bool:
    """Affine indices merge by the one rule of stax.ir.affine.contiguous; an index with
    FloorDiv/ModularIndexing (a reshaped view) may also merge where rewriting both loops as
    digits of one makes it no more complex: GPU indexing digits of one flat index read these
    more cheaply than two loops (stax.sched's iteration group keeps the strict rule)."""
    inner = group[0]
    for e, part, cost in zip(exprs, parts, base_cost):
        if not part.nonlinear:
            if not contiguous((part,), vars_[k], vars_[inner], int(sizes[inner])):
                return False
        elif vars_[k] not in e.free_symbols and not (e.free_symbols & {vars_[j] for j in group}):
            continue  # the expression uses none of these loops: merging does not touch it
        elif _merge_cost(e, [k] + group, sizes, vars_) > cost:
            return False
    return True


def _merge_cost(e, dims, sizes, vars_) -> int:
    c = sympy.Symbol("_stax_merge", integer=True, nonnegative=True)
    sub, total = {}, 1
    for k in reversed(dims):
        sub[vars_[k]] = _digit_of(c, total, int(sizes[k]), k == dims[0])
        total *= int(sizes[k])
    ranges = {vars_[k]: sizes[k] for k in range(len(vars_)) if k not in dims}
    ranges[c] = total
    return _nonaffine(simplify_index(e.xreplace(sub), ranges))


def _symbolic_merge(sizes, exprs, vars_, prefix) -> LoopMerge:
    """coalesce_loops over symbolic sizes: adjacent loops merge where every index is affine in them and
    walks them contiguously (stax.ir.affine.contiguous: strides compared as expressions, valid at every
    size); static size-1 loops drop. A non-affine index (a view's FloorDiv) keeps the nest as it is: the
    digit rewrite of the static rule weighs costs at numbers."""
    zero = {v: _ZERO for v, s in zip(vars_, sizes) if s == 1}
    exprs = [e.xreplace(zero) for e in exprs] if zero else exprs
    vset = set(vars_)
    parts = [affine_parts(e, vset) for e in exprs]
    if any(p.nonlinear for p in parts):
        return _identity_merge(sizes, exprs, vars_, prefix)
    groups: list[list[int]] = []
    for k in reversed([k for k, s in enumerate(sizes) if s != 1]):
        if groups and contiguous(parts, vars_[k], vars_[groups[0][0]], sizes[groups[0][0]]):
            groups[0].insert(0, k)
        else:
            groups.insert(0, [k])
    new_vars = tuple(var(prefix, j) for j in range(len(groups)))
    reindex, new_sizes = dict(zero), []
    for j, g in enumerate(groups):
        total = sympy.Integer(1)
        for k in reversed(g):
            reindex[vars_[k]] = _digit_of(new_vars[j], total, sizes[k], k == g[0])
            total *= sizes[k]
        new_sizes.append(total)
    new_exprs = tuple(
        sympy.Add(*p.rest_terms, *(sympify(p.stride(vars_[g[-1]])) * new_vars[j] for j, g in enumerate(groups)))
        for p in parts
    )
    return LoopMerge(tuple(new_sizes), new_vars, new_exprs, tuple(tuple(g) for g in groups), reindex)


def _identity_merge(sizes, exprs, vars_, prefix) -> LoopMerge:
    new_vars = tuple(var(prefix, j) for j in range(len(sizes)))
    reindex = dict(zip(vars_, new_vars))
    return LoopMerge(
        tuple(sizes), new_vars, tuple(e.xreplace(reindex) for e in exprs), tuple((k,) for k in range(len(sizes))),
        reindex,
    )
