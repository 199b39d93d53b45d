"""Views over symbolic sizes (issue 23, frontend slice): the strides torch's computeStride gives, proved
with expressions; slices and selects whose bounds the ranges place. Each checked against the static
answer at a binding."""

import pytest
import sympy
from stax.ir import size_var
from stax.ir import views as IV
from stax.ir.value_ranges import ValueRange

s0, s1 = size_var("s0"), size_var("s1")


@pytest.mark.parametrize("sizes, strides, new, want", [
    ((s0, s1, 16), (16 * s1, 16, 1), (s0 * s1, 16), (16, 1)),  # flatten: the flat-index form does not fold
    ((s0 * s1, 16), (16, 1), (s0, s1, 16), (16 * s1, 16, 1)),  # split
    ((s0, s1, 768), (768 * s1, 768, 1), (s0, s1, 12, 64), (768 * s1, 768, 64, 1)),  # into heads
    ((s0, 12, s1, 64), (768 * s1, 64, 768, 1), (s0, 12 * s1, 64), None),  # transposed heads: needs a copy
    ((s0, s1), (1, s0), (s0 * s1,), None),  # a transposed flatten
])
def test_view_strides(sizes, strides, new, want):
    assert IV.view_strides(sizes, strides, new) == want
    static = IV.view_strides(*[_at(t) for t in (sizes, strides, new)])
    assert static == (None if want is None else _at(want))


def _at(xs) -> tuple:
    """The static values at s0 = 3, s1 = 5."""
    return tuple(int(sympy.sympify(x).xreplace({s0: 3, s1: 5})) for x in xs)


def test_infer_sizes_symbolic():
    assert IV.infer_sizes((s0, -1), 16 * s0 * s1) == (s0, 16 * s1)
    assert IV.infer_sizes((-1,), 16 * s0 * s1) == (16 * s0 * s1,)
    with pytest.raises(ValueError):
        IV.infer_sizes((s1, -1), 16 * s0)  # not provably an integer
    with pytest.raises(ValueError):
        IV.infer_sizes((s0, s1), s0 * s0)


def test_slice_and_select_with_ranges():
    ranges = {s0: ValueRange(2, 512)}
    sizes, m = IV.slice_map((512, 8), 0, 0, s0, ranges=ranges)  # position_ids[:seq_len]
    assert sizes == (s0, 8)
    with pytest.raises(NotImplementedError):
        IV.slice_map((512, 8), 0, 0, s0)  # unbounded s0 may pass 512: Python would clamp
    assert IV.slice_map((s0, s1), 1, 1, 2**63 - 1)[0] == (s0, s1 - 1)  # x[:, 1:]
    assert IV.select_map((s0, s1), 1, -1)[0] == (s0,)
    assert IV.select_map((s0, s1), 1, -1)[1]((size_var("v"),)) == (size_var("v"), s1 - 1)
    with pytest.raises(NotImplementedError):
        IV.select_map((s0,), 0, 5)  # s0 >= 1 only: index 5 may be out of range


@pytest.mark.parametrize("n", [5, 8, 13])
def test_constant_pad_by_symbolic_amounts(n):
    """constant_pad with pads that are expressions of a size (cuda's sdpa pads its bias by `8 - s % 8`),
    bound at a size, against numpy: the symbolic form decides no comparison it cannot prove."""
    import numpy as np
    from irtestlib import run_pointwise
    from stax.ir import dtypes as dt
    from stax.ir import load
    from stax.ir.expr import map_indices
    from stax.ir.index import ModularIndexing

    pads = ((0, 0), (0, 8 - ModularIndexing(s0, 1, 8)))
    v = IV.constant_pad(lambda ix: load("x", s0 * ix[0] + ix[1], dt.float32), (2, s0), pads, -1.0, dt.float32)
    x = np.arange(2 * n, dtype=np.float32).reshape(2, n)
    width = n + 8 - n % 8
    at_n = lambda e: e.xreplace({s0: n}) if isinstance(e, sympy.Basic) else e  # noqa: E731
    out = run_pointwise(map_indices(v, at_n, bounds=at_n), (2, width), {"x": (x, dt.float32)})
    np.testing.assert_array_equal(out, np.pad(x, ((0, 0), (0, width - n)), constant_values=-1.0))
