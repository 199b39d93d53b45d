"""GpuArtifact: everything `generate_artifact` makes of a Schedule, as plain data.

Source text, names, launch configs and counts only (no callables, no torch or IR objects), so a
whole-graph cache can pickle it and `load_artifact` can rebuild the module without the schedule:
a second process then skips planning and Triton code generation. The decisions taken while
generating (variants, the candidate launch configs, PDL, FMA contraction) are in it, so a load
makes none of them again; autotuning choices already made (`with_choices`) are kept too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

PLAIN = ""  # the bucket of a launcher with one choice (SizedLauncher has one per row-length bucket)


@dataclass(frozen=True)
class KernelLaunch:
    """One generated kernel as its launcher (`launch_<index>`) is built: its variants (their
    source is in the module), the launch configs to race, heuristic first, the autotune key
    (source, sizes, device, Triton version) and the choices already made per bucket."""

    index: int
    plan: str  # the planned kernel's name (log lines)
    variants: tuple  # kernels.KernelSource per variant
    candidates: tuple  # heuristics.LaunchConfig
    key: str
    n_in: int
    n_out: int
    options: tuple  # ((Triton compile option, value), ...): launch_pdl, enable_fp_fusion
    arg_dtypes: tuple  # ((buffer, dtype name), ...) of every pointer argument (precompile jobs)
    n_numels: int = 0  # > 0: a SizedLauncher (call-time sizes) with this many numels ...
    n_sizes: int = 0  # ... and size symbols after its pointers
    choices: tuple = ()  # ((bucket, LaunchConfig), ...) chosen by a previous run: never re-tuned
    by_size: tuple = ()  # ((size class, (LaunchConfig, ...)), ...): a symbolic kernel's candidates per class


@dataclass(frozen=True)
class ExternLaunch:
    """One ExternKernel node: `EXTERN_<index>` is `extern_kernels[kernel]`, called with `constants`
    (or bound to them once, when the callable has `bind`)."""

    index: int
    kernel: str
    name: str  # the node
    constants: tuple  # ((name, literal), ...)
    fallback: bool  # an ATen fallback (may synchronize: such a module is never CUDA-graphed)


@dataclass(frozen=True)
class GpuArtifact:
    """A generated schedule before loading. `identity` names the target it was generated for
    (`target_identity`: GPU name and compute capability, or 'interpreter', and Triton's version):
    loading it for another target is an error, never a silent mismatch."""

    identity: str
    source: str  # the module: PRELUDE, kernels, wrapper (CompiledModule.source)
    kernels: tuple  # KernelLaunch per generated kernel, schedule order
    externs: tuple  # ExternLaunch per extern node, schedule order
    kernel_names: tuple  # CompiledModule.kernel_names
    errors: tuple  # ((exception name, message), ...): error code k + 1
    unpoisoned: tuple  # messages of checks that do not poison their lanes (the flag is read in the call)
    allocated_bytes: int  # every planned buffer of one call (0: symbolic): CUDA graph memory bound
    symbolic: bool  # sizes are call-time values


def target_identity(config) -> str:
    """What generated code depends on beyond the config: the device kind and Triton's version."""
    import triton

    return f"{device_name(config)}; triton {triton.__version__}"


def device_name(config) -> str:
    """'interpreter', or the GPU's name, compute capability and SM count (autotune keys too)."""
    if config.interpret:
        return "interpreter"
    import torch

    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(torch.cuda.current_device())
        return f"{p.name} sm{p.major}{p.minor} {p.multi_processor_count}SM"
    return config.device


def with_choices(artifact: GpuArtifact, compiled) -> GpuArtifact:
    """`artifact` with the launch configs `compiled` (its loaded module, after a call) has chosen:
    a module loaded from the result launches them without asking the autotuner. A kernel with one
    candidate (in every size class) has no choice to keep (its artifact stays as it is)."""
    from .compile import generated_module

    module = generated_module(compiled)
    kernels = []
    for k in artifact.kernels:
        if len(k.candidates) < 2 and all(len(cs) < 2 for _, cs in k.by_size):
            kernels.append(k)
            continue
        launcher = getattr(module, f"launch_{k.index}")
        chosen = dict(getattr(launcher, "choices", None) or {})  # SizedLauncher: per bucket
        if not chosen and launcher.choice is not None:
            chosen = {PLAIN: launcher.choice}
        kernels.append(replace(k, choices=tuple(sorted(chosen.items()))) if chosen else k)
    return replace(artifact, kernels=tuple(kernels))
