"""Row / Emit / Meta / Aux and the small helpers every op category uses.

`Meta.exact` tracks whether stax and eager must agree bit for bit on a value (views,
selections, integer math do; sums and transcendental functions need not). Ops that are
discontinuous in their input (comparisons, argmax, float->int casts) are applied only to
exact values, so a one-ulp difference upstream can never flip them: that keeps the
fuzzer free of false alarms without loosening its tolerances.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from ..program import FLOATS, INTS

CODE = {"f32": "D.f32", "f64": "D.f64", "f16": "D.f16", "bf16": "D.bf16", "i32": "D.i32", "i64": "D.i64", "b": "D.b"}


@dataclass(frozen=True)
class Meta:
    """What generation and resolution know about one value."""

    shape: tuple
    dtype: str
    strides: tuple = ()
    exact: bool = True  # stax must match eager bit for bit
    special: bool = False  # may hold NaN / inf
    k: float = 1.0  # error-growth factor: tolerances scale with it
    grad: bool = False  # requires grad
    writable: bool = True  # an in-place op may write it (no overlap, not a grad leaf's storage)
    tol: str | None = None  # the coarsest float type any rounding difference came from (None: exact)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def is_float(self) -> bool:
        return self.dtype in FLOATS

    @property
    def is_int(self) -> bool:
        return self.dtype in INTS

    @property
    def is_bool(self) -> bool:
        return self.dtype == "b"


@dataclass(frozen=True)
class Aux:
    """An auxiliary graph input a row needs (index tensor, weight, mask, ...).

    kind: 'data' (random values; a float one requires grad when the program runs backward),
    'index' (ints in [low, high)), 'unique' (ints in [0, high), distinct along `dim`),
    'mask' (bools), 'positive' (floats > 0, e.g. a running variance), 'unit' (floats in (0, 1)).
    """

    kind: str
    shape: tuple
    dtype: str
    low: int = 0
    high: int = 0
    dim: int = 0
    layout: str = "contig"
    grad: bool = True


@dataclass(frozen=True)
class Emit:
    """A resolved op: `expr` over `{0}`.. (arguments) and `{a0}`.. (aux inputs).

    pre: statements run before `expr` (assignments into views); cost: added to the
    error factor k; exact / special / grad: overrides of the row's defaults; inplace:
    the op writes argument 0 (and every alias of it); view: the result aliases argument 0.
    """

    expr: str
    aux: tuple = ()
    pre: tuple = ()
    cost: float = 0.0
    exact: bool | None = None
    special: bool = False
    grad: bool = True
    inplace: bool = False
    view: bool = False


def _any(m: Meta) -> bool:
    return True


@dataclass(frozen=True)
class Row:
    """One op form. `build(rng, metas) -> Emit | None` (None: not applicable here).

    arity: values read from the program; `optional` trailing ones may be absent (the row
    then picks a scalar or an aux input itself). `accepts` checks argument 0's type,
    `partner(m0, mk)` argument k's. exact: bit-identical output for exact inputs;
    needs_exact: discontinuous, so only applied to exact arguments.
    """

    name: str
    category: str
    build: Callable
    arity: int = 1
    optional: int = 0
    accepts: Callable = _any
    partner: Callable | None = None
    exact: bool = False
    needs_exact: bool = False
    weight: float = 1.0
    tags: frozenset = field(default_factory=frozenset)


# ---- type predicates -------------------------------------------------------------------

def is_float(m: Meta) -> bool:
    return m.is_float


def not_bool(m: Meta) -> bool:
    return not m.is_bool


def is_intlike(m: Meta) -> bool:
    return m.is_int or m.is_bool


def nonempty(m: Meta) -> bool:
    return m.numel > 0


def rank_at_least(n: int) -> Callable:
    return lambda m: m.ndim >= n


def both(*preds) -> Callable:
    return lambda m: all(p(m) for p in preds)


# ---- parameter helpers -------------------------------------------------------------------

def pick_dim(r: random.Random, m: Meta, negative: bool = True) -> int:
    """A dim of m (sometimes negative); 0 for a 0-dim tensor (torch accepts 0 and -1 there)."""
    n = max(m.ndim, 1)
    d = r.randrange(n)
    return d - n if negative and r.random() < 0.3 else d


def sized_dim(r: random.Random, m: Meta) -> tuple[int, int] | None:
    """(d, size) of a random dim of m (ndim >= 1), or None when that dim is empty (nothing to index)."""
    d = r.randrange(m.ndim)
    return (d, m.shape[d]) if m.shape[d] else None


def pick_dims(r: random.Random, m: Meta) -> list[int]:
    if m.ndim == 0:
        return [0]
    k = r.randint(1, m.ndim)
    return sorted(r.sample(range(m.ndim), k))


def float_literal(r: random.Random) -> str:
    return repr(r.choice([0.5, -1.5, 2.0, 0.1, 3.0, -0.25, 1e-3, 7.0, -4.0]))


def scalar_for(r: random.Random, dtype: str, allow_float: bool = True) -> str:
    """A Python scalar literal that combines with `dtype` (sometimes one that promotes)."""
    if dtype == "b":
        return r.choice(["True", "False", "1", "2"])
    if dtype in INTS:
        if allow_float and r.random() < 0.2:
            return float_literal(r)
        return str(r.choice([1, 2, 3, -1, 5, -7, 0]))
    return r.choice([float_literal(r), float_literal(r), str(r.choice([1, 2, -3]))])


def broadcast_shape(r: random.Random, shape: tuple) -> tuple:
    """A shape that broadcasts against `shape` to exactly `shape`: some dims set to 1,
    some leading dims dropped."""
    s = list(shape)
    drop = r.randint(0, len(s)) if r.random() < 0.3 else 0
    s = s[drop:]
    return tuple(1 if (n != 1 and r.random() < 0.3) else n for n in s)


def add_aux(aux: list, spec: Aux) -> str:
    aux.append(spec)
    return "{a" + str(len(aux) - 1) + "}"


def partner_operand(r: random.Random, m: Meta, aux: list, dtypes=None, scalar: bool = True,
                    allow_float_scalar: bool = True) -> str:
    """The second operand of a binary op when the program gave none: a Python scalar, a new
    input of a broadcastable shape, or a 0-dim tensor input (dtype from `dtypes`, default m's)."""
    u = r.random()
    if scalar and u < 0.35:
        return scalar_for(r, m.dtype, allow_float_scalar)
    dtype = r.choice(dtypes) if dtypes else (m.dtype if r.random() < 0.8 else r.choice(_promotable(m.dtype)))
    shape = () if u > 0.9 else broadcast_shape(r, m.shape)
    return add_aux(aux, Aux("data", shape, dtype))


def _promotable(dtype: str) -> list[str]:
    if dtype in FLOATS:
        return ["f32", "f64", "f16", "bf16"]
    if dtype in INTS:
        return ["i32", "i64", "b", "f32"]
    return ["b", "i64", "f32"]


def broadcastable(a: tuple, b: tuple) -> bool:
    for x, y in zip(reversed(a), reversed(b)):
        if x != y and x != 1 and y != 1:
            return False
    return True


def same_shape_partner(m0: Meta, m1: Meta) -> bool:
    """m1 broadcasts against m0 without growing it."""
    return broadcastable(m0.shape, m1.shape) and len(m1.shape) <= len(m0.shape) and all(
        y == 1 or x == y for x, y in zip(reversed(m0.shape), reversed(m1.shape)))


PRECISION = {"f64": 0, "f32": 1, "f16": 2, "bf16": 3}  # finer -> coarser


def coarsest(*dtypes) -> str | None:
    """The float type with the largest epsilon among `dtypes` (None entries ignored)."""
    got = [d for d in dtypes if d in PRECISION]
    return max(got, key=PRECISION.__getitem__) if got else None


def reduction_cost(n: int) -> float:
    """Tolerance growth of an accumulation over n terms (error grows like sqrt(n))."""
    return 1.0 + math.sqrt(max(n, 1))


def prod(xs) -> int:
    return math.prod(xs)
