"""Index expressions as plain data (plain_index.py): every expression stax.ir's index math makes over size
symbols survives to_plain / from_plain equal, through pickle; other symbols and functions are refused."""

import pickle

import pytest
import sympy
from hypothesis import given, settings
from irtestlib import index_exprs
from stax.ir import CeilDiv, FloorDiv, ModularIndexing, size_var
from stax.ir.index import var
from stax.ir.plain_index import PlainIndex, from_plain, to_plain

s0, s1 = size_var("s0"), size_var("s1_div4")


def _round_trip(e):
    p = pickle.loads(pickle.dumps(to_plain(e)))
    assert isinstance(p, PlainIndex) and all(isinstance(x, (str, int, tuple)) for x in _leaves(p.tree))
    return from_plain(p)


def _leaves(t):
    for x in t:
        if isinstance(x, tuple):
            yield from _leaves(x)
        else:
            yield x


@pytest.mark.parametrize("e", [
    sympy.Integer(7), 2 * s0 + 3, s0 * s1, s0 ** 2, FloorDiv(s0 + 3, 4), ModularIndexing(s0, 2, 8), CeilDiv(s1, 3),
    sympy.Min(s0, 64), sympy.Max(1, s1 - 2), sympy.Rational(1, 2) * s0, 256 * s1 * FloorDiv(s0, 2)])
def test_expressions_round_trip_equal(e):
    back = _round_trip(e)
    assert sympy.simplify(back - e) == 0 and back.free_symbols == sympy.sympify(e).free_symbols


@settings(max_examples=80, deadline=None)
@given(index_exprs([s0, s1], max_leaves=10))
def test_random_index_expressions_round_trip(e):
    back = _round_trip(e)
    for a, b in ((3, 5), (17, 2), (64, 9)):  # equal values at several sizes (structure may be rebuilt)
        env = {s0: a, s1: b}
        assert back.xreplace(env) == sympy.sympify(e).xreplace(env)


def test_other_symbols_and_functions_are_refused():
    with pytest.raises(ValueError, match="not an index expression"):
        to_plain(var("x", 0) + s0)  # a loop variable: no size
    with pytest.raises(ValueError, match="not an index expression"):
        to_plain(sympy.sqrt(s0))
