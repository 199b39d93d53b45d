"""Symbolic shapes (dynamic=True, automatic dynamic): ShapeEnv symbols as stax.ir size variables.

The ATen graph's SymInts (SymInt placeholders, tensor inputs' sizes and strides, sym_size nodes) are
sympy expressions in ShapeEnv symbols (s0, s77, ...). Each symbol becomes the stax.ir `SizeVar` of the
same name, with the ShapeEnv's value range (what proofs may use) and the example's value as hint (what
estimates use); torch's index functions become stax.ir's. Nothing here does index math: it translates.
"""

from __future__ import annotations

import logging
import math

import sympy
import torch
from stax.ir import SizeVars, SymbolRange, size_var
from stax.ir.index import CeilDiv, FloorDiv, ModularIndexing, contiguous_strides
from stax.ir.simplify import simplify_index
from stax.ir.sizevars import provably_nonnegative
from torch.utils._sympy import functions as TF

from .errors import GraphUnsupported
from .strides import is_dense, meta_strides
from .tensor import as_size

log = logging.getLogger("stax.frontend")
MULTIPLE_TAG = "_div"  # q = s // m is named f"{s}_div{m}" (to_symints reads it back)
MIN_SIZE = 2  # what Stax assumes of every size symbol (dynamo's default ranges start there: 0 and 1 specialize)


def is_symbolic(x) -> bool:
    """A SymInt whose value is not a constant (a traced size, stride or int argument)."""
    return isinstance(x, torch.SymInt) and not x.node.expr.is_Integer


def hint_int(x) -> int:
    """The example's value of an int or SymInt, without adding a guard (estimates only)."""
    if isinstance(x, torch.SymInt):
        h = x.node.hint
        if h is None:
            raise GraphUnsupported(f"size {x} has no example value (data-dependent)", cause="symbolic shapes")
        return int(h)
    return int(x)


class Symbols:
    """The size symbols one graph uses: ShapeEnv symbol -> stax SizeVar with (lo, hi, hint)."""

    def __init__(self):
        self.rows: dict[str, SymbolRange] = {}
        self.multiples: dict[str, sympy.Expr] = {}  # ShapeEnv symbol known a multiple of m -> m*q (or itself)
        self._equal_key: tuple = (None, -1)  # _guarded_equal's memo: (the ShapeEnv, its guard count)
        self._equal: dict = {}

    def __bool__(self) -> bool:
        return bool(self.rows)

    def size_vars(self) -> SizeVars:
        return SizeVars(tuple(self.rows.values()))

    def value_ranges(self) -> dict | None:
        """{symbol: ValueRange} of the symbols seen so far (proofs in stax.ir); None for a static graph."""
        return self.size_vars().value_ranges if self.rows else None

    def expr(self, x):
        """An int stays an int; a SymInt becomes its sympy expression over stax SizeVars (an int when constant)."""
        if isinstance(x, bool) or not isinstance(x, (int, torch.SymInt)):
            raise GraphUnsupported(f"{x!r} is not a size", cause="symbolic shapes")
        if isinstance(x, int):
            return x
        e = x.node.expr
        if e.is_Integer:
            return int(e)
        shape_env = x.node.shape_env
        e = shape_env.replace(e)  # symbols the guards made equal (s1 == s0) spelled as one
        e = e.xreplace(self._guarded_equal(shape_env)) if e.free_symbols else e
        if e.is_Integer:
            return int(e)
        out = self._translate(e, shape_env)
        return int(out) if out.is_Integer else out

    def _guarded_equal(self, shape_env) -> dict:
        """{symbol: expression} from the guards `Eq(expression, symbol)` that the ShapeEnv keeps without a
        replacement (it solves no floor), and {expression: n} from `Eq(expression, n)`: a pooled size
        `(s0 - 1) // 2 + 1` times a tensor whose size is its own symbol, or a constant. Spelled as one,
        the two sizes broadcast; the symbol's input dimension is checked against the expression at each
        call (runtime's _call_symbolic: a shape mismatch raises), which the guard makes hold."""
        env, count = self._equal_key
        if env is not shape_env or count != len(shape_env.guards):
            found: dict = {}
            for g in shape_env.guards:
                e = g.expr
                if not isinstance(e, sympy.Eq):
                    continue
                for sym, other in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
                    if sym.is_Symbol and not other.is_Number and sym not in other.free_symbols and sym not in found:
                        found[sym] = other
                        break
                    if other.is_Integer and not sym.is_Number and sym.free_symbols:  # (s0 - 1) // 2 + 1 == 8
                        found.setdefault(sym, other)
                        break
            for _ in range(len(found)):  # resolve chains (s2 -> f(s1), s1 -> g(s0)); a cycle stays partial
                resolved = {k: v.xreplace(found) for k, v in found.items()}
                if resolved == found:
                    break
                found = {k: v for k, v in resolved.items() if k not in v.free_symbols}
            self._equal_key, self._equal = (shape_env, len(shape_env.guards)), found
        return self._equal

    def exprs(self, xs) -> tuple:
        return tuple(self.expr(x) for x in xs)

    def hint(self, e) -> int:
        """`e`'s value at the examples' sizes (an estimate: orders strides, never proves)."""
        if isinstance(e, int):
            return e
        return int(sympy.sympify(e).xreplace({r.symbol: r.hint for r in self.rows.values()}))

    def meta_sizes(self, val) -> tuple:
        return self.exprs(val.shape)

    def meta_strides(self, val) -> tuple:
        """strides.meta_strides over expressions: the traced strides when dense, else row-major. Density
        is decided exactly (equal expressions); the hints only pick the order the dims are tried in."""
        sizes, strides = self.exprs(val.shape), self.exprs(val.stride())
        if all(isinstance(x, int) for x in (*sizes, *strides)):
            return meta_strides(val)
        if is_dense(sizes, strides, key=self.hint):
            return strides
        return tuple(as_size(s) for s in contiguous_strides(sizes))

    def _symbol(self, s: sympy.Symbol, shape_env):
        """The stax expression of ShapeEnv symbol `s`: its SizeVar, or `m*q` when the guards made `s` a
        multiple of m (`Mod(s, m)` in shape_env.divisible: group norm's view by C // groups), so that
        `m*(s // m) == s` is provable; q is a SizeVar of its own, bound from s at call time."""
        m = multiple_of(s, shape_env)
        if m > 1:
            if s.name not in self.multiples:
                sym = self._row(s, shape_env)
                r = self.rows.pop(s.name)
                if r.hint // m >= MIN_SIZE:  # (below: s stays whole; the view falls back to ATen as before)
                    q = size_var(f"{s.name}{MULTIPLE_TAG}{m}")
                    self.rows[q.name] = SymbolRange(q, max(-(-r.lo // m), MIN_SIZE), r.hi // m if r.hi != math.inf
                                                    else math.inf, r.hint // m)
                    self.multiples[s.name] = m * q
                else:
                    self.rows[s.name] = r
                    self.multiples[s.name] = sym
            return self.multiples[s.name]
        return self._row(s, shape_env)

    def _row(self, s: sympy.Symbol, shape_env):
        if s.name not in self.rows:
            vr = shape_env.var_to_range.get(s)
            values = getattr(shape_env, "backed_var_to_val", None) or shape_env.var_to_val
            hint = values.get(s)
            if vr is None or hint is None:
                raise GraphUnsupported(f"symbol {s} has no range or example value (data-dependent size)",
                                       cause="symbolic shapes")
            lo = int(vr.lower) if vr.lower.is_Integer else -math.inf  # (torch's int_oo is not an Integer)
            hi = int(vr.upper) if vr.upper.is_Integer else math.inf
            if hi < MIN_SIZE:
                raise GraphUnsupported(f"symbolic size {s} in [{vr.lower}, {vr.upper}]: below {MIN_SIZE}",
                                       cause="symbolic shapes")
            # Stax's own assumption beyond the guards: a symbolic size is never 1 (broadcasts, squeezes and
            # unit strides are decided on that); checked at every call (size_binding.py), eager below it. An
            # int argument the guards let be <= 1 (`f(x, n)`, automatic dynamic: [-oo, oo]) is compiled for
            # n >= 2 the same way: a call with a smaller n runs eagerly, counted, never with a wrong answer
            # (an example below it, `f(x, 1)` under dynamic=True: that call runs eagerly, the hint is MIN_SIZE)
            if lo < MIN_SIZE:
                log.debug("symbol %s in [%s, %s] (example %s): compiled for %s >= %d (smaller values run eagerly)",
                          s, vr.lower, vr.upper, hint, s, MIN_SIZE)
            self.rows[s.name] = SymbolRange(size_var(s.name), max(lo, MIN_SIZE), hi, max(int(hint), MIN_SIZE))
        return self.rows[s.name].symbol

    def _to_int(self, e, shape_env):
        """TruncToInt / FloorToInt / CeilToInt of a float made of sizes, as FloorDiv / CeilDiv of integers: the
        float value must be exactly num / den (dyadic constants, divisions by integer constants), which the
        double arithmetic torch evaluates also gives exactly for sizes below 2**40."""
        q = self._rational(e.args[0], shape_env)
        if q is None:
            raise GraphUnsupported(f"size expression {e} is not an exact rational of sizes", cause="symbolic shapes")
        num, den = q
        if isinstance(e, TF.CeilToInt):
            return CeilDiv(num, den)
        if isinstance(e, TF.TruncToInt) and not provably_nonnegative(num):  # (trunc == floor at >= 0)
            raise GraphUnsupported(f"size expression {e} may be negative", cause="symbolic shapes")
        return FloorDiv(num, den)

    def _rational(self, e, shape_env):
        """(integer expression, positive int) whose quotient is float expression `e` exactly, else None."""
        if isinstance(e, TF.ToFloat):
            return self._rational(e.args[0], shape_env)
        if e.is_Integer or e.is_Symbol or isinstance(e, (TF.FloorDiv, TF.ModularIndexing) + _MODS):
            return self._translate(e, shape_env), 1
        if isinstance(e, sympy.Float):
            r = sympy.Rational(e)  # the binary value of the double, exactly
            return (r.p, r.q) if r.q <= MAX_DENOMINATOR else None
        if e.is_Rational:
            return (e.p, e.q) if (e.q & (e.q - 1)) == 0 and e.q <= MAX_DENOMINATOR else None
        parts = [self._rational(a, shape_env) for a in e.args]
        if any(p is None for p in parts):
            return None
        if e.is_Mul:
            return sympy.Mul(*(n for n, _ in parts)), math.prod(d for _, d in parts)
        if e.is_Add:
            den = math.lcm(*(d for _, d in parts))
            return sympy.Add(*(n * (den // d) for n, d in parts)), den
        if isinstance(e, (TF.IntTrueDiv, TF.FloatTrueDiv)):
            (n1, d1), (n2, d2) = parts
            if not sympy.sympify(n2).is_Integer or int(n2) == 0:
                return None  # (a division by a size: no integer form)
            sign = 1 if int(n2) > 0 else -1
            return sign * n1 * d2, d1 * abs(int(n2))
        return None

    def _translate(self, e, shape_env):
        if e.is_Integer:
            return sympy.Integer(int(e))
        if e.is_Symbol:
            return self._symbol(e, shape_env)
        if isinstance(e, _TO_INT):  # int(n * 0.5), math.ceil(n / 3): exact when the float value is a rational
            return self._to_int(e, shape_env)
        args = [self._translate(a, shape_env) for a in e.args]
        if e.is_Add:
            return sympy.Add(*args)
        if e.is_Mul:
            return sympy.Mul(*args)
        if e.is_Pow and e.exp.is_Integer and int(e.exp) >= 0:
            return args[0] ** int(e.exp)
        if isinstance(e, TF.FloorDiv):  # CleanDiv too (a FloorDiv known exact)
            return FloorDiv(*args)
        if isinstance(e, TF.ModularIndexing):
            return ModularIndexing(*args)
        if isinstance(e, _MODS):  # torch's Mod (nonnegative operands) and PythonMod: Python's a % m either way
            return ModularIndexing(args[0], 1, args[1])
        if isinstance(e, (TF.Max, sympy.Max)):
            return self._extreme(sympy.Max, args)
        if isinstance(e, (TF.Min, sympy.Min)):
            return self._extreme(sympy.Min, args)
        raise GraphUnsupported(f"size expression {e} ({type(e).__name__}) has no stax.ir form", cause="symbolic shapes")


    def _extreme(self, f, args):
        """Max / Min of `args` without those the size ranges prove never win (stax.ir's simplifier): torch
        writes a stride as `Max(1, n)`, and an extern given a padded view (cuda sdpa's bias, `n - n % 8 + 8`
        wide) compared its realized strides with that form, found them different and was passed a dense copy."""
        return simplify_index(f(*args), self.value_ranges())


_MODS = tuple({sympy.Mod, getattr(TF, "Mod", sympy.Mod), getattr(TF, "PythonMod", sympy.Mod)})  # torch's own Mod


_TO_INT = (TF.TruncToInt, TF.FloorToInt, TF.CeilToInt)
MAX_DENOMINATOR = 1 << 20  # a float constant is used only if it is exactly p / q with q a power of 2 up to this


def multiple_of(s: sympy.Symbol, shape_env) -> int:
    """The m the ShapeEnv knows `s` to be a multiple of (the lcm of its `Mod(s, k) == 0` facts), else 1."""
    m = 1
    for e in getattr(shape_env, "divisible", ()):
        if isinstance(e, _MODS) and e.args[0] == s and e.args[1].is_Integer and int(e.args[1]) > 1:
            m = math.lcm(m, int(e.args[1]))
    return m


def to_symints(exprs: tuple, shape_env) -> tuple | None:
    """Size expressions as SymInts of `shape_env`'s symbols (what AOTAutograd takes for a forward graph's
    real output strides); None when there is no ShapeEnv or an expression has no SymInt form."""
    if all(isinstance(e, int) for e in exprs):
        return tuple(exprs)
    if shape_env is None:
        return None
    from stax.ir.index_printer import to_python
    from torch.fx.experimental.symbolic_shapes import SymNode

    values = getattr(shape_env, "backed_var_to_val", None) or shape_env.var_to_val
    env = {str(s): torch.SymInt(SymNode(s, shape_env, int, int(v), fx_node=None)) for s, v in values.items()}
    env |= {"min": torch.sym_min, "max": torch.sym_max}
    for e in exprs:  # q = s // m of a symbol known a multiple of m (Symbols._symbol)
        for q in getattr(e, "free_symbols", ()):
            base, tag, m = q.name.rpartition(MULTIPLE_TAG)
            if tag and base in env and m.isdigit():
                env[q.name] = env[base] // int(m)
    try:
        return tuple(e if isinstance(e, int) else eval(to_python(e), {"__builtins__": {}}, env)  # noqa: S307
                     for e in exprs)
    except (NameError, TypeError, NotImplementedError):
        return None
