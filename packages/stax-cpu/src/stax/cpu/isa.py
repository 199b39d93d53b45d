"""ISA probe (§8.1): AVX-512 -> AVX2 -> no vector extension, by compiling and running a check.

Each level is a set of compiler flags and a vector width; a level is supported if a
test program built with its flags runs and gives the right answer. The answer is
cached on disk next to the compiled kernels (keyed by compiler and CPU identity).
$STAX_CPU_ISA (or CpuConfig.isa) forces a level; forcing one the CPU lacks is an error.
"""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .config import ISA_LEVELS
from .toolchain import cache_key

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


def _probe_level(cxx: str, level: str) -> bool:
    isa = ISAS[level]
    src = _CHECK % {"bytes": isa.vector_bytes or 16, "feature": _FEATURE[level]}
    with tempfile.TemporaryDirectory(prefix="stax-isa-") as d:
        exe = Path(d) / "check"
        cpp = Path(d) / "check.cpp"
        cpp.write_text(src)
        res = subprocess.run([cxx, "-O1", *isa.flags, str(cpp), "-o", str(exe)], capture_output=True)
        if res.returncode != 0:
            return False
        try:
            return subprocess.run([str(exe)], capture_output=True, timeout=30).returncode == 0
        except (OSError, subprocess.SubprocessError):
            return False


def probe(cxx: str, cache_dir: Path) -> str:
    """The widest supported level (cached on disk)."""
    key = cache_key(cxx, ("isa-probe-v1",), _CHECK)
    path = cache_dir / "cpu" / f"isa-{key[:24]}.txt"
    try:
        got = path.read_text().strip()
        if got in ISAS:
            return got
    except OSError:
        pass
    level = next((lv for lv in ISA_LEVELS if _probe_level(cxx, lv)), "none")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(level)
    os.replace(tmp, path)
    log.info("ISA probe: %s", level)
    return level


def supported_levels(cxx: str, cache_dir: Path) -> list[str]:
    """Every level this machine runs (the probe's answer and all narrower ones)."""
    best = probe(cxx, cache_dir)
    return list(ISA_LEVELS[ISA_LEVELS.index(best):])


def select(cxx: str, cache_dir: Path, forced: str | None) -> Isa:
    """The level to compile for: `forced` (config or $STAX_CPU_ISA) if given and supported, else the probe's."""
    forced = forced or os.environ.get("STAX_CPU_ISA") or None
    if forced is not None:
        forced = forced.strip().lower()
        if forced not in ISAS:
            raise ValueError(f"STAX_CPU_ISA={forced!r} is not one of {ISA_LEVELS}")
        if forced not in supported_levels(cxx, cache_dir):
            raise RuntimeError(f"ISA {forced!r} was forced but this CPU/compiler does not support it")
        return ISAS[forced]
    return ISAS[probe(cxx, cache_dir)]
