"""Index expressions: sympy with integer loop variables and exact integer functions.

Indices are sympy expressions so that sizes and strides can be symbolic (dynamic
shapes: size symbols and their ranges live in `sizevars`). FloorDiv and ModularIndexing carry Python's
floor semantics exactly; the printers in `index_printer` lower them to C/Python.
"""

from __future__ import annotations

import functools
import re

import sympy
from sympy import Expr


@functools.cache
def var(prefix: str, k: int) -> sympy.Symbol:
    """Loop variable `prefix`k: i* for pointwise ranges, r* for reduction ranges, c* normalized."""
    return sympy.Symbol(f"{prefix}{k}", integer=True, nonnegative=True)


def pointwise_vars(n: int) -> tuple[sympy.Symbol, ...]:
    return tuple(var("i", k) for k in range(n))


def reduction_vars(n: int) -> tuple[sympy.Symbol, ...]:
    return tuple(var("r", k) for k in range(n))


def sympify(x) -> Expr:
    """Turn ints, strings and expressions into sympy integers/expressions."""
    if isinstance(x, sympy.Basic):
        return x
    if isinstance(x, bool):
        return sympy.Integer(int(x))
    if isinstance(x, int):
        return sympy.Integer(x)
    if isinstance(x, str):  # "128*i0 + r0": loop-variable names become the stax loop symbols, s0.. size symbols
        from .sizevars import size_var

        names = {m: var(m[0], int(m[1:])) for m in re.findall(r"\b([ircv]\d+)\b", x)}
        names.update({m: size_var(m) for m in re.findall(r"\b(s\d+)\b", x)})
        names.update(FloorDiv=FloorDiv, ModularIndexing=ModularIndexing, CeilDiv=CeilDiv)
        return sympy.sympify(x, locals=names)
    return sympy.sympify(x)


class FloorDiv(sympy.Function):
    """floor(base / divisor) on integers (Python's //)."""

    is_integer = True
    nargs = (2,)

    @classmethod
    def eval(cls, base, divisor):
        # structural tests only (x == 0), never assumption queries: eval runs on every construction
        if divisor == 0:
            raise ZeroDivisionError("FloorDiv by zero in an index expression")
        if base.is_Integer and divisor.is_Integer:
            return sympy.Integer(int(base) // int(divisor))
        if divisor == 1:
            return base
        if base == 0:
            return sympy.Integer(0)
        if (
            isinstance(base, FloorDiv)
            and divisor.is_Integer
            and base.args[1].is_Integer
            and divisor > 0
            and base.args[1] > 0
        ):  # floor(floor(x/a)/b) == floor(x/(a*b)) only for positive a, b
            return FloorDiv(base.args[0], base.args[1] * divisor)
        return _exact_quotient(base, divisor)

    def _eval_is_nonnegative(self):
        base, divisor = self.args
        if base.is_nonnegative and divisor.is_positive:
            return True
        return None


def _exact_quotient(base, divisor):
    """base / divisor when every term of `base` has an integer coefficient the integer `divisor` divides
    (`FloorDiv(2*s1*s2, 2)` -> `s1*s2`: a size known even, spelled `2*s1`); else None (left unevaluated)."""
    if not divisor.is_Integer or int(divisor) <= 1 or not (base.is_Mul or base.is_Add):
        return None
    terms = sympy.Add.make_args(base)
    coeffs = [t.as_coeff_Mul() for t in terms]
    if any(not c.is_Integer or int(c) % int(divisor) for c, _ in coeffs):
        return None
    return sympy.Add(*(sympy.Integer(int(c) // int(divisor)) * rest for c, rest in coeffs))


class ModularIndexing(sympy.Function):
    """(base // divisor) % modulus on integers: the digit of a mixed-radix index."""

    is_integer = True
    nargs = (3,)

    @classmethod
    def eval(cls, base, divisor, modulus):
        if divisor == 0 or modulus == 0:
            raise ZeroDivisionError("ModularIndexing with a zero divisor or modulus")
        if base.is_Integer and divisor.is_Integer and modulus.is_Integer:
            return sympy.Integer((int(base) // int(divisor)) % int(modulus))
        if base == 0 or modulus == 1:
            return sympy.Integer(0)
        return None

    def _eval_is_nonnegative(self):
        if self.args[2].is_positive:  # Python's % takes the modulus's sign
            return True
        return None


class CeilDiv(sympy.Function):
    """ceil(base / divisor) on integers."""

    is_integer = True
    nargs = (2,)

    @classmethod
    def eval(cls, base, divisor):
        if base.is_Integer and divisor.is_Integer:
            return sympy.Integer(-(-int(base) // int(divisor)))
        if divisor == 1:
            return base
        return None

    def _eval_is_nonnegative(self):
        base, divisor = self.args
        if base.is_nonnegative and divisor.is_positive:
            return True
        return None


def index_min(*args) -> Expr:
    """min of integer index expressions (exact; printed as std::min / min)."""
    return sympy.Min(*(sympify(a) for a in args))


def index_max(*args) -> Expr:
    """max of integer index expressions (exact; printed as std::max / max)."""
    return sympy.Max(*(sympify(a) for a in args))


def free_loop_vars(e: Expr) -> set[sympy.Symbol]:
    return {s for s in sympify(e).free_symbols if isinstance(s, sympy.Symbol)}


def product(values) -> Expr:
    out = sympy.Integer(1)
    for v in values:
        out = out * sympify(v)
    return out


def strided_index(vars_, strides, offset=0) -> Expr:
    """offset + sum(stride_k * var_k): the flat storage index of a strided layout."""
    e = sympify(offset)
    for v, s in zip(vars_, strides):
        e = e + sympify(s) * v
    return e


def contiguous_strides(sizes) -> tuple[Expr, ...]:
    strides = []
    acc = sympy.Integer(1)
    for s in reversed(list(sizes)):
        strides.append(acc)
        acc = acc * sympify(s)
    return tuple(reversed(strides))


def as_int(e) -> int:
    """The integer value of a static size/stride, with a clear error for symbolic ones (code that needs
    numbers: bind the sizes first, `stax.ir.bind_graph`, or estimate with `SizeVars.hint`)."""
    e = sympify(e)
    if not e.is_Integer:
        raise NotImplementedError(f"symbolic size {e} where a static size is needed (bind the graph's sizes first)")
    return int(e)
