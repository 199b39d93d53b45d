"""numerics.truncdiv at INT_MIN: C division toward zero must not go through abs(), which wraps
(int8: abs(-128) == -128, so -128 / -100 came out as -2 instead of 1)."""

import numpy as np
import pytest
from stax.ir import dtypes as dt
from stax.ir import numerics


def c_div(a: int, b: int, bits: int) -> int:
    """C (and eager) integer division on Python ints: truncate toward zero, wrap to `bits`."""
    q = abs(a) // abs(b)
    q = -q if (a < 0) != (b < 0) else q
    return (q + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))


@pytest.mark.parametrize("d", [dt.int8, dt.int16, dt.int32, dt.int64], ids=lambda d: d.name)
def test_truncdiv_int_min(d):
    info = np.iinfo(d.np)
    lo, hi = int(info.min), int(info.max)
    pairs = [(lo, -100), (lo, 100), (lo, -1), (lo, 1), (lo, lo), (lo, hi), (lo, 3), (lo, -3), (lo + 1, lo),
             (hi, lo), (hi, -1), (-7, 2), (7, -2), (-7, -2), (0, lo)]
    a = np.array([p[0] for p in pairs], dtype=d.np)
    b = np.array([p[1] for p in pairs], dtype=d.np)
    got = numerics.truncdiv(a, b)
    assert got.dtype == d.np
    want = [c_div(x, y, 8 * d.itemsize) for x, y in pairs]
    assert [int(v) for v in got] == want
    if d == dt.int8:
        assert int(numerics.truncdiv(np.int8(-128), np.int8(-100))) == 1  # the reported case
