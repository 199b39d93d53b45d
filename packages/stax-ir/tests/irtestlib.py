"""Shared helpers for the stax-ir tests: run one expression through the interpreter, grids."""

from __future__ import annotations

import numpy as np
import sympy
from stax.ir import ComputedBuffer, Graph, InputBuffer, Layout, Pointwise, interpret, outputs
from stax.ir import dtypes as dt
from stax.ir.index_printer import evaluate
from stax.ir.interpreter import index_grid


def grid_values(expr, vars_, sizes) -> np.ndarray:
    """Exact int64 values of an index expression at every point of the grid (reference evaluator)."""
    out = np.asarray(evaluate(sympy.sympify(expr), index_grid(vars_, sizes)), dtype=np.int64)
    return np.broadcast_to(out, tuple(sizes))


def run_pointwise(value, sizes, inputs: dict, extern=None) -> np.ndarray:
    """Interpret `value` over `sizes`; inputs are {name: (array, DType)} stored contiguously."""
    ins = tuple(InputBuffer(name, Layout.contiguous(np.shape(a) or (1,), d)) for name, (a, d) in inputs.items())
    node = ComputedBuffer("out", Layout.contiguous(sizes, value.dtype), Pointwise(tuple(sizes), value))
    g = Graph(ins, (node,), ("out",))
    feed = {name: dt.round_to(np.asarray(a).reshape(-1), d) for name, (a, d) in inputs.items()}
    return outputs(g, interpret(g, feed, extern))[0]


# ---- random index expressions (hypothesis strategies)

from hypothesis import strategies as st  # noqa: E402
from stax.ir.index import CeilDiv, FloorDiv, ModularIndexing  # noqa: E402


def index_exprs(vars_, max_leaves: int = 8):
    """Index expressions over `vars_`: sums, scalings, FloorDiv/ModularIndexing/CeilDiv with
    positive divisors, Min/Max, and negative constants (simplification must stay exact anyway)."""
    leaf = st.one_of(st.sampled_from(list(vars_)), st.integers(-6, 12).map(sympy.Integer))
    pos = st.integers(1, 12)

    def extend(children):
        return st.one_of(
            st.tuples(children, children).map(lambda t: t[0] + t[1]),
            st.tuples(st.integers(-4, 8), children).map(lambda t: t[0] * t[1]),
            st.tuples(children, pos).map(lambda t: FloorDiv(*t)),
            st.tuples(children, pos, pos).map(lambda t: ModularIndexing(*t)),
            st.tuples(children, pos).map(lambda t: CeilDiv(*t)),
            st.tuples(children, children).map(lambda t: sympy.Min(*t)),
            st.tuples(children, children).map(lambda t: sympy.Max(*t)),
        )

    return st.recursive(leaf, extend, max_leaves=max_leaves)


@st.composite
def reshape_exprs(draw, vars_, sizes):
    """What view composition produces: a row-major flat index over `vars_`, split into the
    digits of another mixed radix (FloorDiv/ModularIndexing), recombined with new strides."""
    flat, inner = sympy.Integer(0), 1
    for v, s in reversed(list(zip(vars_, sizes))):
        flat += inner * v
        inner *= s
    total = inner
    radix = []
    rest = total
    while rest > 1 and len(radix) < 4:
        divs = [d for d in range(2, rest + 1) if rest % d == 0]
        d = draw(st.sampled_from(divs))
        radix.insert(0, d)
        rest //= d
    if rest > 1:
        radix.insert(0, rest)
    expr, inner = sympy.Integer(draw(st.integers(0, 5))), 1
    for k, r in enumerate(reversed(radix)):
        digit = FloorDiv(flat, inner) if k == len(radix) - 1 else ModularIndexing(flat, inner, r)
        expr += draw(st.sampled_from([0, 1, 2, inner, r, inner * 3])) * digit
        inner *= r
    return expr
