"""GpuArtifact -> CompiledModule: import the generated source, bind launchers, externs, errors.

What `compile_schedule` does after generating, and all a whole-graph cache hit does: no plan,
no Triton source is written here. The config given at load decides what is per process (device,
cache directory, autotuner, compile workers, CUDA graphs); the artifact, what was generated.
A cache directory that cannot be written is replaced by a private one (removed at exit), so an
unusable $STAX_CACHE_DIR costs the cache, never the compile.

Process-wide state: `_PRIVATE`, the private directories standing in for unwritable ones.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import logging
import os
import shutil
import sys
import tempfile
import threading

from stax.sched import CompiledModule

from . import graph_pools, graphs
from .artifact import PLAIN, GpuArtifact, target_identity
from .autotune import default_autotuner
from .config import GpuConfig
from .graphs import GraphedCall
from .plan import EXTERN_FORM
from .runtime import ErrorFlag, KernelLauncher, allocator_for
from .sized_launch import SizedLauncher

log = logging.getLogger("stax.gpu")

_PRIVATE: dict[str, str] = {}
_LOCK = threading.Lock()


def writable_dir(directory: str) -> str:
    """`directory` if it can be written, else this process's private stand-in (logged once)."""
    with _LOCK:
        if directory in _PRIVATE:
            return _PRIVATE[directory]
        try:
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".write-check-")
            os.close(fd)
            os.unlink(tmp)
            return directory
        except OSError as e:
            private = _PRIVATE[directory] = tempfile.mkdtemp(prefix="stax-gpu-cache-")
            atexit.register(shutil.rmtree, private, True)
            log.info("stax-gpu: cache directory %s is not usable (%s); writing modules to %s (removed at exit)",
                     directory, e, private)
            return private


def load_module(source: str, cache_dir: str):
    """Write `source` to a content-addressed file and import it (Triton needs real source)."""
    digest = hashlib.sha256(source.encode()).hexdigest()
    directory = os.path.join(writable_dir(cache_dir), "modules", digest[:2])
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"stax_{digest[:32]}.py")
    if not os.path.exists(path):
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    name = f"stax_gpu_{digest[:32]}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # triton resolves the kernels' globals through the module
    spec.loader.exec_module(module)
    return module


def load_artifact(artifact: GpuArtifact, *, extern_kernels=None, config: GpuConfig | None = None,
                  graph=None) -> CompiledModule:
    """The runnable module of `artifact` (what compile_schedule returns). `graph`: the schedule's graph,
    bound as the module's GRAPH when at hand (aot.compile_module reads it; a cache load has none)."""
    config = config or GpuConfig.from_env()
    here = target_identity(config)
    if artifact.identity != here:
        raise ValueError(f"stax-gpu: artifact generated for {artifact.identity!r}, loaded for {here!r}")
    extern_kernels = dict(extern_kernels or {})
    for e in artifact.externs:
        if e.kernel not in extern_kernels:
            raise KeyError(f"stax-gpu: no implementation given for extern kernel {e.kernel!r} ({e.name})")
    pool = compile_pool(config)
    module = load_module(artifact.source, config.cache_dir)
    import torch

    device = torch.device(config.device)
    module.DEVICE = device
    module.empty_strided = allocator_for(device)
    module.GRAPH = graph  # as run: split reductions add partial buffers
    module.ARTIFACT = artifact
    module.__stax_module__ = module  # generated_module: two loads of one source share a name, not this
    why = "GpuConfig.error_sync" if config.error_sync else (
        "unpoisoned checks: " + "; ".join(artifact.unpoisoned) if artifact.unpoisoned else "")
    errors = artifact.errors
    module.ERRORS = ErrorFlag(errors, device, sync=config.error_sync, why=why,
                              asserted=bool(artifact.unpoisoned)) if errors else ()
    if module.ERRORS and module.ERRORS.asserted:
        log.info("%s: a device-side assert ends each call (%s; GpuConfig.error_sync=True reads the flag and "
                 "raises the check's error instead)", module.__name__, why)
    for e in artifact.externs:
        fn, constants = extern_kernels[e.kernel], dict(e.constants)
        bind = getattr(fn, "bind", None)  # the extern protocol stax.cpu uses too: constants read once
        if bind is not None:
            fn, constants = bind(**constants), {}
        setattr(module, f"EXTERN_{e.index}", fn)
        setattr(module, f"CONSTANTS_{e.index}", constants)
    autotuner = default_autotuner(config)
    for k in artifact.kernels:
        vs = k.variants
        sized = {"n_numels": k.n_numels, "n_sizes": k.n_sizes, "by_size": k.by_size} if k.n_numels else {}
        launcher = (SizedLauncher if sized else KernelLauncher)(
            vs[0].name, {ks.variant: (ks, getattr(module, ks.name)) for ks in vs}, list(k.candidates), autotuner,
            k.key, n_in=k.n_in, n_out=k.n_out, options=dict(k.options), **sized)
        _preset(launcher, k.choices)
        setattr(module, f"launch_{k.index}", launcher)
        log.info("%s: %s variants=%s candidates=%d", k.plan, vs[0].name, [ks.variant for ks in vs],
                 len(k.candidates))
    if pool is not None:
        _precompile(pool, module, {k.index: dict(k.arg_dtypes) for k in artifact.kernels}, autotuner)
    call = module.call
    fallback = any(e.fallback for e in artifact.externs)
    why_not = graph_refusal(config, fallback, artifact.allocated_bytes)
    if why_not is None:
        call = GraphedCall(call, module.__name__, errors=module.ERRORS or None,
                           instances=config.cuda_graph_instances, keys=config.cuda_graph_keys,
                           gpu_bound_ratio=config.cuda_graph_gpu_bound_ratio if _pdl(artifact) else 0.0,
                           pools=graph_pools.POOLS if config.cuda_graph_shared_pools else None)
    elif config.cuda_graphs and device.type == "cuda":
        log.info("stax-gpu: no CUDA graphs for this module: %s", why_not)
    return CompiledModule(artifact.source, call, device=config.device, kernel_names=artifact.kernel_names)


def _pdl(artifact: GpuArtifact) -> bool:
    return any(dict(k.options).get("launch_pdl") for k in artifact.kernels)


def _preset(launcher, choices: tuple) -> None:
    """The launch configs a previous run chose: the autotuner is not asked again."""
    for bucket, cfg in choices:
        if getattr(launcher, "sized", False):
            launcher.choices[bucket] = cfg
        elif bucket == PLAIN:
            launcher.choice = cfg


def artifact_of(compiled: CompiledModule) -> GpuArtifact | None:
    """The GpuArtifact a module was loaded from (None: not a stax.gpu module)."""
    call = compiled.call
    fn = getattr(call, "call", call)  # a GraphedCall wraps the wrapper
    return getattr(fn, "__globals__", {}).get("ARTIFACT")


def generated_module(compiled: CompiledModule):
    """The Python module a CompiledModule's wrapper lives in (its launchers, ERRORS, GRAPH)."""
    call = compiled.call
    fn = getattr(call, "call", call)  # a GraphedCall wraps the wrapper
    return fn.__globals__.get("__stax_module__") or sys.modules[fn.__module__]


def compile_pool(config: GpuConfig):
    """The process-wide compile workers (precompile.py) for a cuda module, or None."""
    from . import precompile

    if config.interpret or not config.device.startswith("cuda"):
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    return precompile.pool(precompile.default_workers() if config.compile_workers is None else config.compile_workers)


def launchers(module) -> list:
    """A generated module's KernelLaunchers, in name order."""
    return [getattr(module, n) for n in sorted(vars(module)) if n.startswith("launch_")]


def _precompile(pool, module, dtypes: dict, autotuner) -> None:
    """Hand every kernel config the module's launchers may compile to worker processes (precompile.py).
    `dtypes`: per kernel index, {buffer: dtype name} of its pointer arguments."""
    import torch

    from . import precompile

    major, minor = torch.cuda.get_device_capability()
    target = ("cuda", major * 10 + minor, 32)
    tuned = getattr(autotuner, "cached_choice", None)
    for index, of in dtypes.items():
        launcher = getattr(module, f"launch_{index}")
        if getattr(launcher, "sized", False):
            continue  # (call-time sizes: the JIT compiles it at its first launch)
        cands = launcher.candidates
        hit = launcher.choice or (tuned(launcher.key, cands) if tuned is not None and len(cands) > 1 else None)
        for cfg in [hit] if hit is not None else cands:  # a tuned choice: only it will be launched
            ks, fn = launcher.variants[cfg.variant]
            try:
                job = precompile.job_for(ks, fn, [of[b] for b in ks.args], cfg, launcher.options, target, module)
            except (KeyError, ValueError) as e:  # the JIT compiles what cannot be described
                log.info("stax-gpu: %s %s not precompiled: %s", ks.name, cfg.key(), e)
                continue
            launcher.prepared[cfg.key()] = (job, pool.submit(job))


def why_not_graphed(config: GpuConfig, plans, allocated: int = 0) -> str | None:
    """None when the module's wrapper may be replayed as a CUDA graph (graphs.py), else why not."""
    fallback = any(p.form == EXTERN_FORM and p.extern.fallback for p in plans)
    return graph_refusal(config, fallback, allocated)


def graph_refusal(config: GpuConfig, fallback: bool, allocated: int = 0) -> str | None:
    """why_not_graphed over what an artifact knows: whether it calls fallback ATen ops, the bytes one
    call allocates. An error flag read synchronously is read after each replay, and a symbolic-shape
    module's graphs are keyed by its sizes too (graphs.py)."""
    if not config.cuda_graphs:
        return "off"
    if (config.interpret or not config.device.startswith("cuda")) and graphs.BACKEND is graphs.CudaGraphs:
        return "not a cuda module"  # a stand-in backend (host_graphs) graphs modules anywhere
    if fallback:
        return "it calls fallback ATen ops (any of which may synchronize)"
    if allocated > config.cuda_graph_max_bytes:
        # its kernels run >= 0.25 ms at 4 TB/s: a launch's overhead is small next to that,
        # and each instance would keep this much reserved
        return (f"it allocates {allocated / 2**20:.0f} MiB per call "
                f"(cuda_graph_max_bytes {config.cuda_graph_max_bytes / 2**20:.0f} MiB)")
    return None
