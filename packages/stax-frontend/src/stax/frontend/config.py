"""Frontend configuration: one frozen dataclass, overridable by env vars or `patch()`.

The active config lives in a ContextVar (not a module global), so overrides are
scoped to a `with config.patch(...)` block and to the thread/task that made them.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
from dataclasses import dataclass, field

from stax.cpu import CpuConfig
from stax.sched import SchedulerConfig

RUNTIMES = ("auto", "cpu", "interpret")
PARTITIONERS = ("min_cut", "default")
DEVICE_OVERRIDES = (None, "gpu")


@dataclass(frozen=True)
class DeviceCosts:
    """§6.6 materialization cost model for one device kind.

    `op_cost` prices one evaluation of an op (default 1); a composed pointwise value
    with several users is written to a buffer when its body costs at least
    `recompute_threshold` (rule 1) — on CPU transcendental ops are expensive, on GPU
    they are cheap next to a round trip through memory.
    """

    op_cost: tuple = ()  # ((op name, cost), ...)
    default_cost: int = 1
    recompute_threshold: float = 8  # rule 1: several users and body cost >= this
    reduction_input_threshold: float = 4  # rule 3: feeds a reduction, has other users, cost >= this
    # rule 5: a gather feeding a reduction with at most this many outputs gets a buffer, so the
    # gather runs where the buffer is computed (many programs) instead of inside the few programs
    # of the reduction (GPU: one program walked 16384 gathered rows of log_softmax+nll in 23 us)
    few_outputs: int = 0
    # rule 6: a value of n elements whose every user is pointwise over at least this many times n
    # elements (it is read through a broadcast: batch norm's per-channel 1/sqrt(var + eps)) gets a
    # buffer when its body costs at least reduction_input_threshold: computed n times, not per element
    broadcast_ratio: float = 4

    def cost(self, name: str) -> int:
        return dict(self.op_cost).get(name, self.default_cost)


_TRANSCENDENTAL = (
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin", "acos",
    "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "atan2", "erf", "lgamma", "sigmoid", "pow",
)

CPU_COSTS = DeviceCosts(
    op_cost=tuple((n, 8) for n in _TRANSCENDENTAL)
    + (("truediv", 2), ("sqrt", 2), ("rsqrt", 2), ("reciprocal", 2), ("floordiv", 2), ("remainder", 2), ("fmod", 2)),
    recompute_threshold=8,
    reduction_input_threshold=4,
)
GPU_COSTS = DeviceCosts(op_cost=(), recompute_threshold=float("inf"), reduction_input_threshold=float("inf"),
                       few_outputs=64, broadcast_ratio=float("inf"))


def _env_flag(name: str, default: bool = False) -> bool:
    v = os.environ.get(name)
    if v is None:
        return default
    return v.strip().lower() not in ("", "0", "false", "no", "off")


@dataclass(frozen=True)
class Config:
    """Everything the frontend reads; pass-through to no other package.

    debug: write a per-graph dump (ATen graph, IR, schedule + fusion log, source).
    debug_dir: where the dump goes (one subdirectory per compiled graph).
    runtime: 'cpu' (stax.cpu C++), 'interpret' (numpy reference interpreter, slow,
      for debugging lowerings), 'auto' (cpu when stax.cpu provides compile_schedule).
    strict: re-raise when a whole graph fails to compile instead of running it eagerly.
    max_reads / max_body_ops: §6.6 rules 2 and 4 (too many reads, body too large).
    cpu_costs / gpu_costs: §6.6 per-device cost tables (rules 1 and 3).
    conv_channels_last: inference and training graphs (CPU: oneDNN, cuda: cuDNN) run 2-D convolutions
      on channels-last memory (lowering/conv_layout.py); env STAX_CONV_CHANNELS_LAST=0 keeps NCHW.
    conv_prepack: CPU inference graphs run each 2-D convolution whose weight is a graph input on a
      oneDNN weight packed once, with batch norm folded into it and a ReLU / residual add as
      post-ops (conv_fusion.py, packed_conv.py: the cache follows version counters, so a write
      through `p.data` is not seen); env STAX_CONV_PREPACK=0 turns it off.
    linear_prepack: the same for linear layers (addmm / mm by a transposed graph-input weight) on a
      packed oneDNN weight, a ReLU / GELU after them as a post-op (linear_fusion.py,
      packed_linear.py); env STAX_LINEAR_PREPACK=0 turns it off.
    follow_read_order: a materialized pointwise value no user sees is stored in the memory
      order of its reads (read_order.py; channels-last after channels-last convolutions);
      env STAX_FOLLOW_READ_ORDER=0 stores it row-major.
    partitioner: how AOTAutograd splits a training graph into forward and backward: 'min_cut'
      (its min-cut rematerialization, Inductor's: cheap pointwise values are recomputed in the
      backward instead of saved) or 'default' (save what the backward reads).
    foreach_kernels: CPU graphs split `_foreach_*` ops (foreach=True optimizers) into per-tensor
      Stax kernels that write the updated tensors in place (foreach_decomps.py, donation.py);
      env STAX_FOREACH_KERNELS=0 keeps them as ATen fallbacks.
    gpu_foreach_kernels: cuda graphs do the same (per-tensor Stax kernels, each written into its
      donated parameter: a graph without the fallback can be CUDA-graphed, and AOTAutograd's copy
      back finds the data in place). Off: on an H100 it was no faster than torch's multi-tensor
      kernels (README); env STAX_GPU_FOREACH_KERNELS=1 turns it on (A/B).
    scheduler / cpu / gpu_options: stax.sched's SchedulerConfig, stax.cpu's CpuConfig and
      overrides of stax.gpu's GpuConfig (an optional package: given as field/value pairs);
      `torch.compile(..., options={"cpu.isa": "avx2", "scheduler.max_fusion_nodes": 64})` sets
      them (with_options).
    graph_cache: look compiled graphs (stax.cpu's and stax.gpu's) up in, and store them to, the whole-graph cache under
      $STAX_CACHE_DIR/graphs (graph_cache.py): a second process compiling the same graph loads it
      without lowering, scheduling or generating code; env STAX_GRAPH_CACHE=0 turns it off.
    graph_cache_dir: where its entries go (env STAX_GRAPH_CACHE_DIR); None: <$STAX_CACHE_DIR>/graphs.
    device_override: None routes each graph by its tensors' device (cuda -> stax.gpu,
      cpu -> stax.cpu); 'gpu' sends every graph to stax.gpu, also CPU tensors — for
      tests and dry runs under TRITON_INTERPRET=1 (Triton's interpreter runs on CPU).
    """

    debug: bool = False
    debug_dir: str = "stax_debug"
    report: bool = False  # per-graph HTML report (stax.frontend.report), env STAX_REPORT
    report_dir: str = "stax_report"  # env STAX_REPORT_DIR
    runtime: str = "auto"
    strict: bool = False
    max_reads: int = 8
    max_body_ops: int = 64
    cpu_costs: DeviceCosts = field(default=CPU_COSTS)
    gpu_costs: DeviceCosts = field(default=GPU_COSTS)
    device_override: str | None = None  # env STAX_DEVICE_OVERRIDE=gpu
    conv_channels_last: bool = True  # env STAX_CONV_CHANNELS_LAST
    conv_prepack: bool = True  # env STAX_CONV_PREPACK: CPU inference convolutions on packed weights
    linear_prepack: bool = True  # env STAX_LINEAR_PREPACK: CPU inference linear layers on packed weights
    follow_read_order: bool = True  # env STAX_FOLLOW_READ_ORDER
    partitioner: str = "min_cut"  # env STAX_PARTITIONER: AOTAutograd's forward/backward split
    foreach_kernels: bool = True  # env STAX_FOREACH_KERNELS
    gpu_foreach_kernels: bool = False  # env STAX_GPU_FOREACH_KERNELS
    graph_cache: bool = True  # env STAX_GRAPH_CACHE=0: the whole-graph cache (graph_cache.py) off
    graph_cache_dir: str | None = None  # env STAX_GRAPH_CACHE_DIR; None: <stax.cpu's cache dir>/graphs
    # the lower packages' own configs (their fields read their env vars where they say so)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)  # the targets' policies start here
    cpu: CpuConfig = field(default_factory=CpuConfig)  # stax.cpu's code generation and toolchain
    gpu_options: tuple = ()  # ((GpuConfig field, value), ...) over stax.gpu's GpuConfig.from_env()

    def __post_init__(self):
        if self.runtime not in RUNTIMES:
            raise ValueError(f"config.runtime must be one of {RUNTIMES}, got {self.runtime!r}")
        if self.partitioner not in PARTITIONERS:
            raise ValueError(f"config.partitioner must be one of {PARTITIONERS}, got {self.partitioner!r}")
        if self.device_override not in DEVICE_OVERRIDES:
            raise ValueError(f"config.device_override must be one of {DEVICE_OVERRIDES}, got {self.device_override!r}")


def with_options(cfg: Config, options: dict | None) -> Config:
    """`cfg` with `torch.compile(..., options=...)` applied: a Config field by name, a field of
    its nested configs as "scheduler.<field>" / "cpu.<field>" / "gpu.<field>"."""
    top: dict = {}
    nested: dict = {"scheduler": {}, "cpu": {}, "gpu": {}}
    for key, value in (options or {}).items():
        head, dot, rest = key.partition(".")
        if dot and head in nested:
            nested[head][rest] = value
        elif not dot and key in {f.name for f in dataclasses.fields(Config)}:
            top[key] = value
        else:
            raise ValueError(f"stax: unknown option {key!r}; options are Config fields "
                             f"({', '.join(f.name for f in dataclasses.fields(Config))}) or "
                             f"scheduler.<field>, cpu.<field>, gpu.<field>")
    cfg = dataclasses.replace(cfg, **top)
    for name in ("scheduler", "cpu"):
        if nested[name]:
            cfg = dataclasses.replace(cfg, **{name: dataclasses.replace(getattr(cfg, name), **nested[name])})
    if nested["gpu"]:
        cfg = dataclasses.replace(cfg, gpu_options=tuple({**dict(cfg.gpu_options), **nested["gpu"]}.items()))
    return cfg


def from_env() -> Config:
    """Defaults overridden by STAX_DEBUG(_DIR), STAX_REPORT(_DIR), STAX_RUNTIME, STAX_STRICT,
    STAX_DEVICE_OVERRIDE, STAX_CONV_CHANNELS_LAST, STAX_CONV_PREPACK, STAX_LINEAR_PREPACK,
    STAX_FOLLOW_READ_ORDER, STAX_PARTITIONER, STAX_GRAPH_CACHE(_DIR)."""
    c = Config()
    return dataclasses.replace(
        c,
        debug=_env_flag("STAX_DEBUG", c.debug),
        debug_dir=os.environ.get("STAX_DEBUG_DIR", c.debug_dir),
        report=_env_flag("STAX_REPORT", c.report),
        report_dir=os.environ.get("STAX_REPORT_DIR", c.report_dir),
        runtime=os.environ.get("STAX_RUNTIME", c.runtime),
        strict=_env_flag("STAX_STRICT", c.strict),
        device_override=os.environ.get("STAX_DEVICE_OVERRIDE") or c.device_override,
        conv_channels_last=_env_flag("STAX_CONV_CHANNELS_LAST", c.conv_channels_last),
        conv_prepack=_env_flag("STAX_CONV_PREPACK", c.conv_prepack),
        linear_prepack=_env_flag("STAX_LINEAR_PREPACK", c.linear_prepack),
        follow_read_order=_env_flag("STAX_FOLLOW_READ_ORDER", c.follow_read_order),
        partitioner=os.environ.get("STAX_PARTITIONER", c.partitioner),
        foreach_kernels=_env_flag("STAX_FOREACH_KERNELS", c.foreach_kernels),
        gpu_foreach_kernels=_env_flag("STAX_GPU_FOREACH_KERNELS", c.gpu_foreach_kernels),
        graph_cache=_env_flag("STAX_GRAPH_CACHE", c.graph_cache),
        graph_cache_dir=os.environ.get("STAX_GRAPH_CACHE_DIR") or c.graph_cache_dir,
    )


_ACTIVE: contextvars.ContextVar[Config | None] = contextvars.ContextVar("stax_frontend_config", default=None)


def current() -> Config:
    """The config in effect: the innermost `patch()`, else defaults + env vars (read now)."""
    c = _ACTIVE.get()
    return c if c is not None else from_env()


@contextlib.contextmanager
def patch(**overrides):
    """Override fields for the duration of a `with` block, e.g. `patch(debug=True)`."""
    token = _ACTIVE.set(dataclasses.replace(current(), **overrides))
    try:
        yield current()
    finally:
        _ACTIVE.reset(token)
