"""Index simplification (§6.8) for the index maps that views produce.

Reshapes are written as FloorDiv / ModularIndexing of a flat index; these rules
fold them back to plain strides whenever the loop ranges allow, so a view of a
contiguous buffer reads `128*i0 + i1`, not `128*((128*i0+i1)//128) + ...`:

  R1  FloorDiv(c*y + r, d)        -> (c/d)*y + FloorDiv(r, d)        when d | c
  R2  ModularIndexing(c*y + r, d, m) -> ModularIndexing(r, d, m)     when d*m | c
  R3  FloorDiv(x, d) -> 0, ModularIndexing(x, d, m) -> FloorDiv(x, d) when x's range allows
  R4  c*ModularIndexing(x, d, m) + c*m*FloorDiv(x, d*m)          -> c*FloorDiv(x, d)
      c*ModularIndexing(x, d, m) + c*m*ModularIndexing(x, d*m, n) -> c*ModularIndexing(x, d, m*n)
  R5  ModularIndexing(FloorDiv(x, a), b, m) -> ModularIndexing(x, a*b, m)

Ranges map each loop symbol to its extent; unknown symbols make a rule not fire.
(Could move into stax-ir with the rest of §6.8.)
"""

from __future__ import annotations

import sympy
from stax.ir.index import FloorDiv, ModularIndexing, sympify


def bounds(e, ranges: dict) -> tuple[int, int] | None:
    """Inclusive integer bounds of `e` over the loop ranges, or None if unknown."""
    if e.is_Integer:
        return int(e), int(e)
    if e.is_Symbol:
        n = ranges.get(e)
        return (0, max(int(n) - 1, 0)) if n is not None else None
    if e.is_Add:
        lo = hi = 0
        for a in e.args:
            b = bounds(a, ranges)
            if b is None:
                return None
            lo, hi = lo + b[0], hi + b[1]
        return lo, hi
    if e.is_Mul:
        c, rest = e.as_coeff_Mul()
        if c.is_Integer and rest is not e:
            b = bounds(rest, ranges)
            if b is None:
                return None
            c = int(c)
            return (c * b[0], c * b[1]) if c >= 0 else (c * b[1], c * b[0])
        return None
    if isinstance(e, FloorDiv):
        b = bounds(e.args[0], ranges)
        d = e.args[1]
        if b is None or not d.is_Integer or int(d) <= 0:
            return None
        return b[0] // int(d), b[1] // int(d)
    if isinstance(e, ModularIndexing):
        m = e.args[2]
        if m.is_Integer and int(m) > 0:
            return 0, int(m) - 1
        return None
    return None


def _split_multiple(x, k: int):
    """x = k*y + r: the terms of x whose coefficient is a multiple of k, and the rest."""
    mult, rest = sympy.Integer(0), sympy.Integer(0)
    for t in sympy.Add.make_args(sympy.expand(x)):
        c, _ = t.as_coeff_Mul()
        if c.is_Integer and int(c) % k == 0:
            mult += t
        else:
            rest += t
    return mult, rest


def _floordiv(x, d, ranges):
    if not d.is_Integer or int(d) <= 0:
        return FloorDiv(x, d)
    k = int(d)
    mult, rest = _split_multiple(x, k)  # R1
    if mult != 0:
        return sympy.expand(mult / k) + _floordiv(rest, d, ranges)
    b = bounds(x, ranges)
    if b is not None and b[0] >= 0 and b[1] < k:  # R3
        return sympy.Integer(0)
    if isinstance(x, FloorDiv) and x.args[1].is_Integer:
        return _floordiv(x.args[0], x.args[1] * d, ranges)
    return FloorDiv(x, d)


def _modular(x, d, m, ranges):
    if not (d.is_Integer and m.is_Integer) or int(d) <= 0 or int(m) <= 0:
        return ModularIndexing(x, d, m)
    if isinstance(x, FloorDiv) and x.args[1].is_Integer:  # R5
        return _modular(x.args[0], x.args[1] * d, m, ranges)
    mult, rest = _split_multiple(x, int(d) * int(m))  # R2
    if mult != 0:
        return _modular(rest, d, m, ranges)
    b = bounds(x, ranges)
    if b is not None and b[0] >= 0 and b[1] // int(d) < int(m):  # R3
        return _floordiv(x, d, ranges)
    return ModularIndexing(x, d, m)


def _rewrite(e, ranges):
    if e.is_Atom:
        return e
    args = [_rewrite(a, ranges) for a in e.args]
    if isinstance(e, FloorDiv):
        return _floordiv(args[0], args[1], ranges)
    if isinstance(e, ModularIndexing):
        return _modular(args[0], args[1], args[2], ranges)
    return e.func(*args)


def _combine_pairs(e):
    """R4 on the terms of a sum; returns the rewritten sum or None if nothing fired."""
    terms = []
    for t in sympy.Add.make_args(sympy.expand(e)):
        c, atom = t.as_coeff_Mul()
        terms.append((c, atom))
    for i, (c, a) in enumerate(terms):
        if not isinstance(a, ModularIndexing):
            continue
        x, d, m = a.args
        for j, (c2, b) in enumerate(terms):
            if j == i or c2 != c * m:
                continue
            new = None
            if isinstance(b, FloorDiv) and b.args[0] == x and b.args[1] == d * m:
                new = c * FloorDiv(x, d)
            elif isinstance(b, ModularIndexing) and b.args[0] == x and b.args[1] == d * m:
                new = c * ModularIndexing(x, d, m * b.args[2])
            if new is not None:
                rest = [cc * aa for k, (cc, aa) in enumerate(terms) if k not in (i, j)]
                return sympy.Add(new, *rest)
    return None


def simplify_index(e, ranges: dict):
    """Apply R1-R5 to a fixed point."""
    e = sympify(e)
    if not e.has(FloorDiv, ModularIndexing):
        return e
    for _ in range(64):
        new = _rewrite(sympy.expand(e), ranges)
        combined = _combine_pairs(new)
        if combined is not None:
            new = combined
        new = sympy.expand(new)
        if new == e:
            break
        e = new
    return e
