"""Miscompile probes: known wrong-code bugs of the C++ compiler, checked by compiling and running
a small program with the kernels' own flags; a compiler that fails a check gets the flag that
avoids the bug added to every kernel's flags.

MASKED_SLP: GCC 12.2's loop vectorizer (with AVX-512VL or AVX2 masked loads) gives every vector
of an SLP group of masked loads the first vector's mask (`.MASK_LOAD (p + 88, mask_0)` for the
second group of lanes). Stax's generated code meets it wherever a small constant inner loop is
unrolled into a group and a load is conditional: a masked load, or one that jump threading sank
under a `where` whose condition does not change in a reduction loop (the fuzzer's
bwd-value_171f8944e3: sum over an expanded dim of where(x > 0, 0, g) dropped half the terms).
Masked loads come only from the loop if-conversion, so `-fno-tree-loop-if-convert` avoids it
(Stax's own vector bodies select on vector masks and do not need it).

The answer is cached like the ISA probe's: keyed by compiler, CPU and the flags the check is
built with; a compiler-free copy keyed by the CPU and flags serves a warm cache without a
compiler (its kernels' cache keys include the workaround flags).
"""

from __future__ import annotations

import hashlib
import logging

from .toolchain import Cache, Toolchain, cache_key, check_program, cpu_identity

log = logging.getLogger("stax.cpu")

# exits 1 when the reduction below is miscompiled; values from volatile memory (nothing folds)
_MASKED_SLP_CHECK = r"""
typedef long long i64;
__attribute__((noipa)) void k(const float* __restrict__ a, const float* __restrict__ t, float* __restrict__ out,
                              i64 n) {
    for (i64 x0 = 0; x0 < n; x0 += 1)
        for (i64 x1 = 0; x1 < 3; x1 += 1) {
            float acc = 0.0f;
            for (i64 x2 = 0; x2 < 2; x2 += 1) {
                const float v = a[3 * x0 + x1];
                const bool c = v > 0.0f;
                const float w = t[3 * x0 + x1 + 3 * n * x2];
                const float s = c ? 0.0f : w;
                acc = acc + s;
            }
            out[3 * x0 + x1] = acc;
        }
}
int main() {
    volatile float src[96];
    for (int i = 0; i < 96; ++i) src[i] = (float)(((i * 7) % 5) - 2);
    float a[48], t[96], out[48];
    for (int i = 0; i < 48; ++i) a[i] = src[i];
    for (int i = 0; i < 96; ++i) t[i] = (float)i + src[i] * 0.0f;
    const i64 ns[3] = {6, 8, 16};
    for (i64 n : ns) {
        k(a, t, out, n);
        for (i64 i = 0; i < 3 * n; ++i)
            if (out[i] != (a[i] > 0.0f ? 0.0f : t[i] + t[i + 3 * n])) return 1;
    }
    return 0;
}
"""
MASKED_SLP_FLAG = "-fno-tree-loop-if-convert"


def _names(tc: Toolchain, flags: tuple) -> tuple[str, str]:
    """(compiler-keyed record, compiler-free record) names in <cache>/cpu."""
    free = hashlib.sha256(("\n".join((cpu_identity(), " ".join(flags), _MASKED_SLP_CHECK))).encode()).hexdigest()
    free_name = f"miscompile-any-{free[:24]}.txt"
    if tc.cxx is None:
        return free_name, free_name
    return f"miscompile-{cache_key(tc.identity, ('miscompile-v1', *flags), _MASKED_SLP_CHECK)[:24]}.txt", free_name


def _fails(tc: Toolchain, flags: tuple) -> bool:
    """True when the check, built with `flags`, runs and gives a wrong answer (a check that does not
    build or run says nothing: no workaround)."""
    return check_program(tc, _MASKED_SLP_CHECK, flags, "stax-miscompile-") == 1


def workaround_flags(tc: Toolchain, cache: Cache, flags: tuple) -> tuple:
    """The flags to add to `flags` (the kernels' optimization + ISA flags) on this compiler: () unless a
    probe fails. Cached on disk; without a compiler, the compiler-free record (else none)."""
    name, free_name = _names(tc, flags)
    cached = cache.read_text(name)
    if cached is not None and cached[1] in ("ok", "masked-slp"):
        if tc.cxx is not None and cache.read_text(free_name) is None:
            cache.write_text(free_name, cached[1])
        return (MASKED_SLP_FLAG,) if cached[1] == "masked-slp" else ()
    if tc.cxx is None:
        return ()
    bad = _fails(tc, flags)
    answer = "masked-slp" if bad else "ok"
    cache.write_text(name, answer)
    cache.write_text(free_name, answer)
    if bad:
        log.info("stax.cpu: %s miscompiles SLP masked loads under %s: kernels get %s",
                 tc.identity.splitlines()[0] if tc.identity else tc.cxx, " ".join(flags), MASKED_SLP_FLAG)
    return (MASKED_SLP_FLAG,) if bad else ()
