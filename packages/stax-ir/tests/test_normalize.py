"""Index normalization (§7.1): canonical forms keep the address sequence and identify equal accesses."""

from unittest import mock

import numpy as np
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from irtestlib import reshape_exprs
from stax.ir import normalize
from stax.ir.index import FloorDiv, ModularIndexing, pointwise_vars, reduction_vars, var
from stax.ir.index_printer import evaluate
from stax.ir.interpreter import index_grid
from stax.ir.normalize import affine_coefficients, affine_digits, normalize_index
from stax.ir.sizevars import size_var
from stax.ir.views import View

i0, i1, i2, i3 = pointwise_vars(4)
(r0,) = reduction_vars(1)
c0, c1, c2 = var("c", 0), var("c", 1), var("c", 2)


def addresses(index, pairs) -> np.ndarray:
    """Row-major address sequence of `index` over loop variables (reference, no normalization)."""
    sizes = [s for _, s in pairs]
    out = np.asarray(evaluate(sympy.sympify(index), index_grid([v for v, _ in pairs], sizes)), dtype=np.int64)
    return np.broadcast_to(out, tuple(sizes)).reshape(-1)


def assert_same_sequence(index, pairs):
    """The normalized form visits the same addresses in the same order; each one is
    repeated once per point of the dropped (size-1 or unused trailing) dimensions."""
    n = normalize_index(index, pairs)
    orig = addresses(index, pairs)
    canon = n.addresses()
    assert len(orig) % len(canon) == 0
    np.testing.assert_array_equal(orig, np.repeat(canon, len(orig) // len(canon)))
    return n


# --- the book's examples -------------------------------------------------------------


def test_example_7_1_indices():
    """Example 7.1: 128*i0 + i1 over (64,128) -> c0 {c0: 8192}; buf1 read at i0 -> c0 {c0: 64}."""
    n = normalize_index(128 * i0 + i1, [(i0, 64), (i1, 128)])
    assert (n.index, n.ranges) == (c0, {c0: 8192})
    assert str(n) == "c0 over {c0: 8192}"
    read = normalize_index(i0, [(i0, 64), (i1, 128)])
    write = normalize_index(i0, [(i0, 64), (i1, 1), (r0, 128)])  # keepdim sum writes (64,1)
    assert read == write and (read.index, read.ranges) == (c0, {c0: 64})
    assert normalize_index(128 * i0 + r0, [(i0, 64), (r0, 128)]).ranges == {c0: 8192}


def test_prefix_rule_only_for_trailing_unused_dims():
    """Prop 7.2: i0 of (64,128) is a prefix read; i1 of (128,64) is not and stays distinct."""
    write = normalize_index(i0, [(i0, 64)])
    assert normalize_index(i0, [(i0, 64), (i1, 128)]) == write
    other = normalize_index(i1, [(i0, 128), (i1, 64)])
    assert other != write and other.ranges == {c0: 128, c1: 64} and other.index == c1


def test_distance_plus_one_differs():
    """Prop 7.3: reading a[i+1] is not the write index a[i]."""
    assert normalize_index(i0 + 1, [(i0, 63)]) != normalize_index(i0, [(i0, 63)])


def test_views_resolve_exactly():
    flat = normalize_index(i0, [(i0, 8192)])
    split = 128 * FloorDiv(i0, 128) + ModularIndexing(i0, 1, 128)
    assert normalize_index(split, [(i0, 8192)]) == flat
    transposed = 64 * ModularIndexing(i0, 1, 128) + FloorDiv(i0, 128)
    assert normalize_index(transposed, [(i0, 8192)]) == normalize_index(i0 + 64 * i1, [(i0, 64), (i1, 128)])
    assert normalize_index(FloorDiv(i0, 128), [(i0, 8192)]) == normalize_index(i0, [(i0, 64), (i1, 128)])


def test_broadcast_dims_kept_in_the_middle():
    n = assert_same_sequence(6 * i0 + i2, [(i0, 4), (i1, 5), (i2, 6)])
    assert (n.index, n.ranges) == (6 * c0 + c2, {c0: 4, c1: 5, c2: 6})


def test_non_affine_is_kept_conservatively_and_symbolic_affine_is_canonical():
    """A product of loop variables stays an expression; an affine index over a symbolic size (issue 23)
    coalesces like a static one, and different sizes still give different forms."""
    n = normalize_index(i0 * i1, [(i0, 4), (i1, 5)])
    assert not n.is_affine and n.index == c0 * c1
    s = size_var("s0")
    k = normalize_index(s * i0 + i1, [(i0, 4), (i1, s)])
    assert k.is_affine and k.dims == ((4 * s, 1),) and k.index == c0
    assert k != normalize_index(s * i0 + i1, [(i0, 5), (i1, s)])


def test_affine_helpers():
    assert affine_coefficients(3 * i0 + 2 * i1 + 7, [i0, i1]) == ({i0: 3, i1: 2}, 7)
    assert affine_coefficients(FloorDiv(i0, 2), [i0]) is None
    assert affine_digits(np.array([5, 7, 9, 6, 8, 10])) == (5, [(2, 1), (3, 2)])
    assert affine_digits(np.array([0, 1, 3])) is None


# --- properties ----------------------------------------------------------------------

SIZES = st.lists(st.integers(1, 6), min_size=1, max_size=4)


@st.composite
def affine_access(draw):
    sizes = draw(SIZES)
    vars_ = list(pointwise_vars(len(sizes)))
    strides = [draw(st.sampled_from([0, 0, 1, 2, 3, -1, 5, 7, 12, 30])) for _ in sizes]
    offset = draw(st.integers(-5, 20))
    index = offset + sum(s * v for s, v in zip(strides, vars_))
    return index, list(zip(vars_, sizes))


@settings(max_examples=150, deadline=None)
@given(affine_access())
def test_normalization_preserves_address_sequence(access):
    index, pairs = access
    n = assert_same_sequence(index, pairs)
    assert n.is_affine
    assert all(s > 1 for s in n.sizes)
    assert not n.dims or n.dims[-1][1] != 0  # no unused trailing dimension
    for (_, t_out), (s_in, t_in) in zip(n.dims, n.dims[1:]):
        assert t_out != s_in * t_in  # maximally coalesced


def _factorizations(n: int) -> list[list[int]]:
    """A few ways to write n as a product of loop sizes (outer first)."""
    out = [[n]]
    for d in range(2, n):
        if n % d == 0:
            out.append([d, n // d])
            for e in range(2, n // d):
                if (n // d) % e == 0:
                    out.append([d, e, n // d // e])
    return out


@st.composite
def one_map_two_loop_nests(draw):
    """One address map on a flat iteration space, written over two different loop nests."""
    radices = draw(st.lists(st.integers(2, 4), min_size=1, max_size=3))
    strides = [draw(st.sampled_from([0, 1, 2, 3, 5, -1, 8])) for _ in radices]
    offset = draw(st.integers(0, 9))
    n = int(np.prod(radices))
    nests = _factorizations(n)
    a = draw(st.sampled_from(nests))
    b = draw(st.sampled_from(nests))
    return radices, strides, offset, a, b


def _write_over(radices, strides, offset, sizes):
    """The map `offset + sum(stride_j * digit_j(flat))` as an index over loops `sizes`."""
    vars_ = list(pointwise_vars(len(sizes)))
    flat = sympy.Integer(0)
    for v, s in zip(vars_, sizes):
        flat = flat * s + v
    index = sympy.Integer(offset)
    inner = 1
    for r, t in reversed(list(zip(radices, strides))):
        index += t * ModularIndexing(flat, inner, r)
        inner *= r
    return index, list(zip(vars_, sizes))


@settings(max_examples=150, deadline=None)
@given(one_map_two_loop_nests())
def test_equal_accesses_written_differently_normalize_equal(case):
    radices, strides, offset, a, b = case
    ia, pa = _write_over(radices, strides, offset, a)
    ib, pb = _write_over(radices, strides, offset, b)
    na, nb = assert_same_sequence(ia, pa), assert_same_sequence(ib, pb)
    assert na == nb
    # and the plain affine spelling over the radices themselves agrees too
    vars_ = list(pointwise_vars(len(radices)))
    plain = offset + sum(t * v for t, v in zip(strides, vars_))
    assert normalize_index(plain, list(zip(vars_, radices))) == na


@settings(max_examples=100, deadline=None)
@given(affine_access(), affine_access())
def test_equal_normal_forms_mean_equal_addresses(x, y):
    nx, ny = normalize_index(*x), normalize_index(*y)
    if nx == ny:
        np.testing.assert_array_equal(nx.addresses(), ny.addresses())
    else:
        assert nx.sizes != ny.sizes or not np.array_equal(nx.addresses(), ny.addresses())


# --- how blocks of FloorDiv/ModularIndexing are resolved -----------------------------


def _uncached(index, pairs):
    """normalize_index without its cache (the tests below swap the routes it takes)."""
    pairs = tuple((v, sympy.Integer(n)) for v, n in pairs)
    return normalize._normalize.__wrapped__(sympy.sympify(index), pairs, normalize.MAX_EVAL_POINTS)


class _NoFastPath:
    """Stands in for normalize._IntTree: every block goes to the reference evaluator."""

    ok = False

    def __init__(self, *args):
        pass


def test_view_chain_resolves_without_evaluating_the_grid():
    """A reshape round trip written the way views write it (coefficients reduced modulo
    the size they index) folds symbolically: no grid of 7168 points is evaluated."""
    e = 7 * i0 + ModularIndexing(2 * FloorDiv(7 * i0 + i1, 1024) + ModularIndexing(7 * i0 + i1, 1, 1024), 1, 7)
    pairs = [(i0, 1024), (i1, 7)]
    with (
        mock.patch.object(normalize._IntTree, "grid_digits", side_effect=AssertionError("evaluated")),
        mock.patch.object(normalize, "_reference_digits", side_effect=AssertionError("evaluated")),
        mock.patch.object(normalize, "SYMBOLIC_MIN_POINTS", 1),
    ):
        n = _uncached(e, pairs)
    assert (n.index, n.ranges) == (c0, {c0: 7168})
    assert_same_sequence(e, pairs)


@st.composite
def view_accesses(draw):
    """x.permute(p).reshape(s) style gathers, reshape round trips, and digit sums with big strides."""
    sizes = draw(st.lists(st.sampled_from([1, 2, 3, 4, 6, 7, 8, 12]), min_size=2, max_size=3))
    vars_ = list(pointwise_vars(len(sizes)))
    kind = draw(st.integers(0, 2))
    if kind == 0:
        perm = draw(st.permutations(range(len(sizes))))
        shape = draw(st.permutations(sizes))
        index = View.contiguous(shape).permute(tuple(perm)).reshape(sizes).index_at(vars_)
    elif kind == 1:
        index = draw(reshape_exprs(vars_, sizes))
    else:
        index = draw(st.sampled_from([1, 3, 2**31 - 1, 2**40])) * draw(reshape_exprs(vars_, sizes)) + vars_[0]
    return index, list(zip(vars_, sizes))


@settings(max_examples=150, deadline=None)
@given(view_accesses(), st.sampled_from([1, 5, 64, 1 << 15]))
def test_symbolic_chunked_and_reference_blocks_agree(access, chunk):
    """The canonical form depends on the values only: every route to it gives the same answer."""
    index, pairs = access
    default = _uncached(index, pairs)
    with mock.patch.object(normalize, "SYMBOLIC_MIN_POINTS", 1):
        assert _uncached(index, pairs) == default
    no_symbolic = mock.patch.object(normalize, "_flat_digits", return_value=None)
    with no_symbolic, mock.patch.object(normalize, "CHUNK_POINTS", chunk):
        evaluated = _uncached(index, pairs)
    with no_symbolic, mock.patch.object(normalize, "_IntTree", _NoFastPath):
        reference = _uncached(index, pairs)
    assert default == evaluated == reference
    if default.is_affine:
        assert_same_sequence(index, pairs)


def test_chain_digits():
    F, n = normalize._FLAT, 7168
    assert (normalize._chain_digits(FloorDiv(F, 7) + 1024 * ModularIndexing(F, 1, 7) + 5, n)
            == (5, [(1024, 1), (7, 1024)]))
    assert normalize._chain_digits(3 * F, n) == (0, [(7168, 3)])
    assert normalize._chain_digits(ModularIndexing(F, 1, 3) + ModularIndexing(F, 1, 4), n) is None  # 3 and 4: no chain
    assert normalize._chain_digits(ModularIndexing(F + 1, 1, 7), n) is None  # not a digit of F


@st.composite
def mixed_radix_sequences(draw):
    radices = draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
    strides = [draw(st.integers(-9, 9)) for _ in radices]
    digits = np.indices(radices).reshape(len(radices), -1)
    return draw(st.integers(-5, 5)) + (np.array(strides)[:, None] * digits).sum(axis=0)


@settings(max_examples=200, deadline=None)
@given(mixed_radix_sequences(), st.integers(1, 200), st.lists(st.integers(-3, 3), max_size=3), st.integers(0, 199))
def test_prefix_rejection_is_sound(values, cut, noise, where):
    """A prefix never rejects a sequence that has an affine digit split; when it rejects a
    perturbed one, the full split fails too."""
    cut = min(cut, len(values))
    assert not normalize._prefix_rejects(values[:cut], len(values))
    bad = values.copy()
    for k, d in enumerate(noise):
        bad[(where + 7 * k) % len(bad)] += d
    if normalize._prefix_rejects(bad[:cut], len(bad)):
        assert affine_digits(bad) is None


def test_prefix_rejection_stops_a_large_evaluation_early():
    """(i0 + i1) % 5 over a 1024 x 1024 grid: the first chunk already shows no affine split."""
    e, pairs = ModularIndexing(i0 + i1, 1, 5), [(i0, 1024), (i1, 1024)]
    tree = normalize._IntTree(e, dict(pairs))
    with mock.patch.object(normalize, "affine_digits", side_effect=AssertionError("evaluated it all")):
        assert tree.grid_digits(e, [v for v, _ in pairs], [s for _, s in pairs]) is None
    assert not _uncached(e, pairs).is_affine


def test_digit_recombination_past_the_evaluation_limit():
    """A flat index split into the digits of two different reshapes is the flat index itself, also over
    more points than may be evaluated (9,288,972 > MAX_EVAL_POINTS): stax-gpu's kernel of a repeat + pad
    whose result is read through a (12287, 756) view could not prove its producer's write and its
    consumer's read the same point (fuzzer, seed 6 graph 254 on the H200)."""
    c = sympy.Symbol("xindex", integer=True, nonnegative=True)
    n = 9288972
    assert n > normalize.MAX_EVAL_POINTS
    read = 756 * FloorDiv(c, 756) + ModularIndexing(c, 1, 756)
    write = (3096324 * FloorDiv(c, 3096324) + 1032108 * ModularIndexing(c, 1032108, 3)
             + 172018 * ModularIndexing(c, 172018, 6) + 24574 * ModularIndexing(c, 24574, 7)
             + ModularIndexing(c, 1, 24574))
    flat = normalize.normalize_index(c, [(c, n)])
    assert normalize.normalize_index(read, [(c, n)]) == flat
    assert normalize.normalize_index(write, [(c, n)]) == flat
    # a digit order that is not a chain stays unresolved (conservative: no fusion), not wrong
    skew = 756 * FloorDiv(c, 756) + ModularIndexing(c, 1, 755)
    assert normalize.normalize_index(skew, [(c, n)]) != flat
