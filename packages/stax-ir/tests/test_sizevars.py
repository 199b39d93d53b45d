"""Symbolic sizes (issue 23): a program built over size symbols means, at every binding, the program built
with those sizes as integers; simplification, normalization and the 32-bit decision stay exact/sound."""

import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from stax.ir import (
    ComputedBuffer,
    Graph,
    InputBuffer,
    Layout,
    Pointwise,
    Reduction,
    SizeVars,
    bind_graph,
    cast,
    index_value,
    interpret,
    load,
    op,
    outputs,
    size_var,
    to_storage,
)
from stax.ir import dtypes as dt
from stax.ir.examples import example_7_1
from stax.ir.index import FloorDiv, ModularIndexing, pointwise_vars, reduction_vars
from stax.ir.index_printer import evaluate
from stax.ir.interpreter import index_grid
from stax.ir.normalize import normalize_index
from stax.ir.simplify import simplify_index
from stax.ir.sizevars import NO_SIZE_VARS, provably_equal
from stax.ir.value_ranges import ValueRange, bound_index, index_fits_int32

F32, I64 = dt.float32, dt.int64
s0, s1 = size_var("s0"), size_var("s1")
i0, i1 = pointwise_vars(2)
(r0,) = reduction_vars(1)
TABLE = SizeVars.of(s0=(2, 4096, 64), s1=(2, 4096, 128))


def transpose_add_iota(n, m, size_vars=NO_SIZE_VARS):
    """out[i, j] = x.t()[i, j] + y[i, j] * (i*m + j): a strided read, a contiguous one and an iota."""
    x = InputBuffer("x", Layout.contiguous((m, n), F32))
    y = InputBuffer("y", Layout.contiguous((n, m), F32))
    prod = op("mul", load("y", m * i0 + i1, F32), cast(index_value(m * i0 + i1, I64), F32))
    value = op("add", load("x", n * i1 + i0, F32), prod)
    out = ComputedBuffer("out", Layout.contiguous((n, m), F32), Pointwise((n, m), value))
    return Graph((x, y), (out,), ("out",), size_vars)


def slice_and_row_max(n, m, size_vars=NO_SIZE_VARS):
    """x[:, 1:m+1] (a symbolic storage offset per row) and its row max; the max is broadcast back."""
    x = InputBuffer("x", Layout.contiguous((n, m + 2), F32))
    sl = load("x", (m + 2) * i0 + r0 + 1, F32)
    mx = ComputedBuffer("mx", Layout.contiguous((n,), F32), Reduction((n,), (m,), "max", sl))
    sub = op("sub", load("x", (m + 2) * i0 + i1 + 1, F32), load("mx", i0, F32))
    out = ComputedBuffer("out", Layout.contiguous((n, m), F32), Pointwise((n, m), sub))
    return Graph((x,), (mx, out), ("out",), size_vars)


def flat_view_and_mask(n, m, size_vars=NO_SIZE_VARS):
    """A flat (n*m,) view of an (n, m) tensor through FloorDiv/ModularIndexing by m, and a mask on it."""
    x = InputBuffer("x", Layout.contiguous((n, m), F32))
    (c,) = pointwise_vars(1)
    read = load("x", m * FloorDiv(c, m) + ModularIndexing(c, 1, m), F32)
    first_row = op("lt", index_value(c, I64), index_value(sympy.sympify(m), I64))
    value = op("where", first_row, read, op("neg", read))
    out = ComputedBuffer("out", Layout.contiguous((n * m,), F32), Pointwise((n * m,), value))
    return Graph((x,), (out,), ("out",), size_vars)


def gather_rows(n, m, size_vars=NO_SIZE_VARS):
    """out[j, k] = x[idx[j], k]: an indirect read checked against the symbolic bound n."""
    x = InputBuffer("x", Layout.contiguous((n, m), F32))
    idx = InputBuffer("idx", Layout.contiguous((m,), I64))
    t = sympy.Symbol("t0", integer=True, nonnegative=True)
    value = load("x", m * t + i1, F32, indirect=((t, load("idx", i0, I64), n),))
    out = ComputedBuffer("out", Layout.contiguous((m, m), F32), Pointwise((m, m), value))
    return Graph((x, idx), (out,), ("out",), size_vars)


def example(n, m, size_vars=NO_SIZE_VARS):
    return example_7_1(n, m, size_vars=size_vars)


PROGRAMS = [example, transpose_add_iota, slice_and_row_max, flat_view_and_mask, gather_rows]
BINDINGS = [(2, 2), (3, 7), (5, 2), (17, 33), (64, 128)]


def _inputs(graph: Graph, n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    feed = {}
    for inp in graph.inputs:
        shape = tuple(int(s) for s in inp.layout.sizes)
        if inp.layout.dtype == I64:
            arr = rng.integers(0, n, size=shape)
        else:
            arr = rng.standard_normal(shape)
        feed[inp.name] = to_storage(arr, inp.layout)
    return feed


@pytest.mark.parametrize("build", PROGRAMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("n,m", BINDINGS)
def test_symbolic_program_matches_the_static_build(build, n, m):
    """The symbolic graph through the interpreter at (s0, s1) = (n, m) equals the graph built with n, m."""
    static = build(n, m)
    symbolic = build(s0, s1, TABLE)
    feed = _inputs(static, n, seed=n * 1000 + m)
    want = outputs(static, interpret(static, feed))
    got = outputs(bind_graph(symbolic, {"s0": n, "s1": m}), interpret(symbolic, feed, sizes={"s0": n, "s1": m}))
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert w.shape == g.shape and w.dtype == g.dtype
        np.testing.assert_array_equal(g, w)


def test_bound_graph_is_the_static_graph():
    """Binding every size gives exactly the graph built with integers (same text, same hash)."""
    for build in PROGRAMS:
        bound = bind_graph(build(s0, s1, TABLE), {s0: 5, s1: 3})
        assert str(bound) == str(build(5, 3)) and bound.content_hash() == build(5, 3).content_hash()


def test_bindings_are_checked_against_the_table():
    g = example(s0, s1, TABLE)
    feed = {"primals_1": np.zeros(6, np.float32)}
    with pytest.raises(ValueError, match="outside its range"):
        interpret(g, feed, sizes={"s0": 1, "s1": 6})
    with pytest.raises(KeyError, match="no value given for size s1"):
        interpret(g, feed, sizes={"s0": 2})
    with pytest.raises(ValueError, match="pass sizes"):
        interpret(g, feed)


def test_graph_needs_a_row_for_every_size_symbol():
    with pytest.raises(ValueError, match="s1 has no row"):
        example(s0, s1, SizeVars.of(s0=(2, 8, 4)))
    assert "size s0 in [2, 4096] hint 64" in str(example(s0, s1, TABLE))
    assert "size" not in str(example(64, 128)).split("input")[0]  # static text (and hash) unchanged


# ---------------------------------------------------------------- the 32-bit decision


def test_int32_needs_a_range_bound():
    """s1*i0 + i1 over (s0, s1): provably 32-bit when s0, s1 <= 4096, unknown (64-bit) without a bound."""
    expr = s1 * i0 + i1
    loops = {i0: s0, i1: s1}
    assert index_fits_int32(expr, {**loops, **TABLE.value_ranges})
    assert not index_fits_int32(expr, loops)  # no range: never claim 32-bit
    big = SizeVars.of(s0=(2, 2**20, 64), s1=(2, 2**20, 128))
    assert not index_fits_int32(expr, {**loops, **big.value_ranges})  # the hints fit, the range does not


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 2**17), st.integers(1, 2**17), st.integers(0, 3))
def test_int32_decision_is_sound_at_the_largest_binding(hi0, hi1, extra):
    """Whenever the ranges prove 32-bit, the largest binding's largest index fits; when it cannot fit, False."""
    sv = SizeVars.of(s0=(1, hi0, 1), s1=(1, hi1, 1))
    expr = (s1 + extra) * i0 + i1 + extra * s0
    fits = index_fits_int32(expr, {i0: s0, i1: s1, **sv.value_ranges})
    largest = int(expr.subs({s0: hi0, s1: hi1, i0: hi0 - 1, i1: hi1 - 1}))
    if fits:
        assert largest <= 2**31 - 1
    if largest > 2**31 - 1:
        assert not fits


def test_loop_ranges_follow_the_size_ranges():
    r = bound_index(s1 * i0 + i1, {i0: s0, i1: s1, **TABLE.value_ranges})
    assert r == ValueRange(0, 4096 * 4096 - 1)


# ---------------------------------------------------------------- simplification and normalization


def _at(expr, binding, sizes):
    """Exact values of `expr` with the sizes bound, over the bound loop grid."""
    e = sympy.sympify(expr).xreplace(binding)
    vars_ = list(sizes)
    n = [int(sympy.sympify(sizes[v]).xreplace(binding)) for v in vars_]
    return np.broadcast_to(np.asarray(evaluate(e, index_grid(vars_, n)), dtype=np.int64), tuple(n))


VIEW_EXPRS = [
    FloorDiv(s1 * i0 + i1, s1),
    ModularIndexing(s1 * i0 + i1, 1, s1),
    FloorDiv(s1 * i0 + i1 + 1, s1),
    ModularIndexing(s1 * i0 + i1 + 1, 1, s1),
    s1 * FloorDiv(s1 * i0 + i1, s1) + ModularIndexing(s1 * i0 + i1, 1, s1),
    FloorDiv(i0, s1),
    FloorDiv(2 * s1 * i0 + i1, s1),
]


@pytest.mark.parametrize("expr", VIEW_EXPRS, ids=str)
@pytest.mark.parametrize("n,m", [(2, 2), (3, 5), (9, 4)])
def test_symbolic_simplification_is_exact(expr, n, m):
    loops = {i0: s0, i1: s1}
    simplified = simplify_index(expr, loops)
    binding = {s0: sympy.Integer(n), s1: sympy.Integer(m)}
    np.testing.assert_array_equal(_at(simplified, binding, loops), _at(expr, binding, loops))


def test_symbolic_views_fold():
    """The reshape round trip of a symbolic (s0, s1) tensor folds back to its loop variables."""
    loops = {i0: s0, i1: s1}
    assert simplify_index(FloorDiv(s1 * i0 + i1, s1), loops) == i0
    assert simplify_index(ModularIndexing(s1 * i0 + i1, 1, s1), loops) == i1
    assert simplify_index(FloorDiv(s1 * i0 + i1 + 1, s1), loops) != i0  # i1 + 1 may reach s1


NORMALIZE_CASES = [
    (s1 * i0 + r0, ((i0, s0), (i1, 1), (r0, s1))),
    (s1 * i0 + i1, ((i0, s0), (i1, s1))),
    (i0, ((i0, s0), (i1, s1))),
    (i0 + s0 * i1, ((i0, s0), (i1, s1))),
    ((s1 + 2) * i0 + i1 + 1, ((i0, s0), (i1, s1))),
    (s1 * FloorDiv(s1 * i0 + i1, s1) + ModularIndexing(s1 * i0 + i1, 1, s1), ((i0, s0), (i1, s1))),
    (3 * i0 + i1, ((i0, s0), (i1, 3))),
]


@pytest.mark.parametrize("expr,pairs", NORMALIZE_CASES, ids=lambda x: str(x))
@pytest.mark.parametrize("n,m", [(2, 3), (4, 4), (7, 2)])
def test_symbolic_normal_form_has_the_static_address_sequence(expr, pairs, n, m):
    """The canonical form over symbols, bound, walks the same addresses as the bound index does."""
    sym = normalize_index(expr, pairs)
    binding = {s0: sympy.Integer(n), s1: sympy.Integer(m)}
    bound_pairs = [(v, sympy.sympify(s).xreplace(binding)) for v, s in pairs]
    static = normalize_index(expr.xreplace(binding), bound_pairs)
    sizes = {c: s for c, s in zip(sym.vars, sym.sizes)}
    got = _at(sym.index, binding, sizes).reshape(-1)
    np.testing.assert_array_equal(got, static.addresses())


def test_example_7_1_accesses_normalize_as_in_the_book():
    """Example 7.1 with symbolic n, m: the row-sum write and the broadcast read are the same c0 over s0,
    x's reads are c0 over s0*s1 (the static c0 over 8192 up to the sizes)."""
    write = normalize_index(i0, [(i0, s0), (i1, 1)])
    read = normalize_index(i0, [(i0, s0), (i1, s1)])
    assert write == read and str(write) == "c0 over {c0: s0}"
    x_red = normalize_index(s1 * i0 + r0, [(i0, s0), (i1, 1), (r0, s1)])
    x_pw = normalize_index(s1 * i0 + i1, [(i0, s0), (i1, s1)])
    assert x_red == x_pw and str(x_pw) == "c0 over {c0: s0*s1}"
    assert normalize_index(i0 + 1, [(i0, s0)]) != normalize_index(i0, [(i0, s0)])


def test_provably_equal():
    assert provably_equal(s0 * s1, s1 * s0) and provably_equal((s0 + 1) * s1, s0 * s1 + s1)
    assert not provably_equal(s0, s1) and not provably_equal(s0 * s1, s0 * s1 + 1)
    assert provably_equal(64, 64) and not provably_equal(64, 128)


@given(st.integers(1, 500))
def test_nonnegativity_through_quotients_is_sound(n):
    """`s - s // 2` and `s - ceil(s / 3)` are proved >= 0 through the quotients' rational bounds; what is
    proved holds at every value, and `s // 2 - s` or `s - 3*s // 2` (false) are never proved."""
    from stax.ir.index import CeilDiv, FloorDiv, sympify
    from stax.ir.sizevars import provably_nonnegative

    s = sympify("s1")
    for e, want in ((s - FloorDiv(s, 2), True), (s - CeilDiv(s, 3), True), (s - 2 * FloorDiv(s, 2), True),
                    (FloorDiv(s, 2) - s, False), (s - FloorDiv(3 * s, 2), False)):
        assert provably_nonnegative(e) is want
        if want:
            assert int(e.subs(s, n)) >= 0


def test_nbytes_at_the_hints_and_exact_when_static():
    """SizeVars.nbytes: a symbolic layout's storage bytes at the hints (a transposed view: the storage
    extent, not numel); a static layout's own bytes, with or without a table."""
    sv = SizeVars.of(s0=(2, 64, 8), s1=(2, 64, 5))
    lay = Layout("cpu", F32, (s1, s0), (1, s1 + 1), 2)  # padded rows: storage 2 + (s1-1) + (s0-1)(s1+1) + 1
    assert sv.nbytes(lay) == (2 + 4 + 7 * 6 + 1) * 4
    static = Layout("cpu", F32, (3, 4), (1, 3), 5)
    assert sv.nbytes(static) == NO_SIZE_VARS.nbytes(static) == static.nbytes() == 17 * 4
