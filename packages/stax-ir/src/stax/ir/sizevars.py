"""Symbolic sizes (dynamic shapes): size symbols, their range table, and the questions asked of them.

A graph with symbolic shapes names its sizes with `SizeVar` symbols (positive integers, a class of
their own so that no loop variable or indirect-index symbol is ever mistaken for one). `SizeVars`
is the one table symbol -> (lo, hi, hint) a graph carries: the ranges make proofs (32-bit indexing,
dropped checks, simplification), the hints only estimate (fusion score, peak memory). Everything
that must never be wrong asks `provably_equal` / `provably_nonnegative`, never the hints.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass

import sympy

from .index import sympify
from .value_ranges import ValueRange, bound_index

INF = math.inf


class SizeVar(sympy.Symbol):
    """A symbolic size (s0, s1, ...): a positive integer fixed per call, known to lie in its range."""

    def __new__(cls, name: str):
        return super().__new__(cls, name, integer=True, positive=True)

    def __getnewargs_ex__(self):  # pickling: the class fixes the assumptions
        return (self.name,), {}


@functools.cache
def size_var(name: str) -> SizeVar:
    return SizeVar(name)


def size_symbols(expr) -> frozenset:
    """The size symbols an expression uses."""
    return frozenset(s for s in sympify(expr).free_symbols if isinstance(s, SizeVar))


def is_static(expr) -> bool:
    return sympify(expr).is_Integer


@dataclass(frozen=True)
class SymbolRange:
    """One row of the table: lo <= symbol <= hi (hi may be inf); `hint` is a typical value (lo <= hint <= hi)."""

    symbol: SizeVar
    lo: int
    hi: int | float
    hint: int

    def __post_init__(self):
        if not isinstance(self.symbol, SizeVar):
            raise TypeError(f"size symbol {self.symbol!r} must be a stax.ir.sizevars.SizeVar")
        if not (1 <= self.lo <= self.hint <= self.hi):
            raise ValueError(
                f"size {self.symbol}: need 1 <= lo <= hint <= hi, got [{self.lo}, {self.hi}] hint {self.hint}"
            )

    def __str__(self) -> str:
        return f"{self.symbol} in [{self.lo}, {self.hi}] hint {self.hint}"


@dataclass(frozen=True)
class SizeVars:
    """The symbol-range table of a graph (empty for a static graph); rows sorted by name."""

    rows: tuple = ()

    def __post_init__(self):
        rows = tuple(sorted(self.rows, key=lambda r: r.symbol.name))
        names = [r.symbol.name for r in rows]
        if len(set(names)) != len(names):
            raise ValueError(f"size symbol listed twice: {names}")
        object.__setattr__(self, "rows", rows)

    @staticmethod
    def of(**ranges) -> SizeVars:
        """SizeVars.of(s0=(2, 1024, 64), ...): name -> (lo, hi, hint)."""
        return SizeVars(tuple(SymbolRange(size_var(n), *r) for n, r in ranges.items()))

    def __bool__(self) -> bool:
        return bool(self.rows)

    @functools.cached_property
    def symbols(self) -> frozenset:
        return frozenset(r.symbol for r in self.rows)

    @functools.cached_property
    def value_ranges(self) -> dict:
        """{symbol: ValueRange(lo, hi)}: merge into a `var_ranges` mapping to prove things with the ranges."""
        return {r.symbol: ValueRange(r.lo, r.hi) for r in self.rows}

    @functools.cached_property
    def hints(self) -> dict:
        return {r.symbol: sympy.Integer(r.hint) for r in self.rows}

    def hint(self, expr) -> int:
        """The integer value of `expr` at the hints (an estimate: scores, peak memory)."""
        e = sympify(expr)
        if e.is_Integer:
            return int(e)
        v = e.xreplace(self.hints)
        if not v.is_Integer:
            raise ValueError(f"size {expr} uses symbols outside the table {sorted(s.name for s in self.symbols)}")
        return int(v)

    def nbytes(self, layout) -> int:
        """A layout's storage bytes; with symbolic sizes at the hints (an estimate: peaks, reports)."""
        if not self.rows:
            return layout.nbytes()
        return self.hint(layout.storage_size_expr()) * layout.dtype.itemsize

    def bind(self, binding: Mapping) -> dict:
        """{symbol: Integer} from {symbol or name: int}, checked complete and inside the ranges."""
        by_name = {(k.name if isinstance(k, sympy.Symbol) else str(k)): v for k, v in binding.items()}
        out = {}
        for r in self.rows:
            if r.symbol.name not in by_name:
                raise KeyError(f"no value given for size {r.symbol}")
            v = int(by_name.pop(r.symbol.name))
            if not r.lo <= v <= r.hi:
                raise ValueError(f"size {r.symbol} = {v} is outside its range [{r.lo}, {r.hi}]")
            out[r.symbol] = sympy.Integer(v)
        if by_name:
            raise KeyError(f"values given for unknown sizes {sorted(by_name)}")
        return out

    def __str__(self) -> str:
        return ", ".join(map(str, self.rows))


def provably_nonnegative(expr, ranges: Mapping | None = None) -> bool:
    """expr >= 0 for every value of its symbols in `ranges` (size symbols default to >= 1). Intervals
    lose the relation between `s` and `s // 2` in `s - s // 2`; a second try bounds each integer
    quotient term by its rational relaxation first (`_relaxed_below`)."""
    e = sympify(expr)
    if e.is_Integer:
        return int(e) >= 0
    e = sympy.expand(e)
    if bound_index(e, ranges).lo >= 0:
        return True
    low = _relaxed_below(e)
    return low is not None and bound_index(sympy.expand(low), ranges).lo >= 0


def _relaxed_below(e):
    """An expression <= `e` everywhere: each term c*FloorDiv(a, k) / c*CeilDiv(a, k) (c, k integers, k > 0)
    replaced by the end of floor(a/k) in [(a-k+1)/k, a/k] / ceil(a/k) in [a/k, (a+k-1)/k] that bounds the
    term from below; None when there is no such term."""
    from .index import CeilDiv, FloorDiv

    out, changed = [], False
    for t in sympy.Add.make_args(e):
        c, q = t.as_coeff_Mul()
        if isinstance(q, (FloorDiv, CeilDiv)) and c.is_Integer and q.args[1].is_Integer and int(q.args[1]) > 0:
            a, k = q.args
            lo, hi = ((a - k + 1) / k, a / k) if isinstance(q, FloorDiv) else (a / k, (a + k - 1) / k)
            out.append(c * (lo if c > 0 else hi))
            changed = True
        else:
            out.append(t)
    return sympy.Add(*out) if changed else None


def provably_equal(a, b) -> bool:
    """a == b for every value of the symbols: equal after expansion (sizes, strides, element counts)."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    a, b = sympify(a), sympify(b)
    if a.is_Integer and b.is_Integer:
        return a == b
    return a == b or sympy.expand(a - b) == 0


def canonical_size(expr):
    """One spelling per value: an int for a static size, else the expanded expression (a dict key)."""
    e = sympify(expr)
    return int(e) if e.is_Integer else sympy.expand(e)


NO_SIZE_VARS = SizeVars()  # the table of a static graph
