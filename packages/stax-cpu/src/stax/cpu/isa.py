"""ISA probe (§8.1): AVX-512 -> AVX2 -> no vector extension, by compiling and running a check.

Each level is a set of compiler flags and a vector width; a level is supported if a
test program built with its flags runs and gives the right answer. The answer is
cached on disk next to the compiled kernels (keyed by compiler and CPU identity; a
compiler-free copy keyed by the CPU alone serves a warm cache without a compiler). A cached
answer is checked against the CPU's flags before use. $STAX_CPU_ISA (or CpuConfig.isa)
forces a level; forcing one the CPU lacks is an error.
"""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import dataclass

from .config import ISA_LEVELS
from .toolchain import Cache, Toolchain, cache_key, check_program, cpu_identity

log = logging.getLogger("stax.cpu")


@dataclass(frozen=True)
class Isa:
    name: str
    flags: tuple
    vector_bytes: int  # 0: scalar only

    def width(self, itemsize: int) -> int:
        return self.vector_bytes // itemsize if self.vector_bytes else 1


ISAS: dict[str, Isa] = {
    "avx512": Isa("avx512", ("-march=native", "-mavx512f", "-mavx512vl", "-mavx512bw", "-mavx512dq",
                             "-mprefer-vector-width=512"), 64),
    "avx2": Isa("avx2", ("-march=native", "-mavx2", "-mfma", "-mf16c", "-mno-avx512f"), 32),
    "none": Isa("none", ("-march=native", "-mno-avx512f", "-mno-avx2", "-mno-avx", "-mno-fma", "-mno-f16c"), 0),
}

_CHECK = r"""
typedef float vf __attribute__((vector_size(%(bytes)d)));
int main() {
    const char* feat = "%(feature)s";
    if (feat[0] && !__builtin_cpu_supports("%(feature)s")) return 3;
    volatile float in[64];
    for (int i = 0; i < 64; ++i) in[i] = (float)i;
    vf a, b;
    for (unsigned i = 0; i < sizeof(vf) / 4; ++i) { a[i] = in[i]; b[i] = in[i + 1]; }
    vf c = a * b + a;
    for (unsigned i = 0; i < sizeof(vf) / 4; ++i) if (c[i] != in[i] * in[i + 1] + in[i]) return 2;
    return 0;
}
"""
_FEATURE = {"avx512": "avx512f", "avx2": "avx2", "none": ""}

# /proc/cpuinfo flags a level's code needs (its -m flags; avx512 code uses AVX2 + FMA too)
REQUIRED_FLAGS: dict[str, frozenset] = {
    "avx2": frozenset({"avx", "avx2", "fma", "f16c"}),
    "avx512": frozenset({"avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq"}),
    "none": frozenset(),
}


def cpu_flags() -> frozenset | None:
    """The CPU's feature flags (/proc/cpuinfo's first `flags` line); None where there is none (not Linux
    x86), then nothing is checked. A function of its own so tests can simulate another CPU."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return None


def allowed_levels() -> list[str]:
    """The levels whose code the CPU's flags allow (all when the flags are unknown), widest first."""
    flags = cpu_flags()
    if flags is None:
        return list(ISA_LEVELS)
    return [lv for lv in ISA_LEVELS if REQUIRED_FLAGS[lv] <= flags]


def _probe_level(tc: Toolchain, level: str) -> bool:
    isa = ISAS[level]
    src = _CHECK % {"bytes": isa.vector_bytes or 16, "feature": _FEATURE[level]}
    return check_program(tc, src, ("-O1", *isa.flags), "stax-isa-") == 0


def _record_name() -> str:
    """The compiler-free copy of the probe's answer (read when there is no compiler)."""
    return f"isa-any-{hashlib.sha256(cpu_identity().encode()).hexdigest()[:24]}.txt"


def probe_cache_name(tc: Toolchain) -> str:
    """The probe's cache file (in <cache>/cpu): keyed by compiler and CPU, or by the CPU alone without a compiler."""
    if tc.cxx is None:
        return _record_name()
    return f"isa-{cache_key(tc.identity, ('isa-probe-v1',), _CHECK)[:24]}.txt"


def probe(tc: Toolchain, cache: Cache) -> str:
    """The widest supported level (cached on disk). A cached answer the CPU's flags do not allow (a cache
    copied from another machine, a hand-edited file) is not trusted: its code would die of SIGILL."""
    allowed = allowed_levels()
    name = probe_cache_name(tc)
    cached = cache.read_text(name)
    if cached is not None and cached[1] in ISAS:
        path, got = cached
        if got in allowed:
            if tc.cxx is not None and cache.read_text(_record_name()) is None:  # a cache from before the copy
                cache.write_text(_record_name(), got)
            return got
        lacking = " ".join(sorted(REQUIRED_FLAGS[got] - (cpu_flags() or frozenset())))
        log.warning("ISA probe cache %s says %s but this CPU lacks %s: %s", path, got, lacking,
                    "re-probing" if tc.cxx is not None else f"using {allowed[0]} (no compiler to re-probe)")
        if tc.cxx is None:
            return allowed[0]
    if tc.cxx is None:
        # never probed on this CPU and nothing to probe with: what the flags allow, if they are known
        level = allowed[0] if cpu_flags() is not None else "none"
        log.info("ISA: %s from the CPU flags (no C++ compiler to probe with, no probe record)", level)
        return level
    level = next((lv for lv in ISA_LEVELS if lv in allowed and _probe_level(tc, lv)), "none")
    cache.write_text(name, level)
    cache.write_text(_record_name(), level)
    log.info("ISA probe: %s", level)
    return level


def supported_levels(tc: Toolchain, cache: Cache) -> list[str]:
    """Every level this machine runs (the probe's answer and all narrower ones)."""
    best = probe(tc, cache)
    return list(ISA_LEVELS[ISA_LEVELS.index(best):])


def select(tc: Toolchain, cache: Cache, forced: str | None) -> Isa:
    """The level to compile for: `forced` (config or $STAX_CPU_ISA) if given and supported, else the probe's."""
    forced = forced or os.environ.get("STAX_CPU_ISA") or None
    if forced is not None:
        forced = forced.strip().lower()
        if forced not in ISAS:
            raise ValueError(f"STAX_CPU_ISA={forced!r} is not one of {ISA_LEVELS}")
        if forced not in supported_levels(tc, cache):
            raise RuntimeError(f"ISA {forced!r} was forced but this CPU/compiler does not support it")
        return ISAS[forced]
    return ISAS[probe(tc, cache)]
