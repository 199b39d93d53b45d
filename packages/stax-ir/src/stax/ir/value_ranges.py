"""Value-range analysis: sound integer intervals for index and value expressions.

Codegen asks two questions of it: can this kernel index with 32-bit integers
(`index_fits_int32`), and can a bounds check be dropped because it provably holds
(`bounds_check_needed`, `provably_true`)? Both need a *sound* over-approximation,
never a guess, so every rule here widens rather than narrows when unsure.

Loop-variable ranges are given as `{symbol: size}` (the variable runs over
0..size-1) or `{symbol: ValueRange}`. Float ranges bound the non-NaN values only;
comparisons are decided statically for integer and bool operands, never floats.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import sympy

from . import dtypes as dt
from .expr import Constant, IndexValue, Load, Op, Value, walk
from .index import CeilDiv, FloorDiv, ModularIndexing, sympify

INF = math.inf


@dataclass(frozen=True)
class ValueRange:
    """The closed interval [lo, hi]; ends are Python ints or +-inf."""

    lo: int | float
    hi: int | float

    @staticmethod
    def point(x) -> ValueRange:
        return ValueRange(x, x)

    @property
    def is_point(self) -> bool:
        return self.lo == self.hi

    @property
    def is_finite(self) -> bool:
        return math.isfinite(self.lo) and math.isfinite(self.hi)

    def contains(self, x) -> bool:
        return self.lo <= x <= self.hi

    def within(self, lo, hi) -> bool:
        return lo <= self.lo and self.hi <= hi

    def union(self, other: ValueRange) -> ValueRange:
        return ValueRange(min(self.lo, other.lo), max(self.hi, other.hi))

    def __str__(self) -> str:
        return f"[{self.lo}, {self.hi}]"


FULL = ValueRange(-INF, INF)
BOOL = ValueRange(0, 1)
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MAX = 2**63 - 1


def dtype_range(d: dt.DType) -> ValueRange:
    """Every value a dtype can hold (floats: all non-NaN values)."""
    if d.is_bool:
        return BOOL
    if d.is_integer:
        info = np.iinfo(d.np)
        return ValueRange(int(info.min), int(info.max))
    return FULL


def _size_range(size, known: dict | None = None) -> ValueRange:
    """0 <= v < size; a symbolic size is bounded by the ranges `known` of its symbols, and without a
    finite bound by int64's (a tensor's extent is an int64: a loop variable over it fits one)."""
    size = sympify(size)
    if size.is_Integer:
        return ValueRange(0, max(int(size) - 1, 0))
    hi = IndexBounds(known or {}).bound(size).hi
    return ValueRange(0, min(hi, INT64_MAX) - 1)


def var_range_map(var_ranges: Mapping | None) -> dict:
    """{symbol: ValueRange} from sizes or ranges.

    Entries given as ValueRanges (loop variables, and the size symbols' rows of a graph's
    `size_vars.value_ranges`) bound the symbolic sizes of the others: {s0: [2, 64], i0: s0}
    gives i0 the range [0, 63].
    """
    out = {}
    symbolic = []
    for s, r in (var_ranges or {}).items():
        if isinstance(r, ValueRange):  # (a size or a loop variable: an int64 whatever its range says)
            out[s] = r if r.hi <= INT64_MAX else ValueRange(r.lo, INT64_MAX)
        else:
            r = sympify(r)
            if r.is_Integer:
                out[s] = ValueRange(0, max(int(r) - 1, 0))
            else:
                symbolic.append((s, r))
    if symbolic:  # bounded by the ranges given in the same mapping (loop variables' and size symbols')
        known = {s: r for s, r in out.items() if isinstance(r, ValueRange)}
        out.update((s, _size_range(r, known)) for s, r in symbolic)
    return out


# ---------------------------------------------------------------- interval arithmetic


def _mul(a, b):
    if a == 0 or b == 0:  # 0 * inf: the finite value times 0
        return 0
    return a * b


def _floordiv(a, b):
    if math.isinf(a) or math.isinf(b):
        if math.isinf(b):
            if math.isinf(a):
                return INF if (a > 0) == (b > 0) else -INF
            return 0 if a == 0 or (a > 0) == (b > 0) else -1
        return INF if (a > 0) == (b > 0) else -INF
    return int(a) // int(b)


def add_ranges(a: ValueRange, b: ValueRange) -> ValueRange:
    return ValueRange(a.lo + b.lo, a.hi + b.hi)


def mul_ranges(a: ValueRange, b: ValueRange) -> ValueRange:
    c = [_mul(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
    return ValueRange(min(c), max(c))


def floordiv_ranges(a: ValueRange, b: ValueRange) -> ValueRange:
    """floor(a / b); unknown when b may be 0. On each sign of b the quotient is monotone in both."""
    if b.lo <= 0 <= b.hi:
        return FULL
    c = [_floordiv(x, y) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
    return ValueRange(min(c), max(c))


def mod_ranges(y: ValueRange, m: ValueRange) -> ValueRange:
    """y % m with Python semantics (result has the modulus's sign)."""
    if m.is_point and m.lo > 0 and y.is_finite and math.isfinite(m.lo):
        k = y.lo // m.lo
        if y.hi // m.lo == k:  # y stays within one period: the shift is exact
            return ValueRange(y.lo - k * m.lo, y.hi - k * m.lo)
    if m.lo > 0:
        if y.lo >= 0 and y.hi < m.lo:
            return y
        return ValueRange(0, m.hi - 1 if math.isfinite(m.hi) else INF)
    if m.hi < 0:
        return ValueRange(m.lo + 1 if math.isfinite(m.lo) else -INF, 0)
    return FULL


def pow_ranges(a: ValueRange, k: int) -> ValueRange:
    if k == 0:
        return ValueRange.point(1)
    ends = [x**k for x in (a.lo, a.hi)]
    if k % 2 == 0 and a.lo < 0 < a.hi:
        return ValueRange(0, max(ends))
    return ValueRange(min(ends), max(ends))


# ---------------------------------------------------------------- index expressions


def bound_index(expr, var_ranges: Mapping | None = None) -> ValueRange:
    """A sound interval containing every value of the index `expr` over the given ranges."""
    return IndexBounds(var_range_map(var_ranges)).bound(sympify(expr))


class IndexBounds:
    """Memoized interval evaluation of one sympy expression tree."""

    def __init__(self, ranges: dict):
        self.ranges = ranges
        self.memo: dict = {}

    def bound(self, e) -> ValueRange:
        r = self.memo.get(e)
        if r is None:
            r = self._bound(e)
            self.memo[e] = r
        return r

    def _bound(self, e) -> ValueRange:
        if e.is_Integer:
            return ValueRange.point(int(e))
        if e.is_Rational:
            return ValueRange.point(float(e))
        if e.is_Symbol:
            if e in self.ranges:
                return self.ranges[e]
            if e.is_positive:  # a size symbol without a row: at least 1
                return ValueRange(1, INF)
            return ValueRange(0, INF) if e.is_nonnegative else FULL
        args = [self.bound(a) for a in e.args]
        if e.is_Add:
            out = args[0]
            for a in args[1:]:
                out = add_ranges(out, a)
            return out
        if e.is_Mul:
            out = args[0]
            for a in args[1:]:
                out = mul_ranges(out, a)
            return out
        if e.is_Pow and e.exp.is_Integer and int(e.exp) >= 0:
            return pow_ranges(args[0], int(e.exp))
        if isinstance(e, FloorDiv):
            return floordiv_ranges(args[0], args[1])
        if isinstance(e, CeilDiv):
            neg = floordiv_ranges(ValueRange(-args[0].hi, -args[0].lo), args[1])
            return ValueRange(-neg.hi, -neg.lo)
        if isinstance(e, ModularIndexing):
            return mod_ranges(floordiv_ranges(args[0], args[1]), args[2])
        if isinstance(e, sympy.Min):
            return ValueRange(min(a.lo for a in args), min(a.hi for a in args))
        if isinstance(e, sympy.Max):
            return ValueRange(max(a.lo for a in args), max(a.hi for a in args))
        return FULL


def index_fits_int32(expr, var_ranges: Mapping | None = None) -> bool:
    """True if `expr` and every partial result of evaluating it fit in int32.

    Checks each subexpression's range, each sum's positive and negative parts
    separately (any summation order), each product's magnitudes, and that each
    loop bound (size) itself fits, so 32-bit C or Triton code cannot overflow.
    """
    expr = sympify(expr)
    b = IndexBounds(var_range_map(var_ranges))
    for e in sympy.preorder_traversal(expr):
        r = b.bound(e)
        if not r.within(INT32_MIN, INT32_MAX):
            return False
        if e.is_Symbol and r.hi + 1 > INT32_MAX:
            return False
        if e.is_Add:
            rs = [b.bound(a) for a in e.args]
            if sum(max(x.hi, 0) for x in rs) > INT32_MAX or sum(min(x.lo, 0) for x in rs) < INT32_MIN:
                return False
        elif e.is_Mul:
            mag = 1
            for a in e.args:
                x = b.bound(a)
                mag = _mul(mag, max(abs(x.lo), abs(x.hi)))
            if mag > INT32_MAX:
                return False
    return True


# ---------------------------------------------------------------- value expressions


def _cmp(fn: Callable[[ValueRange, ValueRange], bool | None]):
    def rule(args, node):
        a, b = args
        if not node.args[0].dtype.is_floating:  # NaN makes float comparisons undecidable
            res = fn(a, b)
            if res is not None:
                return ValueRange.point(int(res))
        return BOOL

    return rule


def _lt(a, b):
    return True if a.hi < b.lo else False if a.lo >= b.hi else None


def _le(a, b):
    return True if a.hi <= b.lo else False if a.lo > b.hi else None


def _eq(a, b):
    if a.is_point and b.is_point and a.lo == b.lo:
        return True
    return False if (a.hi < b.lo or b.hi < a.lo) else None


def _not(x):
    return None if x is None else not x


def _remainder(args, node):
    a, b = args
    if b.lo > 0:
        hi = b.hi - 1 if node.dtype.is_integer else b.hi
        return a if (a.lo >= 0 and a.hi < b.lo) else ValueRange(0, hi)
    return FULL


def _trunc_cast(args, node):
    if node.dtype.is_bool:
        return BOOL
    if node.args[0].dtype.is_floating and node.dtype.is_integer:
        return dtype_range(node.dtype)  # NaN and out-of-range floats become arbitrary integers
    return args[0]  # exact, or wraps: _clip_to_dtype widens a range that leaves the dtype


def _where(args, node):
    c, a, b = args
    if c == ValueRange.point(1):
        return a
    if c == ValueRange.point(0):
        return b
    return a.union(b)


def _abs(args, node):
    a = args[0]
    if a.lo >= 0:
        return a
    if a.hi <= 0:
        return ValueRange(-a.hi, -a.lo)
    return ValueRange(0, max(-a.lo, a.hi))


# op name -> (ranges of operands, node) -> range; anything absent gets its dtype's range.
_VALUE_RULES: dict[str, Callable] = {
    "add": lambda r, n: add_ranges(*r),
    "sub": lambda r, n: add_ranges(r[0], ValueRange(-r[1].hi, -r[1].lo)),
    "mul": lambda r, n: mul_ranges(*r),
    "neg": lambda r, n: ValueRange(-r[0].hi, -r[0].lo),
    "abs": _abs,
    "maximum": lambda r, n: ValueRange(max(r[0].lo, r[1].lo), max(r[0].hi, r[1].hi)),
    "minimum": lambda r, n: ValueRange(min(r[0].lo, r[1].lo), min(r[0].hi, r[1].hi)),
    "relu": lambda r, n: ValueRange(max(r[0].lo, 0), max(r[0].hi, 0)),
    "floordiv": lambda r, n: floordiv_ranges(*r) if n.dtype.is_integer else FULL,
    "remainder": _remainder,
    "where": _where,
    "to_dtype": _trunc_cast,
    "sigmoid": lambda r, n: BOOL,
    "tanh": lambda r, n: ValueRange(-1, 1),
    "exp": lambda r, n: ValueRange(0, INF),
    "rand": lambda r, n: BOOL,
    "lt": _cmp(_lt),
    "le": _cmp(_le),
    "gt": _cmp(lambda a, b: _lt(b, a)),
    "ge": _cmp(lambda a, b: _le(b, a)),
    "eq": _cmp(_eq),
    "ne": _cmp(lambda a, b: _not(_eq(a, b))),
    "logical_and": lambda r, n: ValueRange(min(r[0].lo, r[1].lo), min(r[0].hi, r[1].hi)),
    "logical_or": lambda r, n: ValueRange(max(r[0].lo, r[1].lo), max(r[0].hi, r[1].hi)),
    "logical_not": lambda r, n: ValueRange(1 - r[0].hi, 1 - r[0].lo),
}


def _clip_to_dtype(r: ValueRange, d: dt.DType) -> ValueRange:
    """Integer ops wrap on overflow: a range that leaves the dtype becomes the whole dtype."""
    full = dtype_range(d)
    if d.is_floating:
        return r
    return r if r.within(full.lo, full.hi) else full


# where(x OP k, a, b) with k an integer constant: the range of x where the condition holds, and
# where it fails (wrapping a negative index, `where(i < 0, i + n, i)`, then provably lands in [0, n)).
_HOLDS = {
    "lt": lambda k: (ValueRange(-INF, k - 1), ValueRange(k, INF)),
    "le": lambda k: (ValueRange(-INF, k), ValueRange(k + 1, INF)),
    "gt": lambda k: (ValueRange(k + 1, INF), ValueRange(-INF, k)),
    "ge": lambda k: (ValueRange(k, INF), ValueRange(-INF, k - 1)),
}
_MIRROR = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}  # k OP x == x MIRROR k


def _intersect(a: ValueRange, b: ValueRange) -> ValueRange | None:
    lo, hi = max(a.lo, b.lo), min(a.hi, b.hi)
    return ValueRange(lo, hi) if lo <= hi else None


def _int_constant(n) -> int | None:
    if isinstance(n, Constant) and n.dtype.is_integer and isinstance(n.value, int | np.integer):
        return int(n.value)
    return None


def _node_range(n, ranges: Callable, ib: IndexBounds) -> ValueRange:
    """One node's range from its operands' (`ranges(node)`), clipped to its dtype."""
    if isinstance(n, Constant):
        v = n.value
        r = FULL if isinstance(v, float) and math.isnan(v) else ValueRange.point(int(v) if isinstance(v, bool) else v)
    elif isinstance(n, IndexValue):
        r = ib.bound(n.index)
    elif isinstance(n, Op):
        rule = _VALUE_RULES.get(n.name)
        r = rule([ranges(a) for a in n.args], n) if rule else dtype_range(n.dtype)
    else:
        r = dtype_range(n.dtype)
    return _clip_to_dtype(r, n.dtype)


def _rebound(root: Value, x: Value, xr: ValueRange, ib: IndexBounds) -> ValueRange:
    """`root`'s range when `x` (a node under it, or an equal copy) is known to lie in `xr`."""
    local: dict[int, ValueRange] = {}
    hx = hash(x)
    for m in walk(root):
        same = m is x or (hash(m) == hx and m == x)  # rewrites (index substitution) may copy shared nodes
        local[id(m)] = xr if same else _node_range(m, lambda a: local[id(a)], ib)
    return local[id(root)]


def _where_refined(n: Op, out: dict, ib: IndexBounds) -> ValueRange:
    """where(x OP k, a, b): each branch bounded with x narrowed to where it is taken."""
    base = _node_range(n, lambda a: out[id(a)], ib)
    cond, a, b = n.args
    if not (isinstance(cond, Op) and cond.name in _HOLDS and cond.args[0].dtype.is_integer):
        return base
    x, k, name = cond.args[0], _int_constant(cond.args[1]), cond.name
    if k is None:
        x, k, name = cond.args[1], _int_constant(cond.args[0]), _MIRROR[name]
    if k is None or isinstance(x, Constant):
        return base
    parts = []
    for branch, taken in zip((a, b), _HOLDS[name](k)):
        xr = _intersect(out[id(x)], taken)
        if xr is not None:  # (None: that branch is never taken)
            parts.append(_rebound(branch, x, xr, ib))
    if not parts:
        return base
    r = parts[0] if len(parts) == 1 else parts[0].union(parts[1])
    return _intersect(r, base) or base


def bound_values(root: Value, var_ranges: Mapping | None = None) -> dict[int, ValueRange]:
    """Ranges of every node of the DAG (by id), operands first."""
    ib = IndexBounds(var_range_map(var_ranges))
    out: dict[int, ValueRange] = {}
    for n in walk(root):
        if isinstance(n, Op) and n.name == "where":
            out[id(n)] = _clip_to_dtype(_where_refined(n, out, ib), n.dtype)
        else:
            out[id(n)] = _node_range(n, lambda a: out[id(a)], ib)
    return out


def bound_value(root: Value, var_ranges: Mapping | None = None) -> ValueRange:
    """A sound range of `root` (ints/bools; floats exclude NaN) over the loop ranges."""
    return bound_values(root, var_ranges)[id(root)]


def provably_true(cond: Value, var_ranges: Mapping | None = None) -> bool:
    """True when the bool value `cond` holds at every point (its check can be dropped)."""
    return bound_value(cond, var_ranges) == ValueRange.point(1)


def provably_false(cond: Value, var_ranges: Mapping | None = None) -> bool:
    return bound_value(cond, var_ranges) == ValueRange.point(0)


def bounds_check_needed(index: Value, bound, var_ranges: Mapping | None = None) -> bool:
    """False when 0 <= index < bound provably holds, so codegen may omit the check. A symbolic bound
    (a size symbol's extent) is compared symbolically (symbolic_bounds.py)."""
    from .symbolic_bounds import in_bounds  # (it evaluates ranges with this module)

    return not in_bounds(index, bound, var_ranges)


def indirect_checks_needed(load: Load, var_ranges: Mapping | None = None) -> tuple[bool, ...]:
    """For each (symbol, value, bound) of `load.indirect`: whether its bounds check must stay."""
    return tuple(bounds_check_needed(v, b, var_ranges) for _, v, b in load.indirect)


def indirect_ranges(load: Load) -> dict:
    """Ranges of a load's indirect symbols once their bounds checks have passed."""
    return {s: _size_range(b) for s, _, b in load.indirect}
