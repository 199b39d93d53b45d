"""Print index expressions as C/C++ (`to_c`) or Python (`to_python`) source, and evaluate them with numpy.

C integer division truncates toward zero while FloorDiv floors; the printer emits a
plain `/` only when sympy proves the operands non-negative, else a helper call
(`stax_floordiv` / `stax_mod`, defined by the codegen's prelude).
"""

from __future__ import annotations

import numpy as np
import sympy

from .index import CeilDiv, FloorDiv, ModularIndexing, sympify


def _nonneg(e) -> bool:
    return bool(e.is_nonnegative)


def to_c(e, index_type: str = "int64_t") -> str:
    """C expression for `e`; integer literals are suffixed to avoid 32-bit overflow."""
    e = sympify(e)
    return _c(e, index_type)


def _c(e, it: str) -> str:
    if e.is_Integer:
        v = int(e)
        if it == "int64_t" and not (-(2**31) <= v < 2**31):
            return f"{v}LL"
        return str(v) if v >= 0 else f"({v})"
    if e.is_Symbol:
        return e.name
    if e.is_Add:
        terms = sorted(e.args, key=lambda t: (t.is_Integer, sympy.default_sort_key(t)))
        out = _c(terms[0], it)
        for t in terms[1:]:
            c, rest = t.as_coeff_Mul()
            if c.is_Number and c < 0:
                out += " - " + _c(-t, it)
            else:
                out += " + " + _c(t, it)
        return f"({out})" if len(terms) > 1 else out
    if e.is_Mul:
        return "*".join(_atom_c(a, it) for a in e.args)
    if e.is_Pow and e.exp.is_Integer and int(e.exp) > 0:
        return "*".join([_atom_c(e.base, it)] * int(e.exp))
    if isinstance(e, FloorDiv):
        a, b = e.args
        if _nonneg(a) and _nonneg(b):
            return f"({_c(a, it)} / {_atom_c(b, it)})"
        return f"stax_floordiv({_c(a, it)}, {_c(b, it)})"
    if isinstance(e, CeilDiv):
        a, b = e.args
        if _nonneg(a) and b.is_Integer and int(b) > 0:
            return f"(({_c(a, it)} + {int(b) - 1}) / {int(b)})"
        return f"stax_floordiv({_c(a, it)} + {_c(b, it)} - 1, {_c(b, it)})"
    if isinstance(e, ModularIndexing):
        a, d, m = e.args
        inner = _c(FloorDiv(a, d), it)
        if _nonneg(a) and _nonneg(d) and m.is_positive:
            return f"({inner} % {_atom_c(m, it)})"
        return f"stax_mod({inner}, {_c(m, it)})"
    if isinstance(e, sympy.Min):
        return _nest_c("std::min", e.args, it)
    if isinstance(e, sympy.Max):
        return _nest_c("std::max", e.args, it)
    raise NotImplementedError(f"cannot print index expression {e!r} to C")


def _nest_c(fn: str, args, it: str) -> str:
    out = _c(args[0], it)
    for a in args[1:]:
        out = f"{fn}<{it}>({out}, {_c(a, it)})"
    return out


def _atom_c(e, it: str) -> str:
    s = _c(e, it)
    return s if (e.is_Atom and not (e.is_Integer and int(e) < 0)) or s.startswith("(") else f"({s})"


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


def evaluate(e, env: dict) -> np.ndarray | int:
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
