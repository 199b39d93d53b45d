"""SIMD float32 math for the vectorized form: exp, log, tanh, sigmoid, erf.

Written on GCC generic vectors (no intrinsics headers, no SLEEF in a torch-free
environment). exp and log follow Cephes' expf/logf reductions and polynomials; tanh
uses Cephes' small-argument polynomial and 1 - 2/(e^{2x}+1) beyond 0.625; erf is
x + x*Q(x^2) below 0.875 and 1 - exp(P(x)) above (P fitting log erfc on two
intervals), coefficients fitted by least squares in float64 and kept for float32
Horner evaluation. test_vec_math.py bounds the error in ulps against float64 numpy.
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
// 2^n * y for integral n in [-150, 128] (subnormal and overflowing results exact): one vscalefps on
// AVX-512; elsewhere two exponent factors, so 2^n itself never leaves the float range
static inline vfloat scale2(vfloat y, vfloat n) {
#if defined(__AVX512F__)
    if (sizeof(vfloat) == 64) return __builtin_ia32_scalefps512_mask(y, n, y, (unsigned short)-1, 4);
#endif
    vint32 ni = __builtin_convertvector(n, vint32);
    vint32 n1 = ni >> 1, n2 = ni - n1;
    return y * (vfloat)((n1 + 127) << 23) * (vfloat)((n2 + 127) << 23);
}
static inline vfloat exp(vfloat x) {
    // NaN passes the clamps (comparisons with NaN are false) and every step after them
    vfloat xc = x < STAX_VF(-103.972084f) ? STAX_VF(-103.972084f) : x;
    xc = xc > STAX_VF(88.72283935546875f) ? STAX_VF(88.72283935546875f) : xc;
    vfloat n = fmadd(xc, STAX_VF(1.44269504088896341f), STAX_VF(12582912.0f)) - 12582912.0f;  // nearest
    vfloat r = fmadd(n, STAX_VF(-0.693359375f), xc);  // Cody-Waite: n * 0.693359375 is exact
    r = fmadd(n, STAX_VF(2.12194440e-4f), r);
    vfloat z = r * r;
    vfloat y = STAX_VF(1.9875691500E-4f);
    y = fmadd(y, r, STAX_VF(1.3981999507E-3f));
    y = fmadd(y, r, STAX_VF(8.3334519073E-3f));
    y = fmadd(y, r, STAX_VF(4.1665795894E-2f));
    y = fmadd(y, r, STAX_VF(1.6666665459E-1f));
    y = fmadd(y, r, STAX_VF(5.0000001201E-1f));
    y = fmadd(y, z, r) + 1.0f;
    y = scale2(y, n);
    return x > STAX_VF(88.72283935546875f) ? STAX_VF(__builtin_inff()) : y;
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
    vfloat u1 = ax - 1.4375f;  // log erfc on [0.875, 2)
    vfloat p1 = STAX_VF(-4.900413119e-06f);
    p1 = fmadd(p1, u1, STAX_VF(-1.863654231e-05f));
    p1 = fmadd(p1, u1, STAX_VF(2.256682679e-04f));
    p1 = fmadd(p1, u1, STAX_VF(-1.340522724e-03f));
    p1 = fmadd(p1, u1, STAX_VF(6.412445433e-03f));
    p1 = fmadd(p1, u1, STAX_VF(-2.737595791e-02f));
    p1 = fmadd(p1, u1, STAX_VF(-8.876544009e-01f));
    p1 = fmadd(p1, u1, STAX_VF(-3.397529351e+00f));
    p1 = fmadd(p1, u1, STAX_VF(-3.168672518e+00f));
    vfloat u2 = ax - 2.965f;  // log erfc on [2, 3.93)
    vfloat p2 = STAX_VF(1.136162198e-06f);
    p2 = fmadd(p2, u2, STAX_VF(-7.711074125e-06f));
    p2 = fmadd(p2, u2, STAX_VF(4.484408544e-05f));
    p2 = fmadd(p2, u2, STAX_VF(-2.547232400e-04f));
    p2 = fmadd(p2, u2, STAX_VF(1.397114890e-03f));
    p2 = fmadd(p2, u2, STAX_VF(-7.604454356e-03f));
    p2 = fmadd(p2, u2, STAX_VF(-9.566059177e-01f));
    p2 = fmadd(p2, u2, STAX_VF(-6.236763563e+00f));
    p2 = fmadd(p2, u2, STAX_VF(-1.050090415e+01f));
    vfloat big = 1.0f - exp(ax < STAX_VF(2.0f) ? p1 : p2);
    big = ax < STAX_VF(3.93f) ? big : STAX_VF(1.0f);
    vfloat r = ax < STAX_VF(0.875f) ? small : copysign_v(big, x);
    return (x != x) ? x : r;
}
}}  // namespace stax::vec
"""
