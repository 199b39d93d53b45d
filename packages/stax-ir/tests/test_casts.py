"""to_dtype between every pair of dtypes, against an exact reference written from eager's rules.

Float targets round half to even, computed exactly with Fractions; like eager,
float64 and integer sources reach half types through float32 (double rounding).
Float -> integer truncates toward zero; NaN and values outside the conversion
width (int64 for int64/uint8, int32 otherwise) become INT_MIN of that width,
then wrap to the target, as eager on x86.
"""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from irtestlib import run_pointwise
from stax.ir import cast, load
from stax.ir import dtypes as dt

# (precision bits incl. the implicit one, minimum normal exponent, maximum exponent)
FORMATS = {"float16": (11, -14, 15), "bfloat16": (8, -126, 127), "float32": (24, -126, 127),
           "float64": (53, -1022, 1023)}


def round_exact(x, name: str) -> float:
    """Round the exact value x (Fraction/int/float) to format `name`, half to even, with overflow to inf."""
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return x
    if x == 0:
        return float(x)  # keeps the sign of -0.0
    x = Fraction(x)
    p, emin, emax = FORMATS[name]
    sign = -1 if x < 0 else 1
    a = abs(x)
    e = max(math.floor(math.log2(a)), emin)
    while Fraction(2) ** e > a and e > emin:  # fix float log2 inaccuracy
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, emin)
    ulp = Fraction(2) ** (e - p + 1)
    q, r = divmod(a, ulp)
    if r * 2 > ulp or (r * 2 == ulp and q % 2 == 1):
        q += 1
    v = q * ulp
    max_finite = (2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax
    if v > max_finite:
        return sign * math.inf
    return sign * float(v)


def wrap(v: int, d: dt.DType) -> int:
    bits = d.itemsize * 8
    v &= (1 << bits) - 1
    return v - (1 << bits) if (d.kind == "i" and v >= 1 << (bits - 1)) else v


def ref_cast(x, src: dt.DType, dst: dt.DType):
    if dst.is_bool:
        return bool(x != 0) or (src.is_floating and math.isnan(x))
    if src.is_bool:
        x = int(x)
    if dst.is_integer:
        if src.is_floating:
            wide = 64 if dst.name in ("int64", "uint8") else 32
            if math.isnan(x) or math.isinf(x) or not -(2 ** (wide - 1)) <= math.trunc(x) < 2 ** (wide - 1):
                return wrap(-(2 ** (wide - 1)), dst)
            return wrap(math.trunc(x), dst)
        return wrap(int(x), dst)
    # floating target
    if dst.name in ("float16", "bfloat16") and (src.is_integer or src.name == "float64"):
        x = round_exact(x if src.is_floating else int(x), "float32")  # through float, as eager
    return round_exact(x if src.is_floating else int(x), dst.name)


def values_for(d: dt.DType) -> list:
    if d.is_bool:
        return [False, True]
    if d.is_integer:
        info = np.iinfo(d.np)
        return sorted({int(v) for v in (0, 1, -1, 127, 128, 255, 256, -129, 65504, 65520, 2**24 + 1, 2**31 - 1,
                                        -(2**31), 2**40 + 2**32 + 2**16 + 1, info.min, info.max)
                       if info.min <= v <= info.max})
    vals = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 0.999, 255.9, 256.0, -1.0, -129.7, 300.7, 70000.0, -40000.5,
            65519.0, 65520.0, 2.0**31, -(2.0**31), 2.0**31 - 128, 3e9, 2.0**63, -(2.0**63), 1e20, 1e-8, 1e-45,
            1 + 2.0**-11 + 2.0**-40, 1 + 2.0**-8, 1.00390625, 3.4e38, math.inf, -math.inf, math.nan]
    return [float(v) for v in dt.round_to(np.array(vals), d)]


PAIRS = list(itertools.product(dt.ALL_DTYPES, dt.ALL_DTYPES))


@pytest.mark.parametrize("src, dst", PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_cast_edge_values(src, dst):
    vals = values_for(src)
    arr = np.array(vals, dtype=src.np)
    got = run_pointwise(cast(load("x", "i0", src), dst), (len(vals),), {"x": (arr, src)})
    want = [ref_cast(v, src, dst) for v in vals]
    for v, g, w in zip(vals, got, want):
        g = float(g) if dst.is_floating else (bool(g) if dst.is_bool else int(g))
        same = (g == w and math.copysign(1, g) == math.copysign(1, w)) if dst.is_floating and not math.isnan(w) else (
            math.isnan(g) if dst.is_floating else g == w)
        assert same, f"{src}->{dst} of {v!r}: got {g!r}, want {w!r}"


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(dt.ALL_DTYPES), st.sampled_from(dt.ALL_DTYPES), st.data())
def test_cast_random_values(src, dst, data):
    if src.is_bool:
        raw = data.draw(st.lists(st.booleans(), min_size=1, max_size=8))
    elif src.is_integer:
        info = np.iinfo(src.np)
        raw = data.draw(st.lists(st.integers(int(info.min), int(info.max)), min_size=1, max_size=8))
    else:
        raw = data.draw(st.lists(st.floats(width=64 if src == dt.float64 else 32), min_size=1, max_size=8))
    arr = dt.round_to(np.array(raw, dtype=np.float64 if src.is_floating else src.np), src)
    vals = [float(v) if src.is_floating else (bool(v) if src.is_bool else int(v)) for v in arr]
    got = run_pointwise(cast(load("x", "i0", src), dst), (len(vals),), {"x": (arr, src)})
    for v, g in zip(vals, got):
        w = ref_cast(v, src, dst)
        if dst.is_floating and math.isnan(w):
            assert math.isnan(g)
        else:
            assert (float(g) if dst.is_floating else g) == w, f"{src}->{dst} of {v!r}: got {g!r}, want {w!r}"


def test_round_exact_reference_agrees_with_hardware_float32():
    """The Fraction reference itself rounds like numpy's float64 -> float32 (single rounding)."""
    xs = np.random.default_rng(1).standard_normal(500) * 10.0 ** np.random.default_rng(2).integers(-40, 40, 500)
    for x in xs:
        with np.errstate(over="ignore"):
            assert (round_exact(float(x), "float32") == float(np.float32(x))
                    or math.isinf(round_exact(float(x), "float32")))
