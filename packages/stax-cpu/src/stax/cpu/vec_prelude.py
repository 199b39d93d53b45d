"""The vector half of the prelude: GCC vector-extension types with W lanes and the
stax::vec operations the vectorized kernel form uses (no intrinsics headers: the
compiler lowers generic vectors to AVX2 / AVX-512 itself, so one text serves every
width). Every op has a lane-wise fallback over the scalar helpers; hot float ops
(exp, log, tanh, erf, sigmoid, ...) have real SIMD implementations in `vec_math`.

Booleans are 0/-1 lanes of `char` (a type distinct from int8_t) so they can select.
"""

from __future__ import annotations

from .cpp_ops import helpers
from .tiles import transpose_source
from .vec_math import VEC_MATH

# the lane-wise fallback macros of `_TEXT`, in this order; the helper names come from cpp_ops.OP_TABLE's rows
LANEWISE = ("VMAP1", "VMAP2", "VMAP2E", "VPRED1")


def _prefix_steps(lanes: int, v: str, ident: str) -> list[str]:
    """log2 `lanes` steps of `v = step(op, v, v shifted up by s lanes)`, the lanes shifted in being
    the identity (`__builtin_shufflevector` takes constant indices)."""
    steps, s = [], 1
    while s < lanes:
        idx = ", ".join(str(lanes + c if c < s else c - s) for c in range(lanes))
        steps.append(f"{v} = step(op, {v}, __builtin_shufflevector({v}, {ident}, {idx}));")
        s *= 2
    return steps


def _scan_source(lanes: int) -> str:
    """The vector form's scans: `scan_<op>(v, carry)`, the inclusive prefix of W lanes (log2 W
    shift-and-combine steps) combined with the carry of the earlier blocks.

    W lanes of 4 bytes are one register. W lanes of 8 bytes (vdouble, vint64: a float32 scan that
    accumulates in float64, an int64 cumsum) are two, and GCC builds shifts across the pair, and the
    carry's 128-byte broadcast, through the stack: there each half is scanned in its own register
    (log2(W/2) steps, the two interleaved), then the upper half takes the lower half's last lane and
    both the carry (the upper lanes' sums associate differently from the one-register steps, as
    in-vector sums do anyway). A float64 half's steps add as fma(a, 1, b): the same rounding (a * 1
    is exact), on the FMA pipes, where AMD's cores have separate FADD ones that the scan's adds
    saturate (Intel's cores run both on the same ports)."""
    h = lanes // 2
    whole = "".join(f"\n    {st}" for st in _prefix_steps(lanes, "v", "ident"))
    if h < 2:
        return _SCANS.replace("@STEPS@", whole).replace("@HALVES@", "").replace("@HALF_OPS@", "")
    steps = [st for pair in zip(_prefix_steps(h, "lo", "id"), _prefix_steps(h, "hi", "id")) for st in pair]
    halves = (_SCAN_HALVES.replace("@LO@", ", ".join(str(c) for c in range(h)))
              .replace("@HI@", ", ".join(str(c) for c in range(h, lanes)))
              .replace("@ALL@", ", ".join(str(c) for c in range(lanes)))
              .replace("@LAST@", ", ".join([str(h - 1)] * h)).replace("@DUPH@", ", ".join(["e"] * h))
              .replace("@STEPS@", "".join(f"\n    {st}" for st in steps)))
    return _SCANS.replace("@STEPS@", whole).replace("@HALF_OPS@", _SCAN_HALF_OPS).replace("@HALVES@", halves)


_SCAN_HALF_OPS = r"""
typedef double vdouble_h __attribute__((vector_size(4 * W)));  // half a vdouble: one register
typedef int64_t vint64_h __attribute__((vector_size(4 * W)));
static inline vdouble_h maximum(vdouble_h a, vdouble_h b) { return (a > b || a != a) ? a : b; }
static inline vdouble_h minimum(vdouble_h a, vdouble_h b) { return (a < b || a != a) ? a : b; }
static inline vint64_h maximum(vint64_h a, vint64_h b) { return a > b ? a : b; }
static inline vint64_h minimum(vint64_h a, vint64_h b) { return a < b ? a : b; }"""

_SCAN_HALVES = r"""
#if defined(__AVX512F__) && STAX_VW == 16
static inline vdouble_h step(vop_add, vdouble_h a, vdouble_h b) {
    return __builtin_ia32_vfmaddpd512_mask(a, (vdouble_h){} + 1, b, (unsigned char)-1, 4);
}
#elif defined(__FMA__) && STAX_VW == 8
static inline vdouble_h step(vop_add, vdouble_h a, vdouble_h b) {
    return __builtin_ia32_vfmaddpd256(a, (vdouble_h){} + 1, b);
}
#endif
template <class HT, class VT, class E, class Op> static inline VT scan_halves(VT v, E ident, E carry, Op op) {
    HT lo = __builtin_shufflevector(v, v, @LO@);
    HT hi = __builtin_shufflevector(v, v, @HI@);
    E e = ident;
    const HT id = HT{@DUPH@};@STEPS@
    hi = op(hi, __builtin_shufflevector(lo, lo, @LAST@));
    e = carry;
    const HT c = HT{@DUPH@};
    lo = op(lo, c);
    hi = op(hi, c);
    return __builtin_shufflevector(lo, hi, @ALL@);
}
template <class T, class Op> static inline vdouble scan_op(vdouble v, T ident, T carry, Op op) {
    return scan_halves<vdouble_h>(v, (double)ident, (double)carry, op);
}
template <class T, class Op> static inline vint64 scan_op(vint64 v, T ident, T carry, Op op) {
    return scan_halves<vint64_h>(v, (int64_t)ident, (int64_t)carry, op);
}"""

_SCANS = r"""@HALF_OPS@
struct vop_add { template <class VT> VT operator()(VT a, VT b) const { return a + b; } };
struct vop_mul { template <class VT> VT operator()(VT a, VT b) const { return a * b; } };
struct vop_max { template <class VT> VT operator()(VT a, VT b) const { return maximum(a, b); } };
struct vop_min { template <class VT> VT operator()(VT a, VT b) const { return minimum(a, b); } };
template <class Op, class VT> static inline VT step(Op op, VT a, VT b) { return op(a, b); }
template <class VT, class Op> static inline VT prefix(VT v, VT ident, Op op) {@STEPS@
    return v;
}
template <class VT, class T, class Op> static inline VT scan_op(VT v, T ident, T carry, Op op) {
    return op(prefix(v, bcast<VT>(ident), op), bcast<VT>(carry));
}@HALVES@
template <class VT, class T> static inline VT scan_add(VT v, T carry) { return scan_op(v, T(0), carry, vop_add{}); }
template <class VT, class T> static inline VT scan_mul(VT v, T carry) { return scan_op(v, T(1), carry, vop_mul{}); }
// max / min: the carry starts at the lowest / highest value, so it is the identity too
template <class VT, class T> static inline VT scan_max(VT v, T carry) { return scan_op(v, carry, carry, vop_max{}); }
template <class VT, class T> static inline VT scan_min(VT v, T carry) { return scan_op(v, carry, carry, vop_min{}); }"""


def vec_prelude(lanes: int) -> str:
    maps = [f"STAX_{kind}({name})" for kind in LANEWISE for name in helpers(kind)]
    text = _TEXT.replace("@W@", str(lanes)).replace("@DUP@", ", ".join(["e"] * lanes))
    text = text.replace("@TRANSPOSE@", transpose_source(lanes)).replace("@SCANS@", _scan_source(lanes))
    return text.replace("@MAPS@", "\n".join(maps)) + VEC_MATH


_TEXT = r"""
// ---- stax vector prelude: W lanes of GCC generic vectors ----
#define STAX_VW @W@  // lanes, for the preprocessor: width-specific builtins below
namespace stax { namespace vec {
constexpr int W = @W@;
typedef float vfloat __attribute__((vector_size(4 * W)));
typedef double vdouble __attribute__((vector_size(8 * W)));
typedef int32_t vint32 __attribute__((vector_size(4 * W)));
typedef int64_t vint64 __attribute__((vector_size(8 * W)));
typedef uint32_t vuint32 __attribute__((vector_size(4 * W)));
typedef uint16_t vuint16 __attribute__((vector_size(2 * W)));
typedef int8_t vint8 __attribute__((vector_size(W)));
typedef char vbool __attribute__((vector_size(W)));  // lanes 0 / -1
#if defined(__FLT16_MAX__)
typedef _Float16 vhalf __attribute__((vector_size(2 * W)));
#endif

template <class T> struct V;
template <> struct V<float> { typedef vfloat t; typedef vint32 mask; };
template <> struct V<double> { typedef vdouble t; typedef vint64 mask; };
template <> struct V<int32_t> { typedef vint32 t; typedef vint32 mask; };
template <> struct V<int64_t> { typedef vint64 t; typedef vint64 mask; };
template <> struct V<bool> { typedef vbool t; typedef vbool mask; };
template <class VT> struct Elem;
template <> struct Elem<vfloat> { typedef float t; };
template <> struct Elem<vdouble> { typedef double t; };
template <> struct Elem<vint32> { typedef int32_t t; };
template <> struct Elem<vint64> { typedef int64_t t; };
template <> struct Elem<vbool> { typedef bool t; };

// a constructor of W equal elements: GCC turns it into one broadcast (a lane loop became W masked
// broadcasts, and kept loop-invariant scalars from being hoisted)
template <class VT, class S> static inline VT bcast(S s) {
    typedef typename Elem<VT>::t E;
    const E e = (E)s;
    return VT{@DUP@};
}
static inline vbool bcast_bool(bool b) { const char e = b ? -1 : 0; return vbool{@DUP@}; }
template <class M> static inline vbool to_bool(M m) { return __builtin_convertvector(m, vbool); }
template <class VT> static inline typename V<typename Elem<VT>::t>::mask mask_for(vbool m) {
    return __builtin_convertvector(m, typename V<typename Elem<VT>::t>::mask);
}
// 32-bit 0/-1 lanes -> char lanes (a comparison stored as bool, or combined as one): GCC 12 scalarizes
// __builtin_convertvector here on AVX2 (a vpextrd + byte store per lane): two packs instead (64 Ki
// floats compared and stored as bool: 31 -> 4.5 us); vpmovdb on AVX-512 (what GCC emits there too)
#if defined(__GNUC__) && !defined(__clang__) && ((defined(__AVX512F__) && STAX_VW == 16) || (defined(__AVX2__) && STAX_VW == 8))
typedef char v16c_ __attribute__((vector_size(16)));
#if STAX_VW == 16
typedef int v16i_ __attribute__((vector_size(64)));
static inline vbool to_bool(vint32 m) {
    return (vbool)__builtin_ia32_pmovdb512_mask((v16i_)m, (v16c_){}, (unsigned short)0xFFFF);
}
#else
typedef short v8s_ __attribute__((vector_size(16)));
static inline vbool to_bool(vint32 m) {
    const v8s_ w = __builtin_ia32_packssdw128(__builtin_shufflevector(m, m, 0, 1, 2, 3),
                                              __builtin_shufflevector(m, m, 4, 5, 6, 7));
    const v16c_ b = __builtin_ia32_packsswb128(w, w);
    return __builtin_shufflevector(b, b, 0, 1, 2, 3, 4, 5, 6, 7);
}
#endif
#endif

// ---- loads and stores (unaligned; storage types converted to compute types) ----
template <class VT, class T> static inline VT loadu(const T* p) { VT v; __builtin_memcpy(&v, p, sizeof(VT)); return v; }
template <class VT, class T> static inline void storeu(T* p, VT v) { __builtin_memcpy(p, &v, sizeof(VT)); }
// non-temporal (streaming) store for large outputs: no read-for-ownership of lines about to be
// overwritten whole; falls back to a normal store when `p` is not aligned to the vector
template <class VT, class T> static inline void stream(T* p, VT v) { storeu(p, v); }
static inline void stream(float* p, vfloat v) {
#if defined(__AVX512F__) && STAX_VW == 16
    if ((((__UINTPTR_TYPE__)p) & 63) == 0) { __builtin_ia32_movntps512(p, v); return; }
#elif defined(__AVX__) && STAX_VW == 8
    if ((((__UINTPTR_TYPE__)p) & 31) == 0) { __builtin_ia32_movntps256(p, v); return; }
#endif
    storeu(p, v);
}
static inline vfloat load_bf16(const uint16_t* p) {
    vuint32 u = __builtin_convertvector(loadu<vuint16>(p), vuint32) << 16;
    return (vfloat)u;
}
static inline vuint16 bf16_bits(vfloat f) {
    vuint32 u = (vuint32)f;
    vuint32 r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    r = (f != f) ? (vuint32)(vint32){} + 0x7fc0u : r;
    return __builtin_convertvector(r, vuint16);
}
static inline void store_bf16(uint16_t* p, vfloat f) { storeu(p, bf16_bits(f)); }
static inline vfloat rb(vfloat f) { return (vfloat)(__builtin_convertvector(bf16_bits(f), vuint32) << 16); }
#if defined(__FLT16_MAX__)
static inline vfloat load_f16(const uint16_t* p) { return __builtin_convertvector(loadu<vhalf>(p), vfloat); }
static inline void store_f16(uint16_t* p, vfloat f) { storeu(p, __builtin_convertvector(f, vhalf)); }
static inline vfloat rh(vfloat f) { return __builtin_convertvector(__builtin_convertvector(f, vhalf), vfloat); }
#else
static inline vfloat load_f16(const uint16_t* p) { vfloat r; for (int i = 0; i < W; ++i) r[i] = stax::h2f(p[i]); return r; }
static inline void store_f16(uint16_t* p, vfloat f) { for (int i = 0; i < W; ++i) p[i] = stax::f2h(f[i]); }
static inline vfloat rh(vfloat f) { vfloat r; for (int i = 0; i < W; ++i) r[i] = stax::rh(f[i]); return r; }
#endif
static inline vbool load_bool(const bool* p) { vbool b; __builtin_memcpy(&b, p, W); return -b; }
static inline void store_bool(bool* p, vbool m) { vbool b = m & 1; __builtin_memcpy(p, &b, W); }

// ---- conversions (to_dtype) ----
template <class VR, class VA> static inline VR convert(VA a) { return __builtin_convertvector(a, VR); }
template <class VR> static inline VR convert_bool(vbool m) { return __builtin_convertvector(m & 1, VR); }
template <class VA> static inline vbool nonzero(VA a) { return to_bool(a != 0); }
template <class VR, class VA> static inline VR float_to_int(VA a) {  // exact eager semantics, lane by lane
    typedef typename Elem<VR>::t R;
    VR r;
    for (int i = 0; i < W; ++i) r[i] = stax::float_to_int<R>(a[i]);
    return r;
}

// ---- selection, comparisons, logic ----
template <class VT> static inline VT where(vbool m, VT a, VT b) { return mask_for<VT>(m) ? a : b; }
// int64 lanes are two registers wide: GCC splits bitwise ops but turns `m ? a : b` into a cmov per lane
static inline vint64 blend64(vint64 m, vint64 a, vint64 b) { return (m & a) | (~m & b); }
static inline vint64 where(vbool m, vint64 a, vint64 b) { return blend64(mask_for<vint64>(m), a, b); }
template <class M, class VT> static inline VT select(M m, VT a, VT b) { return m ? a : b; }
static inline vint64 select(vint64 m, vint64 a, vint64 b) { return blend64(m, a, b); }
static inline vbool where(vbool m, vbool a, vbool b) { return (m & a) | (~m & b); }
template <class VT> static inline vbool eq(VT a, VT b) { return to_bool(a == b); }
template <class VT> static inline vbool ne(VT a, VT b) { return to_bool(a != b); }
template <class VT> static inline vbool lt(VT a, VT b) { return to_bool(a < b); }
template <class VT> static inline vbool le(VT a, VT b) { return to_bool(a <= b); }
template <class VT> static inline vbool gt(VT a, VT b) { return to_bool(a > b); }
template <class VT> static inline vbool ge(VT a, VT b) { return to_bool(a >= b); }
template <class VT> static inline vbool logical_and(VT a, VT b) { return to_bool((a != 0) & (b != 0)); }
template <class VT> static inline vbool logical_or(VT a, VT b) { return to_bool((a != 0) | (b != 0)); }
template <class VT> static inline vbool logical_xor(VT a, VT b) { return to_bool((a != 0) ^ (b != 0)); }
template <class VT> static inline vbool logical_not(VT a) { return to_bool(a == 0); }
static inline vbool bitwise_not(vbool a) { return ~a; }

// ---- lane-wise fallbacks over the scalar helpers (every op works in the vector form) ----
#define STAX_VMAP1(name) \
    template <class VT> static inline VT name(VT a) { VT r; for (int i = 0; i < W; ++i) r[i] = stax::name(a[i]); return r; }
#define STAX_VMAP2(name) \
    template <class VT> static inline VT name(VT a, VT b) { \
        VT r; for (int i = 0; i < W; ++i) r[i] = stax::name(a[i], b[i]); return r; }
#define STAX_VMAP2E(name) \
    template <class VT> static inline VT name(VT a, VT b, int64_t* err) { \
        VT r; for (int i = 0; i < W; ++i) r[i] = stax::name(a[i], b[i], err); return r; }
#define STAX_VPRED1(name) \
    template <class VT> static inline vbool name(VT a) { \
        vbool r; for (int i = 0; i < W; ++i) r[i] = stax::name(a[i]) ? -1 : 0; return r; }
@MAPS@
// integer floor division / Python remainder by a positive literal: no error to flag, and the divisor a
// template constant, so each lane is a multiply-high and shifts (a lane-wise idiv took ~40 cycles)
template <long long C, class VT> static inline VT floordiv_by(VT a) {
    VT r; for (int i = 0; i < W; ++i) { auto x = a[i]; auto q = x / C; r[i] = (q * C != x && x < 0) ? q - 1 : q; }
    return r; }
template <long long C, class VT> static inline VT remainder_by(VT a) {
    VT r; for (int i = 0; i < W; ++i) { auto m = a[i] % C; r[i] = m < 0 ? m + C : m; }
    return r; }
template <class VT> static inline vfloat rand(VT seed, VT offset) {
    vfloat r; for (int i = 0; i < W; ++i) r[i] = stax::rand(seed[i], offset[i]); return r; }
template <class VT> static inline vfloat randn(VT seed, VT offset) {
    vfloat r; for (int i = 0; i < W; ++i) r[i] = stax::randn(seed[i], offset[i]); return r; }

// ---- SIMD overloads of the common float ops (exact: same results as the scalar helpers) ----
// maximum / minimum propagate NaN: vmaxps / vminps return b when either is NaN, so only lanes
// where a is NaN need a fix (masked on AVX-512: 2 instructions, where the generic form takes 4)
#if defined(__AVX512F__) && STAX_VW == 16
static inline vfloat maximum(vfloat a, vfloat b) {
    return __builtin_ia32_maxps512_mask(a, b, a, __builtin_ia32_cmpps512_mask(a, a, 7, (unsigned short)-1, 4), 4);
}
static inline vfloat minimum(vfloat a, vfloat b) {
    return __builtin_ia32_minps512_mask(a, b, a, __builtin_ia32_cmpps512_mask(a, a, 7, (unsigned short)-1, 4), 4);
}
#elif defined(__AVX__) && STAX_VW == 8
static inline vfloat maximum(vfloat a, vfloat b) { return a != a ? a : __builtin_ia32_maxps256(a, b); }
static inline vfloat minimum(vfloat a, vfloat b) { return a != a ? a : __builtin_ia32_minps256(a, b); }
#else
static inline vfloat maximum(vfloat a, vfloat b) { return (a > b || a != a) ? a : b; }
static inline vfloat minimum(vfloat a, vfloat b) { return (a < b || a != a) ? a : b; }
#endif
static inline vdouble maximum(vdouble a, vdouble b) { return (a > b || a != a) ? a : b; }
static inline vdouble minimum(vdouble a, vdouble b) { return (a < b || a != a) ? a : b; }
#define STAX_VFLOAT_EXACT(VT, M) \
    static inline VT fmax(VT a, VT b) { return (a > b || b != b) ? a : b; } \
    static inline VT fmin(VT a, VT b) { return (a < b || b != b) ? a : b; } \
    static inline VT relu(VT a) { return (a < 0) ? (VT){} : a; } \
    static inline VT sign(VT a) { return (a > 0) ? (VT){} + 1 : ((a < 0) ? (VT){} - 1 : (VT){}); } \
    static inline VT reciprocal(VT a) { return 1 / a; } \
    static inline vbool isnan(VT a) { return to_bool(a != a); }
STAX_VFLOAT_EXACT(vfloat, vint32)
STAX_VFLOAT_EXACT(vdouble, vint64)
// signbit from the sign bit of the lanes' bits: the lane loop's char stores fed to a float conversion
// crashed GCC 12 at -O2 and above with AVX-512 (internal compiler error: unrecognizable insn)
static inline vbool signbit(vfloat a) { vint32 b; __builtin_memcpy(&b, &a, sizeof b); return to_bool(b < 0); }
static inline vbool signbit(vdouble a) { vint64 b; __builtin_memcpy(&b, &a, sizeof b); return to_bool(b < 0); }
static inline vfloat abs(vfloat a) { vfloat r; for (int i = 0; i < W; ++i) r[i] = __builtin_fabsf(a[i]); return r; }
static inline vdouble abs(vdouble a) { vdouble r; for (int i = 0; i < W; ++i) r[i] = __builtin_fabs(a[i]); return r; }
static inline vfloat sqrt(vfloat a) { vfloat r; for (int i = 0; i < W; ++i) r[i] = __builtin_sqrtf(a[i]); return r; }
static inline vdouble sqrt(vdouble a) { vdouble r; for (int i = 0; i < W; ++i) r[i] = __builtin_sqrt(a[i]); return r; }
static inline vfloat rsqrt(vfloat a) { return 1 / sqrt(a); }
static inline vdouble rsqrt(vdouble a) { return 1 / sqrt(a); }

// ---- horizontal reductions (lane order, after the vector loop) ----
struct op_add { template <class T> T operator()(T a, T b) const { return a + b; } };
struct op_mul { template <class T> T operator()(T a, T b) const { return a * b; } };
struct op_max { template <class T> T operator()(T a, T b) const { return stax::maximum(a, b); } };
struct op_min { template <class T> T operator()(T a, T b) const { return stax::minimum(a, b); } };
template <class Op, class VT> static inline typename Elem<VT>::t vec_reduce_all(Op op, VT v) {
    typename Elem<VT>::t r = v[0];
    for (int i = 1; i < W; ++i) r = op(r, v[i]);
    return r;
}
// W x W block transpose in registers (tiled form: a load strided along the vector loop)
@TRANSPOSE@
// ---- scans along the vector loop: in-register inclusive prefix, then the carry of earlier blocks ----
@SCANS@
static inline bool any_lane(vbool m) { bool r = false; for (int i = 0; i < W; ++i) r = r || m[i] != 0; return r; }
static inline bool all_lanes(vbool m) { bool r = true; for (int i = 0; i < W; ++i) r = r && m[i] != 0; return r; }
static inline vint64 iota64() { vint64 r; for (int i = 0; i < W; ++i) r[i] = i; return r; }

// ---- arg reductions: per-lane best value and its index; lanes folded with stax::arg*_pick ----
template <class VT> static inline void argmax_update(VT& acc, vint64& idx, VT v, vint64 vi) {
    auto take = (v > acc) | ((v != v) & (acc == acc));
    acc = take ? v : acc;
    idx = blend64(__builtin_convertvector(take, vint64), vi, idx);
}
template <class VT> static inline void argmin_update(VT& acc, vint64& idx, VT v, vint64 vi) {
    auto take = (v < acc) | ((v != v) & (acc == acc));
    acc = take ? v : acc;
    idx = blend64(__builtin_convertvector(take, vint64), vi, idx);
}
// fold an unrolled loop's independent accumulator (b, bi) into (acc, idx): lane-wise arg*_pick
template <class VT> static inline void argmax_vmerge(VT& acc, vint64& idx, VT b, vint64 bi) {
    auto bn = b != b, an = acc != acc;
    auto lower = __builtin_convertvector(bi < idx, decltype(bn));
    auto take = (bn & (~an | lower)) | (~bn & ~an & ((b > acc) | ((b == acc) & lower)));
    acc = take ? b : acc;
    idx = __builtin_convertvector(take, vint64) ? bi : idx;
}
template <class VT> static inline void argmin_vmerge(VT& acc, vint64& idx, VT b, vint64 bi) {
    auto bn = b != b, an = acc != acc;
    auto lower = __builtin_convertvector(bi < idx, decltype(bn));
    auto take = (bn & (~an | lower)) | (~bn & ~an & ((b < acc) | ((b == acc) & lower)));
    acc = take ? b : acc;
    idx = __builtin_convertvector(take, vint64) ? bi : idx;
}
template <class T, class VT> static inline void argmax_lanes(T& best, int64_t& bi, VT acc, vint64 idx) {
    for (int i = 0; i < W; ++i) stax::argmax_pick(best, bi, (T)acc[i], (int64_t)idx[i]);
}
template <class T, class VT> static inline void argmin_lanes(T& best, int64_t& bi, VT acc, vint64 idx) {
    for (int i = 0; i < W; ++i) stax::argmin_pick(best, bi, (T)acc[i], (int64_t)idx[i]);
}

// ---- Welford: W lanes of the value's vector type VT, one count (every lane sees as many values).
// float lanes are fast but drift over long runs, so every CHUNK updates the lanes are folded into
// double lanes (Chan et al.'s combination) and restart: float speed, the double path's accuracy ----
template <class VT> struct VWelford {
    static constexpr int64_t CHUNK = 256;
    typedef typename Elem<VT>::t E;
    VT mean = {}, m2 = {};
    int64_t n = 0;
    vdouble dmean = {}, dm2 = {};
    int64_t dn = 0;
    inline void update(VT x) {
        if (__builtin_expect(n == CHUNK, 0)) flush();
        n += 1;
        E rn = E(1) / E(n);
        VT d = x - mean;
        mean = mean + d * rn;
        m2 = m2 + d * (x - mean);
    }
    static inline void fold(vdouble& am, vdouble& a2, int64_t& an, const vdouble& bm, const vdouble& b2, int64_t bn) {
        if (bn == 0) return;
        if (an == 0) { am = bm; a2 = b2; an = bn; return; }
        int64_t nt = an + bn;
        double wb = (double)bn / (double)nt;
        vdouble d = bm - am;
        am = am + d * wb;
        a2 = a2 + b2 + d * d * ((double)an * wb);
        an = nt;
    }
    inline void flush() {
        fold(dmean, dm2, dn, __builtin_convertvector(mean, vdouble), __builtin_convertvector(m2, vdouble), n);
        mean = VT{}; m2 = VT{}; n = 0;
    }
    inline void merge(VWelford& b) {  // an unrolled loop's independent accumulator (flushed too)
        flush();
        b.flush();
        fold(dmean, dm2, dn, b.dmean, b.dm2, b.dn);
    }
    inline void merge_into(stax::Welford& acc) {  // lanes pairwise (equal counts: no division), then one merge
        flush();
        if (dn == 0) return;
        double m[W], q[W];
        for (int i = 0; i < W; ++i) { m[i] = dmean[i]; q[i] = dm2[i]; }
        int64_t cnt = dn;
        for (int h = W / 2; h >= 1; h /= 2, cnt *= 2) {
            for (int i = 0; i < h; ++i) {
                double d = m[i + h] - m[i];
                m[i] += 0.5 * d;
                q[i] += q[i + h] + d * d * (0.5 * (double)cnt);
            }
        }
        acc.merge(m[0], q[0], cnt);
    }
    template <class RT> inline RT mean_v() {
        flush();
        return dn ? __builtin_convertvector(dmean, RT) : bcast<RT>(__builtin_nan(""));
    }
    template <class RT> inline RT m2_v() { flush(); return __builtin_convertvector(dm2, RT); }
    template <class RT> inline RT count_v() { flush(); return bcast<RT>((double)dn); }
    inline void store_lanes(stax::Welford* dst) {  // one Welford state per lane (per-thread partials)
        flush();
        for (int i = 0; i < W; ++i) { dst[i].mean = dmean[i]; dst[i].m2 = dm2[i]; dst[i].n = dn; }
    }
};
}}  // namespace stax::vec
"""  # noqa: E501 - C++ template: a few one-line helpers are kept whole (and the text byte-identical)
