"""compile_schedule: Schedule -> C++ -> shared libraries -> CompiledModule with `call(args)`.

The pipeline, one step per function: `prepare` (compiler, ISA, threads, flags: build_env.py),
`generate_artifact` (each kernel's C++ and the wrapper, as plain data: artifact.py),
`build_libraries` (g++, cached, in parallel), `load_artifact` (dlopen, exec the wrapper
against the runtime hooks: loader.py). A caller that caches artifacts runs the last two only.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from stax.ir import ExternKernel
from stax.sched import CompiledModule, Schedule
from stax.sched.schedule import EXTERN, SCATTER

from . import isa as isa_mod
from . import runtime, toolchain
from .artifact import CpuArtifact, ExternCall, KernelEntry
from .build_env import BuildEnv, prepare
from .config import CpuConfig, resolve_workers
from .frame import KernelSource
from .kernel import emit_kernel
from .loader import load_artifact
from .prelude import PRELUDE
from .regions import EscapingBuffers, RegionPlanner, emit_region
from .scatter import emit_scatter_kernel
from .vec_prelude import vec_prelude
from .wrapper import wrapper_source

log = logging.getLogger("stax.cpu")


def generate_kernels(schedule: Schedule, config: CpuConfig, isa: isa_mod.Isa, threads: int) -> list[KernelSource]:
    """The C++ functions of the non-extern kernels, in schedule order: one per kernel, or one per
    region of consecutive loop-nest kernels (`KernelSource.kernels`, regions.py).

    A symbolic-shape graph's sizes are `int64_t` arguments and its loops run to them: every vector loop
    with its scalar tail, regions planned at the size hints, kernel-local arrays of a constant extent, but
    no tiles, unrolling, chunked arrays, streaming stores or split reductions yet (they need the sizes);
    Algorithm 8.1's depth is taken at the size hints (any depth is correct)."""
    symbolic = bool(schedule.graph.size_vars)
    vector_bytes = isa.vector_bytes if config.vectorize else 0
    stream_bytes = config.stream_bytes if isa.vector_bytes and not symbolic else None
    tile = config.tile and not symbolic
    huge_bytes = None if symbolic else config.huge_page_bytes
    escaping = EscapingBuffers(schedule)
    planner = RegionPlanner(schedule, merge=True, vector_bytes=vector_bytes, tile=tile, threads=threads,
                            localize=config.localize and not symbolic, localize_bytes=config.localize_bytes,
                            escaping_of=escaping, min_chunk=config.min_chunk)
    regions = {r.kernels[0].name: r for r in planner.plan(config.regions) if len(r.kernels) > 1}
    out: list[KernelSource] = []
    skip = 0
    for k in schedule.kernels:
        if skip:
            skip -= 1
            continue
        region = regions.get(k.name)
        if region is not None:
            log.debug("%s: %s share one parallel region", region.name, ", ".join(x.name for x in region.kernels))
            out.append(emit_region(region, schedule.graph, threads, config.min_chunk, vector_bytes=vector_bytes,
                                   tile=tile, stream_bytes=stream_bytes, huge_bytes=huge_bytes,
                                   roots=planner.roots))
            skip = len(region.kernels) - 1
        elif k.kind == SCATTER:
            out.append(emit_scatter_kernel(k, schedule.graph, threads, config.min_chunk))
        elif k.kind != EXTERN:
            out.append(emit_kernel(k, schedule.graph, threads, config.min_chunk, vector_bytes=vector_bytes,
                                   escaping=escaping(k), tile=tile,
                                   stream_bytes=stream_bytes, huge_bytes=huge_bytes, roots=planner.roots,
                                   nests=planner.nests(k)))
    return out


UNIT_CHARS = 32_000


def partition(kernels: list[KernelSource], workers: int) -> list[list[KernelSource]]:
    """Kernels -> translation units compiled in parallel, balanced by code size. g++'s time grows with a
    unit's kernel code (GPT-2's 14 functions, 107 KB: 1.65 s as one unit on 2 cores) while the prelude and
    a g++ start cost ~0.1 s per unit, and a function's cost is not its length (int64 vector code compiles
    several times slower): a unit per UNIT_CHARS, up to two per worker so the pool evens out what sizes
    mispredict (GPT-2 as 1 / 2 / 3 / 4 / 6 units on 2 cores: 1.65 / 1.26 / 0.98 / 1.07 / 1.33 s). Kernels
    go largest first into the lightest unit (stable: the same kernels give the same units)."""
    total = sum(len(k.code) for k in kernels)
    n = max(1, min(2 * workers, len(kernels), total // UNIT_CHARS))
    units: list[list[KernelSource]] = [[] for _ in range(n)]
    size = [0] * n
    for k in sorted(kernels, key=lambda k: -len(k.code)):
        j = size.index(min(size))
        units[j].append(k)
        size[j] += len(k.code)
    return [u for u in units if u]


def unit_source(kernels: list[KernelSource], isa: isa_mod.Isa) -> str:
    """One translation unit: the prelude plus the given kernels."""
    vec = vec_prelude(isa.vector_bytes // 4) if any(k.vectorized for k in kernels) else ""
    return PRELUDE + vec + "\n" + "\n".join(k.code for k in kernels)


# What the generated wrapper binds besides the IR's buffer names: a graph input with one of these
# names would shadow a helper (a backward's saved `as_strided` did); callers keep their names clear
WRAPPER_NAMES = frozenset({"empty_strided", "data_ptr", "as_strided", "check_input", "new_err", "addressof",
                           "raise_error", "fix_layout", "call", "call_unchecked", "args", "err", "errp",
                           "size_of", "check_size_range"})  # (and a symbolic graph's size names, s0, ...)
WRAPPER_PREFIXES = ("k_", "ext_", "consts_", "dt_")


def generate_artifact(schedule: Schedule, env: BuildEnv, config: CpuConfig, extern_kernels: dict
                      ) -> CpuArtifact:
    """Code generation: the schedule's C++ units and Python wrapper as plain data (no g++, no dlopen).
    `extern_kernels` must hold every extern node's kernel (KeyError otherwise); those with `bind`
    are bound once per node by the loaded wrapper."""
    graph = schedule.graph
    externs: dict[str, str] = {}
    calls: list[ExternCall] = []
    for k in schedule.kernels:
        if k.kind == EXTERN:
            node = graph.node(k.nodes[0])
            assert isinstance(node, ExternKernel)
            fn = extern_kernels.get(node.kernel)
            if fn is None:
                raise KeyError(f"no implementation given for extern kernel {node.kernel!r} (node {node.name})")
            externs[node.name] = f"ext_{node.name}"
            bindable = getattr(fn, "bind", None) is not None
            calls.append(ExternCall(node.name, node.kernel, tuple(node.constants), bindable))
    bound = {c.node for c in calls if c.bound}  # the constants bound once: the wrapper passes only the buffers

    kernels = generate_kernels(schedule, config, env.isa, env.threads)
    groups = partition(kernels, resolve_workers(config))
    units = tuple(unit_source(gr, env.isa) for gr in groups)
    entries = tuple(KernelEntry(ks.name, u, len(ks.params), tuple(ks.index_loads), tuple(ks.kernels),
                                len(ks.size_params))
                    for u, gr in enumerate(groups) for ks in gr)
    order = {k.name: pos for pos, k in enumerate(kernels)}
    entries = tuple(sorted(entries, key=lambda e: order[e.name]))
    local = {b for k in kernels for b in k.local}
    wsrc = wrapper_source(schedule, {k.name: k.params + k.size_params for k in kernels}, externs, local,
                          {k.name: k.kernels for k in kernels if len(k.kernels) > 1}, bound)
    source = (
        f"// ---- C++ ({env.isa.name}, {env.threads} threads) ----\n{unit_source(kernels, env.isa)}\n"
        f"# ---- Python wrapper ----\n{wsrc}"
    )
    return CpuArtifact(env.identity(), env.isa.name, env.threads, env.flags, units, entries, tuple(calls), wsrc,
                       max((k.err_slots for k in kernels), default=1), schedule.content_hash()[:12], source)


def build_libraries(artifact: CpuArtifact, env: BuildEnv, config: CpuConfig) -> list[Path]:
    """The C++ compile: one shared library per unit (cache hits reused, misses compiled in parallel)."""
    return toolchain.build(list(artifact.units), env.tc, artifact.flags, env.cache, resolve_workers(config))


def compile_schedule(schedule: Schedule, *, allocator=None, extern_kernels=None, config: CpuConfig | None = None
                     ) -> CompiledModule:
    """prepare -> generate_artifact -> build_libraries -> load_artifact."""
    config = config or CpuConfig()
    allocator = allocator or runtime.NumpyAllocator()
    extern_kernels = dict(extern_kernels or {})
    t0 = time.perf_counter()
    env = prepare(config)
    artifact = generate_artifact(schedule, env, config, extern_kernels)
    module = load_artifact(artifact, env, build_libraries(artifact, env, config), allocator, extern_kernels)
    log.info("compiled %d kernel(s) in %.3f s", len(artifact.kernel_names), time.perf_counter() - t0)
    return module
