"""GpuConfig: every knob of the Triton backend in one frozen dataclass, passed explicitly.

`GpuConfig.from_env()` is the only place that reads the environment (TRITON_INTERPRET,
STAX_CACHE_DIR); everything downstream takes the resolved object, so tests can pin
each choice (block caps, looped reductions, int64 indexing) without global state.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

MATH_MODES = ("libdevice", "portable")
INDEX_DTYPES = ("auto", "int32", "int64")
BOUNDS_CHECKS = ("flag", "off")


def interpreter_enabled() -> bool:
    """True when Triton runs kernels with its numpy interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def default_cache_dir() -> str:
    base = os.environ.get("STAX_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "stax")
    return os.path.join(base, "gpu")


@dataclass(frozen=True)
class GpuConfig:
    """How stax-gpu generates, tunes and runs Triton kernels.

    interpret: kernels run under TRITON_INTERPRET (CPU tensors, numpy semantics).
    math: 'libdevice' (CUDA libdevice calls, the GPU default) or 'portable' (tl.* and
        helper formulas; the interpreter has no libdevice).
    autotune: time the candidate launch configs at first run (GPU) instead of taking
        the heuristic's first choice; results are cached on disk under cache_dir.
    persistent_reduction_max: largest padded reduction size kept whole in one block.
    dual_variant_min: above this padded size (and up to persistent_reduction_max), the
        autotuner also races a looped variant against the persistent one.
    xblock_cap / r0_block_cap: upper bounds on XBLOCK and on R0_BLOCK of looped
        reductions (tests use them to force many programs, ragged masks and loops).
    index_dtype: 'auto' picks int32 when every index provably fits.
    bounds_check: 'flag' checks indirect indices and integer divisors in the kernel,
        sets an error flag and raises after the call; 'off' trusts the input.
    error_sync: read a module's error flag back at the end of every cuda call (a host
        sync) so the faulting call raises; by default, when every check poisons its
        result with NaN, the read is asynchronous and a later call raises (see
        runtime.ErrorFlag). Under the interpreter it is always sync.
    hoist_loads: persistent reductions issue every plain load before the first reduction
        (Inductor's order too); False keeps loads at their first use.
    tile_2d: use 2-D tiles for pointwise kernels whose accesses disagree on the
        contiguous dimension (transposes).
    autotuner: an object with `select(key, candidates, run)`; None builds the default.
    """

    interpret: bool = False
    device: str = "cuda"
    math: str = "libdevice"
    autotune: bool = True
    cache_dir: str = field(default_factory=default_cache_dir)
    persistent_reduction_max: int = 4096
    dual_variant_min: int = 1024
    xblock_cap: int | None = None
    r0_block_cap: int | None = None
    index_dtype: str = "auto"
    bounds_check: str = "flag"
    error_sync: bool = False
    hoist_loads: bool = True
    tile_2d: bool = True
    max_autotune_configs: int = 4
    eviction_hints: bool = True
    autotuner: object = field(default=None, compare=False, hash=False)

    def __post_init__(self):
        if self.math not in MATH_MODES:
            raise ValueError(f"GpuConfig.math must be one of {MATH_MODES}, got {self.math!r}")
        if self.index_dtype not in INDEX_DTYPES:
            raise ValueError(f"GpuConfig.index_dtype must be one of {INDEX_DTYPES}, got {self.index_dtype!r}")
        if self.bounds_check not in BOUNDS_CHECKS:
            raise ValueError(f"GpuConfig.bounds_check must be one of {BOUNDS_CHECKS}, got {self.bounds_check!r}")
        for name in ("xblock_cap", "r0_block_cap"):
            v = getattr(self, name)
            if v is not None and (v < 1 or v & (v - 1)):
                raise ValueError(f"GpuConfig.{name} must be a power of two, got {v}")

    @staticmethod
    def from_env(**overrides) -> GpuConfig:
        """The defaults for this process: interpreter-friendly under TRITON_INTERPRET=1."""
        if interpreter_enabled():
            base = GpuConfig(interpret=True, device="cpu", math="portable", autotune=False)
        else:
            base = GpuConfig()
        return replace(base, **overrides)

    def with_(self, **changes) -> GpuConfig:
        return replace(self, **changes)
