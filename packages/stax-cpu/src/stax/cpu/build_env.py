"""BuildEnv: what one compile resolves before generating code (compiler, cache, ISA, threads, flags).

Resolved once per compile (the compiler identity and ISA answer are cached per process / on disk),
and its `identity()` is what generated code depends on beyond the schedule and the config: a
whole-graph cache keys its entries by it (compiler version, ISA level chosen, threads, flags).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from . import isa as isa_mod
from . import miscompile, toolchain
from .config import CpuConfig, resolve_cache_dir, resolve_num_threads
from .malloc_tuning import tune_malloc


@dataclass(frozen=True)
class BuildEnv:
    tc: toolchain.Toolchain  # tc.cxx None: no compiler, only cached libraries load
    cache: toolchain.Cache
    isa: isa_mod.Isa
    threads: int
    flags: tuple  # the kernels' compile flags (optimization, ISA, base, extra, miscompile workarounds)

    def identity(self) -> str:
        """sha256 of (compiler identity, ISA, threads, flags): equal identities generate equal code."""
        h = hashlib.sha256()
        for part in (self.tc.identity or ("no-compiler\n" + toolchain.cpu_identity()), self.isa.name,
                     str(self.threads), " ".join(self.flags)):
            h.update(part.encode())
            h.update(b"\0")
        return h.hexdigest()


def prepare(config: CpuConfig) -> BuildEnv:
    """Resolve the toolchain, cache, ISA, threads and flags for `config` (tunes malloc: process-wide)."""
    tune_malloc(config)  # process-wide; see malloc_tuning.py (CpuConfig.tune_malloc / $STAX_CPU_TUNE_MALLOC)
    tc = toolchain.Toolchain.from_config(config)
    cache = toolchain.open_cache(resolve_cache_dir(config))  # unwritable: a private temporary directory
    isa = isa_mod.select(tc, cache, config.isa)
    threads = resolve_num_threads(config)
    flags = tuple(config.opt_flags) + isa.flags + toolchain.BASE_FLAGS + tuple(config.extra_flags)
    # known wrong-code bugs of this compiler under these flags (miscompile.py): the flags that avoid them
    probe_flags = tuple(f for f in flags if f != "-shared")
    flags += miscompile.workaround_flags(tc, cache, probe_flags)
    return BuildEnv(tc, cache, isa, threads, flags)
