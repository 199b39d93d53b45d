"""numpy implementations of ops whose PyTorch semantics numpy does not give directly.

Each function takes operands already in the compute dtype and returns the raw
result; the interpreter rounds it to the op's dtype. The comments name the eager
(CPU) behaviour each one reproduces, so a backend author knows what to match.
"""

from __future__ import annotations

import math

import numpy as np

from . import dtypes as dt


def int_div_guard(b) -> None:
    if np.any(np.asarray(b) == 0):
        raise ZeroDivisionError("integer division by zero (ZeroDivisionError)")


def floordiv(a, b):
    """torch.floor_divide: integers floor (x/0 is an error); floats as Python's // (fmod-based, exact)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "iub":
        int_div_guard(b)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.floor_divide(a, b)


def truncdiv(a, b, dtype=None):
    """div(rounding_mode='trunc'): C division toward zero; half types round the quotient first, as eager."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "iub":
        int_div_guard(b)
        with np.errstate(over="ignore", divide="ignore"):
            # a - fmod(a, b) is an exact multiple of b, so floor division is exact (no abs(INT_MIN) wrap)
            return np.floor_divide(a - np.fmod(a, b), b).astype(a.dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = a / b
    if dtype is not None and dtype.itemsize == 2:
        q = dt.round_to(q, dtype).astype(q.dtype)
    return np.trunc(q)


def remainder(a, b):
    """torch.remainder: the divisor's sign. Floats: m = fmod(a, b); m + b if m != 0 and signs differ."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "iub":
        int_div_guard(b)
        return np.mod(a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.fmod(a, b)
        return np.where((m != 0) & ((b < 0) != (m < 0)), m + b, m)


def fmod(a, b):
    """torch.fmod: the dividend's sign (C fmod)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "iub":
        int_div_guard(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.fmod(a, b)


def sign(a):
    """torch.sign: (a > 0) - (a < 0); NaN gives 0, -0.0 gives 0; bool is identity."""
    a = np.asarray(a)
    if a.dtype.kind == "b":
        return a
    return (a > 0).astype(a.dtype) - (a < 0).astype(a.dtype)


def int_identity(fn):
    """floor/ceil/round/trunc: identity on integers (numpy would go through float64)."""

    def f(a):
        a = np.asarray(a)
        return a if a.dtype.kind in "iub" else fn(a)

    return f


def relu(a):
    """x < 0 ? 0 : x, as eager's CPU kernel: NaN stays NaN and -0.0 stays -0.0 (atan2 tells them apart)."""
    a = np.asarray(a)
    if a.dtype.kind == "f":
        return np.where(a < 0, a.dtype.type(0), a)
    return np.maximum(a, 0)


def power(a, b):
    """torch.pow: integers wrap; a negative integer exponent is an error."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "iu" and np.any(b < 0):
        raise ValueError("Integers to negative integer powers are not allowed.")
    with np.errstate(all="ignore"):
        return np.power(a, b)


def shift_left(a, b):
    """torch.bitwise_left_shift: shifting by < 0 or >= the bit width gives 0."""
    a, b = np.asarray(a), np.asarray(b)
    bits = a.dtype.itemsize * 8
    ok = (b >= 0) & (b < bits)
    return np.where(ok, np.left_shift(a, np.where(ok, b, 0).astype(a.dtype)), 0).astype(a.dtype)


def shift_right(a, b):
    """torch.bitwise_right_shift: arithmetic; shifting by < 0 or >= the width fills with the sign."""
    a, b = np.asarray(a), np.asarray(b)
    bits = a.dtype.itemsize * 8
    ok = (b >= 0) & (b < bits)
    fill = np.where(a < 0, -1, 0) if a.dtype.kind == "i" else 0
    return np.where(ok, np.right_shift(a, np.where(ok, b, 0).astype(a.dtype)), fill).astype(a.dtype)


def frac(a):
    """x - trunc(x); inf gives NaN, as eager."""
    with np.errstate(invalid="ignore"):
        return a - np.trunc(a)


def scalar_map(fn):
    """Apply a Python float -> float function elementwise in float64, keep the dtype."""
    vec = np.frompyfunc(fn, 1, 1)

    def f(a):
        a = np.asarray(a)
        return vec(a.astype(np.float64)).astype(a.dtype)

    return f


def lgamma_scalar(x: float) -> float:
    try:
        return math.lgamma(x)
    except (ValueError, OverflowError):
        return math.inf  # poles at 0, -1, -2, ...: +inf, as eager


def erf_scalar(x: float) -> float:
    return math.erf(x) if not math.isnan(x) else math.nan


def erfc_scalar(x: float) -> float:
    return math.erfc(x) if not math.isnan(x) else math.nan


def erfinv_scalar(y: float) -> float:
    """Inverse error function: Giles' approximation polished by Newton steps on math.erf.

    erfinv(+-1) = +-inf, |y| > 1 or NaN gives NaN, as eager.
    """
    if math.isnan(y) or abs(y) > 1:
        return math.nan
    if abs(y) == 1:
        return math.copysign(math.inf, y)
    w = -math.log((1.0 - y) * (1.0 + y))
    if w < 6.25:
        w -= 3.125
        p = -3.6444120640178196996e-21
        for c in (-1.685059138182016589e-19, 1.2858480715256400167e-18, 1.115787767802518096e-17,
                  -1.333171662854620906e-16, 2.0972767875968561637e-17, 6.6376381343583238325e-15,
                  -4.0545662729752068639e-14, -8.1519341976054721522e-14, 2.6335093153082322977e-12,
                  -1.2975133253453532498e-11, -5.4154120542946279317e-11, 1.051212273321532285e-09,
                  -4.1126339803469836976e-09, -2.9070369957882005086e-08, 4.2347877827932403518e-07,
                  -1.3654692000834678645e-06, -1.3882523362786468719e-05, 0.0001867342080340571352,
                  -0.00074070253416626697512, -0.0060336708714301490533, 0.24015818242558961693,
                  1.6536545626831027356):
            p = c + p * w
    elif w < 16.0:
        w = math.sqrt(w) - 3.25
        p = 2.2137376921775787049e-09
        for c in (9.0756561938885390979e-08, -2.7517406297064545428e-07, 1.8239629214389227755e-08,
                  1.5027403968909827627e-06, -4.013867526981545969e-06, 2.9234449089955446044e-06,
                  1.2475304481671778723e-05, -4.7318229009055733981e-05, 6.8284851459573175448e-05,
                  2.4031110387097893999e-05, -0.0003550375203628474796, 0.00095328937973738049703,
                  -0.0016882755560235047313, 0.0024914420961078508066, -0.0037512085075692412107,
                  0.005370914553590063617, 1.0052589676941592334, 3.0838856104922207635):
            p = c + p * w
    else:
        w = math.sqrt(w) - 5.0
        p = -2.7109920616438573243e-11
        for c in (-2.5556418169965252055e-10, 1.5076572693500548083e-09, -3.7894654401267369937e-09,
                  7.6157012080783393804e-09, -1.4960026627149240478e-08, 2.9147953450901080826e-08,
                  -6.7711997758452339498e-08, 2.2900482228026654717e-07, -9.9298272942317002539e-07,
                  4.5260625972231537039e-06, -1.9681778105531670567e-05, 7.5995277030017761139e-05,
                  -0.00021503011930044477347, -0.00013871931833623122026, 1.0103004648645343977,
                  4.8499064014085844221):
            p = c + p * w
    x = p * y
    for _ in range(2):  # Newton on erf(x) - y; erf'(x) = 2/sqrt(pi) exp(-x^2)
        d = 2.0 / math.sqrt(math.pi) * math.exp(-x * x)
        if d == 0.0:
            break
        x -= (math.erf(x) - y) / d
    return x
