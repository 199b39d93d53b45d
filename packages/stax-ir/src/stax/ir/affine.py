"""Affine index math in one place: an index's integer strides over loop variables, and when two
adjacent loops walk every index as one contiguous loop (loop coalescing).

Every package reads strides out of sympy indices through `affine_parts` (stax.sched's iteration
groups, stax-cpu's loop merging and vector accesses, stax-gpu's contiguous dimension, the views
and `coalesce_loops` here) and merges loops by `contiguous` / `contiguous_runs`, so a symbolic
size or a new index form needs one implementation, not five.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import sympy

from .index import sympify


@dataclass(frozen=True)
class AffineParts:
    """An index split over some loop variables.

    `coeffs`: {var: stride} from the terms `c*var`, c an integer or, with symbolic shapes, an
    expression in size symbols only (`s1*i0`: stride s1); `nonlinear`: the variables that also
    occur in any other term (FloorDiv / ModularIndexing, products, non-integer coefficients);
    `rest_terms`: the terms that use none of the variables (constants, other symbols such as
    indirect indices, size symbols).
    """

    coeffs: Mapping
    nonlinear: frozenset
    rest_terms: tuple

    @property
    def linear(self) -> dict | None:
        """`coeffs` when every term that uses the variables is `c*var`, else None."""
        return None if self.nonlinear else dict(self.coeffs)

    def stride(self, v) -> int | sympy.Expr:
        """The coefficient of the plain term `c*v` (0 when there is none): an int, or an expression
        in size symbols for a symbolic shape."""
        return self.coeffs.get(v, 0)

    @property
    def rest(self) -> sympy.Expr:
        """The sum of the terms without the variables (an integer for a plain strided index)."""
        return sympy.Add(*self.rest_terms)


def affine_parts(expr, vars_: Iterable) -> AffineParts:
    """Split `expr` (as written: sympy's canonical sum, not expanded) over the symbols `vars_`."""
    vs = vars_ if isinstance(vars_, (set, frozenset)) else set(vars_)
    coeffs: dict = {}
    nonlinear: set = set()
    rest = []
    for term in sympy.Add.make_args(sympify(expr)):
        c, t = term.as_coeff_Mul()
        if t.is_Symbol and c.is_Integer and t in vs:
            coeffs[t] = coeffs.get(t, 0) + int(c)
            continue
        used = term.free_symbols & vs
        if not used:
            rest.append(term)
            continue
        sym = _size_coefficient(term, used) if len(used) == 1 else None
        if sym is None:
            nonlinear |= used
        else:
            (v,) = used
            coeffs[v] = coeffs.get(v, 0) + sym
    return AffineParts(coeffs, frozenset(nonlinear), tuple(rest))


def _size_coefficient(term, used):
    """c when `term` is c*v for the one loop variable v in `used` and c an expression in size symbols
    (positive integer symbols: stax.ir.sizevars.SizeVar), else None."""
    if not term.is_Mul:
        return None
    (v,) = used
    rest = [a for a in term.args if a is not v]
    if len(rest) != len(term.args) - 1 or not rest:
        return None
    c = sympy.Mul(*rest)
    if not all(s.is_positive and s.is_integer for s in c.free_symbols):
        return None
    return c


def affine_coefficients(index, vars_: Sequence) -> tuple[dict, int] | None:
    """({var: integer stride}, integer offset) when `index` is affine in `vars_` with an integer
    offset, else None (symbols other than `vars_` make it non-affine for this purpose)."""
    p = affine_parts(index, vars_)
    if p.nonlinear or not all(t.is_Integer for t in p.rest_terms):
        return None
    return dict(p.coeffs), sum(int(t) for t in p.rest_terms)


def first_step(index, v, vars_: Iterable):
    """How far `index` moves when `v` goes from 0 to 1 with every other variable of `vars_` at 0:
    the stride of the innermost digit `v` feeds. Unlike `affine_parts(...).stride(v)` it sees
    through digits: `802816*(r // 12544) + r % 12544` steps by 1 in r (what a warp's neighbouring
    lanes read), where the affine stride is undefined. An expression with symbolic sizes."""
    e = sympify(index)
    parts = affine_parts(e, vars_)
    if v not in parts.nonlinear:  # a plain c*v term (or none): its coefficient, without substituting
        return parts.stride(v)
    at = {u: 0 for u in vars_}
    return sympy.expand(e.xreplace({**at, v: 1}) - e.xreplace(at))


def contiguous(parts: Iterable[AffineParts], outer, inner, inner_size) -> bool:
    """True when loops `outer` (around) and `inner` (of `inner_size` iterations) are one loop of
    outer * inner iterations for every index: each is linear in both, stride(outer) == inner_size *
    stride(inner) (an index that uses neither, 0 == 0, does not object)."""
    return all(
        outer not in p.nonlinear and inner not in p.nonlinear and _same(p.stride(outer), inner_size * p.stride(inner))
        for p in parts
    )


def _same(a, b) -> bool:
    """a == b for every value of the size symbols (ints compare directly)."""
    if a == b:
        return True
    if isinstance(a, int | sympy.Integer) and isinstance(b, int | sympy.Integer):
        return False
    return sympy.expand(a - b) == 0


def contiguous_runs(vars_: Sequence, sizes: Sequence, parts: Sequence[AffineParts]) -> list[list[int]]:
    """Positions of `vars_` (outer to inner) grouped into runs of adjacent loops that `contiguous`
    lets merge pairwise: each run is one coalesced loop."""
    runs: list[list[int]] = []
    for k in range(len(vars_)):
        if runs and contiguous(parts, vars_[runs[-1][-1]], vars_[k], sizes[k]):
            runs[-1].append(k)
        else:
            runs.append([k])
    return runs
