"""Print sympy index expressions as Triton source.

Triton's integer `//` and `%` truncate toward zero (C semantics) while FloorDiv and
ModularIndexing floor (Python semantics); the two agree on non-negative operands,
which is what loop indices are, so plain operators are emitted when sympy proves
non-negativity and `triton_helpers.floordiv_int` / `remainder` otherwise.
"""

from __future__ import annotations

import sympy
from stax.ir.index import CeilDiv, FloorDiv, ModularIndexing, sympify


def _nonneg(e) -> bool:
    return bool(e.is_nonnegative)


def texpr(e) -> str:
    """Triton expression for the integer index `e`."""
    return _p(sympify(e))


def _p(e) -> str:
    if e.is_Integer:
        v = int(e)
        return str(v) if v >= 0 else f"({v})"
    if e.is_Symbol:
        return e.name
    if e.is_Add:
        terms = sorted(e.args, key=lambda t: (t.is_Integer, sympy.default_sort_key(t)))
        out = _p(terms[0])
        for t in terms[1:]:
            c, _ = t.as_coeff_Mul()
            if c.is_Number and c < 0:
                out += " - " + _atom(-t)
            else:
                out += " + " + _p(t)
        return f"({out})"
    if e.is_Mul:
        c, rest = e.as_coeff_Mul()
        factors = list(sympy.Mul.make_args(rest))
        parts = ([str(int(c))] if c != 1 else []) + [_atom(f) for f in factors]
        if c == -1:
            return f"(-{'*'.join(_atom(f) for f in factors)})"
        return "*".join(parts)
    if e.is_Pow and e.exp.is_Integer and int(e.exp) > 0:
        return "*".join([_atom(e.base)] * int(e.exp))
    if isinstance(e, FloorDiv):
        a, b = e.args
        if _nonneg(a) and b.is_positive:
            return f"({_p(a)} // {_atom(b)})"
        return f"triton_helpers.floordiv_int({_p(a)}, {_p(b)})"
    if isinstance(e, ModularIndexing):
        a, d, m = e.args
        inner = _p(a) if d == 1 else _p(FloorDiv(a, d))
        if _nonneg(a) and d.is_positive and m.is_positive:
            return f"({inner} % {_atom(m)})"
        return f"triton_helpers.remainder({inner}, {_p(m)})"
    if isinstance(e, CeilDiv):
        a, b = e.args
        if _nonneg(a) and b.is_positive:
            return f"(({_p(a)} + {_p(b - 1)}) // {_atom(b)})"
        return f"(-triton_helpers.floordiv_int(-{_atom(a)}, {_p(b)}))"
    if isinstance(e, sympy.Min):
        return _nest("tl.minimum", e.args)
    if isinstance(e, sympy.Max):
        return _nest("tl.maximum", e.args)
    raise NotImplementedError(f"stax-gpu: cannot print index expression {e!r} for Triton")


def _nest(fn: str, args) -> str:
    out = _p(args[0])
    for a in args[1:]:
        out = f"{fn}({out}, {_p(a)})"
    return out


def _atom(e) -> str:
    s = _p(e)
    if e.is_Symbol or (e.is_Integer and int(e) >= 0) or (s.startswith("(") and s.endswith(")") and _balanced(s)):
        return s
    return f"({s})"


def _balanced(s: str) -> bool:
    """True when the outer parentheses of s enclose all of it."""
    depth = 0
    for k, ch in enumerate(s):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and k != len(s) - 1:
            return False
    return True


def axes_of(e, axis_of: dict) -> frozenset:
    """The program axes ('x', 'y', 'r') an index depends on; unknown symbols count as all."""
    out = set()
    for s in sympify(e).free_symbols:
        out |= axis_of.get(s.name, {"x", "y", "r"})
    return frozenset(out)
