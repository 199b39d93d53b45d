"""Range-aware simplification and loop coalescing: exact at every point, and the expected forms."""

import itertools

import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from irtestlib import grid_values, index_exprs, reshape_exprs
from stax.ir.index import CeilDiv, FloorDiv, ModularIndexing, pointwise_vars, var
from stax.ir.simplify import coalesce_loops, simplify_index

i0, i1, i2 = pointwise_vars(3)
V = (i0, i1, i2)
c0, c1 = var("c", 0), var("c", 1)
sizes3 = st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(1, 6))


# ---- properties


@settings(max_examples=250, deadline=None)
@given(index_exprs(V), sizes3)
def test_simplify_preserves_every_value(e, sizes):
    s = simplify_index(e, dict(zip(V, sizes)))
    np.testing.assert_array_equal(grid_values(s, V, sizes), grid_values(e, V, sizes), err_msg=f"{e} -> {s}")


@settings(max_examples=150, deadline=None)
@given(st.data(), sizes3)
def test_simplify_preserves_view_compositions(data, sizes):
    e = data.draw(reshape_exprs(V, sizes))
    s = simplify_index(e, dict(zip(V, sizes)))
    np.testing.assert_array_equal(grid_values(s, V, sizes), grid_values(e, V, sizes), err_msg=f"{e} -> {s}")


def _flat(expr, vars_, sizes):
    return grid_values(expr, vars_, sizes).reshape(-1)


@settings(max_examples=150, deadline=None)
@given(st.data(), sizes3)
def test_coalesce_keeps_every_access_in_loop_order(data, sizes):
    """Merged loops visit the same addresses in the same (row-major) order for every expression."""
    exprs = data.draw(st.lists(st.one_of(index_exprs(V, 5), reshape_exprs(V, sizes),
                                         st.tuples(*[st.integers(0, 40)] * 3).map(
                                             lambda t: t[0] * i0 + t[1] * i1 + t[2] * i2)),
                               min_size=1, max_size=3))
    m = coalesce_loops(sizes, exprs, V)
    assert np.prod(m.sizes) == np.prod(sizes)
    assert [k for g in m.groups for k in g] == [k for k, s in enumerate(sizes) if s != 1]
    for old, new in zip(exprs, m.exprs):
        np.testing.assert_array_equal(_flat(new, m.vars, m.sizes), _flat(old, V, sizes), err_msg=f"{old} -> {new}")
    for k, v in enumerate(V):  # reindex maps old vars to their values in the new vars
        np.testing.assert_array_equal(_flat(m.reindex[v], m.vars, m.sizes),
                                      np.broadcast_to(np.arange(sizes[k]).reshape(
                                          [-1 if j == k else 1 for j in range(3)]), sizes).reshape(-1))


# ---- expected forms (before -> after, and why)


def test_digits_fold_within_their_range():
    r = {i0: 64, i1: 128}
    assert simplify_index(ModularIndexing(i1, 1, 128), r) == i1  # 0 <= i1 < 128
    assert simplify_index(FloorDiv(i1, 128), r) == 0
    assert simplify_index(FloorDiv(128 * i0 + i1, 128), r) == i0  # multiples of the divisor leave the floor
    assert simplify_index(ModularIndexing(128 * i0 + i1, 1, 128), r) == i1
    assert simplify_index(ModularIndexing(i1 + 130, 1, 128), {i1: 127}) == ModularIndexing(i1 + 2, 1, 128)
    assert simplify_index(ModularIndexing(i1 + 130, 1, 128), {i1: 100}) == i1 + 2
    assert simplify_index(ModularIndexing(i1 + 3, 1, 128), {i1: 100}) == i1 + 3


def test_digit_recombination():
    """m*FloorDiv(x, m) + ModularIndexing(x, 1, m) == x: a reshape and its inverse cancel."""
    r = {i0: 64, i1: 128}
    assert simplify_index(8 * FloorDiv(i1, 8) + ModularIndexing(i1, 1, 8), r) == i1
    assert simplify_index(4 * ModularIndexing(i1, 4, 8) + ModularIndexing(i1, 1, 4), r) == ModularIndexing(i1, 1, 32)
    assert simplify_index(32 * FloorDiv(i1, 32) + 4 * ModularIndexing(i1, 4, 8) + ModularIndexing(i1, 1, 4), r) == i1
    # strides that do not line up stay apart: a transposed reshape is a genuine gather
    e = 8 * FloorDiv(i1, 8) + 2 * ModularIndexing(i1, 1, 8)
    assert simplify_index(e, r) == e


def test_small_terms_below_a_common_factor_drop_out_of_a_floor():
    """floor((4*i0 + i1) / 8) == floor(i0 / 2) when 0 <= i1 < 4."""
    assert simplify_index(FloorDiv(4 * i0 + i1, 8), {i0: 10, i1: 4}) == FloorDiv(i0, 2)
    assert simplify_index(FloorDiv(4 * i0 + i1, 8), {i0: 10, i1: 5}) == FloorDiv(4 * i0 + i1, 8)


def test_common_factors_leave_a_modulus():
    r = {i0: 10, i1: 10}
    assert simplify_index(ModularIndexing(6 * i0 + 3 * i1, 1, 12), r) == 3 * ModularIndexing(2 * i0 + i1, 1, 4)
    assert simplify_index(FloorDiv(6 * i0 + 3 * i1, 12), r) == FloorDiv(2 * i0 + i1, 4)


def test_nested_digits_compose():
    r = {i0: 1000}
    assert simplify_index(FloorDiv(FloorDiv(i0, 4), 8), r) == FloorDiv(i0, 32)
    assert simplify_index(FloorDiv(ModularIndexing(i0, 2, 16), 4), r) == ModularIndexing(i0, 8, 4)
    assert simplify_index(ModularIndexing(ModularIndexing(i0, 1, 16), 1, 4), r) == ModularIndexing(i0, 1, 4)
    assert simplify_index(ModularIndexing(FloorDiv(i0, 4), 1, 8), r) == ModularIndexing(i0, 4, 8)


def test_digits_recombine_modulo_the_modulus():
    """Views reduce coefficients modulo the size they index (1024 == 2 mod 7); inside a
    modulus the digits still recombine, and bases congruent modulo d*m are one base."""
    r = {i0: 7168}
    x = 2 * FloorDiv(i0, 1024) + ModularIndexing(i0, 1, 1024)  # == i0 modulo 7 (not equal to i0)
    assert simplify_index(ModularIndexing(x, 1, 7), r) == ModularIndexing(i0, 1, 7)
    assert simplify_index(7 * FloorDiv(i0, 7) + ModularIndexing(x, 1, 7), r) == i0
    # ModularIndexing(y, 2, 3) only depends on y modulo 6, and 64 == 4 (mod 6)
    y = 4 * FloorDiv(i0, 64) + ModularIndexing(i0, 1, 64)
    assert simplify_index(ModularIndexing(y, 2, 3), r) == ModularIndexing(i0, 2, 3)
    # 3 is not 1024 modulo 7, i0 + 1 is not i0 modulo 7: genuine gathers stay, and stay exact
    for e in (ModularIndexing(3 * FloorDiv(i0, 1024) + ModularIndexing(i0, 1, 1024), 1, 7),
              7 * FloorDiv(i0, 7) + ModularIndexing(i0 + 1, 1, 7)):
        s = simplify_index(e, r)
        assert s not in (ModularIndexing(i0, 1, 7), i0)
        np.testing.assert_array_equal(grid_values(s, (i0,), (7168,)), grid_values(e, (i0,), (7168,)))


@settings(max_examples=150, deadline=None)
@given(st.data(), sizes3, st.integers(1, 8), st.integers(1, 12))
def test_simplify_preserves_digit_sums_under_a_modulus(data, sizes, d, m):
    """What views build: a digit sum inside ModularIndexing(., d, m) with its coefficients
    reduced (or shifted) modulo d*m. Folding it must stay exact at every point."""
    e = data.draw(reshape_exprs(V, sizes))
    shifts = data.draw(st.lists(st.integers(-2, 2), min_size=8, max_size=8))
    parts = [term.as_coeff_Mul() for term in sympy.Add.make_args(e)]
    x = sympy.Add(*[(c % (d * m) if k % 2 else c + shifts[k % 8] * d * m) * rest for k, (c, rest) in enumerate(parts)])
    e = ModularIndexing(x, d, m) + data.draw(st.sampled_from([0, 1, m])) * FloorDiv(x, d * m)
    s = simplify_index(e, dict(zip(V, sizes)))
    np.testing.assert_array_equal(grid_values(s, V, sizes), grid_values(e, V, sizes), err_msg=f"{e} -> {s}")


def test_size_one_vars_min_max_and_ceil():
    assert simplify_index(5 * i0 + i1, {i0: 1, i1: 3}) == i1
    assert simplify_index(sympy.Min(i0, 10), {i0: 8}) == i0
    assert simplify_index(sympy.Max(i0, i1 + 100), {i0: 8, i1: 4}) == i1 + 100
    assert simplify_index(CeilDiv(i0, 4), {i0: 4}) == FloorDiv(i0 + 3, 4)  # 0 for i0 = 0, else 1
    assert simplify_index(CeilDiv(8 * i0, 4), {i0: 10}) == 2 * i0


def test_unknown_ranges_keep_expressions_exact():
    s = sympy.Symbol("s", integer=True)  # may be negative: nothing folds that would need a range
    assert simplify_index(ModularIndexing(s, 1, 8)) == ModularIndexing(s, 1, 8)
    assert simplify_index(FloorDiv(8 * s + 3, 8)) == s  # exact for every integer s


# ---- loop coalescing


def test_example_7_1_loops_merge():
    """128*i0 + i1 over (64, 128) walks memory contiguously: one loop of 8192."""
    m = coalesce_loops((64, 128), [128 * i0 + i1], (i0, i1))
    assert (m.sizes, m.exprs, m.groups) == ((8192,), (c0,), ((0, 1),))
    assert m.reindex == {i0: FloorDiv(c0, 128), i1: ModularIndexing(c0, 1, 128)}


def test_broadcast_read_blocks_merging():
    """Reading buf1 at i0 inside the (64, 128) nest: i0 and i1 cannot become one loop."""
    m = coalesce_loops((64, 128), [128 * i0 + i1, i0], (i0, i1))
    assert m.sizes == (64, 128) and m.exprs == (128 * c0 + c1, c0)


def test_transpose_blocks_merging_and_size_one_dims_drop():
    m = coalesce_loops((4, 1, 8), [i0 + 4 * i2], (i0, i1, i2))
    assert m.sizes == (4, 8) and m.exprs == (c0 + 4 * c1,) and m.reindex[i1] == 0
    m = coalesce_loops((4, 1, 8), [8 * i0 + i2, 5 * i1], (i0, i1, i2))
    assert m.sizes == (32,) and m.exprs == (c0, 0)


def test_views_merge_when_their_digits_recombine():
    """A (4, 8) nest reading 4*i0 + i1//2 reads c//2 of the merged loop: merge."""
    m = coalesce_loops((4, 8), [4 * i0 + FloorDiv(i1, 2)], (i0, i1))
    assert m.sizes == (32,) and m.exprs == (FloorDiv(c0, 2),)
    m = coalesce_loops((4, 8), [8 * i0 + FloorDiv(i1, 2)], (i0, i1))
    assert m.sizes == (4, 8)


@pytest.mark.parametrize("perm", list(itertools.permutations(range(3))))
def test_memory_order_recovers_a_permuted_layout(perm):
    """A (4, 5, 6) layout whose dims are laid out in the order `perm` (outer to inner): memory_order
    of its write index gives that order back; an index not affine in the vars gives None."""
    from stax.ir import memory_order

    sizes, vs = (4, 5, 6), pointwise_vars(3)
    strides, acc = [0] * 3, 1
    for k in reversed(perm):
        strides[k], acc = acc, acc * sizes[k]
    index = sum(s * v for s, v in zip(strides, vs)) + 7
    assert memory_order(index, vs) == list(perm)
    assert memory_order(FloorDiv(vs[0], 2) + vs[1], vs) is None


def test_symbolic_sizes_merge_by_the_affine_rule():
    """Symbolic sizes: s1*i0 + i1 over (s0, s1) is one loop of s0*s1 (strides compared as expressions);
    a broadcast read of i0 keeps two loops; a static size-1 loop drops; a FloorDiv keeps the nest."""
    from stax.ir import size_var

    s0, s1 = size_var("s0"), size_var("s1")
    m = coalesce_loops((s0, s1), [s1 * i0 + i1], (i0, i1))
    assert (m.sizes, m.exprs, m.groups) == ((s0 * s1,), (c0,), ((0, 1),))
    assert m.reindex == {i0: FloorDiv(c0, s1), i1: ModularIndexing(c0, 1, s1)}
    m = coalesce_loops((s0, s1), [s1 * i0 + i1, i0], (i0, i1))
    assert m.sizes == (s0, s1) and m.exprs == (s1 * c0 + c1, c0)
    m = coalesce_loops((s0, 1, 8), [8 * i0 + i2 + 3, 5 * i1], (i0, i1, i2))
    assert m.sizes == (8 * s0,) and m.exprs == (c0 + 3, 0) and m.reindex[i1] == 0
    m = coalesce_loops((s0, 8), [8 * i0 + FloorDiv(i1, 2)], (i0, i1))
    assert m.sizes == (s0, 8) and m.groups == ((0,), (1,))


def test_symbolic_digits_recombine():
    """The digits coalesce_loops gives merged symbolic loops read back as the merged index: s1*(c // s1)
    + c % s1 == c, three digits of (s0, s1, s2) likewise; a coefficient that is not the modulus stays."""
    from stax.ir import size_var

    s0, s1, s2 = size_var("s0"), size_var("s1"), size_var("s2")
    ranges = {c0: s0 * s1 * s2}
    assert simplify_index(s1 * FloorDiv(c0, s1) + ModularIndexing(c0, 1, s1), ranges) == c0
    three = s1 * s2 * FloorDiv(c0, s1 * s2) + s2 * ModularIndexing(c0, s2, s1) + ModularIndexing(c0, 1, s2)
    assert simplify_index(three, ranges) == c0
    assert simplify_index(s2 * ModularIndexing(c0, s2, s1) + ModularIndexing(c0, 1, s2) + 5, ranges) == \
        ModularIndexing(c0, 1, s1 * s2) + 5
    kept = s0 * FloorDiv(c0, s1) + ModularIndexing(c0, 1, s1)
    assert simplify_index(kept, ranges) == kept
