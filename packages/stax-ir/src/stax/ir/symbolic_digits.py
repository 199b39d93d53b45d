"""Digits of one flat index with symbolic divisors recombine: s1*FloorDiv(x, s1) + ModularIndexing(x, 1, s1) == x.

Loops merged over symbolic sizes (`coalesce_loops`) give each old loop variable back as a digit of the
merged one (i0 = x // s1, i1 = x % s1); an access that walked them contiguously (s1*i0 + i1) must then
read the merged index itself, not its digits recombined at run time. The rule is the static one of
`simplify._Simplifier.combine_digits`, with divisors, moduli and coefficients compared as expressions:
c*m*D(z, d*m, M) + c*D(z, d, m) == c*D(z, d, m*M), where D(z, d, None) is FloorDiv(z, d) and
D(z, d, m) is ModularIndexing(z, d, m); it holds for every positive value of the size symbols.
"""

from __future__ import annotations

import sympy

from .index import FloorDiv, ModularIndexing
from .sizevars import SizeVar


def symbolic_digit(t) -> tuple | None:
    """(coefficient, base, divisor, modulus or None) of a term `c * digit` whose coefficient is made of
    integers and size symbols, or None."""
    c, digit = sympy.Integer(1), None
    for f in sympy.Mul.make_args(t):
        if digit is None and isinstance(f, (FloorDiv, ModularIndexing)):
            digit = f
        else:
            c = c * f
    if digit is None or not all(isinstance(s, SizeVar) for s in c.free_symbols):
        return None
    if isinstance(digit, FloorDiv):
        return c, digit.args[0], digit.args[1], None
    return c, digit.args[0], digit.args[1], digit.args[2]


def has_size_symbol(e) -> bool:
    return any(isinstance(s, SizeVar) for s in e.free_symbols)


def _equal(a, b) -> bool:
    return a == b or sympy.expand(a - b) == 0


def digit_pair(digits, fits) -> tuple | None:
    """The first pair of `digits`, (position, coefficient, (base, divisor, modulus or None)) triples, that
    recombine: an outer digit a = c*m*D(z, d*m, M) and an inner b = c*D(z, d, m) with `fits(ca, za, da,
    cb, zb, db, mb)` (how coefficients, bases and divisors are compared: integers, congruences, size
    expressions). Returns (position a, position b, c, z, d, merged modulus m*M or None), the search that
    `simplify` (static) and `combine_symbolic_digits` share."""
    for ka, ca, (za, da, ma) in digits:
        for kb, cb, (zb, db, mb) in digits:
            if ka != kb and mb is not None and fits(ca, za, da, cb, zb, db, mb):
                return ka, kb, cb, za, db, None if ma is None else ma * mb
    return None


def _symbolic_fits(ca, za, da, cb, zb, db, mb) -> bool:
    return za == zb and _equal(db * mb, da) and _equal(ca, cb * mb)


def combine_symbolic_digits(e):
    """`e` (a sum) with every pair of adjacent digits of one base recombined, until none is left."""
    while e.is_Add:
        terms = list(e.args)
        digits = [(k, d[0], d[1:]) for k, d in ((k, symbolic_digit(t)) for k, t in enumerate(terms))
                  if d is not None]
        hit = digit_pair(digits, _symbolic_fits)
        if hit is None:
            return e
        ka, kb, c, z, d, m = hit
        merged = (z if d == 1 else FloorDiv(z, d)) if m is None else ModularIndexing(z, d, m)
        e = sympy.Add(*(t for k, t in enumerate(terms) if k not in (ka, kb))) + c * merged
    return e
