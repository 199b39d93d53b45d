"""Symbolic sizes (dynamic shapes) in stax-gpu: what a size symbol is here, and what is not supported.

A graph's size symbols (stax.ir `SizeVar`s, with ranges and hints in `Graph.size_vars`) become int
arguments of the kernels that use them and of `call(args, sizes)`; element counts, grids and
allocations are evaluated from them at each call. Decisions that need numbers (block sizes, how many
configs to race) take the hints: every such decision is correct at any size (masks on every tail).
Proofs (32-bit indexing) take the ranges. Anything that would need the sizes to be numbers raises
`SymbolicUnsupported`, which the frontend turns into a counted, logged eager run of the graph.
"""

from __future__ import annotations

import sympy
from stax.ir.index import sympify
from stax.ir.sizevars import size_symbols
from stax.ir.value_ranges import bound_index

CAUSE = "symbolic shapes on stax.gpu"


class SymbolicUnsupported(NotImplementedError):
    """A symbolic-size graph stax-gpu does not compile yet; `cause` names the reason (one warning each)."""

    def __init__(self, what: str):
        super().__init__(f"stax-gpu: {what} with symbolic sizes is not supported yet")
        self.cause = f"{CAUSE}: {what}"


def is_static(x) -> bool:
    return isinstance(x, int) or bool(sympify(x).is_Integer)


def size(x):
    """A size as an int when static, else its sympy expression (sizes are never mixed up otherwise)."""
    if isinstance(x, int):
        return x
    e = sympify(x)
    return int(e) if e.is_Integer else e


def hint(x, hints: dict) -> int:
    """The value of size `x` at the graph's size hints (estimates only: block sizes, race or not)."""
    if isinstance(x, int):
        return x
    e = sympify(x)
    return int(e) if e.is_Integer else int(e.xreplace(hints))


def size_range(x, ranges: dict):
    """The ValueRange size `x` takes over the size symbols' ranges (its ends may be infinite)."""
    return bound_index(sympy.expand(sympify(x)), ranges)


def upper_bound(x, ranges: dict) -> float:
    """The largest value size `x` takes over the size symbols' ranges (inf when unbounded)."""
    if isinstance(x, int):
        return x
    return size_range(x, ranges).hi


def symbols_of(exprs) -> frozenset:
    """The size symbols some sizes / indices use."""
    out = set()
    for e in exprs:
        if not isinstance(e, int):
            out |= size_symbols(e)
    return frozenset(out)
