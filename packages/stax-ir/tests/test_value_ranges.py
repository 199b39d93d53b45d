"""Value ranges are sound (contain every value) and tight enough to drop checks and pick int32."""

import numpy as np
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from irtestlib import grid_values, index_exprs, run_pointwise
from stax.ir import cast, const, index_value, load, op, pointwise_vars
from stax.ir import dtypes as dt
from stax.ir.index import FloorDiv, ModularIndexing
from stax.ir.index_printer import evaluate
from stax.ir.interpreter import index_grid
from stax.ir.value_ranges import (
    _MIRROR,
    INF,
    ValueRange,
    bound_index,
    bound_value,
    bounds_check_needed,
    index_fits_int32,
    indirect_checks_needed,
    provably_false,
    provably_true,
)

i0, i1, i2 = pointwise_vars(3)
V = (i0, i1, i2)
sizes3 = st.tuples(st.integers(1, 7), st.integers(1, 7), st.integers(1, 7))


@settings(max_examples=250, deadline=None)
@given(index_exprs(V), sizes3)
def test_index_bounds_contain_every_value(e, sizes):
    r = bound_index(e, dict(zip(V, sizes)))
    vals = grid_values(e, V, sizes)
    assert r.lo <= vals.min() and vals.max() <= r.hi, f"{e}: {r} vs [{vals.min()}, {vals.max()}]"


@settings(max_examples=150, deadline=None)
@given(index_exprs(V, 6), sizes3, st.integers(0, 31))
def test_int32_verdict_is_sound(e, sizes, shift):
    """When index_fits_int32 says yes, no subexpression leaves int32 anywhere on the grid."""
    e = e.xreplace({i0: (2**shift) * i0})  # push values toward the int32 limits
    ranges = dict(zip(V, sizes))
    if not index_fits_int32(e, ranges):
        return
    env = index_grid(V, sizes)
    for sub in sympy.preorder_traversal(e):
        vals = np.asarray(evaluate(sub, env))
        assert vals.min() >= -(2**31) and vals.max() <= 2**31 - 1, sub


def test_index_bounds_examples():
    assert bound_index(128 * i0 + i1, {i0: 64, i1: 128}) == ValueRange(0, 8191)
    assert bound_index(ModularIndexing(i0, 1, 8), {i0: 100}) == ValueRange(0, 7)
    assert bound_index(ModularIndexing(i0 + 8, 1, 16), {i0: 4}) == ValueRange(8, 11)  # one period: exact
    assert bound_index(FloorDiv(i0, 4), {i0: 10}) == ValueRange(0, 2)
    assert bound_index(i0 - 3 * i1, {i0: 5, i1: 2}) == ValueRange(-3, 4)
    assert bound_index(i0).hi == float("inf")  # unknown size: unbounded above, still >= 0


def test_int32_choice():
    assert index_fits_int32(128 * i0 + i1, {i0: 64, i1: 128})
    assert index_fits_int32(i0, {i0: 2**31 - 1})
    assert not index_fits_int32(i0, {i0: 2**31})  # the loop bound itself does not fit
    assert not index_fits_int32(65536 * i0 + i1, {i0: 65536, i1: 65536})
    # the sum fits but a partial sum of its positive terms does not: any evaluation order must be safe
    big = 2**30
    e = big * i0 + big * i1 - big
    assert bound_index(e, {i0: 2, i1: 2}).within(-(2**31), 2**31 - 1)
    assert not index_fits_int32(e, {i0: 2, i1: 2})
    assert index_fits_int32(i0 * i1 * 200000, {i0: 100, i1: 100})  # 99 * 99 * 200000 < 2^31
    assert not index_fits_int32(i0 * i1 * 300000, {i0: 100, i1: 100})
    assert index_fits_int32(i0, {i0: ValueRange(-5, 5)})


@st.composite
def int_values(draw):
    """Small integer value DAGs over index values: what indirect indices and masks are made of."""
    leaves = [index_value(i0), index_value(i1 - 3), index_value(2 * i0 + i1, dt.int32),
              const(draw(st.integers(-5, 9)), dt.int64)]
    nodes = list(leaves)
    for _ in range(draw(st.integers(1, 6))):
        name = draw(st.sampled_from(["add", "sub", "mul", "neg", "abs", "maximum", "minimum", "floordiv",
                                     "remainder", "where", "lt", "ge", "eq", "to_int8", "relu"]))
        a = draw(st.sampled_from(nodes))
        b = draw(st.sampled_from(nodes))
        a64 = cast(a, dt.int64)
        b64 = cast(b, dt.int64)
        if name in ("floordiv", "remainder"):
            nodes.append(op(name, a64, const(draw(st.integers(1, 7)), dt.int64)))
        elif name == "where":
            nodes.append(op("where", op("lt", a64, b64), a64, b64))
        elif name in ("lt", "ge", "eq"):
            nodes.append(op(name, a64, b64))
        elif name == "to_int8":
            nodes.append(cast(op("mul", a64, const(50, dt.int64)), dt.int8))
        elif name in ("neg", "abs", "relu"):
            nodes.append(op(name, a64))
        else:
            nodes.append(op(name, a64, b64))
    return nodes[-1]


@settings(max_examples=150, deadline=None)
@given(int_values(), st.tuples(st.integers(1, 9), st.integers(1, 9)))
def test_value_bounds_contain_every_value(v, sizes):
    r = bound_value(v, dict(zip((i0, i1), sizes)))
    vals = np.asarray(run_pointwise(v, sizes, {}), dtype=np.int64)
    assert r.lo <= vals.min() and vals.max() <= r.hi, f"{v}: {r} vs [{vals.min()}, {vals.max()}]"


def test_checks_that_provably_hold_can_be_dropped():
    r = {i0: 10, i1: 4}
    assert not bounds_check_needed(index_value(i0), 10, r)
    assert bounds_check_needed(index_value(i0), 9, r)
    assert bounds_check_needed(index_value(i0 - 1), 10, r)
    modded = op("remainder", load("ids", i0, dt.int64), const(7, dt.int64))
    assert not bounds_check_needed(modded, 7, r)  # x % 7 is in [0, 7) whatever x is
    assert bounds_check_needed(load("ids", i0, dt.int64), 10**6, r)  # data: unknown
    t = sympy.Symbol("t", integer=True)
    g = load("w", t, dt.float32, indirect=((t, index_value(i1), 4), (t, load("ids", i0, dt.int64), 4)))
    assert indirect_checks_needed(g, r) == (False, True)
    pad_cond = op("lt", index_value(i1 - 2), const(4, dt.int64))
    assert provably_true(pad_cond, {i1: 6}) and not provably_true(pad_cond, {i1: 7})
    assert provably_false(op("lt", index_value(i1 + 8), const(4, dt.int64)), r)


def test_float_comparisons_are_never_decided():
    """NaN makes x < 5 false even when x's non-NaN range is below 5."""
    x = op("sigmoid", load("x", i0, dt.float32))
    assert bound_value(x) == ValueRange(0, 1)
    assert not provably_true(op("lt", x, const(5.0, dt.float32)))


def test_a_wrapped_negative_index_needs_no_check():
    """where(i < 0, i + n, i) on an index clamped to [-n, n) lands in [0, n) (embedding backward)."""
    ids = load("ids", i0, dt.int64)
    clamped = op("minimum", op("maximum", ids, const(-32, dt.int64)), const(31, dt.int64))
    wrapped = op("where", op("lt", clamped, const(0, dt.int64)), op("add", clamped, const(32, dt.int64)), clamped)
    assert bound_value(wrapped) == ValueRange(0, 31)
    assert not bounds_check_needed(wrapped, 32)
    mirrored = op("where", op("gt", const(0, dt.int64), clamped), op("add", clamped, const(32, dt.int64)), clamped)
    assert bound_value(mirrored) == ValueRange(0, 31)
    # a wider clamp can still land outside: the check stays
    wide = op("minimum", op("maximum", ids, const(-40, dt.int64)), const(31, dt.int64))
    w2 = op("where", op("lt", wide, const(0, dt.int64)), op("add", wide, const(32, dt.int64)), wide)
    assert bound_value(w2) == ValueRange(-8, 31) and bounds_check_needed(w2, 32)
    # equal copies of the clamped index (a rewrite that did not keep nodes shared) refine alike
    copy = op("minimum", op("maximum", load("ids", i0, dt.int64), const(-32, dt.int64)), const(31, dt.int64))
    assert copy is not clamped and copy == clamped
    copied = op("where", op("lt", copy, const(0, dt.int64)), op("add", clamped, const(32, dt.int64)), clamped)
    assert bound_value(copied) == ValueRange(0, 31)
    # a branch that is never taken does not widen the range
    never = op("where", op("ge", clamped, const(100, dt.int64)), const(-1000, dt.int64), clamped)
    assert bound_value(never) == ValueRange(-32, 31)


@settings(max_examples=150, deadline=None)
@given(int_values(), st.integers(-6, 6), st.integers(-8, 8), st.sampled_from(["lt", "le", "gt", "ge"]),
       st.booleans(), st.tuples(st.integers(1, 9), st.integers(1, 9)))
def test_where_refinement_contains_every_value(v, k, shift, cmp, mirrored, sizes):
    """where(x OP k, x + shift, x), either operand order: the refined range holds every value."""
    x = cast(v, dt.int64)
    kc = const(k, dt.int64)
    cond = op(_MIRROR[cmp], kc, x) if mirrored else op(cmp, x, kc)
    w = op("where", cond, op("add", x, const(shift, dt.int64)), x)
    r = bound_value(w, dict(zip((i0, i1), sizes)))
    vals = np.asarray(run_pointwise(w, sizes, {}), dtype=np.int64)
    assert r.lo <= vals.min() and vals.max() <= r.hi, f"{w}: {r} vs [{vals.min()}, {vals.max()}]"


def test_checks_against_symbolic_bounds():
    """A symbolic-shape graph indexes a buffer of s0 rows by values of a loop over 0..s0-1 (a causal
    mask's arange, a wrapped negative index): the checks are proven against the symbolic bound, with
    the size symbols' ranges, unbounded above or not; what may leave the bound keeps its check."""
    s0 = sympy.Symbol("s0", integer=True, positive=True)
    i64 = dt.int64
    one = const(1, i64)
    v = cast(index_value(i0), i64)
    wrapped = op("where", op("lt", v, const(0, i64)), op("add", v, index_value(s0)), v)
    for hi in (512, INF):
        r = {i0: s0, i1: 4, s0: ValueRange(2, hi)}
        assert not bounds_check_needed(v, s0, r)
        assert not bounds_check_needed(wrapped, s0, r)
        assert not bounds_check_needed(op("sub", index_value(s0 - 1), v), s0, r)  # reversed
        assert not bounds_check_needed(op("add", v, one), s0 + 1, r)
        # 2 * i0 may wrap int64 where s0 is unbounded: proven only with the range's bound
        assert bounds_check_needed(op("mul", v, const(2, i64)), 2 * s0 - 1, r) == (hi == INF)
        assert bounds_check_needed(op("add", v, one), s0, r)
        assert bounds_check_needed(v, s0 - 1, r)
        assert bounds_check_needed(op("mul", v, const(2, i64)), 2 * s0 - 2, r)
        assert bounds_check_needed(op("sub", v, one), s0, r)  # -1 at i0 = 0
        assert bounds_check_needed(load("ids", i0, i64), s0, r)  # data
    r = {i0: s0, s0: ValueRange(2, 512)}
    assert not bounds_check_needed(v, 512, r) and bounds_check_needed(v, 511, r)  # the range's bound
    assert bounds_check_needed(v, s0, {i0: 2 * s0, s0: ValueRange(2, 512)})  # a longer loop
