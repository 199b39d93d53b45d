"""SIMD float32 math for the vectorized form: exp, log, tanh, sigmoid, erf.

Written on GCC generic vectors (no intrinsics headers, no SLEEF in a torch-free
environment). exp and log follow Cephes' expf/logf reductions and polynomials; tanh
uses Cephes' small-argument polynomial and 1 - 2/(e^{2x}+1) beyond 0.625; erf is
x + x*Q(x^2) below 0.875 and 1 - P(s)/Q(s) above (a rational erfc on [0.875, 3.93]),
coefficients fitted (reweighted least squares toward minimax, Loeb's linearization for the
rational one) in float64 and kept for float32 Horner evaluation. test_vec_math.py bounds the
error in ulps against float64 numpy.
Special values (±inf, NaN, ±0, subnormals, overflow) follow libm.
"""

VEC_MATH = r"""
namespace stax { namespace vec {
#define STAX_VF(c) ((vfloat){} + (float)(c))
#define STAX_VI(c) ((vint32){} + (int32_t)(c))
static inline vfloat fmadd(vfloat a, vfloat b, vfloat c) {  // one rounding: vfmadd (GCC vectorizes this)
    vfloat r;
    for (int i = 0; i < W; ++i) r[i] = __builtin_fmaf(a[i], b[i], c[i]);
    return r;
}
static inline vfloat copysign_v(vfloat mag, vfloat sgn) {
    return (vfloat)(((vint32)mag & STAX_VI(0x7fffffff)) | ((vint32)sgn & STAX_VI(0x80000000u)));
}
// exp: n = round(x / ln2), r = x - n ln2 (Cody-Waite, exact product), e^r by a degree-6
// polynomial 1 + r + c2 r^2 + ... + c6 r^6 (fitted for relative error 3.1e-9 on |r| <= ln2/2;
// Cephes' expf has degree 7) in plain Horner form ending in two fma(y, r, 1): 6 FMAs, one
// instruction fewer than 1 + r + r^2 P(r) in the throughput-bound loops (softmax, log_softmax,
// exp->sum), and more accurate: every float in [-87.3, 88.7], 0.89 ulp worst (the r^2 P(r)
// form: 1.008 ulp at x = 26.7286). NaN passes the clamps (written so they compile to
// vmaxps/vminps, which return the second operand, x, when it is NaN) and every step after.
static inline vfloat exp_reduced(vfloat xc, vfloat& n) {
    n = fmadd(xc, STAX_VF(1.44269504088896341f), STAX_VF(12582912.0f)) - 12582912.0f;  // nearest
    vfloat r = fmadd(n, STAX_VF(-0.693359375f), xc);  // n * 0.693359375 is exact for |n| < 2^15
    r = fmadd(n, STAX_VF(2.12194440e-4f), r);
    vfloat y = STAX_VF(1.381459413e-03f);
    y = fmadd(y, r, STAX_VF(8.368716575e-03f));
    y = fmadd(y, r, STAX_VF(4.166838899e-02f));
    y = fmadd(y, r, STAX_VF(1.666652113e-01f));
    y = fmadd(y, r, STAX_VF(4.999999404e-01f));
    y = fmadd(y, r, STAX_VF(1.0f));
    return fmadd(y, r, STAX_VF(1.0f));
}
// a > b ? a : b and a < b ? a : b as one vmaxps / vminps (b when either is NaN: clamping x as b lets
// NaN through); GCC emits compare + blend for the generic form
static inline vfloat max_ab(vfloat a, vfloat b) {
#if defined(__AVX512F__) && STAX_VW == 16
    return __builtin_ia32_maxps512_mask(a, b, a, (unsigned short)-1, 4);
#elif defined(__AVX__) && STAX_VW == 8
    return __builtin_ia32_maxps256(a, b);
#else
    return a > b ? a : b;
#endif
}
static inline vfloat min_ab(vfloat a, vfloat b) {
#if defined(__AVX512F__) && STAX_VW == 16
    return __builtin_ia32_minps512_mask(a, b, a, (unsigned short)-1, 4);
#elif defined(__AVX__) && STAX_VW == 8
    return __builtin_ia32_minps256(a, b);
#else
    return a < b ? a : b;
#endif
}
static inline bool any_low(vint32 m) {  // any lane set: one vmovmskps where AVX has it
#if defined(__AVX__) && STAX_VW == 8
    return __builtin_ia32_movmskps256((vfloat)m) != 0;
#else
    bool r = false;
    for (int i = 0; i < W; ++i) r = r || m[i] != 0;
    return r;
#endif
}
static inline vfloat exp(vfloat x) {
    vfloat xc = max_ab(STAX_VF(-103.972084f), x);  // below: 0 (2^-150 rounds away)
#if defined(__AVX512F__) && STAX_VW == 16
    // vscalefps computes y * 2^n with IEEE overflow / subnormal results, so above ln(FLT_MAX) it
    // overflows to inf by itself: the upper clamp only keeps r exact (and +inf finite)
    xc = min_ab(STAX_VF(200.0f), xc);
    vfloat n;
    vfloat y = exp_reduced(xc, n);
    return __builtin_ia32_scalefps512_mask(y, n, y, (unsigned short)-1, 4);
#else
    xc = min_ab(STAX_VF(88.72283935546875f), xc);
    vfloat n;
    vfloat y = exp_reduced(xc, n);
    vint32 ni = __builtin_convertvector(n, vint32);
    // y * 2^n as an add to y's exponent field (y in [0.7, 1.42], so exact while the result is normal,
    // n >= -125): two instructions where two factors take seven (0.56-0.62 -> 0.45-0.57 ns a float). Lanes
    // with a subnormal result, rare outside masked scores, take the two-factor form.
    vfloat r = (vfloat)((vint32)y + (ni << 23));
    vint32 low = n < STAX_VF(-125.0f);
    if (__builtin_expect(any_low(low), 0)) {
        vint32 n1 = ni >> 1, n2 = ni - n1;
        r = low ? y * (vfloat)((n1 + 127) << 23) * (vfloat)((n2 + 127) << 23) : r;
    }
    return x > STAX_VF(88.72283935546875f) ? STAX_VF(__builtin_inff()) : r;
#endif
}
static inline vfloat log(vfloat x) {
    vint32 sub = x < STAX_VF(1.17549435e-38f);
    vfloat xs = sub ? x * 8388608.0f : x;
    vint32 bits = (vint32)xs;
    vint32 e = ((bits >> 23) & 0xff) - 126 - (sub & STAX_VI(23));
    vfloat m = (vfloat)((bits & 0x007fffff) | 0x3f000000);
    vint32 small = m < STAX_VF(0.707106781186547524f);
    e = e + small;  // small lanes are -1
    m = small ? m + m - 1.0f : m - 1.0f;
    vfloat z = m * m;
    vfloat y = STAX_VF(7.0376836292E-2f);
    y = fmadd(y, m, STAX_VF(-1.1514610310E-1f));
    y = fmadd(y, m, STAX_VF(1.1676998740E-1f));
    y = fmadd(y, m, STAX_VF(-1.2420140846E-1f));
    y = fmadd(y, m, STAX_VF(1.4249322787E-1f));
    y = fmadd(y, m, STAX_VF(-1.6668057665E-1f));
    y = fmadd(y, m, STAX_VF(2.0000714765E-1f));
    y = fmadd(y, m, STAX_VF(-2.4999993993E-1f));
    y = fmadd(y, m, STAX_VF(3.3333331174E-1f));
    y = y * (m * z);
    vfloat fe = __builtin_convertvector(e, vfloat);
    y = y + fe * -2.12194440e-4f;
    y = y - z * 0.5f;
    vfloat r = m + y;
    r = r + fe * 0.693359375f;
    r = (x == 0) ? STAX_VF(-__builtin_inff()) : r;
    r = (x < 0) ? STAX_VF(__builtin_nanf("")) : r;
    r = (x == STAX_VF(__builtin_inff())) ? x : r;
    return (x != x) ? x : r;
}
static inline vfloat tanh(vfloat x) {
    vfloat z = x * x;
    vfloat p = STAX_VF(-5.70498872745E-3f);
    p = fmadd(p, z, STAX_VF(2.06390887954E-2f));
    p = fmadd(p, z, STAX_VF(-5.37397155531E-2f));
    p = fmadd(p, z, STAX_VF(1.33314422036E-1f));
    p = fmadd(p, z, STAX_VF(-3.33332819422E-1f));
    vfloat small = p * z * x + x;
    vfloat ax = abs(x);
    vfloat big = 1.0f - 2.0f / (exp(ax + ax) + 1.0f);
    vfloat r = ax < STAX_VF(0.625f) ? small : copysign_v(big, x);
    return (x != x) ? x : r;
}
static inline vfloat sigmoid(vfloat x) { return 1.0f / (1.0f + exp(-x)); }
static inline vfloat erf(vfloat x) {
    // |x| < 0.875: x + x Q(x^2). Above: 1 - erfc(|x|) with erfc a rational function P(s) / Q(s) of
    // s = (|x| - 0.875) / 3.055 (degrees 6 / 6, fitted for absolute error 6.5e-9 on [0.875, 3.93], a
    // tenth of erf's ulp there): no exp, so 2.3x faster than 1 - exp(h(x) - x^2) on AVX2 (GELU 1.24 ->
    // 0.38 ms per 605k floats, one thread). Beyond 3.93 erf rounds to 1 (s held at 1); NaN passes.
    vfloat ax = abs(x);
    vfloat t = x * x;
    vfloat q = STAX_VF(8.714059804e-05f);
    q = fmadd(q, t, STAX_VF(-8.220518080e-04f));
    q = fmadd(q, t, STAX_VF(5.207621494e-03f));
    q = fmadd(q, t, STAX_VF(-2.686196868e-02f));
    q = fmadd(q, t, STAX_VF(1.128374098e-01f));
    q = fmadd(q, t, STAX_VF(-3.761263673e-01f));
    q = fmadd(q, t, STAX_VF(1.283791670e-01f));
    vfloat small = x + x * q;
    vfloat s = min_ab(STAX_VF(1.0f), (ax - 0.875f) * STAX_VF(0.32733224222585927f));
    vfloat num = STAX_VF(0.32733529806137085f);
    num = fmadd(num, s, STAX_VF(-1.783429503440857f));
    num = fmadd(num, s, STAX_VF(4.0868024826049805f));
    num = fmadd(num, s, STAX_VF(-5.047563076019287f));
    num = fmadd(num, s, STAX_VF(3.5477030277252197f));
    num = fmadd(num, s, STAX_VF(-1.3467717170715332f));
    num = fmadd(num, s, STAX_VF(0.215924933552742f));
    vfloat den = STAX_VF(17.588237762451172f);
    den = fmadd(den, s, STAX_VF(7.780363082885742f));
    den = fmadd(den, s, STAX_VF(12.181259155273438f));
    den = fmadd(den, s, STAX_VF(5.380745887756348f));
    den = fmadd(den, s, STAX_VF(5.3985595703125f));
    den = fmadd(den, s, STAX_VF(1.1870849132537842f));
    den = fmadd(den, s, STAX_VF(1.0f));
    vfloat big = 1.0f - num / den;
    return ax < STAX_VF(0.875f) ? small : copysign_v(big, x);
}
}}  // namespace stax::vec
"""
