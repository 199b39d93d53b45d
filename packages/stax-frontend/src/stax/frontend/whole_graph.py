"""The whole-graph cache in the compile pipeline: look a graph up, load it, or store it.

`lookup` says what the cache does for one graph ('hit', 'miss', 'off', 'skipped: <reason>',
'corrupt: rebuilt'): CPU graphs under the C++ runtime and stax.gpu graphs (the interpreter
runtime and graphs whose debug dump or report needs the IR are skipped, each with its reason
logged on `stax.frontend.cache` and counted in metrics.graph_cache_skipped). A hit is loaded by
`load`: no lowering, scheduling or code generation; g++ only if stax.cpu's .so cache lost a
library; a GPU module is imported from its stored source with the GpuConfig it was built with.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path

from . import metrics, plain_values
from .aten_runtime import extern_kinds
from .build import Built, GpuBuild, cpu_config, gpu_config, load_cpu, load_gpu
from .call_spec import CallSpec, extra_values, from_lowered
from .config import Config
from .extern_table import kernel_table_of
from .graph_cache import CorruptEntry, GraphCache, GraphEntry
from .graph_key import GPU_PACKAGES, PACKAGES, Uncacheable, gpu_identity, graph_key
from .phases import PhaseClock
from .routing import CPU, route
from .runtime import NoKernels, resolve_runtime

log = logging.getLogger("stax.frontend.cache")


@dataclass
class Lookup:
    status: str  # what the cache did, for the log line
    cache: GraphCache | None = None
    key: str | None = None
    env: object = None  # stax.cpu.BuildEnv the key was computed with (None: a GPU graph)
    entry: GraphEntry | None = None
    stored: GraphEntry | None = None  # what this compile wrote, or the entry it loaded (store_choices)


def _skip(reason: str) -> Lookup:
    log.info("stax: graph not cached: %s", reason)
    metrics.record(graph_cache_skipped={reason: 1})
    return Lookup(f"skipped: {reason}")


def skip_reason(cfg: Config, target: str) -> str | None:
    if target == CPU and resolve_runtime(cfg.runtime) != "cpu":
        return f"config.runtime={cfg.runtime!r}"
    if cfg.debug or cfg.report:
        return "config.debug / config.report need the IR"
    return None


def lookup(gm, example_inputs, kind: str, cfg: Config, target: str, input_strides, clock: PhaseClock) -> Lookup:
    if not cfg.graph_cache:
        return Lookup("off")
    reason = skip_reason(cfg, target)
    if reason is not None:
        return _skip(reason)
    import stax.cpu
    from stax.cpu.config import resolve_cache_dir

    with clock.phase("cache"):
        config = cpu_config(cfg)
        root = resolve_cache_dir(config)
        directory = Path(cfg.graph_cache_dir) if cfg.graph_cache_dir else root / "graphs"
        if target == CPU:
            # before stax.cpu opens its own cache: an unusable directory gets one warning, this cache's
            cache = GraphCache(directory, root)
            env = stax.cpu.prepare(config)
        else:
            device = route(gm, example_inputs, cfg)[1]
            cache = GraphCache(directory, None, note=lambda: _gpu_private_note(cfg, device))
            env = None
        try:
            identity = env.identity() if env is not None else gpu_identity(gpu_config(device, dict(cfg.gpu_options)))
            key = graph_key(gm, example_inputs, kind, cfg, identity, input_strides,
                            PACKAGES if env is not None else GPU_PACKAGES)
        except Uncacheable as e:
            return _skip(str(e))
        except Exception as e:  # noqa: BLE001 - a graph the key does not describe: compiled, not cached
            log.warning("stax: cannot compute the whole-graph cache key (%s: %s); compiling uncached",
                        type(e).__name__, e)
            return _skip(f"no key: {type(e).__name__}")
        clock.ident = key[:12]
        try:
            entry = cache.load(key)
        except CorruptEntry as e:
            log.warning("stax: whole-graph cache entry %s is corrupt (%s): not loaded; rebuilding it", e.path, e.why)
            metrics.record(graph_cache_corrupt=1)
            return Lookup("corrupt: rebuilt", cache, key, env)
    if entry is None:
        metrics.record(graph_cache_misses=1)
        return Lookup("miss", cache, key, env)
    return Lookup("hit", cache, key, env, entry)


def load(found: Lookup, gm, device, cfg: Config, clock: PhaseClock) -> tuple[CallSpec, list, object]:
    """(CallSpec, extras' values, module) of a hit; raises what loading raised (the caller rebuilds)."""
    entry = found.entry
    with clock.phase("cache"):
        spec, artifact, sizes = entry.spec, entry.artifact, ()
        if spec.size_binding is not None:  # a symbolic-shape graph: its size expressions as stored
            spec, artifact = plain_values.decode(spec), plain_values.decode(artifact)
            sizes = spec.size_binding.names
        extras = extra_values(spec, None, gm, device)
    if artifact is None:
        module = NoKernels(*entry.no_kernels)
    elif isinstance(artifact, GpuBuild):
        module = load_gpu(artifact, device, kernel_table_of(entry.externs, sizes), clock)
    else:
        module = load_cpu(artifact, found.env, kernel_table_of(entry.externs, sizes), cpu_config(cfg), clock)
    metrics.record(graph_cache_hits=1)
    found.stored = entry  # (an entry stored before autotuning: its choices are added after the first call)
    return spec, extras, module


def _gpu_private_note(cfg: Config, device) -> str:
    """The unwritable-directory warning's word on stax.gpu's module files (a private directory)."""
    from stax.gpu.load import writable_dir

    gpu = gpu_config(device, dict(cfg.gpu_options))
    private = writable_dir(gpu.cache_dir)
    return f"; Triton modules are written to the private directory {private} (removed at exit)" \
        if private != gpu.cache_dir else ""


def counts_of(lowered, sched) -> dict:
    """The metrics a compile records (a hit records the same)."""
    from stax.ir import ExternKernel

    return dict(
        kernels_generated=sum(1 for k in sched.kernels if k.kind != "extern") if sched else 0,
        nodes_lowered=sum(1 for n in lowered.graph.nodes if not isinstance(n, ExternKernel)),
        extern_calls=sum(lowered.extern_ops.values()),
        extern_ops=dict(lowered.extern_ops),
        fallback_calls=sum(lowered.fallback_ops.values()),
        fallback_ops=dict(lowered.fallback_ops),
        materialized=dict(lowered.materialized),
    )


def store(found: Lookup, lowered, built: Built, counts: dict, clock: PhaseClock) -> str:
    """Write the entry of a miss; returns the status for the log line."""
    if found.cache is None:
        return found.status
    no_kernels = None
    if built.artifact is None:
        if not isinstance(built.module, NoKernels):
            return found.status
        no_kernels = (built.module.inputs, built.module.outputs)
    spec, artifact = from_lowered(lowered), built.artifact
    with clock.phase("cache"):
        try:
            if spec.size_binding is not None:  # (size expressions as plain data: plain_values.py)
                spec, artifact = plain_values.encode(spec), plain_values.encode(artifact)
            entry = GraphEntry(found.key, lowered.graph.content_hash()[:12], spec, artifact, no_kernels,
                               extern_kinds(lowered.graph),
                               tuple((k, tuple(sorted(v.items())) if isinstance(v, dict) else v)
                                     for k, v in counts.items()))
            stored = found.cache.store(entry)
        except Uncacheable as e:
            _skip(str(e))
            return f"skipped: {e}"
        except OSError as e:
            log.warning("stax: could not store whole-graph cache entry %s (%s)", found.key[:12], e)
            return f"{found.status} (not stored: {e})"
    if not stored:
        return f"{found.status} (read-only: not stored)"
    found.stored = entry
    metrics.record(graph_cache_stores=1)
    return f"{found.status} (stored)"


def store_choices(found: Lookup, module) -> None:
    """After a GPU graph's first call: its entry written again with the launch configs the autotuner chose
    then (stax.gpu.with_choices), so that a hit launches them without tuning again. The entry is stored
    before that call (a process that dies in it still leaves one); nothing when no choice is new."""
    entry = found.stored
    if entry is None or found.cache is None or not isinstance(entry.artifact, GpuBuild):
        return
    import stax.gpu

    try:
        artifact = stax.gpu.with_choices(entry.artifact.artifact, module)
        if artifact == entry.artifact.artifact:
            return
        entry = replace(entry, artifact=replace(entry.artifact, artifact=artifact))
        if found.cache.store(entry):
            found.stored = entry
            metrics.record(graph_cache_stores=1)
            log.info("stax: whole-graph cache entry %s stored again with its autotuning choices", found.key[:12])
    except Exception as e:  # noqa: BLE001 - the call itself is done and right: only the entry stays as it was
        log.warning("stax: could not store the autotuning choices of cache entry %s (%s: %s)", found.key[:12],
                    type(e).__name__, e)


def entry_counts(entry: GraphEntry) -> dict:
    return {k: dict(v) if isinstance(v, tuple) else v for k, v in entry.counts}
