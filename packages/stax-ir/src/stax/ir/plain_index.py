"""Index expressions as plain data: nested tuples of names and ints, for caches that store compiled graphs.

A symbolic-shape graph's call spec and generated code hold size expressions (`2*s0`, `FloorDiv(s1, 4)`).
Pickled as sympy objects they would need sympy's classes at load; as `PlainIndex` trees they are tuples
a restricted unpickler accepts, rebuilt with stax.ir's own constructors. Only the node kinds stax.ir's
index math makes are written; anything else is refused (ValueError), never approximated.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from .index import CeilDiv, FloorDiv, ModularIndexing
from .sizevars import SizeVar, size_var

_FUNCS = {"add": sympy.Add, "mul": sympy.Mul, "pow": sympy.Pow, "min": sympy.Min, "max": sympy.Max,
          "floordiv": FloorDiv, "mod": ModularIndexing, "ceildiv": CeilDiv}
_KIND = {cls: name for name, cls in _FUNCS.items()}


@dataclass(frozen=True)
class PlainIndex:
    """One expression: ("int", n) | ("rat", p, q) | ("size", name) | (kind, child, ...), kind in _FUNCS."""

    tree: tuple


def _kind(e) -> str | None:
    for cls, name in _KIND.items():
        if isinstance(e, cls):
            return name
    return None


def _tree(e) -> tuple:
    if e.is_Integer:
        return ("int", int(e))
    if e.is_Rational:
        return ("rat", int(e.p), int(e.q))
    if isinstance(e, SizeVar):
        return ("size", e.name)
    kind = _kind(e)
    if kind is None or (kind == "pow" and not e.exp.is_Integer):  # (sizes have integer powers only)
        raise ValueError(f"{e} ({type(e).__name__}) is not an index expression stax.ir writes")
    return (kind, *(_tree(a) for a in e.args))


def to_plain(e) -> PlainIndex:
    """`e` (a sympy expression over SizeVars) as plain data; ValueError for other symbols or functions."""
    return PlainIndex(_tree(sympy.sympify(e)))


def _expr(t: tuple):
    kind = t[0]
    if kind == "int":
        return sympy.Integer(t[1])
    if kind == "rat":
        return sympy.Rational(t[1], t[2])
    if kind == "size":
        return size_var(t[1])
    return _FUNCS[kind](*(_expr(a) for a in t[1:]))


def from_plain(p: PlainIndex):
    """The expression `p` was made from (equal to it; rebuilt through the constructors)."""
    return _expr(p.tree)
