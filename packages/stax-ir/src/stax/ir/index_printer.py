"""Print index expressions as C/C++ (`to_c`, `IndexPrinter`) or Python (`to_python`) source, and
evaluate them with numpy.

C integer division truncates toward zero while FloorDiv floors; the printer emits a
plain `/` only when sympy proves the operands non-negative, else a helper call
(`stax_floordiv` / `stax_mod`, defined by the codegen's prelude). `IndexPrinter` is the one
printer of the codegens: stax-gpu's Triton printer subclasses it with Triton's names.
"""

from __future__ import annotations

import numpy as np
import sympy

from .index import CeilDiv, FloorDiv, ModularIndexing, sympify


class IndexPrinter:
    """Prints integer index expressions as source text: C/C++ as this class is, another language by
    a subclass that names its operators and helpers (stax-gpu's Triton printer). FloorDiv and
    ModularIndexing floor; C and Triton `/` `//` `%` truncate: the plain operators are emitted
    only when sympy proves the operands non-negative, else the helpers (`floordiv_fn`, `mod_fn`)."""

    div = "/"  # floor division of provably non-negative operands
    floordiv_fn = "stax_floordiv"  # exact floor division and modulus: the codegen prelude's helpers
    mod_fn = "stax_mod"
    min_fn = "std::min<{it}>"  # {it}: the index type
    max_fn = "std::max<{it}>"

    def __init__(self, index_type: str | None = "int64_t"):
        self.index_type = index_type  # int64_t: literals outside int32 get the LL suffix

    def __call__(self, e) -> str:
        return self.print(sympify(e))

    def print(self, e) -> str:
        if e.is_Integer:
            return self.integer(int(e))
        if e.is_Symbol:
            return e.name
        if e.is_Add:
            terms = sorted(e.args, key=lambda t: (t.is_Integer, sympy.default_sort_key(t)))
            out = self.print(terms[0])
            for t in terms[1:]:
                c, _ = t.as_coeff_Mul()
                out += " - " + self.subtracted(-t) if (c.is_Number and c < 0) else " + " + self.print(t)
            return f"({out})"
        if e.is_Mul:
            return self.product(e)
        if e.is_Pow and e.exp.is_Integer and int(e.exp) > 0:
            return "*".join([self.atom(e.base)] * int(e.exp))
        if isinstance(e, FloorDiv):
            a, b = e.args
            if _nonneg(a) and b.is_positive:
                return f"({self.print(a)} {self.div} {self.atom(b)})"
            return f"{self.floordiv_fn}({self.print(a)}, {self.print(b)})"
        if isinstance(e, ModularIndexing):
            a, d, m = e.args
            inner = self.print(FloorDiv(a, d))
            if _nonneg(a) and d.is_positive and m.is_positive:
                return f"({inner} % {self.atom(m)})"
            return f"{self.mod_fn}({inner}, {self.print(m)})"
        if isinstance(e, CeilDiv):
            a, b = e.args
            if _nonneg(a) and b.is_positive:
                return f"(({self.print(a)} + {self.print(b - 1)}) {self.div} {self.atom(b)})"
            return f"(-{self.floordiv_fn}(-{self.atom(a)}, {self.print(b)}))"
        if isinstance(e, (sympy.Min, sympy.Max)):
            fn = (self.min_fn if isinstance(e, sympy.Min) else self.max_fn).format(it=self.index_type)
            out = self.print(e.args[0])
            for a in e.args[1:]:
                out = f"{fn}({out}, {self.print(a)})"
            return out
        raise NotImplementedError(f"cannot print index expression {e!r} ({type(self).__name__})")

    def integer(self, v: int) -> str:
        if self.index_type == "int64_t" and not (-(2**31) <= v < 2**31):
            return f"{v}LL"
        return str(v) if v >= 0 else f"({v})"

    def product(self, e) -> str:
        """A Mul: every factor an atom, the coefficient too (`(-1)*x0`)."""
        return "*".join(self.atom(a) for a in e.args)

    def subtracted(self, t) -> str:
        """What follows ` - ` for a negative term (`t` is its negation)."""
        return self.print(t)

    def atom(self, e) -> str:
        """`e` printed so that it binds as one operand."""
        s = self.print(e)
        return s if e.is_Symbol or (e.is_Integer and int(e) >= 0) else parenthesize(s)


def parenthesize(s: str) -> str:
    """`s` in parentheses, unless a pair already encloses all of it."""
    return s if s.startswith("(") and _enclosed(s) else f"({s})"


def _enclosed(s: str) -> bool:
    depth = 0
    for k, ch in enumerate(s):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and k != len(s) - 1:
            return False
    return True


def _nonneg(e) -> bool:
    return bool(e.is_nonnegative)


def to_c(e, index_type: str = "int64_t") -> str:
    """C expression for `e`; integer literals are suffixed to avoid 32-bit overflow."""
    return IndexPrinter(index_type)(e)


def to_python(e) -> str:
    """Python source for `e` with exact floor semantics (// and % floor in Python)."""
    return _py(sympify(e))


def _py(e) -> str:
    if e.is_Integer:
        return str(int(e)) if int(e) >= 0 else f"({int(e)})"
    if e.is_Symbol:
        return e.name
    if e.is_Add:
        terms = sorted(e.args, key=lambda t: (t.is_Integer, sympy.default_sort_key(t)))
        return "(" + " + ".join(_py(t) for t in terms) + ")"
    if e.is_Mul:
        return "(" + "*".join(_py(a) for a in e.args) + ")"
    if e.is_Pow and e.exp.is_Integer and int(e.exp) >= 0:
        return f"({_py(e.base)}**{int(e.exp)})"
    if isinstance(e, FloorDiv):
        return f"({_py(e.args[0])} // {_py(e.args[1])})"
    if isinstance(e, CeilDiv):
        return f"(-((-{_py(e.args[0])}) // {_py(e.args[1])}))"
    if isinstance(e, ModularIndexing):
        a, d, m = (_py(x) for x in e.args)
        return f"(({a} // {d}) % {m})"
    if isinstance(e, (sympy.Min, sympy.Max)):
        fn = "min" if isinstance(e, sympy.Min) else "max"
        return f"{fn}({', '.join(_py(a) for a in e.args)})"
    raise NotImplementedError(f"cannot print index expression {e!r} to Python")


def evaluate(e, env: dict) -> np.ndarray | np.integer | int:
    """Evaluate `e` with numpy int64 arrays bound to its symbols (exact floor semantics)."""
    e = sympify(e)
    if e.is_Integer:
        return np.int64(int(e))
    if e.is_Symbol:
        try:
            return env[e]
        except KeyError:
            raise KeyError(f"index variable {e} is unbound") from None
    if e.is_Add:
        out = evaluate(e.args[0], env)
        for a in e.args[1:]:
            out = out + evaluate(a, env)
        return out
    if e.is_Mul:
        out = evaluate(e.args[0], env)
        for a in e.args[1:]:
            out = out * evaluate(a, env)
        return out
    if e.is_Pow and e.exp.is_Integer and int(e.exp) >= 0:
        return evaluate(e.base, env) ** int(e.exp)
    if isinstance(e, FloorDiv):
        return np.floor_divide(evaluate(e.args[0], env), evaluate(e.args[1], env))
    if isinstance(e, CeilDiv):
        return -np.floor_divide(-evaluate(e.args[0], env), evaluate(e.args[1], env))
    if isinstance(e, ModularIndexing):
        a, d, m = (evaluate(x, env) for x in e.args)
        return np.mod(np.floor_divide(a, d), m)
    if isinstance(e, sympy.Min):
        vals = [evaluate(a, env) for a in e.args]
        return functools_reduce(np.minimum, vals)
    if isinstance(e, sympy.Max):
        vals = [evaluate(a, env) for a in e.args]
        return functools_reduce(np.maximum, vals)
    raise NotImplementedError(f"cannot evaluate index expression {e!r}")


def functools_reduce(fn, vals):
    out = vals[0]
    for v in vals[1:]:
        out = fn(out, v)
    return out
