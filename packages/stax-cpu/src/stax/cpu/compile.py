"""compile_schedule: Schedule -> C++ -> shared libraries -> CompiledModule with `call(args)`.

The pipeline, one step per line: pick the ISA, emit each kernel, build (cached,
in parallel), load, generate the wrapper, exec it against the runtime hooks.
"""

from __future__ import annotations

import ctypes
import logging
import time

from stax.ir import ExternKernel, body_roots, loads
from stax.ir import dtypes as dt
from stax.sched import CompiledModule, Schedule
from stax.sched.schedule import EXTERN, SCATTER

from . import isa as isa_mod
from . import miscompile, runtime, toolchain
from .config import CpuConfig, resolve_cache_dir, resolve_num_threads, resolve_workers
from .frame import KernelSource
from .kernel import emit_kernel
from .malloc_tuning import tune_malloc
from .prelude import PRELUDE
from .regions import ERR_SLOT, RegionPlanner, emit_region, storage_roots
from .scatter import emit_scatter_kernel
from .vec_prelude import vec_prelude
from .wrapper import wrapper_source

log = logging.getLogger("stax.cpu")


def _input_checker(allocator):
    """The wrapper's check_input(buf, sizes, strides, dtype, name): the allocator's exact-match
    test inline (it runs for every input of every call), the full check only on a mismatch."""
    matches = getattr(allocator, "matches", None)
    if matches is None:
        return lambda buf, sizes, strides, d, name: runtime.check_input(allocator, buf, sizes, strides, d, name)

    def check_input(buf, sizes, strides, d, name):
        if not matches(buf, sizes, strides, d):
            runtime.check_input(allocator, buf, sizes, strides, d, name)

    return check_input


def _reads(graph, kernel) -> set:
    out: set[str] = set()
    for name in kernel.nodes:
        node = graph.node(name)
        if isinstance(node, ExternKernel):
            out.update(node.inputs)
        else:
            out.update(ld.buffer for root in body_roots(node.body) for ld in loads(root))
    return out


def escaping_buffers(schedule: Schedule, kernel) -> set:
    """Buffers of `kernel` that something outside it reads (other kernels, the graph's outputs)."""
    g = schedule.graph
    out = set(g.outputs)
    for other in schedule.kernels:
        if other is not kernel:
            out |= _reads(g, other)
    return out


def generate_kernels(schedule: Schedule, config: CpuConfig, isa: isa_mod.Isa, threads: int) -> list[KernelSource]:
    """The C++ functions of the non-extern kernels, in schedule order: one per kernel, or one per
    region of consecutive loop-nest kernels (`KernelSource.kernels`, regions.py)."""
    vector_bytes = isa.vector_bytes if config.vectorize else 0
    stream_bytes = config.stream_bytes if isa.vector_bytes else None
    if schedule.graph.size_vars:
        return _symbolic_kernels(schedule, config, threads)
    planner = RegionPlanner(schedule, merge=True, vector_bytes=vector_bytes, tile=config.tile, threads=threads,
                            localize=config.localize, localize_bytes=config.localize_bytes,
                            escaping_of=lambda k: escaping_buffers(schedule, k))
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
                                   tile=config.tile, stream_bytes=stream_bytes, huge_bytes=config.huge_page_bytes,
                                   roots=planner.roots))
            skip = len(region.kernels) - 1
        elif k.kind == SCATTER:
            out.append(emit_scatter_kernel(k, schedule.graph, threads, config.min_chunk))
        elif k.kind != EXTERN:
            out.append(emit_kernel(k, schedule.graph, threads, config.min_chunk, vector_bytes=vector_bytes,
                                   escaping=escaping_buffers(schedule, k), tile=config.tile,
                                   stream_bytes=stream_bytes, huge_bytes=config.huge_page_bytes, roots=planner.roots))
    return out


def _symbolic_kernels(schedule: Schedule, config: CpuConfig, threads: int) -> list[KernelSource]:
    """Kernels of a symbolic-shape graph: sizes are `int64_t` arguments, loops run to them. This first
    form is the scalar one, one function per kernel (no vector or tiled forms, regions, kernel-local
    arrays or split reductions yet: their decisions need the sizes); Algorithm 8.1's depth is taken at
    the size hints (any depth is correct)."""
    out: list[KernelSource] = []
    roots = storage_roots(schedule)
    for k in schedule.kernels:
        if k.kind == SCATTER:
            raise NotImplementedError(f"{k.name}: scatter kernels with symbolic sizes are not supported yet")
        if k.kind != EXTERN:
            out.append(emit_kernel(k, schedule.graph, threads, config.min_chunk, vector_bytes=0, escaping=None,
                                   tile=False, stream_bytes=None, huge_bytes=None, roots=roots))
    return out


KERNELS_PER_UNIT = 8


def partition(kernels: list[KernelSource], workers: int) -> list[list[KernelSource]]:
    """Kernels -> translation units compiled in parallel. Parsing the prelude dominates a small
    unit (12 kernels: 1.5 s as 12 units, 0.4 s as one, on 2 cores), so a unit holds about
    KERNELS_PER_UNIT kernels and there are at most `workers` units."""
    n = max(1, min(workers, len(kernels) // KERNELS_PER_UNIT))
    return [g for g in (kernels[k::n] for k in range(n)) if g]


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


def compile_schedule(schedule: Schedule, *, allocator=None, extern_kernels=None, config: CpuConfig | None = None
                     ) -> CompiledModule:
    config = config or CpuConfig()
    allocator = allocator or runtime.NumpyAllocator()
    extern_kernels = dict(extern_kernels or {})
    t0 = time.perf_counter()
    tune_malloc(config)  # process-wide; see malloc_tuning.py (CpuConfig.tune_malloc / $STAX_CPU_TUNE_MALLOC)
    tc = toolchain.Toolchain.from_config(config)  # tc.cxx None: no compiler, only cached libraries load
    cache = toolchain.open_cache(resolve_cache_dir(config))  # unwritable: a private temporary directory
    isa = isa_mod.select(tc, cache, config.isa)
    threads = resolve_num_threads(config)
    flags = tuple(config.opt_flags) + isa.flags + toolchain.BASE_FLAGS + tuple(config.extra_flags)
    # known wrong-code bugs of this compiler under these flags (miscompile.py): the flags that avoid them
    probe_flags = tuple(f for f in flags if f != "-shared")
    flags += miscompile.workaround_flags(tc, cache, probe_flags)

    graph = schedule.graph
    externs: dict[str, str] = {}
    bound: set[str] = set()  # extern nodes whose callable took its constants once (`fn.bind`)
    ns: dict = {}
    for k in schedule.kernels:
        if k.kind == EXTERN:
            node = graph.node(k.nodes[0])
            assert isinstance(node, ExternKernel)
            fn = extern_kernels.get(node.kernel)
            if fn is None:
                raise KeyError(f"no implementation given for extern kernel {node.kernel!r} (node {node.name})")
            externs[node.name] = f"ext_{node.name}"
            bind = getattr(fn, "bind", None)
            if bind is not None:  # the constants bound once: the wrapper passes only the buffers
                ns[f"ext_{node.name}"] = bind(**dict(node.constants))
                bound.add(node.name)
            else:
                ns[f"ext_{node.name}"] = fn
                ns[f"consts_{node.name}"] = dict(node.constants)

    kernels = generate_kernels(schedule, config, isa, threads)
    workers = resolve_workers(config)
    groups = partition(kernels, workers)
    units = [unit_source(gr, isa) for gr in groups]
    paths = toolchain.build(units, tc, flags, cache, workers)
    for gr, path, src in zip(groups, paths, units):
        lib = toolchain.load(path, src, tc, flags, cache)
        for ks in gr:
            fn = getattr(lib, ks.name)
            fn.argtypes = ([ctypes.c_void_p] * len(ks.params) + [ctypes.c_int64] * len(ks.size_params)
                           + [ctypes.c_void_p])
            fn.restype = ctypes.c_int
            ns[f"k_{ks.name}"] = fn

    def build_copy():
        (p,) = toolchain.build([runtime.COPY_SOURCE], tc, ("-O2", "-shared", "-fPIC"), cache, 1)
        f = toolchain.load(p, runtime.COPY_SOURCE, tc, ("-O2", "-shared", "-fPIC"), cache).stax_copy_strided
        f.restype = None
        return f

    index_loads = {k.name: k.index_loads for k in kernels}
    runs = {k.name: k.kernels or (k.name,) for k in kernels}
    slots = max((k.err_slots for k in kernels), default=1)

    def raise_error(err, fname):
        """The first kernel of the function whose error record is set (regions: one record each)."""
        for pos, kname in enumerate(runs.get(fname, (fname,))):
            rec = (ctypes.c_int64 * ERR_SLOT).from_address(ctypes.addressof(err) + 8 * ERR_SLOT * pos)
            if rec[0]:
                runtime.raise_kernel_error(rec, kname, index_loads.get(fname, ()))
        runtime.raise_kernel_error(err, fname, index_loads.get(fname, ()))

    ns.update(
        # the wrapper's allocations pass literal tuples of ints: an allocator may have a faster path for those
        empty_strided=getattr(allocator, "empty_strided_ints", allocator.empty_strided),
        data_ptr=allocator.data_ptr,
        as_strided=getattr(allocator, "as_strided", None),
        check_input=_input_checker(allocator),
        size_of=lambda buf, dim, ndim, name: runtime.size_of(allocator, buf, dim, ndim, name),
        check_size_range=runtime.check_size_range,
        new_err=runtime.new_error_array if slots == 1 else (lambda: (ctypes.c_int64 * (ERR_SLOT * slots))()),
        addressof=ctypes.addressof,
        raise_error=raise_error,
        fix_layout=runtime.LayoutFixer(allocator, build_copy),
        **{f"dt_{d.name}": d for d in dt.ALL_DTYPES},
    )
    local = {b for k in kernels for b in k.local}
    wsrc = wrapper_source(schedule, {k.name: k.params + k.size_params for k in kernels}, externs, local,
                          {k.name: k.kernels for k in kernels if len(k.kernels) > 1}, bound)
    if ns["as_strided"] is None and "as_strided(" in wsrc:
        raise RuntimeError("memory plan reuses a buffer with another layout but the allocator has no as_strided")
    exec(compile(wsrc, f"<stax-cpu wrapper {schedule.content_hash()[:12]}>", "exec"), ns)
    source = (
        f"// ---- C++ ({isa.name}, {threads} threads) ----\n{unit_source(kernels, isa)}\n"
        f"# ---- Python wrapper ----\n{wsrc}"
    )
    log.info("compiled %d kernel(s) in %.3f s", sum(len(k.kernels) or 1 for k in kernels), time.perf_counter() - t0)
    return CompiledModule(source, ns["call"], "cpu", tuple(n for k in kernels for n in (k.kernels or (k.name,))),
                          ns["call_unchecked"])
