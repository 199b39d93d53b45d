"""AOTAutograd glue: one compiler for forward, backward and inference graphs.

`compile_graph` is the per-graph pipeline — a straight list of passes:
route (cuda -> stax.gpu, cpu -> stax.cpu) -> lower (ATen FX -> stax.ir.Graph) ->
stax.sched.schedule with the target's policy -> runtime build (stax.gpu, stax.cpu
or the interpreter) -> boxed wrapper; plus metrics and the debug dump.
"""

from __future__ import annotations

import functools
import logging
import time

import torch
from torch._functorch.aot_autograd import aot_module_simplified
from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition

from . import debug, donation, metrics, runtime
from .config import Config
from .cse import cse
from .decompositions import decomposition_table
from .eager_warnings import cause_of, warn_eager
from .graph_lowering import lower
from .report import write_report
from .routing import GPU, route
from .runtime import CompiledGraph, build_module, eager_callable, no_dynamo
from .targets import TARGETS

log = logging.getLogger("stax.frontend")


@no_dynamo  # the backward is compiled inside loss.backward(), maybe in a compiled frame
def compile_graph(gm: torch.fx.GraphModule, example_inputs, *, kind: str, cfg: Config, input_strides=None,
                  mutated=None):
    """Compile one ATen graph; on failure run it eagerly (unless cfg.strict). `input_strides`:
    compile for these input layouts (per placeholder) instead of the examples' (a variant);
    `mutated`: the inputs AOTAutograd overwrites with the first outputs (donation.py; None: ask it)."""
    from stax.ir import ExternKernel
    from stax.sched import schedule as make_schedule

    t0 = time.perf_counter()
    if mutated is None:
        mutated = donation.mutated_inputs(kind)
    lowered = sched = module = None
    target = None
    try:
        target, device = route(gm, example_inputs, cfg)
        if target == GPU and (why := runtime.gpu_unavailable_reason()) is not None:
            msg = (f"stax: {kind} graph on {device} needs stax-gpu (pip install 'stax-frontend[gpu]'), "
                   f"which is unavailable ({why}); running it eagerly")
            log.warning("%s", msg)
            warn_eager("stax-gpu unavailable: " + why, msg)
            metrics.record(graphs_no_backend=1, compile_time_s=time.perf_counter() - t0)
            return eager_callable(gm)
        cse(gm)
        lowered = lower(gm, example_inputs, cfg, target, device, kind=kind, input_strides=input_strides)
        policy = TARGETS[target].policy(cfg, donation.donated_pairs(lowered, mutated))
        sched = make_schedule(lowered.graph, policy) if lowered.graph.nodes else None
        donation.return_inputs(lowered, sched, mutated)
        module = build_module(lowered, sched, cfg, target, device)
        variant = functools.partial(compile_graph, gm, example_inputs, kind=kind, cfg=cfg, mutated=mutated)
        compiled = CompiledGraph(lowered, module, device, respecialize=lambda strides: variant(input_strides=strides))
        if input_strides is None:
            report_output_strides(lowered)
    except Exception as e:  # noqa: BLE001 - never crash where eager works
        if cfg.debug:
            debug.dump(cfg, kind, gm, lowered, sched, module, error=e)
        if cfg.report:  # per-graph HTML report (report/), also for a failed compile
            write_report(cfg, kind, gm, lowered, sched, module, error=e)
        if cfg.strict:
            raise
        msg = f"stax: could not compile {kind} graph ({type(e).__name__}: {e}); running it eagerly"
        log.warning("%s", msg)
        warn_eager(cause_of(e), msg)
        metrics.record(graphs_failed=1, compile_time_s=time.perf_counter() - t0)
        return eager_callable(gm)
    n_kernels = sum(1 for k in sched.kernels if k.kind != "extern") if sched else 0
    metrics.record(
        graphs_compiled=1,
        graphs_gpu=int(target == GPU and bool(lowered.graph.nodes)),
        kernels_generated=n_kernels,
        nodes_lowered=sum(1 for n in lowered.graph.nodes if not isinstance(n, ExternKernel)),
        extern_calls=sum(lowered.extern_ops.values()),
        extern_ops=lowered.extern_ops,
        fallback_calls=sum(lowered.fallback_ops.values()),
        fallback_ops=lowered.fallback_ops,
        materialized=lowered.materialized,
        compile_time_s=time.perf_counter() - t0,
    )
    if cfg.debug:
        debug.dump(cfg, kind, gm, lowered, sched, module)
    if cfg.report:  # per-graph HTML report (report/)
        write_report(cfg, kind, gm, lowered, sched, module)
    return compiled


def report_output_strides(lowered) -> None:
    """Tell AOTAutograd the strides the compiled forward graph really returns: it compiles the
    backward graph for the saved tensors' real layouts (channels-last activations, expands
    stored dense), not for the traced ones. Outside a forward compile there is no list to fill."""
    tc = torch._guards.TracingContext.try_get()
    if tc is not None and tc.output_strides is not None:
        tc.output_strides.extend(lowered.output_strides)


def aot_compile(gm: torch.fx.GraphModule, example_inputs, cfg: Config):
    """Dynamo graph -> AOTAutograd with Stax compiling every ATen graph it produces."""
    from torch._dynamo.utils import counters, flatten_graph_inputs

    if any(isinstance(x, (list, tuple, dict)) for x in example_inputs):
        # compiled autograd's graphs take their tensors boxed, as one list: flatten them as torch's
        # own AOTAutograd backends do (torch._dynamo.backends.common.AotAutograd)
        return flatten_graph_inputs(gm, example_inputs, functools.partial(aot_compile, cfg=cfg))
    # torch's DDPOptimizer reads this counter to know that a bucket's submodule went through
    # AOTAutograd, whose first call then returns the fake outputs the next bucket is compiled
    # from (TracingContext.fakify_first_call); uncounted, that first call came at run time and
    # the model returned FakeTensors (torch/_dynamo/backends/distributed.py, SubmodCompiler)
    counters["aot_autograd"]["total"] += 1

    def compiler(kind):
        return functools.partial(compile_graph, kind=kind, cfg=cfg)

    return aot_module_simplified(
        gm,
        example_inputs,
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        inference_compiler=compiler("inference"),
        partition_fn=PARTITIONERS[cfg.partitioner],
        decompositions=decomposition_table(foreach=cfg.foreach_kernels and not any(
            isinstance(x, torch.Tensor) and x.device.type != "cpu" for x in example_inputs)),
    )


# AOTAutograd's partitioners: min-cut recomputes cheap values in the backward rather than saving
# them (fewer bytes written by the forward, a lower peak); "inductor" is the op policy it knows
PARTITIONERS = {
    "min_cut": functools.partial(min_cut_rematerialization_partition, compiler="inductor"),
    "default": default_partition,
}
