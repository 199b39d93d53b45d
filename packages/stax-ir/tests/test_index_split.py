"""Index-set splitting (index_split.py): the points where a body's comparisons and clamps change along
a loop, and the body specialized to each piece, checked against the interpreter on the whole loop."""

import numpy as np
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from irtestlib import index_exprs, run_pointwise
from stax import ir
from stax.ir import ValueRange, map_indices, walk
from stax.ir import dtypes as dt
from stax.ir.index_split import specialize, split_points

x0, x1 = ir.pointwise_vars(2)
I64, F32 = dt.int64, dt.float32
Min, Max = sympy.Min, sympy.Max


def _cmp(name, v, k):
    return ir.op(name, v, ir.const(k, I64))


def _cat(width: int, parts: int):
    """cat of `parts` inputs of `width` columns along x1, as the frontend writes it (clamped loads)."""
    t = ir.index_value(x1)
    out = ir.load(f"in{parts - 1}", width * x0 + Max(0, Min(width - 1, x1 - width * (parts - 1))), F32)
    for k in reversed(range(parts - 1)):
        load = ir.load(f"in{k}", width * x0 + Max(0, Min(width - 1, x1 - width * k)), F32)
        out = ir.op("where", _cmp("lt", t, width * (k + 1)), load, out)
    return out


def _pad(n: int, p: int):
    """constant_pad_nd by p on both sides of x1 (and of x0), as the frontend writes it."""
    def inside(v):
        return ir.op("logical_and", _cmp("ge", ir.index_value(v), p), _cmp("lt", ir.index_value(v), n + p))
    idx = n * Max(0, Min(n - 1, x0 - p)) + Max(0, Min(n - 1, x1 - p))
    return ir.op("where", ir.op("logical_and", inside(x0), inside(x1)), ir.load("src", idx, F32), ir.const(0.0, F32))


def _pieces(value, sizes, points):
    n = sizes[1]
    return list(zip([0, *points], [*points, n]))


def _check_pieces(value, sizes, inputs):
    """Every piece of x1, specialized and evaluated on its own, equals the whole body's slice."""
    whole = run_pointwise(value, sizes, inputs)
    points = split_points(value, x1, 0, sizes[1])
    assert list(points) == sorted(set(points)) and all(0 < p < sizes[1] for p in points)
    out = []
    for lo, hi in _pieces(value, sizes, points):
        s = specialize(value, {x0: sizes[0], x1: ValueRange(lo, hi - 1)})
        shifted = map_indices(s, lambda e, lo=lo: e.xreplace({x1: x1 + lo}))
        got = run_pointwise(shifted, (sizes[0], hi - lo), inputs)
        np.testing.assert_array_equal(got, whole[:, lo:hi])
        out.append(s)
    return points, out


def _ops(value) -> set:
    return {n.name for n in walk(value) if isinstance(n, ir.Op)}


def test_a_concatenation_splits_into_one_plain_load_per_input():
    width, rows = 8, 3
    inputs = {f"in{k}": (np.random.default_rng(k).standard_normal(rows * width).astype(np.float32), F32)
              for k in range(3)}
    points, pieces = _check_pieces(_cat(width, 3), (rows, 3 * width), inputs)
    assert points == (8, 16)
    for k, s in enumerate(pieces):  # one input, no select, an affine index
        assert isinstance(s, ir.Load) and s.buffer == f"in{k}"
        assert not s.index.atoms(sympy.Min, sympy.Max) and s.index == width * x0 + x1 - width * k


def test_a_constant_pad_splits_at_its_edges_only():
    n, p = 6, 2
    src = {"src": (np.arange(n * n, dtype=np.float32) + 1, F32)}
    points, pieces = _check_pieces(_pad(n, p), (n + 2 * p, n + 2 * p), src)
    assert points == (p, n + p)  # not also where the clamp meets its bound (n + p - 1): it agrees there
    assert pieces[0] == ir.const(0.0, F32) and pieces[2] == ir.const(0.0, F32)
    middle = pieces[1]  # x0's test and clamp stay (x1 alone was split); x1's are gone
    assert "where" in _ops(middle) and not any(x1 in a.free_symbols for a in _min_max(middle))


def _min_max(value) -> set:
    return {a for n in walk(value) if isinstance(n, ir.Load) for a in n.index.atoms(sympy.Min, sympy.Max)}


def test_a_body_without_branches_along_the_loop_has_no_points():
    body = ir.op("add", ir.load("a", 4 * x0 + x1, F32), ir.load("b", Min(3, x0), F32))
    assert split_points(body, x1, 0, 4) == ()


def test_clamps_fold_where_the_range_decides_them():
    """Min(55, x - 1) over x in [1, 56] is x - 1 (the constant is never below it); equal points keep one."""
    x = x1
    assert ir.simplify_index(Min(55, x - 1), {x: ValueRange(1, 56)}) == x - 1
    assert ir.simplify_index(Max(0, x - 1), {x: ValueRange(1, 56)}) == x - 1
    assert ir.simplify_index(Min(55, x - 1), {x: ValueRange(1, 57)}) == Min(55, x - 1)
    assert ir.simplify_index(Min(x0, x0 + 0 * x), {x0: 4}) == x0


_CMPS = st.sampled_from(["lt", "le", "gt", "ge", "eq", "ne"])
N_IN = 64


@settings(max_examples=60, deadline=None)
@given(a=index_exprs([x0, x1], max_leaves=5), b=index_exprs([x0, x1], max_leaves=5),
       c=index_exprs([x0, x1], max_leaves=4), cmp=_CMPS, k=st.integers(-3, 14), n0=st.integers(1, 3),
       n1=st.integers(1, 13))
def test_specialized_pieces_equal_the_body(a, b, c, cmp, k, n0, n1):
    """Random clamped indices and comparisons: each piece's specialized body gives the whole body's values."""
    def wrap(e):  # any index, kept inside the input
        return ir.ModularIndexing(e + 8 * N_IN, 1, N_IN)
    cond = ir.op(cmp, ir.index_value(c), ir.const(k, I64))
    value = ir.op("where", cond, ir.load("p", wrap(a), F32), ir.op("neg", ir.load("q", wrap(b), F32)))
    inputs = {"p": (np.arange(N_IN, dtype=np.float32), F32), "q": (np.arange(N_IN, dtype=np.float32) * 3 + 1, F32)}
    _check_pieces(value, (n0, n1), inputs)
