"""The code generators a graph can go to, one row each: what the frontend needs to know about a
target in one place instead of "cpu" / "gpu" string checks spread over lowering, scheduling and
building (issue 22).

A row says the stax.ir device its code is generated for, its §6.6 cost table, its stax.sched
fusion policy, how a schedule becomes a module, and the capabilities lowerings ask about
(channels-last convolutions, float64 scan accumulators, atomic adds). stax.gpu is imported
only when the GPU row builds or answers: CPU-only installs have no triton.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from stax.ir import dtypes as dt

from .config import Config, DeviceCosts
from .routing import CPU, GPU


@dataclass(frozen=True)
class Target:
    name: str  # routing.CPU | routing.GPU
    ir_device: str  # the stax.ir device of the generated code: 'cpu' | 'cuda'
    costs: Callable[[Config], DeviceCosts]  # §6.6 rules 1, 3, 5
    policy: Callable[[Config, tuple], object]  # stax.sched's fusion policy (config, donated input pairs)
    channels_last_convs: bool  # 2-D convolutions run on NHWC memory (oneDNN, cuDNN: conv_layout.py)
    packs_weights: bool  # inference convolutions / linears run on prepacked oneDNN weights (packed_*.py)
    conv_bias_grad: bool  # convolution_backward's bias gradient is a Stax reduction, not ATen's (conv_layout.py)
    conv_bias_add: bool  # convolution's bias is a Stax pointwise add after the library call (conv_layout.py)
    scan_acc_float64: bool  # float32 scans accumulate in float64 (ATen's CPU accumulate type)
    atomic_add: Callable[[dt.DType], bool]  # an accumulating scatter into this dtype is supported
    # a var / var_mean over a static trailing row of at most this many elements is two sums (the mean,
    # then the squared deviations) instead of one Welford reduction; 0: always Welford (lowering/reductions.py)
    two_pass_row: int
    wrapper_names: Callable[[], tuple]  # (names, prefixes) its generated wrapper binds: IR inputs avoid them


def _cpu_policy(cfg: Config, donated: tuple = ()):
    """The default policy with §7.5's in-place reuse (a pointwise kernel writes into the dying
    buffer it reads at its write index: a batch-norm backward's gradient over the convolution's;
    an optimizer step's new parameter into the donated old one: donation.py)."""
    from stax.sched import CpuPolicy

    return CpuPolicy(dataclasses.replace(cfg.scheduler, inplace_reuse=True, donated_inputs=donated))


def _gpu_policy(cfg: Config, donated: tuple = ()):
    """GPU fusion by element counts (Def 7.2), dependent reductions (softmax) in one kernel.
    In-place reuse only with `gpu_foreach_kernels` in a graph that donates inputs (an optimizer
    step's parameters): stax.gpu's plans have not been measured with it otherwise."""
    from stax.sched import GpuPolicy

    inplace = dict(inplace_reuse=True, donated_inputs=donated) if cfg.gpu_foreach_kernels and donated else {}
    return GpuPolicy(dataclasses.replace(cfg.scheduler, fuse_dependent_reductions=True, **inplace))


def _cpu_wrapper_names() -> tuple:
    import stax.cpu

    return stax.cpu.WRAPPER_NAMES, stax.cpu.WRAPPER_PREFIXES


def _gpu_wrapper_names() -> tuple:
    import stax.gpu

    return stax.gpu.WRAPPER_NAMES, stax.gpu.WRAPPER_PREFIXES


def _gpu_atomic_add(d: dt.DType) -> bool:
    from stax.gpu.scatter import atomic_add_supported  # the GPU target has stax.gpu

    return atomic_add_supported(d)


TARGETS: dict[str, Target] = {
    CPU: Target(CPU, "cpu", lambda cfg: cfg.cpu_costs, _cpu_policy, channels_last_convs=True, packs_weights=True,
                conv_bias_grad=False, conv_bias_add=False, scan_acc_float64=True, atomic_add=lambda d: True,
                two_pass_row=4096, wrapper_names=_cpu_wrapper_names),
    GPU: Target(GPU, "cuda", lambda cfg: cfg.gpu_costs, _gpu_policy, channels_last_convs=True, packs_weights=False,
                conv_bias_grad=True, conv_bias_add=True, scan_acc_float64=False, atomic_add=_gpu_atomic_add,
                two_pass_row=0, wrapper_names=_gpu_wrapper_names),
}


def target(name: str) -> Target:
    return TARGETS[name]


def of_device(device: str) -> Target:
    """The row whose generated code runs on stax.ir device `device` ('cpu', 'cuda', 'cuda:1')."""
    return TARGETS[CPU] if device.startswith("cpu") else TARGETS[GPU]
