"""Index functions: exact integer semantics, and the C and Python printers agree with them."""

import random
import shutil
import subprocess

import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from irtestlib import index_exprs
from stax.ir.index import CeilDiv, FloorDiv, ModularIndexing, index_max, index_min, pointwise_vars, sympify, var
from stax.ir.index_printer import evaluate, to_c, to_python
from stax.ir.interpreter import index_grid

i0, i1, i2 = pointwise_vars(3)
ints = st.integers(-1000, 1000)
nonzero = ints.filter(lambda x: x != 0)


@given(ints, nonzero, nonzero)
def test_functions_on_integers_are_python_floor_semantics(a, b, m):
    A, B, M = sympy.Integer(a), sympy.Integer(b), sympy.Integer(m)
    assert FloorDiv(A, B) == a // b
    assert ModularIndexing(A, B, M) == (a // b) % m
    assert CeilDiv(A, B) == -(-a // b)


@given(ints, nonzero, nonzero)
def test_symbolic_folding_is_exact(x, a, b):
    """FloorDiv(FloorDiv(x, a), b) folds to FloorDiv(x, a*b) only where that is an identity."""
    s = sympy.Symbol("x", integer=True)
    e = FloorDiv(FloorDiv(s, a), b)
    assert evaluate(e, {s: np.int64(x)}) == (x // a) // b


def test_nonnegativity_is_known():
    assert FloorDiv(i0, 4).is_nonnegative and CeilDiv(i0 + 3, 2).is_nonnegative
    s = sympy.Symbol("s", integer=True)
    assert ModularIndexing(s - 7, 1, 4).is_nonnegative
    assert FloorDiv(s, 4).is_nonnegative is None


def test_min_max_and_string_parsing():
    assert index_min(i0, 3).func is sympy.Min and index_max(i0, i1, 2).func is sympy.Max
    assert sympify("128*i0 + r0") == 128 * i0 + var("r", 0)
    assert sympify("FloorDiv(i1, 2)") == FloorDiv(i1, 2)


def test_c_printer_forms():
    assert to_c(FloorDiv(i0, 4)) == "(i0 / 4)"
    assert to_c(ModularIndexing(i0, 2, 8)) == "((i0 / 2) % 8)"
    assert to_c(FloorDiv(i0 - 5, 4)) == "stax_floordiv((i0 - 5), 4)"
    assert to_c(CeilDiv(i0, 4)) == "((i0 + 3) / 4)"
    assert "LL" in to_c(2**40 * i0) and "LL" not in to_c(2**40 * i0, "int32_t")
    assert to_c(index_min(i0, i1)) == "std::min<int64_t>(i0, i1)"


SIZES = (5, 4, 3)


@settings(max_examples=150, deadline=None)
@given(index_exprs((i0, i1, i2)))
def test_python_printer_matches_evaluate(e):
    env = index_grid((i0, i1, i2), SIZES)
    want = np.broadcast_to(evaluate(e, env), SIZES)
    fn = eval(f"lambda i0, i1, i2: {to_python(e)}")  # noqa: S307 - our own printer's output
    got = np.array([[[fn(a, b, c) for c in range(SIZES[2])] for b in range(SIZES[1])] for a in range(SIZES[0])])
    np.testing.assert_array_equal(got, want)


_PRELUDE = r"""
#include <cstdint>
#include <cstdio>
#include <algorithm>
static inline int64_t stax_floordiv(int64_t a, int64_t b) {
    int64_t q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }
static inline int64_t stax_mod(int64_t a, int64_t b) {
    int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a C++ compiler")
def test_c_printer_matches_evaluate(tmp_path):
    """One C++ program prints every expression at every grid point; compare with numpy."""
    rnd = random.Random(7)
    exprs = [_random_expr(rnd, 4) for _ in range(150)]
    body = []
    for e in exprs:
        body.append(f'  for (int64_t i0 = 0; i0 < {SIZES[0]}; i0++) for (int64_t i1 = 0; i1 < {SIZES[1]}; i1++) '
                    f'for (int64_t i2 = 0; i2 < {SIZES[2]}; i2++) printf("%lld\\n", (long long)({to_c(e)}));')
    src = tmp_path / "idx.cpp"
    src.write_text(_PRELUDE + "int main() {\n" + "\n".join(body) + "\n}\n")
    exe = tmp_path / "idx"
    subprocess.run(["g++", "-O0", "-o", str(exe), str(src)], check=True, capture_output=True, timeout=120)
    out = np.array(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split(),
                   dtype=np.int64)
    env = index_grid((i0, i1, i2), SIZES)
    want = np.concatenate([np.broadcast_to(evaluate(e, env), SIZES).reshape(-1) for e in exprs])
    np.testing.assert_array_equal(out, want)


def _random_expr(rnd: random.Random, depth: int):
    if depth == 0 or rnd.random() < 0.25:
        return rnd.choice([i0, i1, i2, sympy.Integer(rnd.randint(-6, 12))])
    a = _random_expr(rnd, depth - 1)
    k = rnd.randrange(7)
    if k == 0:
        return a + _random_expr(rnd, depth - 1)
    if k == 1:
        return rnd.randint(-4, 8) * a
    if k == 2:
        return FloorDiv(a, rnd.choice([1, 2, 3, 4, 7, -3]))
    if k == 3:
        return ModularIndexing(a, rnd.randint(1, 5), rnd.choice([2, 3, 4, 8, -3]))
    if k == 4:
        return CeilDiv(a, rnd.randint(1, 5))
    if k == 5:
        return index_min(a, _random_expr(rnd, depth - 1))
    return index_max(a, _random_expr(rnd, depth - 1))


def test_first_step_sees_through_digits():
    """The step of the innermost digit a variable feeds (what neighbouring lanes read): 1 along r for
    chunks of an NCHW tensor's (n, h*w) rows, where the affine stride is undefined (a FloorDiv term)."""
    from stax.ir.affine import affine_parts, first_step

    r, x0, x1 = sympy.symbols("r x0 x1", integer=True, nonnegative=True)
    e = 12544 * x0 + 6422528 * x1 + 802816 * FloorDiv(r, 12544) + ModularIndexing(r, 1, 12544)
    assert [first_step(e, v, (r, x0, x1)) for v in (r, x0, x1)] == [1, 12544, 6422528]
    assert affine_parts(e, (r, x0, x1)).stride(r) == 0  # why first_step exists
    assert first_step(FloorDiv(x1, 2) * 7 + x0, x1, (x0, x1)) == 0  # a variable only above a digit: no step
    s = sympy.Symbol("s1", integer=True, positive=True)
    assert first_step(s * x0 + r, x0, (x0, r)) == s  # symbolic sizes: an expression


@given(st.integers(-50, 50), st.integers(-50, 50), st.sampled_from([2, 3, 4]))
def test_exact_quotient_of_multiples(x, y, k):
    """FloorDiv of a sum whose every coefficient the divisor divides is that sum divided (exact at every
    value); one term the divisor does not divide leaves it unevaluated."""
    s1, s2 = sympify("s1"), sympify("s2")
    e = FloorDiv(2 * k * s1 * s2 - k * s1, k)
    assert e == 2 * s1 * s2 - s1
    assert int(e.subs({s1: x, s2: y})) == (2 * k * x * y - k * x) // k
    assert isinstance(FloorDiv(k * s1 + 1, k), FloorDiv)
    assert isinstance(FloorDiv(s1 * s2, k), FloorDiv)
    assert isinstance(FloorDiv(k * s1, s2), FloorDiv)  # (a symbolic divisor: never)
