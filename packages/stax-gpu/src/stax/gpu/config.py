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
        the heuristic's first choice; results are cached on disk under cache_dir. Kernels
        over fewer than autotune_min_elements (x * y * r) are launch-bound: they get the
        heuristic's choice, and only its variant is generated (each raced config is a
        Triton compile: racing them all made compile time dominate small models).
    persistent_reduction_max: largest padded reduction size kept whole in one block.
    dual_variant_min: above this padded size (and up to persistent_reduction_max), the
        autotuner also races a looped variant against the persistent one.
    xblock_cap / r0_block_cap: upper bounds on XBLOCK and on R0_BLOCK of looped
        reductions (tests use them to force many programs, ragged masks and loops).
    index_dtype: 'auto' picks int32 when every index provably fits.
    bounds_check: 'flag' checks indirect indices and integer divisors in the kernel,
        sets an error flag and raises after the call; 'off' trusts the input.
    error_sync: read a module's error flag back at the end of every cuda call (a host
        sync) so the faulting call raises the check's error; by default, when every check
        poisons its result with NaN, the read is asynchronous and a later call raises, and
        otherwise each call ends with a device-side assert on the flag (see
        runtime.ErrorFlag). Under the interpreter it is always sync.
    hoist_loads: persistent reductions issue every plain load before the first reduction
        (Inductor's order too); False keeps loads at their first use.
    tile_2d: use 2-D tiles for pointwise kernels whose accesses disagree on the
        contiguous dimension (transposes).
    write_order: a pointwise kernel's loops, and a reduction kernel's kept dims, follow the
        memory order of what it stores, not the logical order of its dims (a permuted output,
        eager's strides for x.t().exp(), or a channels-last pooling, is then stored with
        stride 1; plan._write_order).
    operand_order: emit an op's operands left to right, so loads are issued in the order the
        program reads them (Inductor's order; False: right to left): a transpose's contiguous
        tile is then loaded before its transposed one.
    tile_store_major: 2-D tiles walk, on program_id(0), the tile axis their store is contiguous
        along, so neighbouring programs write adjacent tiles (kernels._stores_along_y; False:
        x tiles always).
    tile_evict_last: 2-D tiles (transposes) mark their loads evict_last, as Inductor's do.
    eviction_hints: reductions mark loads evict_last (read again, or broadcast over rows)
        or evict_first (read once); evict_first / evict_last_broadcast: False drops only
        the evict_first marks / the evict_last marks of broadcast loads (A/B knobs).
    static_masks: when every launch config's block divides a size (16384 rows of 4096),
        that axis's mask is an all-true constant (Inductor's way) and Triton drops the
        predicates from loads and stores.
    split_reductions: split a reduction kernel with few outputs and a long reduction into
        partial reductions over S chunks (many programs) and a final combine (split.py):
        when n_out < split_max_outputs (None: 2 x SMs) and r >= split_min_rnumel, S is the
        largest divisor of r with S <= split_target_programs / n_out (None: 4 x SMs) and
        r / S >= split_min_chunk.
    num_sms: streaming multiprocessors of the target (None: ask the device).
    cuda_graphs: replay a cuda module's wrapper as a CUDA graph once the same input
        addresses come back (graphs.py: one host call instead of a launch per kernel;
        outputs are never overwritten while anyone holds them); cuda_graph_instances
        graphs per input-address tuple, cuda_graph_keys tuples per module; a module that
        allocates more than cuda_graph_max_bytes per call is not graphed (each instance keeps
        that much reserved, and such a call is long enough that launches cost little).
        cuda_graph_shared_pools: instance k of every graphed module captures into one pool
        per device (graph_pools.py): a later capture reuses what an earlier freed, so a
        graphed training step keeps about a plain step's memory; False: a private pool each.
    pdl: programmatic dependent launch (Hopper and later, Triton >= 3.4): every kernel
        starts with `gdc_wait()` (nothing is read or written before the previous kernel in
        the stream has finished and flushed) then `gdc_launch_dependents()`, and launches
        with `launch_pdl`, so the next kernel's programs are resident and waiting while
        this one's last wave drains. With it on, a key whose timed plain calls spent at least
        cuda_graph_gpu_bound_ratio x their host time on the GPU (median GPU time, least host
        time of 3) is not graphed (graphs.py: PDL does not overlap two graph launches; 0
        graphs every key). Off by default: the gains measured were within noise, and a short
        kernel timed from an idle GPU looks GPU-bound and loses its graph (README; numbers in
        benchmarks/results). Ignored on older GPUs and the interpreter.
    compile_workers: processes that compile a cuda module's kernels ahead of their first
        launch (precompile.py); None: half the host's cores, at most 8 (none on <= 2
        cores); 0: the JIT compiles each kernel at its first launch.
    autotuner: an object with `select(key, candidates, run)`; None builds the default.

    `from_env` also applies STAX_GPU_CONFIG="field=value,..." (see `parse_overrides`).
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
    write_order: bool = True
    operand_order: bool = True
    max_autotune_configs: int = 4
    autotune_min_elements: int = 1 << 20
    eviction_hints: bool = True
    evict_first: bool = True
    evict_last_broadcast: bool = True
    static_masks: bool = True
    tile_store_major: bool = True
    tile_evict_last: bool = True
    split_reductions: bool = True
    split_max_outputs: int | None = None
    split_min_rnumel: int = 65536  # below it the extra launch costs more than the split saves
    split_min_chunk: int = 128
    split_target_programs: int | None = None
    num_sms: int | None = None
    cuda_graphs: bool = True
    cuda_graph_instances: int = 2
    cuda_graph_keys: int = 4
    cuda_graph_max_bytes: int = 2**30
    cuda_graph_shared_pools: bool = True
    pdl: bool = False
    compile_workers: int | None = None
    cuda_graph_gpu_bound_ratio: float = 2.0
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
        env = parse_overrides(os.environ.get("STAX_GPU_CONFIG", ""))
        return replace(base, **{**env, **overrides})

    def with_(self, **changes) -> GpuConfig:
        return replace(self, **changes)


def parse_overrides(text: str) -> dict:
    """'hoist_loads=0,xblock_cap=4' -> {'hoist_loads': False, 'xblock_cap': 4}: GpuConfig
    field overrides as text (STAX_GPU_CONFIG, the benchmark's --variants), typed by field."""
    import dataclasses

    types = {f.name: f for f in dataclasses.fields(GpuConfig)}
    out: dict = {}
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        name, _, raw = item.partition("=")
        name, raw = name.strip(), raw.strip()
        if name not in types or name in ("autotuner",):
            raise ValueError(f"GpuConfig has no settable field {name!r} (in {text!r})")
        default = types[name].default
        kind = str(types[name].type)
        if raw.lower() in ("none", "") and "None" in kind:
            out[name] = None
        elif kind.startswith("bool") or isinstance(default, bool):
            out[name] = raw.lower() not in ("0", "false", "no", "off")
        elif "float" in kind:
            out[name] = float(raw)
        elif "int" in kind:
            out[name] = int(raw)
        else:
            out[name] = raw
    return out
