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
