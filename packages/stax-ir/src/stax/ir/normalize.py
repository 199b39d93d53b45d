"""Index normalization for dependence comparison (§7.1, Prop 7.2).

Two accesses are the same dependence when they touch the same address at the same
point of the (row-major flattened) iteration space. `normalize_index` rewrites an
index over loop variables into one canonical form that depends only on that address
sequence, so equal accesses written differently compare equal:

  * size-1 loop dimensions are dropped (their variable is 0);
  * the index is written as an affine map over a mixed-radix split of the flattened
    iteration, offset + sum(stride_k * c_k); adjacent dimensions are merged when the
    outer stride equals size * stride of the inner one (loop coalescing), so
    128*i0 + i1 over (64, 128) becomes c0 over {c0: 8192};
  * trailing dimensions the index does not use are dropped: reading buf1 at i0 inside
    a (64, 128) loop gives c0 over {c0: 64}, equal to buf1's write index — the prefix
    rule of Prop 7.2 (the consumer has an inner dimension the producer does not).

FloorDiv/ModularIndexing terms (views) are resolved exactly: the variables they couple
are evaluated on their (bounded) grid and the values are decomposed into mixed-radix
digits, which is exact because the canonical form is a function of the values only.
What cannot be resolved (symbolic sizes, indirect symbols, non-affine maps, huge
coupled grids) keeps its expression with renamed variables: such forms never equal an
affine one, so the comparison stays conservative (unequal means "do not fuse").
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import sympy

from .index import sympify, var
from .index_printer import evaluate

# Largest grid (points) evaluated to resolve FloorDiv/ModularIndexing couplings.
MAX_EVAL_POINTS = 1 << 20


@dataclass(frozen=True)
class NormalizedIndex:
    """A canonical index: `offset + sum(stride * c_k)` over `sizes`, or a kept expression.

    `dims` holds (size, stride) pairs outer to inner when the map is affine;
    `expr` is set instead when it could not be put in affine form (compare
    conservatively). Equality and hashing are structural.
    """

    offset: int = 0
    dims: tuple = ()
    expr: sympy.Expr | None = None
    expr_sizes: tuple = ()

    def __hash__(self) -> int:  # dependences are hashed constantly during fusion: compute once
        return self._hash

    @functools.cached_property
    def _hash(self) -> int:
        return hash((self.offset, self.dims, self.expr, self.expr_sizes))

    @property
    def is_affine(self) -> bool:
        return self.expr is None

    @functools.cached_property
    def sizes(self) -> tuple:
        return tuple(s for s, _ in self.dims) if self.expr is None else self.expr_sizes

    @property
    def strides(self) -> tuple:
        return tuple(t for _, t in self.dims)

    @property
    def vars(self) -> tuple:
        return tuple(var("c", k) for k in range(len(self.sizes)))

    @property
    def ranges(self) -> dict:
        """{c0: size0, ...} in loop order (outer first)."""
        return dict(zip(self.vars, self.sizes))

    @property
    def index(self) -> sympy.Expr:
        if self.expr is not None:
            return self.expr
        return _affine_expr(self.offset, self.dims)

    def numel(self) -> int:
        return self._numel

    @functools.cached_property
    def _numel(self) -> int:
        n = 1
        for s in self.sizes:
            n *= int(s)
        return n

    def addresses(self) -> np.ndarray:
        """The address sequence over the canonical iteration, row-major (for tests/debugging)."""
        sizes = [int(s) for s in self.sizes]
        env = _grid(self.vars, sizes)
        return np.broadcast_to(np.asarray(evaluate(self.index, env), dtype=np.int64), tuple(sizes)).reshape(-1)

    def __str__(self) -> str:
        return _format(self)


@functools.lru_cache(maxsize=4096)
def _format(n: NormalizedIndex) -> str:
    ranges = ", ".join(f"{v}: {s}" for v, s in zip(n.vars, n.sizes))
    return f"{n.index} over {{{ranges}}}"


@functools.lru_cache(maxsize=4096)
def _affine_expr(offset: int, dims: tuple) -> sympy.Expr:
    e = sympy.Integer(offset)
    for k, (_, stride) in enumerate(dims):
        e = e + sympy.Integer(stride) * var("c", k)
    return e


def normalize_index(index, var_ranges, max_eval: int = MAX_EVAL_POINTS) -> NormalizedIndex:
    """Canonical form of `index` over loop variables `var_ranges`.

    `var_ranges` is a mapping or sequence of (symbol, size) pairs in loop order,
    outer first (pointwise variables, then reduction variables).
    """
    pairs = tuple(var_ranges.items()) if isinstance(var_ranges, Mapping) else tuple(tuple(p) for p in var_ranges)
    return _normalize_input(index, pairs, max_eval)


@functools.lru_cache(maxsize=65536)
def _normalize_input(index, pairs: tuple, max_eval: int) -> NormalizedIndex:
    return _normalize(sympify(index), tuple((v, sympify(s)) for v, s in pairs), max_eval)


@functools.lru_cache(maxsize=65536)
def _normalize(index: sympy.Expr, pairs: tuple, max_eval: int) -> NormalizedIndex:
    if not all(s.is_Integer for _, s in pairs):
        return _kept(index, pairs)
    sizes_all = [int(s) for _, s in pairs]
    if any(s == 0 for s in sizes_all):
        return _kept(index, pairs)
    zero = {v: 0 for v, s in pairs if int(s) == 1}
    if zero:
        index = index.xreplace({v: sympy.Integer(0) for v in zero})
    vars_ = [v for v, s in pairs if int(s) != 1]
    sizes = [int(s) for _, s in pairs if int(s) != 1]
    pos = {v: k for k, v in enumerate(vars_)}
    if index.free_symbols - set(pos):
        return _kept(index, tuple(zip(vars_, map(sympy.Integer, sizes))))

    linear, const, nonlinear = _split_terms(index, pos)
    if linear is None:
        return _kept(index, tuple(zip(vars_, map(sympy.Integer, sizes))))
    blocks = _coupled_blocks(len(vars_), nonlinear)
    dims: list[tuple[int, int]] = []
    for lo, hi in blocks:
        terms = [t for t, (a, b) in nonlinear if lo <= a and b <= hi]
        if lo == hi and not terms:
            dims.append((sizes[lo], linear.get(lo, 0)))
            continue
        digits = _block_digits(vars_[lo : hi + 1], sizes[lo : hi + 1], linear, pos, terms, max_eval)
        if digits is None:
            return _kept(index, tuple(zip(vars_, map(sympy.Integer, sizes))))
        base, block_dims = digits
        const += base
        dims.extend(block_dims)
    return NormalizedIndex(const, _canonical_dims(dims))


def _split_terms(index, pos):
    """Linear coefficients {position: int}, constant, and non-linear terms with their var span."""
    linear: dict[int, int] = {}
    const = 0
    nonlinear = []
    for term in sympy.Add.make_args(index):
        coeff, rest = term.as_coeff_Mul()
        if rest == 1:
            if not coeff.is_Integer:
                return None, 0, []
            const += int(coeff)
        elif rest.is_Symbol and coeff.is_Integer:
            k = pos[rest]
            linear[k] = linear.get(k, 0) + int(coeff)
        else:
            ks = [pos[s] for s in term.free_symbols]
            nonlinear.append((term, (min(ks), max(ks))))
    return linear, const, nonlinear


def _coupled_blocks(n: int, nonlinear) -> list[tuple[int, int]]:
    """Consecutive runs of loop positions that non-linear terms couple together."""
    spans = sorted(span for _, span in nonlinear)
    blocks, k, j = [], 0, 0
    while k < n:
        hi = k
        while j < len(spans) and spans[j][0] <= hi:
            hi = max(hi, spans[j][1])
            j += 1
        blocks.append((k, hi))
        k = hi + 1
    return blocks


def _grid(vars_, sizes) -> dict:
    n = len(sizes)
    env = {}
    for k, (v, s) in enumerate(zip(vars_, sizes)):
        shape = [1] * n
        shape[k] = s
        env[v] = np.arange(s, dtype=np.int64).reshape(shape)
    return env


def _block_digits(vars_, sizes, linear, pos, terms, max_eval):
    """Evaluate a coupled block on its grid and split it into affine mixed-radix digits."""
    npoints = 1
    for s in sizes:
        npoints *= s
    if npoints > max_eval:
        return None
    expr = sympy.Add(*terms, *(sympy.Integer(linear.get(pos[v], 0)) * v for v in vars_))
    try:
        values = np.asarray(evaluate(expr, _grid(vars_, sizes)))
    except (NotImplementedError, TypeError, KeyError, ZeroDivisionError):
        return None
    if values.dtype.kind not in "iu":
        return None
    return affine_digits(np.broadcast_to(values.astype(np.int64), tuple(sizes)).reshape(-1))


def affine_digits(values: np.ndarray):
    """(offset, [(size, stride), ...]) with values[x] = offset + sum(stride * digit), or None.

    The split is the unique coarsest one: the innermost digit ends where the
    first difference changes, then the row starts are split recursively.
    """
    f = np.asarray(values, dtype=np.int64).reshape(-1)
    base = int(f[0])
    dims: list[tuple[int, int]] = []
    while len(f) > 1:
        step = f[1] - f[0]
        breaks = np.nonzero(np.diff(f) != step)[0]
        r = int(breaks[0]) + 1 if len(breaks) else len(f)
        if len(f) % r:
            return None
        rows = f.reshape(-1, r)
        if not np.array_equal(rows, rows[:, :1] + step * np.arange(r, dtype=np.int64)):
            return None
        dims.insert(0, (r, int(step)))
        f = rows[:, 0]
    return base, dims


def _canonical_dims(dims) -> tuple:
    """Merge coalescible neighbours, drop size-1 and unused trailing dimensions."""
    out: list[tuple[int, int]] = []
    for size, stride in dims:
        if size == 1:
            continue
        out.append((size, stride))
        while len(out) >= 2 and out[-2][1] == out[-1][0] * out[-1][1]:
            (s0, _), (s1, t1) = out[-2], out[-1]
            out[-2:] = [(s0 * s1, t1)]
    while out and out[-1][1] == 0:
        out.pop()
    return tuple(out)


def _kept(index, pairs) -> NormalizedIndex:
    """Conservative form: drop size-1 and unused trailing variables, rename to c0, c1, ..."""
    pairs = [(v, s) for v, s in pairs if not (s.is_Integer and int(s) == 1)]
    index = index.xreplace({v: sympy.Integer(0) for v, s in pairs if s.is_Integer and int(s) == 1})
    used = index.free_symbols
    while pairs and pairs[-1][0] not in used:
        pairs.pop()
    ren = {v: var("c", k) for k, (v, _) in enumerate(pairs)}
    return NormalizedIndex(expr=index.xreplace(ren), expr_sizes=tuple(s for _, s in pairs))


def affine_coefficients(index, vars_: Sequence) -> tuple[dict, int] | None:
    """({var: integer stride}, integer offset) when `index` is affine in `vars_`, else None.

    Symbols other than `vars_` make the index non-affine for this purpose.
    """
    index = sympify(index)
    pos = {v: k for k, v in enumerate(vars_)}
    if index.free_symbols - set(pos):
        return None
    linear, const, nonlinear = _split_terms(index, pos)
    if linear is None or nonlinear:
        return None
    return {vars_[k]: c for k, c in linear.items()}, const
