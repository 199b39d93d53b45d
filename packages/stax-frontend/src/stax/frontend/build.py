"""Schedule -> the module that runs it, per target, timed by phase (phases.py).

stax.cpu's steps are called one by one (prepare + generate_artifact = codegen, build_libraries =
cxx, load_artifact = load), so each has its own time and the CpuArtifact, plain data, can go to
the whole-graph cache; `load_cpu` is what a cache hit runs. stax.gpu's compile_schedule times its
two steps (generate_artifact = codegen, load_artifact = load) on the same clock and keeps its
GpuArtifact (stax.gpu.artifact_of); `load_gpu` is what a GPU cache hit runs.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import stax.cpu
import torch

from .config import Config
from .errors import GraphUnsupported
from .extern_table import kernel_table
from .graph_lowering import LoweredGraph
from .phases import PhaseClock
from .routing import CPU, GPU
from .runtime import InterpretedModule, NoKernels, TorchAllocator, resolve_runtime

if TYPE_CHECKING:
    import stax.gpu  # (imported lazily at run time: CPU-only installs have no triton)

log = logging.getLogger("stax.frontend")


@dataclass(frozen=True)
class GpuBuild:
    """A GPU graph's generated code as the whole-graph cache stores it: stax.gpu's GpuArtifact and the
    GpuConfig overrides it was built with (cuda_graphs=False where the module reads RNG state), which a
    load applies again."""

    artifact: stax.gpu.GpuArtifact
    options: tuple  # ((GpuConfig field, value), ...), sorted


@dataclass(frozen=True)
class Built:
    module: object  # .source and .call(args) (stax.sched.CompiledModule, or the interpreter's)
    artifact: stax.cpu.CpuArtifact | GpuBuild | None  # the generated code (None: another runtime)


def cpu_config(cfg: Config) -> stax.cpu.CpuConfig:
    """cfg.cpu with its thread count, if unset, taken from torch's intra-op pool: stax's OpenMP
    regions and torch's (oneDNN, MKL) then use one team size. stax.cpu alone would take every
    logical CPU, oversubscribing an SMT machine and, under torch.set_num_threads(1), leaving an
    idle OpenMP worker spinning beside each matmul (ViT's weight-gradient matmuls ran 2x slower)."""
    if cfg.cpu.num_threads is not None:
        return cfg.cpu
    return dataclasses.replace(cfg.cpu, num_threads=torch.get_num_threads())


def load_cpu(artifact: stax.cpu.CpuArtifact, env: stax.cpu.BuildEnv, extern: dict, config: stax.cpu.CpuConfig,
             clock: PhaseClock):
    """A CpuArtifact -> its module: g++ for units the .so cache lacks, dlopen, the wrapper."""
    with clock.phase("cxx"):
        paths = stax.cpu.build_libraries(artifact, env, config)
    with clock.phase("load"):
        return stax.cpu.load_artifact(artifact, env, paths, TorchAllocator(), extern)


def _build_cpu(lowered: LoweredGraph, schedule, cfg: Config, device, extern, clock: PhaseClock) -> Built:
    if resolve_runtime(cfg.runtime) == "interpret":
        return Built(InterpretedModule(lowered.graph, extern), None)
    config = cpu_config(cfg)
    with clock.phase("codegen"):
        env = stax.cpu.prepare(config)
        artifact = stax.cpu.generate_artifact(schedule, env, config, extern)
    return Built(load_cpu(artifact, env, extern, config, clock), artifact)


def gpu_config(device, options: dict):
    """The GpuConfig of a GPU graph on `device` under `options` (over GpuConfig.from_env())."""
    import stax.gpu

    return stax.gpu.GpuConfig.from_env(device=str(device if device is not None else "cuda"), **options)


def load_gpu(build: GpuBuild, device, extern: dict, clock: PhaseClock):
    """A cached GpuBuild -> its module, with the options it was built with."""
    import stax.gpu

    with clock.phase("load"):
        return stax.gpu.load_artifact(build.artifact, extern_kernels=extern,
                                      config=gpu_config(device, dict(build.options)))


def _build_gpu(lowered: LoweredGraph, schedule, cfg: Config, device, extern, clock: PhaseClock) -> Built:
    import stax.gpu  # lazily (CPU-only installs have no triton); looked up at call time: benchmarks patch it

    options = dict(cfg.gpu_options)
    if lowered.rng_readers and options.get("cuda_graphs", True):
        # RNG state a library call reads on the host (eager's philox seed and offset are CPU tensors
        # outside a capture): a CUDA graph would replay its first value
        options["cuda_graphs"] = False
        log.info("no CUDA graph for this module: %s read RNG state", ", ".join(lowered.rng_readers))
    config = gpu_config(device, options)
    try:  # (compile_schedule times its codegen and load steps on the clock)
        module = stax.gpu.compile_schedule(schedule, extern_kernels=extern, config=config, phase=clock.phase)
    except stax.gpu.SymbolicUnsupported as e:  # a symbolic-size graph stax.gpu cannot compile yet: eager
        raise GraphUnsupported(str(e), cause=e.cause) from e
    artifact = stax.gpu.artifact_of(module)  # (None from a stand-in compile_schedule: not cached)
    return Built(module, None if artifact is None else GpuBuild(artifact, tuple(sorted(options.items()))))


BUILDERS = {CPU: _build_cpu, GPU: _build_gpu}  # per target: schedule -> module


def build_module(lowered: LoweredGraph, schedule, cfg: Config, target: str, device, clock: PhaseClock) -> Built:
    """The module of `target`: stax.gpu's Triton module, or stax.cpu's (the numpy interpreter under
    config.runtime='interpret'); a graph without nodes needs no code."""
    extern = kernel_table(lowered.graph)
    if not lowered.graph.nodes:
        return Built(NoKernels(tuple(i.name for i in lowered.graph.inputs), lowered.graph.outputs), None)
    return BUILDERS[target](lowered, schedule, cfg, device, extern, clock)
