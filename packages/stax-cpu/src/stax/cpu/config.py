"""CpuConfig: every knob of the CPU backend in one frozen dataclass, passed explicitly.

Fields left as None are resolved from the environment when used (see `resolve_*`),
so a config object never captures process state by itself.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

ISA_LEVELS = ("avx512", "avx2", "none")  # widest first: the probe order of §8.1


@dataclass(frozen=True)
class CpuConfig:
    isa: str | None = None  # 'avx512' | 'avx2' | 'none'; None: $STAX_CPU_ISA, else the probe
    cache_dir: str | None = None  # None: $STAX_CACHE_DIR, else ~/.cache/stax
    num_threads: int | None = None  # None: $OMP_NUM_THREADS, else os.cpu_count()
    cxx: str | None = None  # None: $CXX, else g++ / c++ / clang++ on PATH
    opt_flags: tuple = ("-O3",)
    extra_flags: tuple = ()
    vectorize: bool = True  # emit the vectorized kernel form where legal
    tile: bool = True  # emit 2-D tiled loops for transpose-like access (§8.2)
    min_chunk: int = 512  # Algorithm 8.1's minimum iterations per thread (m)
    # consecutive kernels of a graph (no extern call between them) share one C++ function and one
    # OpenMP parallel region (§8.5), barriers only where a loop reads or overwrites an earlier one's data
    regions: bool = True
    # inside a region, an intermediate written by one loop and read only by the next is computed per
    # chunk of rows into a per-thread scratch array of about `localize_bytes` (compute_at, README);
    # an L1-sized chunk beats larger ones that live in L2
    localize: bool = True
    localize_bytes: int = 4 << 10
    # outputs at least this large use non-temporal vector stores; off by default: with freshly
    # page-faulted output buffers (every call of a torch/numpy allocator) they measured slower
    stream_bytes: int | None = None
    # outputs at least this large ask for transparent huge pages before their first write (None: never)
    huge_page_bytes: int | None = 4 << 20
    compile_workers: int | None = None  # parallel g++ processes; None: os.cpu_count()
    # glibc malloc tuning (process-wide, see malloc_tuning.py): blocks below the mmap threshold come
    # from the heap and up to trim_threshold freed bytes stay mapped, so a call's large outputs reuse
    # the previous call's pages instead of page-faulting fresh ones. None: $STAX_CPU_TUNE_MALLOC, else on
    tune_malloc: bool | None = None
    malloc_mmap_threshold: int = 1 << 30
    malloc_trim_threshold: int = 1 << 30
    malloc_top_pad: int = 0  # 0: glibc's default
    # seconds before a subprocess is killed (its whole process group) and reported as ToolchainTimeoutError:
    # one C++ translation unit; the ISA probe's compile and run and `cxx --version`. A wedged compiler
    # (a full disk, a licence server, NFS) must not hang the caller. None: $STAX_CPU_COMPILE_TIMEOUT /
    # $STAX_CPU_PROBE_TIMEOUT, else 300 / 30
    compile_timeout: float | None = None
    probe_timeout: float | None = None

    def __post_init__(self):
        if self.isa is not None and self.isa not in ISA_LEVELS:
            raise ValueError(f"unknown ISA {self.isa!r}; expected one of {ISA_LEVELS}")
        for name in ("compile_timeout", "probe_timeout"):
            value = getattr(self, name)
            if value is not None and not 0 < value < math.inf:
                raise ValueError(f"CpuConfig.{name} must be a positive number of seconds, got {value!r}")


def resolve_cache_dir(config: CpuConfig) -> Path:
    if config.cache_dir:
        return Path(config.cache_dir)
    env = os.environ.get("STAX_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "stax"


def resolve_num_threads(config: CpuConfig) -> int:
    if config.num_threads:
        return max(1, int(config.num_threads))
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


DEFAULT_COMPILE_TIMEOUT = 300.0
DEFAULT_PROBE_TIMEOUT = 30.0


def _timeout(value: float | None, env: str, default: float) -> float:
    if value is not None:
        return float(value)
    text = os.environ.get(env, "").strip()
    if not text:
        return default
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < math.inf:
        raise ValueError(f"${env}={text!r}: expected a positive number of seconds")
    return seconds


def resolve_compile_timeout(config: CpuConfig) -> float:
    return _timeout(config.compile_timeout, "STAX_CPU_COMPILE_TIMEOUT", DEFAULT_COMPILE_TIMEOUT)


def resolve_probe_timeout(config: CpuConfig) -> float:
    return _timeout(config.probe_timeout, "STAX_CPU_PROBE_TIMEOUT", DEFAULT_PROBE_TIMEOUT)


def resolve_workers(config: CpuConfig) -> int:
    return max(1, config.compile_workers or os.cpu_count() or 1)
