"""@triton.jit helpers that generated kernels call as `triton_helpers.<name>`.

Two kinds: semantics Triton lacks (NaN-propagating max/min as torch has, floor
division and Python remainder on integers, argmax with first-index ties, error
flags), and portable formulas for math that only libdevice provides, used under
TRITON_INTERPRET=1 where `tl.extra.libdevice` does not exist. Import this module only
after TRITON_INTERPRET is decided: `triton.jit` reads it when decorating.
"""

import triton
import triton.language as tl
from triton.language.extra import libdevice

try:  # grid dependency control (programmatic dependent launch, GpuConfig.pdl): Triton >= 3.4
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait  # noqa: F401
except ImportError:  # pragma: no cover - older Triton: compile.py never emits the calls
    gdc_wait = gdc_launch_dependents = None

# ---- NaN-propagating extrema and reductions (torch.maximum / torch.amax semantics) ----


@triton.jit
def maximum(a, b):
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def minimum(a, b):
    return tl.where((a < b) | (a != a), a, b)


@triton.jit
def max2(x, axis: tl.constexpr):
    return tl.reduce(x, axis, maximum)


@triton.jit
def min2(x, axis: tl.constexpr):
    return tl.reduce(x, axis, minimum)


@triton.jit
def add(a, b):
    return a + b


@triton.jit
def _mul(a, b):
    return a * b


@triton.jit
def prod(x, axis: tl.constexpr):
    return tl.reduce(x, axis, _mul)


@triton.jit
def any_(x, axis: tl.constexpr):
    return tl.max(x.to(tl.int8), axis) != 0


@triton.jit
def all_(x, axis: tl.constexpr):
    return tl.min(x.to(tl.int8), axis) != 0


@triton.jit
def argmax_combine(v1, i1, v2, i2):
    """Larger value wins; NaN beats numbers; ties go to the smaller index (eager argmax)."""
    nan1 = v1 != v1
    nan2 = v2 != v2
    gt = (v1 > v2) | (nan1 & (v2 == v2))
    eq = (v1 == v2) | (nan1 & nan2)
    take1 = gt | (eq & (i1 < i2))
    return tl.where(take1, v1, v2), tl.where(take1, i1, i2)


@triton.jit
def argmin_combine(v1, i1, v2, i2):
    nan1 = v1 != v1
    nan2 = v2 != v2
    lt = (v1 < v2) | (nan1 & (v2 == v2))
    eq = (v1 == v2) | (nan1 & nan2)
    take1 = lt | (eq & (i1 < i2))
    return tl.where(take1, v1, v2), tl.where(take1, i1, i2)


@triton.jit
def argmax2(v, i, axis: tl.constexpr):
    _, idx = tl.reduce((v, i), axis, argmax_combine)
    return idx


@triton.jit
def argmin2(v, i, axis: tl.constexpr):
    _, idx = tl.reduce((v, i), axis, argmin_combine)
    return idx


@triton.jit
def welford_combine(mean1, m2_1, w1, mean2, m2_2, w2):
    """Chan et al.: merge two (mean, sum of squared deviations, count) partials."""
    w = w1 + w2
    delta = mean2 - mean1
    frac = tl.where(w == 0, 0.0, w2 / tl.where(w == 0, 1.0, w))
    return mean1 + delta * frac, m2_1 + m2_2 + delta * delta * w1 * frac, w


@triton.jit
def cummax_index_combine(v1, i1, v2, i2):
    """torch.cummax: a later equal value or NaN takes over; a NaN is never displaced by a number."""
    nan1 = v1 != v1
    nan2 = v2 != v2
    take2 = ((v2 >= v1) | nan2) & ~(nan1 & ~nan2)
    return tl.where(take2, v2, v1), tl.where(take2, i2, i1)


@triton.jit
def cummin_index_combine(v1, i1, v2, i2):
    nan1 = v1 != v1
    nan2 = v2 != v2
    take2 = ((v2 <= v1) | nan2) & ~(nan1 & ~nan2)
    return tl.where(take2, v2, v1), tl.where(take2, i2, i1)


# ---- integer and float arithmetic with eager semantics ----


@triton.jit
def floordiv_int(a, b):
    """Python floor division; Triton's // truncates toward zero."""
    q = a // b
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), q - 1, q)


@triton.jit
def floordiv_fmod(a, b, mod):
    """Python's float //, given mod = fmod(a, b): numpy's npy_divmod, exact (not floor(a / b))."""
    div = div_rn(a - mod, b)
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1.0, div)
    fl = tl.floor(div)
    fl = tl.where(div - fl > 0.5, fl + 1.0, fl)
    res = tl.where(div == 0, tl.where((a < 0) != (b < 0), -0.0, 0.0), fl)
    return tl.where(b == 0, div_rn(a, b), res)


@triton.jit
def remainder_fmod(a, b, mod):
    """torch.remainder on floats, given mod = fmod(a, b): mod + b when their signs differ."""
    return tl.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)


@triton.jit
def fmax(a, b):
    """NaN-ignoring max (torch.fmax)."""
    return tl.where((a > b) | (b != b), a, b)


@triton.jit
def fmin(a, b):
    return tl.where((a < b) | (b != b), a, b)


@triton.jit
def shift_left(a, b, bits: tl.constexpr):
    """torch.bitwise_left_shift: shifts outside [0, bits) give 0 (C leaves them undefined)."""
    ok = (b >= 0) & (b < bits)
    return tl.where(ok, a << tl.where(ok, b, tl.zeros_like(b)), tl.zeros_like(a))


@triton.jit
def shift_right(a, b, bits: tl.constexpr):
    """Arithmetic shift; shifts outside [0, bits) fill with the sign."""
    ok = (b >= 0) & (b < bits)
    fill = tl.zeros_like(a)
    if a.dtype.is_int_signed():
        fill = tl.where(a < 0, fill - 1, fill)
    return tl.where(ok, a >> tl.where(ok, b, tl.zeros_like(b)), fill)


@triton.jit
def remainder(a, b):
    """torch.remainder on integers (and index math): the divisor's sign (Triton's % is C's)."""
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def div_rn(a, b):
    """IEEE round-to-nearest division (Triton's fp32 `/` is the approximate div.full)."""
    if a.dtype == tl.float32:
        return tl.math.div_rn(a, b)
    else:
        return a / b


@triton.jit
def reciprocal(x):
    return div_rn(tl.full([1], 1.0, x.dtype), x)


@triton.jit
def sign(x):
    """(x > 0) - (x < 0): NaN and -0.0 give 0, as torch.sign."""
    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)


@triton.jit
def relu(x):
    return tl.where(x < 0, tl.zeros_like(x), x)


@triton.jit
def ipow(a, b):
    """Integer power by squaring; negative exponents give 0 unless |a| == 1 (C++ pow on ints)."""
    result = tl.where(a == a, 1, 0).to(a.dtype)
    base = a
    e = b
    for _ in range(64):
        result = tl.where((e & 1) != 0, result * base, result)
        base = base * base
        e = e >> 1
    neg = tl.where(a == 1, 1, tl.where(a == -1, tl.where((b & 1) != 0, -1, 1), 0)).to(a.dtype)
    return tl.where(b < 0, neg, result)


# ---- error flags (bounds checks, integer division by zero) ----


@triton.jit
def flag_error(err_ptr, bad, code: tl.constexpr):
    """Record `code` in the module's error flag wherever `bad` holds; the wrapper raises."""
    tl.store(err_ptr + tl.zeros_like(bad.to(tl.int32)), code, mask=bad)


# ---- portable math (no libdevice): used under the interpreter ----

@triton.jit
def sqrt_rn(x):
    if x.dtype == tl.float32:
        return tl.math.sqrt_rn(x)
    else:
        return tl.sqrt(x)


@triton.jit
def expm1(x):
    """Kahan's exp(x)-1 = (u-1)*x/log(u): exact near 0 without libdevice."""
    u = tl.exp(x)
    um1 = u - 1.0
    r = tl.where(u == 1.0, x, tl.where(um1 == -1.0, -1.0, um1 * x / tl.log(u)))
    return tl.where(u == float("inf"), u, r)


@triton.jit
def log1p(x):
    u = 1.0 + x
    d = u - 1.0
    r = tl.where(d == 0.0, x, tl.log(u) * x / d)
    return tl.where(u == float("inf"), u, r)


@triton.jit
def log10(x):
    return tl.log(x) * 0.4342944819032518


@triton.jit
def tan(x):
    return tl.sin(x) / tl.cos(x)


@triton.jit
def atan(x):
    """Cephes atanf: range reduction to |x| <= tan(pi/8) and a degree-9 odd polynomial."""
    ax = tl.abs(x)
    big = ax > 2.414213562373095
    mid = ax > 0.41421356237309503
    y0 = tl.where(big, 1.5707963267948966, tl.where(mid, 0.7853981633974483, 0.0))
    xr = tl.where(big, -1.0 / ax, tl.where(mid, (ax - 1.0) / (ax + 1.0), ax))
    z = xr * xr
    p = (((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z - 3.33329491539e-1) * z * xr + xr
    r = y0 + p
    return tl.where(x < 0, -r, r)


@triton.jit
def atan2(y, x):
    both_inf = (tl.abs(x) == float("inf")) & (tl.abs(y) == float("inf"))
    ratio = tl.where(both_inf, tl.where((x < 0) != (y < 0), -1.0, 1.0), y / x)
    a = atan(ratio)
    pos = tl.where(x > 0, a, tl.where(y >= 0, a + 3.141592653589793, a - 3.141592653589793))
    zero_x = tl.where(y > 0, 1.5707963267948966, tl.where(y < 0, -1.5707963267948966, y * 0.0))
    r = tl.where(x == 0, zero_x, pos)
    return tl.where((x != x) | (y != y), x + y, r)


@triton.jit
def asin(x):
    r = atan2(x, tl.sqrt((1.0 - x) * (1.0 + x)))
    return tl.where(tl.abs(x) <= 1.0, r, float("nan"))


@triton.jit
def acos(x):
    r = atan2(tl.sqrt((1.0 - x) * (1.0 + x)), x)
    return tl.where(tl.abs(x) <= 1.0, r, float("nan"))


@triton.jit
def sinh(x):
    ax = tl.abs(x)
    e = expm1(ax)
    r = tl.where(ax > 20.0, tl.exp(ax - 0.6931471805599453), 0.5 * (e + e / (e + 1.0)))
    return tl.where(x < 0, -r, r)


@triton.jit
def cosh(x):
    ax = tl.abs(x)
    return tl.where(ax > 20.0, tl.exp(ax - 0.6931471805599453), 0.5 * (tl.exp(ax) + tl.exp(-ax)))


@triton.jit
def tanh(x):
    e = expm1(-2.0 * tl.abs(x))
    t = -e / (e + 2.0)
    return tl.where(x < 0, -t, t)


@triton.jit
def asinh(x):
    ax = tl.abs(x)
    r = tl.where(ax > 1.0e4, tl.log(ax) + 0.6931471805599453, log1p(ax + ax * ax / (1.0 + tl.sqrt(1.0 + ax * ax))))
    return tl.where(x < 0, -r, r)


@triton.jit
def acosh(x):
    return tl.where(x > 1.0e4, tl.log(x) + 0.6931471805599453, log1p((x - 1.0) + tl.sqrt((x - 1.0) * (x + 1.0))))


@triton.jit
def atanh(x):
    return 0.5 * log1p(2.0 * x / (1.0 - x))


@triton.jit
def lgamma(x):
    """Lanczos (g=7, n=9) with the reflection formula below 0.5."""
    refl = x < 0.5
    z = tl.where(refl, 1.0 - x, x) - 1.0
    t = z + 7.5
    a = 0.99999999999980993 + 676.5203681218851 / (z + 1.0)
    a = a - 1259.1392167224028 / (z + 2.0)
    a = a + 771.32342877765313 / (z + 3.0)
    a = a - 176.61502916214059 / (z + 4.0)
    a = a + 12.507343278686905 / (z + 5.0)
    a = a - 0.13857109526572012 / (z + 6.0)
    a = a + 9.9843695780195716e-6 / (z + 7.0)
    a = a + 1.5056327351493116e-7 / (z + 8.0)
    lg = 0.9189385332046727 + (z + 0.5) * tl.log(t) - t + tl.log(a)
    s = tl.abs(tl.sin(3.141592653589793 * x))
    r = tl.where(refl, tl.log(3.141592653589793 / s) - lg, lg)
    return tl.where(tl.abs(x) == float("inf"), tl.abs(x), r)


@triton.jit
def round_half_even(x):
    r = tl.floor(x)
    d = x - r
    up = (d > 0.5) | ((d == 0.5) & ((r - 2.0 * tl.floor(r * 0.5)) != 0))
    return tl.where(up, r + 1.0, r)


@triton.jit
def trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))


@triton.jit
def pow_portable(a, b):
    """C pow from exp2/log2 with its special cases (negative bases need integer exponents)."""
    mag = tl.exp2(b * tl.log2(tl.abs(a)))
    b_int = tl.floor(b) == b
    odd = b_int & ((b - 2.0 * tl.floor(b * 0.5)) != 0)
    r = tl.where(a < 0, tl.where(b_int, tl.where(odd, -mag, mag), float("nan")), mag)
    return tl.where((b == 0) | (a == 1), 1.0, r).to(a.dtype)


@triton.jit
def round_to_bf16(x):
    """fp32 -> the nearest-even bfloat16 value, kept in fp32 (the interpreter truncates)."""
    bits = x.to(tl.uint32, bitcast=True)
    r = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return tl.where(x != x, x, r.to(tl.float32, bitcast=True))


@triton.jit
def logaddexp_portable(a, b):
    m = maximum(a, b)
    r = m + log1p(tl.exp(-tl.abs(a - b)))
    return tl.where(a == b, a + 0.6931471805599453, r)


@triton.jit
def logaddexp_ld(a, b):
    m = maximum(a, b)
    r = m + libdevice.log1p(libdevice.exp(-tl.abs(a - b)))
    return tl.where(a == b, a + 0.6931471805599453, r)


@triton.jit
def signbit(x):
    if x.dtype == tl.float64:
        return x.to(tl.int64, bitcast=True) < 0
    else:
        return x.to(tl.int32, bitcast=True) < 0


@triton.jit
def copysign(a, b):
    return tl.where(signbit(b), -tl.abs(a), tl.abs(a))


@triton.jit
def hypot(a, b):
    x = tl.abs(a)
    y = tl.abs(b)
    big = tl.where(x > y, x, y)
    small = tl.where(x > y, y, x)
    r = small / tl.where(big == 0, 1.0, big)
    h = big * sqrt_rn(1.0 + r * r)
    return tl.where((x == float("inf")) | (y == float("inf")), float("inf"), h)


@triton.jit
def nextafter(a, b):
    """The next representable value after a toward b, by stepping the bit pattern."""
    if a.dtype == tl.float64:
        bits = a.to(tl.int64, bitcast=True)
        one = tl.full([1], 1, tl.int64)
    else:
        bits = a.to(tl.int32, bitcast=True)
        one = tl.full([1], 1, tl.int32)
    up = b > a
    step = tl.where((a > 0) == up, one, -one)
    r = (bits + step).to(a.dtype, bitcast=True)
    tiny = one.to(a.dtype, bitcast=True)
    r = tl.where(a == 0, tl.where(up, tiny, -tiny), r)
    r = tl.where(a == b, b, r)
    return tl.where((a != a) | (b != b), a + b, r)


@triton.jit
def erfc(x):
    """Numerical Recipes erfcc: fractional error below 1.2e-7 everywhere."""
    z = tl.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    p = -0.82215223 + t * 0.17087277
    p = 1.48851587 + t * p
    p = -1.13520398 + t * p
    p = 0.27886807 + t * p
    p = -0.18628806 + t * p
    p = 0.09678418 + t * p
    p = 0.37409196 + t * p
    p = 1.00002368 + t * p
    ans = t * tl.exp(-z * z - 1.26551223 + t * p)
    return tl.where(x >= 0, ans, 2.0 - ans)


@triton.jit
def erfinv(y):
    """Giles' single-precision approximation, polished by one Newton step on tl.erf."""
    w = -tl.log((1.0 - y) * (1.0 + y))
    a = w - 2.5
    p = 2.81022636e-08
    p = 3.43273939e-07 + p * a
    p = -3.5233877e-06 + p * a
    p = -4.39150654e-06 + p * a
    p = 0.00021858087 + p * a
    p = -0.00125372503 + p * a
    p = -0.00417768164 + p * a
    p = 0.246640727 + p * a
    p = 1.50140941 + p * a
    b = tl.sqrt(w) - 3.0
    q = -0.000200214257
    q = 0.000100950558 + q * b
    q = 0.00134934322 + q * b
    q = -0.00367342844 + q * b
    q = 0.00573950773 + q * b
    q = -0.0076224613 + q * b
    q = 0.00943887047 + q * b
    q = 1.00167406 + q * b
    q = 2.83297682 + q * b
    x = tl.where(w < 5.0, p, q) * y
    x = x - (tl.erf(x) - y) / (1.1283791670955126 * tl.exp(-x * x))
    x = tl.where(tl.abs(y) == 1.0, y * float("inf"), x)
    return tl.where(tl.abs(y) <= 1.0, x, float("nan"))
