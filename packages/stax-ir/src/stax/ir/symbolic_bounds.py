"""Bounds checks against a symbolic bound: `0 <= v < s` where `s` is a size symbol (or an expression of them).

Interval ranges (value_ranges.py) lose the link between a loop variable and its symbolic extent:
with `i0` over `0..s0-1` and `s0` in [2, 512], `i0` is [0, 511] and `s0` is [2, 512], so `i0 < s0` is
not provable from the two intervals. A symbolic-shape graph indexes a buffer of `s0` rows by such a
value (a causal mask's arange, a wrapped negative index): without a proof its check stays, and on the
GPU an integer gather's check is read synchronously after each call. Here the value is rewritten as a
sympy expression where it is one (index values, integer constants, exact casts, + - *, wheres decided by
their condition's range), and `bound - 1 - value` is bounded with each symbolic-extent loop variable
reflected (`v -> size - 1 - v`, a bijection of its range) so the size terms cancel before the interval
evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping

import sympy

from .expr import Constant, IndexValue, Op, Value, walk
from .index import sympify
from .value_ranges import IndexBounds, ValueRange, bound_values, dtype_range, var_range_map

_ARITH = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b}


def value_expr(root: Value, ranges: dict) -> sympy.Expr | None:
    """`root` (an integer value) as a sympy expression of loop variables and sizes, or None where it
    is not one (a load, a float, a cast that may wrap). `ranges`: bound_values' ranges by node id."""
    out: dict[int, sympy.Expr | None] = {}
    for n in walk(root):
        out[id(n)] = _expr(n, out, ranges)
    return out[id(root)]


def _expr(n: Value, out: dict, ranges: dict):
    if isinstance(n, Constant):
        return sympy.Integer(int(n.value)) if n.dtype.is_integer and not isinstance(n.value, float) else None
    if not n.dtype.is_integer or ranges[id(n)] == dtype_range(n.dtype):
        return None  # (a range that may leave the dtype is clipped to all of it: the value may wrap)
    if isinstance(n, IndexValue):
        return n.index
    if not isinstance(n, Op):
        return None
    args = [out[id(a)] for a in n.args]
    if n.name in _ARITH and None not in args:
        return _ARITH[n.name](*args)
    if n.name == "neg" and args[0] is not None:
        return -args[0]
    if n.name == "to_dtype" and n.args[0].dtype.is_integer:  # exact where the source's range fits the dtype
        r, full = ranges[id(n.args[0])], dtype_range(n.dtype)
        return args[0] if r.within(full.lo, full.hi) else None
    if n.name == "where":  # a condition decided by its range picks one branch
        c = ranges[id(n.args[0])]
        if c == ValueRange.point(1):
            return args[1]
        if c == ValueRange.point(0):
            return args[2]
    return None


def in_bounds(index: Value, bound, var_ranges: Mapping | None = None) -> bool:
    """True when `0 <= index < bound` provably holds at every point (`bound` may be symbolic). Loop
    variables are given as {symbol: size}, size symbols as {symbol: ValueRange} (var_range_map's form)."""
    bound = sympify(bound)
    values = bound_values(index, var_ranges)
    r = values[id(index)]
    if r.lo >= 0 and bound.is_Integer and r.hi < int(bound):
        return True  # (the intervals decide: the common, static case)
    e = value_expr(index, values)
    if e is None:
        return False
    known = IndexBounds(var_range_map(var_ranges))
    extents = {s: sympify(size) for s, size in (var_ranges or {}).items() if not isinstance(size, ValueRange)}
    reflect = {v: size - 1 - v for v, size in extents.items() if not size.is_Integer}
    return all(_nonnegative(d, reflect, known) for d in (e, bound - 1 - e))


def _nonnegative(d, reflect: dict, known: IndexBounds) -> bool:
    """d >= 0 over the ranges: as it is, or with the symbolic-extent loop variables reflected."""
    return any(known.bound(sympy.expand(d.xreplace(subs))).lo >= 0 for subs in ({}, reflect)[:1 + bool(reflect)])


__all__ = ["in_bounds", "value_expr"]
