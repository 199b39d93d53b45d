"""The C++ prelude every generated translation unit starts with (scalar helpers).

It includes no system header: fixed-width types come from compiler macros and math
from GCC/Clang builtins, because <cmath> and <immintrin.h> alone cost 0.1-0.4 s of
compile time per unit. Helpers implement the op table's exact semantics (NaN
propagation, Python floor division, error flags) so generated code stays one line per op.
The math helpers over GCC builtins are the rows of cpp_ops.OP_TABLE marked `builtin`.
"""

from .cpp_ops import builtin_helpers


def _math1() -> str:
    """STAX_MATH1(name, name) for every builtin-backed unary helper, four to a line."""
    calls = [f"STAX_MATH1({fn}, {fn})" for fn in builtin_helpers()]
    return "\n".join(" ".join(calls[k:k + 4]) for k in range(0, len(calls), 4))


_TEXT = r"""
// ---- stax prelude: scalar helpers (no system headers, for compile speed) ----
typedef __INT8_TYPE__ int8_t;
typedef __INT16_TYPE__ int16_t;
typedef __INT32_TYPE__ int32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __UINT64_TYPE__ uint64_t;
extern "C" float lgammaf_r(float, int*);
// stax.ir's index printer emits std::min<int64_t> / std::max<int64_t> (no <algorithm> here: compile time)
namespace std {
template <class T> constexpr const T& min(const T& a, const T& b) { return b < a ? b : a; }
template <class T> constexpr const T& max(const T& a, const T& b) { return a < b ? b : a; }
}
extern "C" double lgamma_r(double, int*);

static inline int64_t stax_floordiv(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t std_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t stax_mod(int64_t a, int64_t b) {
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

extern "C" int madvise(void*, __SIZE_TYPE__, int);
extern "C" int omp_get_thread_num(void);
extern "C" int omp_get_num_threads(void);

namespace stax {
// Large fresh output buffers page-fault on first touch, 4 KB at a time (in a VM that costs more than
// the writes); asking for transparent huge pages on the 2 MB-aligned inside of the buffer, before the
// first write, makes that 512x fewer faults. Memory outside the buffer is never advised.
static inline void advise_huge(void* p, int64_t nbytes) {
#if defined(__linux__)
    const __UINTPTR_TYPE__ huge = (__UINTPTR_TYPE__)2 << 20;
    __UINTPTR_TYPE__ lo = ((__UINTPTR_TYPE__)p + huge - 1) & ~(huge - 1);
    __UINTPTR_TYPE__ hi = ((__UINTPTR_TYPE__)p + (__UINTPTR_TYPE__)nbytes) & ~(huge - 1);
    if (hi > lo) madvise((void*)lo, hi - lo, 14 /* MADV_HUGEPAGE */);
#endif
}
// Error flag: err[0] = code (1 zero division, 2 index out of bounds, 3 negative int power),
// err[1..3] = details of the first error. Written by any thread; checked by the wrapper.
static inline void set_err(int64_t* err, int64_t code, int64_t a = 0, int64_t b = 0, int64_t c = 0) {
    if (__atomic_load_n(err, __ATOMIC_RELAXED) == 0) {
        err[1] = a; err[2] = b; err[3] = c;
        __atomic_store_n(err, code, __ATOMIC_RELAXED);
    }
}
static inline int64_t check_index(int64_t v, int64_t bound, int64_t* err, int64_t load_id) {
    if (__builtin_expect(v < 0 || v >= bound, 0)) { set_err(err, 2, v, bound, load_id); return 0; }
    return v;
}

// ---- half types: storage is uint16_t bits; arithmetic in float; round to nearest even ----
#if defined(__FLT16_MAX__)
template <class T> static inline uint16_t f2h(T x) { _Float16 h = (_Float16)x; uint16_t b; __builtin_memcpy(&b, &h, 2); return b; }
static inline float h2f(uint16_t b) { _Float16 h; __builtin_memcpy(&h, &b, 2); return (float)h; }
#else
template <class T> static inline uint16_t f2h(T xin) {
    float x = (float)xin; uint32_t u; __builtin_memcpy(&u, &x, 4);
    uint32_t sign = (u >> 16) & 0x8000u; u &= 0x7fffffffu;
    if (u > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (u >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (u < 0x38800000u) {  // subnormal or zero in half
        float a; __builtin_memcpy(&a, &u, 4);
        float s = a * 16777216.0f;  // 2^24: exact, then round-to-nearest-even to an integer
        uint32_t m = (uint32_t)__builtin_rintf(s);
        return (uint16_t)(sign | m);
    }
    uint32_t r = u + 0xfffu + ((u >> 13) & 1u);
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}
static inline float h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0x1f) u = sign | 0x7f800000u | (m << 13);
    else if (e == 0) { float f = (float)m * 5.9604644775390625e-8f; return sign ? -f : f; }
    else u = sign | ((e + 112u) << 23) | (m << 13);
    float f; __builtin_memcpy(&f, &u, 4); return f;
}
#endif
static inline float b2f(uint16_t b) { uint32_t u = (uint32_t)b << 16; float f; __builtin_memcpy(&f, &u, 4); return f; }
static inline uint16_t f2b(float f) {
    uint32_t u; __builtin_memcpy(&u, &f, 4);
    if (f != f) return (uint16_t)0x7fc0u;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
template <class T> static inline float rh(T x) { return h2f(f2h(x)); }  // round through float16
static inline float rb(float x) { return b2f(f2b(x)); }                  // round through bfloat16

// ---- math: float/double overloads over builtins; integer overloads where the op allows ints ----
#define STAX_MATH1(name, fn) \
    static inline float name(float x) { return __builtin_##fn##f(x); } \
    static inline double name(double x) { return __builtin_##fn(x); }
@MATH1@
#undef STAX_MATH1
static inline float atan2(float a, float b) { return __builtin_atan2f(a, b); }
static inline double atan2(double a, double b) { return __builtin_atan2(a, b); }
static inline float lgamma(float x) { int s; return lgammaf_r(x, &s); }
static inline double lgamma(double x) { int s; return lgamma_r(x, &s); }
template <class T> static inline T rsqrt(T x) { return T(1) / sqrt(x); }
template <class T> static inline T reciprocal(T x) { return T(1) / x; }
template <class T> static inline T sigmoid(T x) { return T(1) / (T(1) + exp(-x)); }

// rounding ops: identity on integers
template <class T> static inline T floor(T x) { return x; }
template <class T> static inline T ceil(T x) { return x; }
template <class T> static inline T round(T x) { return x; }
template <class T> static inline T trunc(T x) { return x; }
static inline float floor(float x) { return __builtin_floorf(x); }
static inline double floor(double x) { return __builtin_floor(x); }
static inline float ceil(float x) { return __builtin_ceilf(x); }
static inline double ceil(double x) { return __builtin_ceil(x); }
static inline float round(float x) { return __builtin_nearbyintf(x); }  // half to even
static inline double round(double x) { return __builtin_nearbyint(x); }
static inline float trunc(float x) { return __builtin_truncf(x); }
static inline double trunc(double x) { return __builtin_trunc(x); }

template <class T> static inline T abs(T x) { return x < T(0) ? T(-x) : x; }
static inline float abs(float x) { return __builtin_fabsf(x); }
static inline double abs(double x) { return __builtin_fabs(x); }
template <class T> static inline bool isnan(T x) { return x != x; }
template <class T> static inline bool isinf(T x) { return false; }
static inline bool isinf(float x) { return __builtin_isinf(x); }
static inline bool isinf(double x) { return __builtin_isinf(x); }
// NaN-propagating max/min, as torch.maximum / amax
template <class T> static inline T maximum(T a, T b) { return (a > b || a != a) ? a : b; }
template <class T> static inline T minimum(T a, T b) { return (a < b || a != a) ? a : b; }
template <class T> static inline T sign(T x) { return T((x > T(0)) - (x < T(0))); }  // NaN -> 0, as torch
static inline bool sign(bool x) { return x; }
static inline float fmax(float a, float b) { return __builtin_fmaxf(a, b); }
static inline double fmax(double a, double b) { return __builtin_fmax(a, b); }
static inline float fmin(float a, float b) { return __builtin_fminf(a, b); }
static inline double fmin(double a, double b) { return __builtin_fmin(a, b); }
static inline float hypot(float a, float b) { return __builtin_hypotf(a, b); }
static inline double hypot(double a, double b) { return __builtin_hypot(a, b); }
static inline float copysign(float a, float b) { return __builtin_copysignf(a, b); }
static inline double copysign(double a, double b) { return __builtin_copysign(a, b); }
static inline float nextafter(float a, float b) { return __builtin_nextafterf(a, b); }
static inline double nextafter(double a, double b) { return __builtin_nextafter(a, b); }
template <class F> static inline F frac(F x) { return x - trunc(x); }
template <class T> static inline bool isfinite(T) { return true; }
static inline bool isfinite(float x) { return __builtin_isfinite(x); }
static inline bool isfinite(double x) { return __builtin_isfinite(x); }
template <class T> static inline bool signbit(T x) { return x < T(0); }
static inline bool signbit(float x) { return __builtin_signbit(x); }
static inline bool signbit(double x) { return __builtin_signbit(x); }
template <class F> static inline F logaddexp(F x, F y) {  // numpy's npy_logaddexp
    if (x == y) return x + F(0.693147180559945309417232121458176568);
    F t = x - y;
    if (t > F(0)) return x + log1p(exp(-t));
    if (t <= F(0)) return y + log1p(exp(t));
    return t;
}
template <class T> static inline T shift_left(T a, T b) {  // shift < 0 or >= width gives 0
    int64_t s = (int64_t)b;
    return (s < 0 || s >= (int64_t)(8 * sizeof(T))) ? T(0) : T((uint64_t)(int64_t)a << s);
}
template <class T> static inline T shift_right(T a, T b) {  // arithmetic; out-of-range fills with the sign
    int64_t s = (int64_t)b;
    return (s < 0 || s >= (int64_t)(8 * sizeof(T))) ? (a < T(0) ? T(-1) : T(0)) : T((int64_t)a >> s);
}
// float -> integer as eager on x86: truncate; NaN/out of range give INT_MIN of the conversion
// width (int64 for int64/uint8, int32 otherwise), then wrap to the target width.
template <class T, class F> static inline T float_to_int(F x) {
    F t = trunc(x);
    if (sizeof(T) == 8 || (T(-1) > T(0) && sizeof(T) == 1))
        return (t >= F(-9223372036854775808.0) && t < F(9223372036854775808.0)) ? T((int64_t)t)
                                                                               : T((int64_t)(1ULL << 63));
    return (t >= F(-2147483648.0) && t < F(2147483648.0)) ? T((int32_t)t) : T((int32_t)(1U << 31));
}
static inline double erfinv_d(double y) {  // Giles' approximation + 2 Newton steps (as stax.ir.numerics)
    if (y != y || __builtin_fabs(y) > 1.0) return __builtin_nan("");
    if (__builtin_fabs(y) == 1.0) return __builtin_copysign(__builtin_inf(), y);
    double w = -__builtin_log((1.0 - y) * (1.0 + y)), p;
    if (w < 6.25) {
        static const double c[] = {-1.685059138182016589e-19, 1.2858480715256400167e-18, 1.115787767802518096e-17,
            -1.333171662854620906e-16, 2.0972767875968561637e-17, 6.6376381343583238325e-15,
            -4.0545662729752068639e-14, -8.1519341976054721522e-14, 2.6335093153082322977e-12,
            -1.2975133253453532498e-11, -5.4154120542946279317e-11, 1.051212273321532285e-09,
            -4.1126339803469836976e-09, -2.9070369957882005086e-08, 4.2347877827932403518e-07,
            -1.3654692000834678645e-06, -1.3882523362786468719e-05, 0.0001867342080340571352,
            -0.00074070253416626697512, -0.0060336708714301490533, 0.24015818242558961693,
            1.6536545626831027356};
        w -= 3.125; p = -3.6444120640178196996e-21;
        for (double ci : c) p = ci + p * w;
    } else if (w < 16.0) {
        static const double c[] = {9.0756561938885390979e-08, -2.7517406297064545428e-07, 1.8239629214389227755e-08,
            1.5027403968909827627e-06, -4.013867526981545969e-06, 2.9234449089955446044e-06,
            1.2475304481671778723e-05, -4.7318229009055733981e-05, 6.8284851459573175448e-05,
            2.4031110387097893999e-05, -0.0003550375203628474796, 0.00095328937973738049703,
            -0.0016882755560235047313, 0.0024914420961078508066, -0.0037512085075692412107,
            0.005370914553590063617, 1.0052589676941592334, 3.0838856104922207635};
        w = __builtin_sqrt(w) - 3.25; p = 2.2137376921775787049e-09;
        for (double ci : c) p = ci + p * w;
    } else {
        static const double c[] = {-2.5556418169965252055e-10, 1.5076572693500548083e-09, -3.7894654401267369937e-09,
            7.6157012080783393804e-09, -1.4960026627149240478e-08, 2.9147953450901080826e-08,
            -6.7711997758452339498e-08, 2.2900482228026654717e-07, -9.9298272942317002539e-07,
            4.5260625972231537039e-06, -1.9681778105531670567e-05, 7.5995277030017761139e-05,
            -0.00021503011930044477347, -0.00013871931833623122026, 1.0103004648645343977,
            4.8499064014085844221};
        w = __builtin_sqrt(w) - 5.0; p = -2.7109920616438573243e-11;
        for (double ci : c) p = ci + p * w;
    }
    double x = p * y;
    for (int i = 0; i < 2; ++i) {
        double d = 2.0 / __builtin_sqrt(3.14159265358979323846) * __builtin_exp(-x * x);
        if (d == 0.0) break;
        x -= (__builtin_erf(x) - y) / d;
    }
    return x;
}
static inline float erfinv(float x) { return (float)erfinv_d(x); }
static inline double erfinv(double x) { return erfinv_d(x); }

// ---- counter-based RNG: Philox4x32-10, bit-compatible with stax.ir.rng / tl.rand ----
static inline void philox(uint32_t c[4], uint32_t k0, uint32_t k1) {
    for (int i = 0; i < 10; ++i) {
        uint64_t pb = (uint64_t)0xCD9E8D57u * c[2], pa = (uint64_t)0xD2511F53u * c[0];
        uint32_t n0 = (uint32_t)(pb >> 32) ^ c[1] ^ k0, n1 = (uint32_t)pb;
        uint32_t n2 = (uint32_t)(pa >> 32) ^ c[3] ^ k1, n3 = (uint32_t)pa;
        c[0] = n0; c[1] = n1; c[2] = n2; c[3] = n3;
        k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
    }
}
static inline float uniform01(uint32_t x) {
    int64_t i = (int32_t)x;
    if (i < 0) i = -i - 1;
    return (float)i * 4.6566127342e-10f;
}
static inline void philox_words(int64_t seed, int64_t offset, uint32_t c[4]) {
    uint64_t s = (uint64_t)seed, o = (uint64_t)offset;
    c[0] = (uint32_t)o; c[1] = (uint32_t)(o >> 32); c[2] = 0; c[3] = 0;
    philox(c, (uint32_t)s, (uint32_t)(s >> 32));
}
static inline float rand(int64_t seed, int64_t offset) { uint32_t c[4]; philox_words(seed, offset, c); return uniform01(c[0]); }
static inline float randn(int64_t seed, int64_t offset) {
    uint32_t c[4]; philox_words(seed, offset, c);
    float u1 = uniform01(c[0]); u1 = u1 > 1.0e-7f ? u1 : 1.0e-7f;
    float th = 6.283185307179586f * uniform01(c[1]);
    return __builtin_sqrtf(-2.0f * __builtin_logf(u1)) * __builtin_cosf(th);
}

// ---- Welford: one accumulator for mean, m2 and count (in double, like the reference) ----
struct Welford {
    double mean = 0.0, m2 = 0.0; int64_t n = 0;
    template <class V> inline void update(V v) {
        n += 1; double x = (double)v, d = x - mean;
        mean += d / (double)n; m2 += d * (x - mean);
    }
    inline double get_mean() const { return n ? mean : __builtin_nan(""); }
    inline double get_m2() const { return m2; }
    inline double get_count() const { return (double)n; }
    // Chan et al.'s parallel combination: lanes of a vector accumulator, per-thread partials
    inline void merge(double mb, double m2b, int64_t nb) {
        if (nb == 0) return;
        if (n == 0) { mean = mb; m2 = m2b; n = nb; return; }
        int64_t nt = n + nb; double d = mb - mean, wb = (double)nb / (double)nt;
        mean += d * wb; m2 += m2b + d * d * (double)n * wb; n = nt;
    }
    inline void merge(const Welford& o) { merge(o.mean, o.m2, o.n); }
};
// arg reductions: take (v, i) over (best, bi) if it is larger (smaller), or equal / NaN with a lower
// index, so combining candidates in any order keeps torch's first index (NaN counts as the largest)
template <class T> static inline void argmax_pick(T& best, int64_t& bi, T v, int64_t i) {
    bool vn = v != v, bn = best != best;
    if (vn ? (!bn || i < bi) : (!bn && (v > best || (v == best && i < bi)))) { best = v; bi = i; }
}
template <class T> static inline void argmin_pick(T& best, int64_t& bi, T v, int64_t i) {
    bool vn = v != v, bn = best != best;
    if (vn ? (!bn || i < bi) : (!bn && (v < best || (v == best && i < bi)))) { best = v; bi = i; }
}
template <class T> static inline T relu(T x) { return (x < T(0)) ? T(0) : x; }  // -0.0, NaN as eager
template <class T> static inline T bitwise_not(T x) { return T(~x); }
static inline bool bitwise_not(bool x) { return !x; }

// ---- division family: Python/torch semantics; integer division by zero sets the error flag ----
template <class T> static inline bool is_minus_one(T b) { return T(-1) < T(0) && b == T(-1); }
template <class T> static inline T floordiv(T a, T b, int64_t* err) {
    if (b == T(0)) { set_err(err, 1); return T(0); }
    if (is_minus_one(b)) return T(-a);
    T q = T(a / b);
    return (T(q * b) != a && ((a < T(0)) != (b < T(0)))) ? T(q - 1) : q;
}
template <class T> static inline T truncdiv(T a, T b, int64_t* err) {
    if (b == T(0)) { set_err(err, 1); return T(0); }
    if (is_minus_one(b)) return T(-a);
    return T(a / b);
}
template <class T> static inline T remainder(T a, T b, int64_t* err) {
    if (b == T(0)) { set_err(err, 1); return T(0); }
    if (is_minus_one(b)) return T(0);
    T r = T(a % b);
    return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? T(r + b) : r;
}
template <class T> static inline T fmod(T a, T b, int64_t* err) {
    if (b == T(0)) { set_err(err, 1); return T(0); }
    if (is_minus_one(b)) return T(0);
    return T(a % b);
}

static inline float truncdiv(float a, float b, int64_t*) { return __builtin_truncf(a / b); }
static inline double truncdiv(double a, double b, int64_t*) { return __builtin_trunc(a / b); }
static inline float fmod(float a, float b, int64_t*) { return __builtin_fmodf(a, b); }
static inline double fmod(double a, double b, int64_t*) { return __builtin_fmod(a, b); }
template <class F> static inline F floordiv_f(F a, F b) {  // Python's float // (numpy npy_floor_divide)
    if (b == F(0)) return a / b;
    F mod = fmod(a, b, (int64_t*)0), div = (a - mod) / b;
    if (mod != F(0) && ((b < F(0)) != (mod < F(0)))) div -= F(1);
    if (div != F(0)) { F fl = floor(div); return (div - fl > F(0.5)) ? fl + F(1) : fl; }
    return copysign(F(0), a / b);
}
static inline float floordiv(float a, float b, int64_t*) { return floordiv_f(a, b); }
static inline double floordiv(double a, double b, int64_t*) { return floordiv_f(a, b); }
static inline float remainder(float a, float b, int64_t*) {
    float r = __builtin_fmodf(a, b);
    return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r;
}
static inline double remainder(double a, double b, int64_t*) {
    double r = __builtin_fmod(a, b);
    return (r != 0.0 && ((r < 0.0) != (b < 0.0))) ? r + b : r;
}
template <class T> static inline T pow(T a, T b, int64_t* err) {
    if (b < T(0)) { set_err(err, 3); return T(0); }
    uint64_t base = (uint64_t)(int64_t)a, r = 1, e = (uint64_t)(int64_t)b;
    while (e) { if (e & 1u) r *= base; base *= base; e >>= 1; }
    return T(r);
}
static inline float pow(float a, float b, int64_t*) { return __builtin_powf(a, b); }
static inline double pow(double a, double b, int64_t*) { return __builtin_pow(a, b); }
}  // namespace stax
// ---- end of prelude ----
"""  # noqa: E501 - C++ template: a few one-line helpers are kept whole (and the text byte-identical)

PRELUDE = _TEXT.replace("@MATH1@", _math1())
