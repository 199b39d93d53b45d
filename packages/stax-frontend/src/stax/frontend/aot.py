"""AOTAutograd glue: one compiler for forward, backward and inference graphs.

`compile_graph` is the per-graph pipeline — a straight list of passes:
lower (ATen FX -> stax.ir.Graph) -> stax.sched.schedule -> runtime build
(stax.cpu or the interpreter) -> boxed wrapper; plus metrics and the debug dump.
"""

from __future__ import annotations

import functools
import logging
import time

import torch
from torch._functorch.aot_autograd import aot_module_simplified

from . import debug, metrics
from .config import Config
from .cse import cse
from .decompositions import decomposition_table
from .graph_lowering import lower
from .runtime import CompiledGraph, build_module, eager_callable, no_dynamo, resolve_runtime

log = logging.getLogger("stax.frontend")


@no_dynamo  # the backward is compiled inside loss.backward(), maybe in a compiled frame
def compile_graph(gm: torch.fx.GraphModule, example_inputs, *, kind: str, cfg: Config):
    """Compile one ATen graph; on failure run it eagerly (unless cfg.strict)."""
    from stax.ir import ExternKernel
    from stax.sched import schedule as make_schedule

    t0 = time.perf_counter()
    lowered = sched = module = None
    try:
        cse(gm)
        lowered = lower(gm, example_inputs, cfg)
        sched = make_schedule(lowered.graph) if lowered.graph.nodes else None
        module = build_module(lowered, sched, resolve_runtime(cfg.runtime))
        compiled = CompiledGraph(lowered, module)
    except Exception as e:  # noqa: BLE001 - never crash where eager works
        if cfg.debug:
            debug.dump(cfg, kind, gm, lowered, sched, module, error=e)
        if cfg.report:  # per-graph HTML report (report/), also for a failed compile
            from .report import write_report

            write_report(cfg, kind, gm, lowered, sched, module, error=e)
        if cfg.strict:
            raise
        log.warning("stax: could not compile %s graph (%s: %s); running it eagerly", kind, type(e).__name__, e)
        metrics.record(graphs_failed=1, compile_time_s=time.perf_counter() - t0)
        return eager_callable(gm)
    n_kernels = sum(1 for k in sched.kernels if k.kind != "extern") if sched else 0
    metrics.record(
        graphs_compiled=1,
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
        from .report import write_report

        write_report(cfg, kind, gm, lowered, sched, module)
    return compiled


def aot_compile(gm: torch.fx.GraphModule, example_inputs, cfg: Config):
    """Dynamo graph -> AOTAutograd with Stax compiling every ATen graph it produces."""

    def compiler(kind):
        return functools.partial(compile_graph, kind=kind, cfg=cfg)

    return aot_module_simplified(
        gm,
        example_inputs,
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        inference_compiler=compiler("inference"),
        decompositions=decomposition_table(),
    )
