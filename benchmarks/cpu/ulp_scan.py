"""Exhaustive-ish accuracy scan of stax-cpu's SIMD math: every `--stride`-th float32 of a range,
through the generated prelude (the same text kernels compile), against the double-precision libm.

test_vec_math.py checks 200k-point sweeps in CI; this scan walks the bit patterns (hundreds of
millions of values) and found the 1.008-ulp exp input (x = 26.7286339) that the sweep had missed.

    python benchmarks/cpu/ulp_scan.py --fn exp --lo -87.3 --hi 88.7 --stride 7     # ~3 s
    python benchmarks/cpu/ulp_scan.py --fn erf --lo -3.9 --hi 3.9 --isa avx2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile

from stax.cpu.prelude import PRELUDE
from stax.cpu.vec_prelude import vec_prelude

LANES = {"avx512": 16, "avx2": 8}
FLAGS = {"avx512": ["-mavx512f", "-mavx512dq", "-mfma"], "avx2": ["-mavx2", "-mfma"]}

MAIN = r"""
extern "C" int printf(const char*, ...);
extern "C" double @FN@(double);
using namespace stax::vec;
static inline unsigned bits(float f) { unsigned u; __builtin_memcpy(&u, &f, 4); return u; }
static inline float from_bits(unsigned u) { float f; __builtin_memcpy(&f, &u, 4); return f; }
int main() {
    const float lo = @LO@f, hi = @HI@f;
    const unsigned stride = @STRIDE@;
    alignas(64) float in[W], out[W];
    double worst = 0; float worst_x = 0; unsigned long long n = 0;
    // walk the bit patterns of [0, hi] and of [lo, 0) (float order = unsigned order per sign)
    for (int neg = 0; neg < 2; ++neg) {
        float end = neg ? -lo : hi;
        if (end <= 0) continue;
        unsigned last = bits(end), sign = neg ? 0x80000000u : 0u;
        for (unsigned b = 1; b <= last; b += stride * W) {
            for (int l = 0; l < W; ++l) {
                unsigned bb = b + (unsigned)l * stride;
                in[l] = from_bits((bb <= last ? bb : last) | sign);
            }
            storeu(out, @FN@(loadu<vfloat>(in)));
            for (int l = 0; l < W; ++l) {
                double exact = ::@FN@((double)in[l]);
                float e32 = (float)exact;
                if (!(e32 == e32) || __builtin_fabsf(e32) > 3.4e38f || __builtin_fabsf(e32) < 1.17549435e-38f) continue;
                double ulp = (double)__builtin_nextafterf(__builtin_fabsf(e32), 3.0e38f) - (double)__builtin_fabsf(e32);
                double err = __builtin_fabs((double)out[l] - exact) / ulp;
                if (err > worst) { worst = err; worst_x = in[l]; }
                ++n;
            }
        }
    }
    printf("%llu values: worst %.4f ulp at x = %.9g\n", n, worst, (double)worst_x);
    return 0;
}
"""


def _widest() -> str:
    """avx512 where the CPU has it (Linux /proc/cpuinfo), else avx2."""
    try:
        with open("/proc/cpuinfo") as f:
            return "avx512" if " avx512f" in f.read() else "avx2"
    except OSError:
        return "avx2"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fn", default="exp", help="a stax::vec function with a libm double twin (exp, log, tanh, erf)")
    ap.add_argument("--lo", type=float, default=-87.3)
    ap.add_argument("--hi", type=float, default=88.7)
    ap.add_argument("--stride", type=int, default=7, help="walk every stride-th float")
    ap.add_argument("--isa", choices=sorted(LANES), default=_widest())
    a = ap.parse_args(argv)
    src = PRELUDE + vec_prelude(LANES[a.isa]) + MAIN.replace("@FN@", a.fn).replace("@LO@", repr(a.lo)).replace(
        "@HI@", repr(a.hi)).replace("@STRIDE@", str(a.stride))
    with tempfile.TemporaryDirectory() as d:
        cpp, exe = os.path.join(d, "scan.cpp"), os.path.join(d, "scan")
        with open(cpp, "w") as f:
            f.write(src)
        subprocess.run(["g++", "-O2", "-std=c++17", *FLAGS[a.isa], cpp, "-o", exe], check=True)
        print(f"{a.fn} on [{a.lo}, {a.hi}], every {a.stride}th float, {a.isa}:", flush=True)
        return subprocess.run([exe]).returncode


if __name__ == "__main__":
    raise SystemExit(main())
