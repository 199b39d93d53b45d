"""Every op of the table, through the interpreter, against an independent reference.

Ops with PyTorch-specific rules (division and remainder signs, NaN handling of
min/max and sign, integer wrap-around, shifts, rounding) have Python scalar
references written from those rules; standard C-math functions are checked
against numpy in float64, rounded to the op's dtype. Inputs cross the edge cases
(signed zeros, inf, NaN, INT_MIN/MAX, ties) with each other.
"""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from irtestlib import run_pointwise
from stax.ir import OPS, load, op
from stax.ir import dtypes as dt

FLOATS = (dt.float16, dt.bfloat16, dt.float32, dt.float64)
INTS = (dt.uint8, dt.int8, dt.int16, dt.int32, dt.int64)
NUMERIC = INTS + FLOATS
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-23, "float64": 2.0**-52}
INF, NAN = math.inf, math.nan


def wrap(v: int, d: dt.DType):
    """Two's complement wrap-around of a Python int to dtype `d`."""
    if d.is_bool:
        return bool(v)
    bits = d.itemsize * 8
    v &= (1 << bits) - 1
    if d.kind == "i" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def ieee_div(a: float, b: float) -> float:
    if b == 0:
        if a == 0 or math.isnan(a):
            return NAN
        return math.copysign(INF, a) * math.copysign(1.0, b)
    return a / b


def c_fmod(a, b):
    if isinstance(a, float):
        if b == 0 or math.isinf(a) or math.isnan(a) or math.isnan(b):
            return NAN
        return math.fmod(a, b)
    q = abs(a) // abs(b)
    q = -q if (a < 0) != (b < 0) else q
    return a - b * q


def torch_remainder(a, b):
    if not isinstance(a, float):
        return a % b  # Python's % has the divisor's sign
    m = c_fmod(a, b)
    return m + b if (m != 0 and (b < 0) != (m < 0)) else m


def floordiv(a, b):
    if not isinstance(a, float):
        return a // b
    if b == 0:
        return ieee_div(a, b)
    if math.isinf(a) or math.isnan(a) or math.isnan(b):
        return NAN
    return a // b  # Python float //: floor of the exact quotient


def truncdiv(a, b, d):
    """Integers: C division. Floats: trunc of the quotient rounded to the operand dtype, as eager
    (bf16/fp16 division rounds to the half type before trunc: 1/0.1001 -> 9.99 -> 10.0 -> 10)."""
    if not isinstance(a, float):
        q = abs(a) // abs(b)
        return -q if (a < 0) != (b < 0) else q
    q = float(dt.round_to(np.float64(ieee_div(a, b)), dt.compute_dtype(d)))
    q = float(dt.round_to(np.float64(q), d))
    return q if (math.isinf(q) or math.isnan(q)) else float(math.trunc(q))


def nan_minmax(f):
    def g(a, b):
        if isinstance(a, float) and (math.isnan(a) or math.isnan(b)):
            return NAN
        return f(a, b)

    return g


def fminmax(f):
    def g(a, b):
        if math.isnan(a):
            return b
        if math.isnan(b):
            return a
        return f(a, b)

    return g


def torch_sign(a):
    if isinstance(a, bool):
        return a
    s = (a > 0) - (a < 0)
    return float(s) if isinstance(a, float) else s


def relu(a):
    if isinstance(a, float) and math.isnan(a):
        return a
    return a if a > 0 else type(a)(0)


def float_round(fn):
    def g(a):
        if not isinstance(a, float) or math.isinf(a) or math.isnan(a):
            return a
        return math.copysign(float(fn(a)), a)  # keeps -0.0 for -0.4 -> -0.0, as C

    return g


def shift_left(a, b, d):
    bits = d.itemsize * 8
    return 0 if (b < 0 or b >= bits) else a << b


def shift_right(a, b, d):
    bits = d.itemsize * 8
    return (-1 if a < 0 else 0) if (b < 0 or b >= bits) else a >> b


def erfinv_bisect(y: float) -> float:
    """Independent erfinv: bisection on math.erf (monotone) in double."""
    if math.isnan(y) or abs(y) > 1:
        return NAN
    if abs(y) == 1:
        return math.copysign(INF, y)
    lo, hi = -7.0, 7.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if math.erf(mid) < y:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def lgamma(x):
    try:
        return math.lgamma(x)
    except (ValueError, OverflowError):
        return INF


def guarded(fn):
    def g(x):
        return NAN if math.isnan(x) else fn(x)

    return g


# op -> (operand dtypes, reference, tolerance in ulps of the result dtype).
# A reference is a Python scalar function, ("np", float64 numpy function), or
# ("d", function taking the dtype too). Results of integer ops are wrapped.
CMP = NUMERIC + (dt.bool_,)
REF = {
    "add": (NUMERIC, lambda a, b: a + b, 1),
    "sub": (NUMERIC, lambda a, b: a - b, 1),
    "mul": (NUMERIC, lambda a, b: a * b, 1),
    "truediv": (FLOATS, ieee_div, 1),
    "floordiv": (NUMERIC, floordiv, 1),
    "truncdiv": (NUMERIC, ("d", truncdiv), 1),  # see truncdiv: half types round the quotient to themselves
    "remainder": (NUMERIC, torch_remainder, 1),
    "fmod": (NUMERIC, c_fmod, 0),
    "neg": (NUMERIC, lambda a: -a, 0),
    "abs": (NUMERIC, abs, 0),
    "square": (NUMERIC, lambda a: a * a, 1),
    "maximum": (NUMERIC, nan_minmax(max), 0),
    "minimum": (NUMERIC, nan_minmax(min), 0),
    "fmax": (FLOATS, fminmax(max), 0),
    "fmin": (FLOATS, fminmax(min), 0),
    "sign": (NUMERIC + (dt.bool_,), torch_sign, 0),
    "relu": (NUMERIC, relu, 0),
    "pow": (NUMERIC, ("np", np.power), 4),
    "exp": (FLOATS, ("np", np.exp), 4),
    "exp2": (FLOATS, ("np", np.exp2), 4),
    "expm1": (FLOATS, ("np", np.expm1), 4),
    "log": (FLOATS, ("np", np.log), 4),
    "log2": (FLOATS, ("np", np.log2), 4),
    "log10": (FLOATS, ("np", np.log10), 4),
    "log1p": (FLOATS, ("np", np.log1p), 4),
    "logaddexp": (FLOATS, ("np", np.logaddexp), 4),
    "sqrt": (FLOATS, ("np", np.sqrt), 1),
    "rsqrt": (FLOATS, ("np", lambda a: 1.0 / np.sqrt(a)), 2),
    "reciprocal": (FLOATS, ("np", lambda a: 1.0 / a), 1),
    "sin": (FLOATS, ("np", np.sin), 4),
    "cos": (FLOATS, ("np", np.cos), 4),
    "tan": (FLOATS, ("np", np.tan), 4),
    "asin": (FLOATS, ("np", np.arcsin), 4),
    "acos": (FLOATS, ("np", np.arccos), 4),
    "atan": (FLOATS, ("np", np.arctan), 4),
    "sinh": (FLOATS, ("np", np.sinh), 4),
    "cosh": (FLOATS, ("np", np.cosh), 4),
    "tanh": (FLOATS, ("np", np.tanh), 4),
    "asinh": (FLOATS, ("np", np.arcsinh), 4),
    "acosh": (FLOATS, ("np", np.arccosh), 4),
    "atanh": (FLOATS, ("np", np.arctanh), 4),
    "atan2": (FLOATS, ("np", np.arctan2), 4),
    "hypot": (FLOATS, ("np", np.hypot), 2),
    "copysign": (FLOATS, math.copysign, 0),
    "nextafter": ((dt.float32, dt.float64), ("np", None), 0),  # checked bit-exactly in its own test
    "erf": (FLOATS, guarded(math.erf), 4),
    "erfc": (FLOATS, guarded(math.erfc), 4),
    "erfinv": (FLOATS[:3], erfinv_bisect, 8),  # float64: ill-conditioned near +-1, see test_erfinv_inverts_erf
    "lgamma": (FLOATS, guarded(lgamma), 8),
    "sigmoid": (FLOATS, ("np", lambda a: 1.0 / (1.0 + np.exp(-a))), 4),
    "frac": (FLOATS, lambda a: NAN if math.isinf(a) else a - float(math.trunc(a)) if not math.isnan(a) else a, 1),
    "floor": (NUMERIC, float_round(math.floor), 0),
    "ceil": (NUMERIC, float_round(math.ceil), 0),
    "round": (NUMERIC, float_round(round), 0),  # Python's round: half to even
    "trunc": (NUMERIC, float_round(math.trunc), 0),
    "eq": (CMP, lambda a, b: a == b, 0),
    "ne": (CMP, lambda a, b: a != b, 0),
    "lt": (CMP, lambda a, b: a < b, 0),
    "le": (CMP, lambda a, b: a <= b, 0),
    "gt": (CMP, lambda a, b: a > b, 0),
    "ge": (CMP, lambda a, b: a >= b, 0),
    "isnan": (FLOATS, math.isnan, 0),
    "isinf": (FLOATS, math.isinf, 0),
    "isfinite": (FLOATS, math.isfinite, 0),
    "signbit": (FLOATS, lambda a: math.copysign(1.0, a) < 0, 0),
    "logical_and": (CMP, lambda a, b: bool(a) and bool(b), 0),
    "logical_or": (CMP, lambda a, b: bool(a) or bool(b), 0),
    "logical_xor": (CMP, lambda a, b: bool(a) != bool(b), 0),
    "logical_not": (CMP, lambda a: not a, 0),
    "bitwise_and": (INTS + (dt.bool_,), lambda a, b: a & b, 0),
    "bitwise_or": (INTS + (dt.bool_,), lambda a, b: a | b, 0),
    "bitwise_xor": (INTS + (dt.bool_,), lambda a, b: a ^ b, 0),
    "bitwise_not": (INTS + (dt.bool_,), lambda a: (not a) if isinstance(a, bool) else ~a, 0),
    "bitwise_left_shift": (INTS, ("d", shift_left), 0),
    "bitwise_right_shift": (INTS, ("d", shift_right), 0),
    "where": (CMP, lambda c, a, b: a if c else b, 0),
}
ELSEWHERE = {"to_dtype": "test_casts.py", "rand": "test_rng.py", "randn": "test_rng.py"}


def test_every_op_has_a_reference():
    assert set(OPS) == set(REF) | set(ELSEWHERE)


def edge_values(d: dt.DType) -> list:
    if d.is_bool:
        return [False, True]
    if d.is_integer:
        info = np.iinfo(d.np)
        vals = [0, 1, -1, 2, -2, 3, 7, -7, 8, 63, 64, int(info.min), int(info.max), int(info.min) + 1,
                int(info.max) - 1]
        return sorted({v for v in vals if info.min <= v <= info.max})
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, -7.0, 0.1, 0.999, -0.999, 100.0, 1e-30, 1e30,
            INF, -INF, NAN]
    return [float(v) for v in dt.round_to(np.array(vals, dtype=np.float64), d)]


def to_py(x, d):
    if d.is_bool:
        return bool(x)
    return int(x) if d.is_integer else float(x)


def reference(name: str, d: dt.DType, args: list[np.ndarray], out_dtype: dt.DType) -> np.ndarray:
    _, ref, _ = REF[name]
    if isinstance(ref, tuple) and ref[0] == "np":
        with np.errstate(all="ignore"):
            r = ref[1](*[np.asarray(a, dtype=np.float64) for a in args])
        if d.is_integer:
            r = ref[1](*[np.asarray(a, dtype=np.int64) if d != dt.uint8 else np.asarray(a, np.uint64) for a in args])
            return np.array([wrap(int(v), out_dtype) for v in np.ravel(r)])
        return dt.round_to(r, out_dtype)
    out = []
    for vals in zip(*args):
        py = [to_py(v, d if k or name != "where" else dt.bool_) for k, v in enumerate(vals)]
        if name == "where":
            py = [bool(vals[0])] + [to_py(v, d) for v in vals[1:]]
        r = ref[1](*py, d) if isinstance(ref, tuple) else ref(*py)
        if out_dtype.is_bool:
            out.append(bool(r))
        elif out_dtype.is_integer:
            out.append(wrap(int(r), out_dtype))
        else:
            out.append(float(r))
    if out_dtype.is_integer or out_dtype.is_bool:
        return np.array(out, dtype=out_dtype.np)
    return dt.round_to(np.array(out, dtype=np.float64), out_dtype)


def check(name: str, d: dt.DType, args: list):
    n = len(args[0])
    dtypes = [dt.bool_] + [d] * (len(args) - 1) if name == "where" else [d] * len(args)
    loads = [load(f"a{k}", "i0", dk) for k, dk in enumerate(dtypes)]
    v = op(name, *loads)
    got = run_pointwise(v, (n,), {f"a{k}": (np.asarray(a), dk) for k, (a, dk) in enumerate(zip(args, dtypes))})
    stored = [dt.round_to(np.asarray(a), dk) for a, dk in zip(args, dtypes)]
    want = reference(name, d, stored, v.dtype)
    ulps = REF[name][2]
    if v.dtype.is_floating:
        got64, want64 = np.asarray(got, np.float64), np.asarray(want, np.float64)
        nan_ok = np.isnan(got64) == np.isnan(want64)
        with np.errstate(invalid="ignore"):
            tol = ulps * EPS[v.dtype.name] * np.abs(want64) + ulps * EPS[v.dtype.name] * 1e-3
            close = (got64 == want64) | (np.abs(got64 - want64) <= tol)
        bad = ~nan_ok | (~np.isnan(want64) & ~close)
        if bad.any():
            k = int(np.nonzero(bad)[0][0])
            raise AssertionError(
                f"{name}[{d}] at inputs {[float(a[k]) for a in stored]}: got {got64[k]!r}, want {want64[k]!r}"
            )
    else:
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=f"{name}[{d}]")


def _valid(name, d, vals):
    """Drop inputs that are errors by definition (checked in their own tests)."""
    if d.is_integer and name in ("floordiv", "truncdiv", "remainder", "fmod") and vals[1] == 0:
        return False
    if d.is_integer and name == "pow" and vals[1] < 0:
        return False
    return True


CASES = [(name, d) for name in sorted(REF) if name != "nextafter" for d in REF[name][0]]


@pytest.mark.parametrize("name, d", CASES, ids=[f"{n}-{d}" for n, d in CASES])
def test_op_on_edge_values(name, d):
    """Every pair (or triple) of edge values: signed zeros, inf, NaN, INT_MIN/MAX."""
    arity = OPS[name].arity
    pool = edge_values(d)
    if name == "where":
        combos = [(c, a, b) for c in (False, True) for a, b in itertools.product(pool, pool)]
    else:
        combos = [c for c in itertools.product(pool, repeat=arity) if _valid(name, d, c)]
    if name == "pow" and d.is_integer:
        combos = [c for c in combos if c[1] <= 64] + [(3, int(np.iinfo(d.np).max))]
    args = [np.array(col, dtype=(bool if (name == "where" and k == 0) or d.is_bool else d.np))
            for k, col in enumerate(zip(*combos))]
    check(name, d, args)


@st.composite
def op_case(draw):
    name = draw(st.sampled_from([n for n, _ in CASES]))
    d = draw(st.sampled_from(REF[name][0]))
    n = draw(st.integers(1, 12))
    if d.is_bool:
        elem = st.booleans()
    elif d.is_integer:
        info = np.iinfo(d.np)
        elem = st.one_of(st.integers(int(info.min), int(info.max)), st.sampled_from(edge_values(d)))
    else:
        width = 16 if d in (dt.float16, dt.bfloat16) else d.itemsize * 8
        elem = st.one_of(st.floats(width=min(width, 32) if width != 64 else 64, allow_nan=True),
                         st.sampled_from(edge_values(d)))
    arity = OPS[name].arity
    cols = []
    for k in range(arity):
        e = st.booleans() if (name == "where" and k == 0) else elem
        cols.append(draw(st.lists(e, min_size=n, max_size=n)))
    rows = [r for r in zip(*cols) if _valid(name, d, r)]
    if name == "pow" and d.is_integer:
        rows = [r for r in rows if r[1] <= 200]
    if not rows:  # every drawn row was an error by definition: use the first valid edge-value row
        pool = edge_values(d)
        rows = [next(r for r in itertools.product(pool, repeat=arity) if _valid(name, d, r))]
        if name == "where":
            rows = [(True,) + rows[0][1:]]
    return name, d, rows


@settings(max_examples=300, deadline=None)
@given(op_case())
def test_op_on_random_values(case):
    name, d, rows = case
    args = [np.array(col, dtype=bool if (name == "where" and k == 0) or d.is_bool
                     else (np.float64 if d.is_floating else d.np))
            for k, col in enumerate(zip(*rows))]
    check(name, d, args)


@pytest.mark.parametrize("name", ["floordiv", "truncdiv", "remainder", "fmod"])
@pytest.mark.parametrize("d", INTS)
def test_integer_division_by_zero_raises(name, d):
    x, y = load("x", "i0", d), load("y", "i0", d)
    with pytest.raises(ZeroDivisionError):
        run_pointwise(op(name, x, y), (2,), {"x": (np.array([1, 2]), d), "y": (np.array([1, 0]), d)})


def test_integer_negative_power_raises():
    x = load("x", "i0", dt.int64)
    with pytest.raises(ValueError, match="negative integer powers"):
        run_pointwise(op("pow", x, x), (2,), {"x": (np.array([2, -1]), dt.int64)})


@pytest.mark.parametrize("d", [dt.float32, dt.float64])
def test_nextafter_steps_one_ulp(d):
    vals = np.array([0.0, 1.0, -1.0, 1e-30, np.inf, np.nan, 3.0], dtype=d.np)
    toward = np.array([1.0, 2.0, -2.0, 0.0, 0.0, 1.0, 3.0], dtype=d.np)
    got = run_pointwise(op("nextafter", load("x", "i0", d), load("y", "i0", d)), (7,),
                        {"x": (vals, d), "y": (toward, d)})
    info = np.finfo(d.np)
    assert got[0] == info.smallest_subnormal and got[1] == 1 + info.eps and got[2] == -(1 + info.eps)
    assert 0 < got[3] < vals[3] and got[4] == info.max and np.isnan(got[5]) and got[6] == 3.0
    with pytest.raises(TypeError, match="supports"):
        op("nextafter", load("x", "i0", dt.float16), load("y", "i0", dt.float16))


def test_erfinv_inverts_erf():
    y = np.linspace(-0.999999, 0.999999, 2001)
    x = run_pointwise(op("erfinv", load("y", "i0", dt.float64)), (2001,), {"y": (y, dt.float64)})
    back = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(back, y, rtol=0, atol=4e-16)
