"""Index-set splitting: where along a loop a body's branches change, and the body on one piece.

A concatenation selects its input by `x < 256`, a constant pad by `1 <= x < 57`, and both clamp their
load indices with Min / Max so that the branch not taken still reads in bounds. Over the whole loop
every lane evaluates every branch (gathers and selects); split at the points where a comparison or a
clamp changes, each piece decides them once (`specialize`): one input, read contiguously.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import sympy

from .build import const
from .expr import Constant, IndexValue, Load, Op, Value, map_indices, walk
from .simplify import simplify_index
from .value_ranges import bound_values

# comparison -> (sign of (a - b), m): the op holds where sign * (a - b) < m (integers: a <= b is a - b < 1)
_CMP = {"lt": (1, 0), "le": (1, 1), "gt": (-1, 0), "ge": (-1, 1)}
_INT_OPS = {"add": 1, "sub": -1}
_ABSORB = {"logical_and": False, "logical_or": True}  # the constant that decides the op


def _as_index(v: Value):
    """The integer `v` computes as an index expression (index values, integer constants, their sums), or None."""
    if isinstance(v, IndexValue):
        return v.index
    if isinstance(v, Constant) and v.dtype.is_integer:
        return sympy.Integer(int(v.value))
    if isinstance(v, Op) and v.dtype.is_integer:
        if v.name == "to_dtype":
            return _as_index(v.args[0]) if v.args[0].dtype.is_integer else None
        if v.name in _INT_OPS:
            a, b = (_as_index(x) for x in v.args)
            return None if a is None or b is None else a + _INT_OPS[v.name] * b
        if v.name == "neg":
            a = _as_index(v.args[0])
            return None if a is None else -a
    return None


def _switch(d, x, m: int) -> int | None:
    """The first integer x at which `d < m` changes truth, for d = c*x + k (integers, c != 0); None if
    d is not of that form in x alone."""
    d = sympy.expand(d)
    if d.free_symbols != {x}:
        return None
    poly = d.as_poly(x)
    if poly is None or poly.degree() != 1:
        return None
    c, k = poly.all_coeffs()
    if not (c.is_Integer and k.is_Integer):
        return None
    r = sympy.Rational(m - int(k), int(c))  # d < m  <=>  x < r (c > 0)  or  x > r (c < 0)
    return int(math.ceil(r)) if c > 0 else int(math.floor(r)) + 1


def _branches(e) -> list:
    """The expressions a Min / Max may take (its arguments, recursively)."""
    if isinstance(e, sympy.Min | sympy.Max):
        return [b for a in e.args for b in _branches(a)]
    return [e]


def split_points(root: Value, x: sympy.Symbol, lo: int, hi: int) -> tuple[int, ...]:
    """Points p, lo < p < hi, such that on each piece [p_k, p_k+1) of the loop `x` every integer comparison
    of `root` that depends on x alone, and every Min / Max of its indices, takes one branch.

    A clamp's two branches agree where they meet, so its split may fall one further: a point already
    taken there, or the loop's own end, serves (a pad splits at 1 and 57, not also at 56)."""
    hard: set[int] = set()
    soft: list[tuple[int, int]] = []
    exprs = []
    for n in walk(root):
        if isinstance(n, Op) and n.name in _CMP and all(a.dtype.is_integer for a in n.args):
            a, b = (_as_index(v) for v in n.args)
            if a is not None and b is not None and (a - b).has(x):
                sign, m = _CMP[n.name]
                t = _switch(sign * (a - b), x, m)
                if t is not None:
                    hard.add(t)
        elif isinstance(n, Op) and n.name in ("eq", "ne") and all(a.dtype.is_integer for a in n.args):
            a, b = (_as_index(v) for v in n.args)
            if a is not None and b is not None and (a - b).has(x):
                hard.update(t for t in (_switch(a - b, x, 0), _switch(a - b, x, 1)) if t is not None)
        if isinstance(n, Load | IndexValue):
            exprs.append(n.index)
    for e in exprs:
        for mm in e.atoms(sympy.Min, sympy.Max):
            bs = _branches(mm)
            for i, a in enumerate(bs):
                for b in bs[i + 1:]:
                    ts = [t for t in (_switch(a - b, x, 0), _switch(a - b, x, 1)) if t is not None]
                    if ts:
                        soft.append((min(ts), max(ts)))
    points = {t for t in hard if lo < t < hi}
    for a, b in sorted(soft):  # any point in [a, b] will do: none inside the loop, or one already taken
        if lo < a and b < hi and not any(a <= p <= b for p in points):
            points.add(a)
    return tuple(sorted(points))


def specialize(root: Value, var_ranges: Mapping) -> Value:
    """`root` on the loop ranges `var_ranges` (sizes or ValueRanges): indices simplified there, every bool
    the ranges decide made a constant, `where` on a constant condition replaced by its branch, a load's
    mask that holds dropped (one that never holds: the load's `other`). Equal to `root` on those ranges."""
    mapped = map_indices(root, lambda e: simplify_index(e, var_ranges))
    ranges = bound_values(mapped, var_ranges)
    memo: dict[int, Value] = {}
    for n in walk(mapped):
        r = ranges[id(n)]
        new: Value
        if n.dtype.is_bool and r.is_point and not isinstance(n, Constant):
            new = const(bool(r.lo), n.dtype)
        elif isinstance(n, Op):
            args = tuple(memo[id(a)] for a in n.args)
            fixed = [a for a in args if isinstance(a, Constant)]
            if n.name == "where" and isinstance(args[0], Constant):
                new = args[1] if args[0].value else args[2]
            elif n.name in _ABSORB and fixed:  # and(a, True) = a, and(a, False) = False; or dually
                decided = [a for a in fixed if bool(a.value) == _ABSORB[n.name]]
                rest = [a for a in args if not isinstance(a, Constant)]
                new = decided[0] if decided or not rest else rest[0]
            else:
                new = n if all(a is b for a, b in zip(args, n.args)) else Op(n.name, args, n.dtype)
        elif isinstance(n, Load) and (n.mask is not None or n.indirect):
            mask = memo[id(n.mask)] if n.mask is not None else None
            ind = tuple((s, memo[id(v)], b) for s, v, b in n.indirect)
            if isinstance(mask, Constant) and not mask.value:
                new = const(n.other, n.dtype)
            else:
                new = Load(n.buffer, n.index, n.dtype, ind, None if isinstance(mask, Constant) else mask, n.other)
        else:
            new = n
        memo[id(n)] = new
    return memo[id(mapped)]
