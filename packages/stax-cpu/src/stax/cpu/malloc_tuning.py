"""glibc malloc tuning: let large blocks freed by one call be reused by the next, without page faults.

Why: glibc serves every block above its mmap threshold (at most 32 MiB by default) with a
fresh `mmap` and returns it with `munmap` on free. A 32 MiB output then costs 8192 page
faults and the kernel zeroing every page on *each* call — often more than the kernel's
own reads and writes. Raising the
mmap threshold puts such blocks on the heap, and raising the trim threshold keeps freed heap
memory mapped, so the next call's allocation reuses warm pages.

This is a process-wide side effect (every malloc of the process is affected, torch's and
numpy's included): it is explicit (`CpuConfig.tune_malloc`, env `STAX_CPU_TUNE_MALLOC=0`
turns it off), logged at DEBUG on `stax.cpu`, and skipped where the user chose their own
policy (glibc tunables / `MALLOC_*_` variables set, jemalloc or tcmalloc preloaded) or where
libc is not glibc. The cost: up to `trim_threshold` bytes of freed memory stay mapped (RSS),
as with any caching allocator.
"""

from __future__ import annotations

import ctypes
import logging
import os
from dataclasses import dataclass

from .config import CpuConfig

log = logging.getLogger("stax.cpu")

# mallopt parameter numbers (glibc <malloc.h>)
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3
ENV = "STAX_CPU_TUNE_MALLOC"
_USER_POLICY_ENV = ("GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
                    "MALLOC_MMAP_MAX_")
_OTHER_ALLOCATORS = ("jemalloc", "tcmalloc", "mimalloc")


@dataclass(frozen=True)
class MallocTuning:
    """What `tune_malloc` did: `applied` settings ({name: bytes}) or why nothing was applied."""

    applied: dict
    reason: str = ""


def enabled(flag: bool | None) -> bool:
    """CpuConfig.tune_malloc if set, else $STAX_CPU_TUNE_MALLOC (default on; '0', 'false', 'off' disable)."""
    if flag is not None:
        return bool(flag)
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "off", "no")


def _glibc():
    """The process's C library when it is glibc (has gnu_get_libc_version), else None."""
    try:
        libc = ctypes.CDLL(None)
        version = libc.gnu_get_libc_version
    except (OSError, AttributeError):
        return None
    version.restype = ctypes.c_char_p
    return libc


def _user_policy() -> str:
    for name in _USER_POLICY_ENV:
        value = os.environ.get(name)
        if value and (name != "GLIBC_TUNABLES" or "glibc.malloc." in value):
            return f"${name} is set"
    preload = os.environ.get("LD_PRELOAD", "")
    for alloc in _OTHER_ALLOCATORS:
        if alloc in preload:
            return f"{alloc} is preloaded"
    return ""


def tune_malloc(config: CpuConfig | None = None) -> MallocTuning:
    """Apply `config`'s malloc settings unless disabled or not applicable. Idempotent (mallopt
    just stores them): `compile_schedule` calls it every time, so no module state is kept."""
    config = config or CpuConfig()
    if not enabled(config.tune_malloc):
        return MallocTuning({}, f"disabled (CpuConfig.tune_malloc / ${ENV})")
    other = _user_policy()
    if other:
        return MallocTuning({}, f"left alone: {other}")
    libc = _glibc()
    if libc is None:
        return MallocTuning({}, "not glibc")
    wanted = {"M_MMAP_THRESHOLD": (M_MMAP_THRESHOLD, config.malloc_mmap_threshold),
              "M_TRIM_THRESHOLD": (M_TRIM_THRESHOLD, config.malloc_trim_threshold)}
    if config.malloc_top_pad:
        wanted["M_TOP_PAD"] = (M_TOP_PAD, config.malloc_top_pad)
    applied, refused = {}, []
    for name, (param, value) in wanted.items():
        if libc.mallopt(ctypes.c_int(param), ctypes.c_int(min(int(value), 2**31 - 1))) == 1:
            applied[name] = int(value)
        else:
            refused.append(name)
    reason = f"glibc refused {', '.join(refused)}" if refused else ""
    log.debug("malloc tuning (process-wide, %s=0 disables): %s%s", ENV,
              ", ".join(f"{k}={v}" for k, v in applied.items()) or "nothing applied", f"; {reason}" if reason else "")
    return MallocTuning(applied, reason)
