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
    sources: tuple  # per symbol: (placeholder position, dim); dim -1: the placeholder is the SymInt itself
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
        src = next(((k, -1) for k, p in enumerate(placeholder_exprs) if p[0] == "int" and p[1] == r.symbol), None)
        if src is None:
            src = next(((k, d) for k, p in enumerate(placeholder_exprs) if p[0] == "tensor"
                        for d, s in enumerate(p[1]) if s == r.symbol), None)
        if src is None:
            raise GraphUnsupported(f"size {r.symbol} is no SymInt input and no input's dim", cause="symbolic shapes")
        sources.append(src)
    return SizeBinding(tuple(r.symbol.name for r in size_vars.rows), tuple(sources),
                       tuple((r.lo, r.hi) for r in size_vars.rows), tuple(placeholder_exprs))


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
                            if p[0] == "int" and (k, -1) not in b.sources]
        self._layouts = [(k, compile_exprs(b.names, p[1]), compile_exprs(b.names, p[2]), dtypes[k])
                         for k, p in enumerate(b.placeholders) if p[0] == "tensor"]
        self._n = len(b.placeholders)

    def bind(self, args: list) -> tuple:
        sizes = []
        for name, (pos, dim), (lo, hi) in zip(self.names, self.sources, self.ranges):
            a = args[pos]
            v = int(a) if dim < 0 else int(a.shape[dim])
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

    def expected(self, sizes: tuple) -> list:
        """Per placeholder: (sizes, strides, torch dtype) at these sizes, None for a SymInt argument."""
        out: list = [None] * self._n
        for k, fs, fst, dtype in self._layouts:
            out[k] = (fs(sizes), fst(sizes), dtype)
        return out
