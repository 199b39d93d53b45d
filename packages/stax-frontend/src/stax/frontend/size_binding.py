"""Binding a symbolic-shape graph's size symbols at each call, and checking what the code assumes.

`SizeBinding` (plain data, part of the CallSpec) says where each size symbol is read from — a SymInt
argument that is exactly it, else the first input dim that is exactly it — and the range the compiled
code was built for. `BoundSizes` is its runtime form: it reads the symbols from the call's arguments,
checks them (the ranges, SymInt arguments that are expressions such as `s0*s1`), and evaluates the
expressions the wrapper needs (input layouts, output views, returned sizes) with compiled Python.
Dynamo's guards already hold these; the checks make a broken assumption a clear error, never a wrong answer.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy
from stax.ir.index_printer import to_python

from .errors import GraphUnsupported


class SizeMismatch(ValueError):
    """A call's sizes break what the compiled graph assumes (a range, or a relation between sizes)."""


@dataclass(frozen=True)
class SizeBinding:
    names: tuple  # the size symbols, in stax.ir SizeVars row order (stax.cpu's `call(args, sizes=)`)
    sources: tuple  # per symbol: (placeholder position, dim, m): the symbol is that value // m (a multiple of m);
    # dim -1: the placeholder is the SymInt itself
    ranges: tuple  # per symbol: (lo, hi) the code was compiled for (hi may be math.inf)
    placeholders: tuple  # per placeholder: ('tensor', sizes, strides) | ('int', expr) | ('other', None)


def size_binding(size_vars, placeholder_exprs) -> SizeBinding | None:
    """The binding of a lowered graph (None: static, no SymInt arguments; a graph whose SymInt arguments
    the guards made constants has a binding without symbols: they are checked, not passed on).
    Unsupported when a symbol is no SymInt argument and no input's dim: nothing at call time says its value."""
    if not size_vars and not any(p[0] == "int" for p in placeholder_exprs):
        return None
    sources = []
    for r in size_vars.rows:
        ints = [((k, -1), p[1]) for k, p in enumerate(placeholder_exprs) if p[0] == "int"]
        dims = [((k, d), s) for k, p in enumerate(placeholder_exprs) if p[0] == "tensor" for d, s in enumerate(p[1])]
        src = next(((*at, 1) for at, e in ints + dims if e == r.symbol), None)
        if src is None:  # a symbol that is s // m of a size s known a multiple of m (symbolic.Symbols._symbol)
            src = next(((*at, m) for at, e in ints + dims if (m := _multiplier(e, r.symbol))), None)
        if src is None:
            raise GraphUnsupported(f"size {r.symbol} is no SymInt input and no input's dim", cause="symbolic shapes")
        sources.append(src)
    return SizeBinding(tuple(r.symbol.name for r in size_vars.rows), tuple(sources),
                       tuple((r.lo, r.hi) for r in size_vars.rows), tuple(placeholder_exprs))


def _multiplier(e, symbol) -> int | None:
    """m when size expression `e` is exactly `m*symbol` (m an integer > 1), else None."""
    if isinstance(e, sympy.Mul):
        c, rest = e.as_coeff_Mul()
        if c.is_Integer and int(c) > 1 and rest == symbol:
            return int(c)
    return None


def compile_exprs(names: tuple, exprs) -> callable:
    """sizes tuple -> the ints of `exprs` (a tuple of ints / sympy expressions in `names`)."""
    if not exprs:
        return lambda sizes: ()
    body = ", ".join(str(int(e)) if isinstance(e, int) or sympy.sympify(e).is_Integer else to_python(e)
                     for e in exprs)
    params = ", ".join(names)
    return eval(f"lambda sizes: (lambda {params}: ({body}{',' if len(exprs) == 1 else ''}))(*sizes)")  # noqa: S307


class BoundSizes:
    """The runtime form of a SizeBinding: `bind(args)` -> the sizes tuple; the layouts expected then."""

    def __init__(self, b: SizeBinding, dtypes: list):
        self.names = b.names
        self.sources = b.sources
        self.ranges = b.ranges
        self.int_positions = frozenset(k for k, p in enumerate(b.placeholders) if p[0] == "int")
        # SymInt arguments that are expressions (a backward's saved `s0*s1`): checked equal at each call
        self._int_checks = [(k, p[1], compile_exprs(b.names, (p[1],))) for k, p in enumerate(b.placeholders)
                            if p[0] == "int" and (k, -1, 1) not in b.sources]
        self._layouts = [(k, compile_exprs(b.names, p[1]), compile_exprs(b.names, p[2]), dtypes[k])
                         for k, p in enumerate(b.placeholders) if p[0] == "tensor"]
        self._n = len(b.placeholders)
        self._expected: dict = {}  # sizes -> expected(sizes): a serving loop sees few sizes, each many times

    def bind(self, args: list) -> tuple:
        sizes = []
        for name, (pos, dim, m), (lo, hi) in zip(self.names, self.sources, self.ranges):
            a = args[pos]
            v = int(a) if dim < 0 else int(a.shape[dim])
            if m > 1:
                if v % m:
                    raise SizeMismatch(f"stax: input {pos}{'' if dim < 0 else f' dim {dim}'} = {v} is not a multiple "
                                       f"of {m}, which the graph was compiled for")
                v //= m
            if not lo <= v <= hi:
                raise SizeMismatch(f"stax: size {name} = {v} is outside the range [{lo}, {hi}] the graph was "
                                   f"compiled for (from input {pos}{'' if dim < 0 else f' dim {dim}'})")
            sizes.append(v)
        sizes = tuple(sizes)
        for k, expr, f in self._int_checks:
            (want,) = f(sizes)
            if int(args[k]) != want:
                raise SizeMismatch(f"stax: input {k} = {args[k]} but the graph was compiled for {expr} = {want}")
        return sizes

    EXPECTED_LIMIT = 64  # sizes remembered (then forgotten all at once: a bounded memo)

    def expected(self, sizes: tuple) -> list:
        """Per placeholder: (sizes, strides, torch dtype) at these sizes, None for a SymInt argument
        (computed once per sizes seen: two calls of every placeholder's size functions otherwise)."""
        out = self._expected.get(sizes)
        if out is not None:
            return out
        if len(self._expected) >= self.EXPECTED_LIMIT:
            self._expected.clear()
        out = [None] * self._n
        for k, fs, fst, dtype in self._layouts:
            out[k] = (fs(sizes), fst(sizes), dtype)
        self._expected[sizes] = out
        return out
