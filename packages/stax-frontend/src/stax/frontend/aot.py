"""AOTAutograd glue: one compiler for forward, backward and inference graphs.

`compile_graph` is the per-graph pipeline — a straight list of passes:
route (cuda -> stax.gpu, cpu -> stax.cpu) -> whole-graph cache lookup (a hit loads the
module and skips the rest) -> lower (ATen FX -> stax.ir.Graph) -> stax.sched.schedule with
the target's policy -> runtime build (stax.gpu, stax.cpu or the interpreter) -> cache
store -> boxed wrapper; plus metrics, phase times (phases.py) and the debug dump.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import time

import torch
from torch._functorch.aot_autograd import aot_module_simplified
from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition

from . import debug, donation, metrics, runtime, whole_graph
from .build import build_module
from .call_spec import extra_values, from_lowered
from .config import Config
from .conv_fusion import fuse_convolutions
from .cse import cse
from .decompositions import decomposition_table
from .eager_warnings import cause_of, warn_eager
from .graph_lowering import lower
from .linear_fusion import fuse_linears
from .phases import AotClock, PhaseClock
from .report import write_report
from .routing import GPU, route
from .runtime import CompiledGraph, eager_callable, no_dynamo
from .symbolic import to_symints
from .targets import TARGETS

log = logging.getLogger("stax.frontend")
phase_log = logging.getLogger("stax.frontend.compile")  # one line per graph: its compile phases (phases.py)
# the AotClock of the aot_module_simplified call running now (a ContextVar: scoped to that call and thread)
_AOT_CLOCK: contextvars.ContextVar[AotClock | None] = contextvars.ContextVar("stax_aot_clock", default=None)


@no_dynamo  # the backward is compiled inside loss.backward(), maybe in a compiled frame
def compile_graph(gm: torch.fx.GraphModule, example_inputs, *, kind: str, cfg: Config, input_strides=None,
                  mutated=None):
    """Compile one ATen graph; on failure run it eagerly (unless cfg.strict). `input_strides`:
    compile for these input layouts (per placeholder) instead of the examples' (a variant);
    `mutated`: the inputs AOTAutograd overwrites with the first outputs (donation.py; None: ask it)."""
    if mutated is None:
        mutated = donation.mutated_inputs(kind)
    clock = PhaseClock(kind)
    aot_clock = _AOT_CLOCK.get()  # set while aot_module_simplified runs: AOTAutograd's time before this graph
    aot_s = aot_clock.take() if aot_clock is not None else None
    if aot_s is not None:
        clock.add("aot", aot_s)
    try:
        return _compile_graph(gm, example_inputs, kind, cfg, input_strides, clock, mutated)
    finally:
        if aot_clock is not None:
            aot_clock.resume()


def _compile_graph(gm, example_inputs, kind: str, cfg: Config, input_strides, clock: PhaseClock, mutated: tuple):
    from stax.sched import schedule as make_schedule

    t0 = time.perf_counter()
    lowered = sched = built = None
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
        variant = functools.partial(compile_graph, gm, example_inputs, kind=kind, cfg=cfg, mutated=mutated)
        # (the donated inputs are part of the key: the same FX graph without AOTAutograd's copy back
        # must not write into its inputs)
        found = whole_graph.lookup(gm, example_inputs, kind, cfg, target, (input_strides, mutated), clock)
        if found.entry is not None:
            try:
                spec, extras, module = whole_graph.load(found, gm, device, cfg, clock)
            except Exception as e:  # noqa: BLE001 - a checked entry that does not load: compile it again
                log.warning("stax: whole-graph cache entry %s did not load (%s: %s); compiling the graph",
                            found.key[:12], type(e).__name__, e)
                metrics.record(graph_cache_corrupt=1)
                found.status, found.entry = "did not load: rebuilt", None
            else:
                clock.cache = "hit"
                compiled = _finish(spec, extras, module, device, variant, input_strides, clock,
                                   whole_graph.entry_counts(found.entry),
                                   eager_callable(gm) if spec.size_binding is not None else None,
                                   after_first=_choices_stored(found, module, target))
                metrics.record(graphs_compiled=1, graphs_gpu=int(target == GPU and found.entry.artifact is not None),
                               compile_time_s=time.perf_counter() - t0)
                return compiled
        cse(gm)
        with clock.phase("lower"):
            if kind == "inference" and TARGETS[target].packs_weights:  # (the CPU target: oneDNN)
                if cfg.conv_prepack and cfg.conv_channels_last:
                    fuse_convolutions(gm, mutated)
                if cfg.linear_prepack:
                    fuse_linears(gm, mutated)
            lowered = lower(gm, example_inputs, cfg, target, device, kind=kind, input_strides=input_strides)
        with clock.phase("schedule"):
            policy = TARGETS[target].policy(cfg, donation.donated_pairs(lowered, mutated))
            sched = make_schedule(lowered.graph, policy) if lowered.graph.nodes else None
            donation.return_inputs(lowered, sched, mutated)
        built = build_module(lowered, sched, cfg, target, device, clock)
        counts = whole_graph.counts_of(lowered, sched)
        clock.cache = whole_graph.store(found, lowered, built, counts, clock)
        clock.ident = clock.ident or lowered.graph.content_hash()[:12]
        compiled = _finish(from_lowered(lowered), extra_values(None, lowered, gm, device), built.module, device,
                           variant, input_strides, clock, counts,
                           eager_callable(gm) if lowered.graph.size_vars else None,
                           after_first=_choices_stored(found, built.module, target))
    except Exception as e:  # noqa: BLE001 - never crash where eager works
        module = built.module if built is not None else None
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
    metrics.record(graphs_compiled=1, graphs_gpu=int(target == GPU and bool(lowered.graph.nodes)),
                   compile_time_s=time.perf_counter() - t0)
    if cfg.debug:
        debug.dump(cfg, kind, gm, lowered, sched, built.module)
    if cfg.report:  # per-graph HTML report (report/), with the compile phases so far
        write_report(cfg, kind, gm, lowered, sched, built.module, times=clock.record(counts["kernels_generated"]))
    return compiled


def _choices_stored(found, module, target: str):
    """What a GPU graph's first call is followed by: its cache entry stored with the autotuning choices."""
    if target != GPU:
        return None
    return lambda: whole_graph.store_choices(found, module)


def _finish(spec, extras, module, device, variant, input_strides, clock: PhaseClock, counts: dict, eager=None,
            after_first=None):
    """The boxed callable of a compiled (or loaded) graph; its metrics; the output strides reported to
    AOTAutograd (forward graphs); the phase line once its first call has run. `eager`: the graph run
    eagerly (symbolic shapes: for a call whose sizes break an assumption of the compiled code). `after_first`:
    run once after the first call (a GPU graph's cache entry takes the autotuning choices made in it)."""
    metrics.record(**counts)
    kernels = counts["kernels_generated"]

    def first_call_done(seconds: float) -> None:
        clock.add("first_run", seconds)
        times = clock.record(kernels)
        metrics.record(graph_times=[times], phase_s=dict(times.phases), phase_runs={p: 1 for p, _ in times.phases})
        phase_log.info("stax: %s", times.line())
        if after_first is not None:
            after_first()

    compiled = CompiledGraph(spec, extras, module, device, respecialize=lambda strides: variant(input_strides=strides),
                             on_first_call=first_call_done, eager=eager)
    if input_strides is None:
        report_output_strides(spec)
    return compiled


def report_output_strides(spec) -> None:
    """Tell AOTAutograd the strides the compiled forward graph really returns: it compiles the
    backward graph for the saved tensors' real layouts (channels-last activations, expands
    stored dense), not for the traced ones. Outside a forward compile there is no list to fill."""
    tc = torch._guards.TracingContext.try_get()
    if tc is not None and tc.output_strides is not None:
        if spec.size_binding is None:
            tc.output_strides.extend(spec.output_strides)
            return
        shape_env = getattr(tc.fake_mode, "shape_env", None)  # symbolic strides: as SymInts of its symbols
        tc.output_strides.extend(None if st is None else to_symints(st, shape_env) for st in spec.output_strides)


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

    token = _AOT_CLOCK.set(AotClock())
    try:
        return aot_module_simplified(
            gm,
            example_inputs,
            fw_compiler=compiler("forward"),
            bw_compiler=compiler("backward"),
            inference_compiler=compiler("inference"),
            partition_fn=PARTITIONERS[cfg.partitioner],
            decompositions=decomposition_table(foreach=cfg.foreach_kernels and (cfg.gpu_foreach_kernels or not any(
                isinstance(x, torch.Tensor) and x.device.type != "cpu" for x in example_inputs))),
        )
    finally:
        _AOT_CLOCK.reset(token)  # a backward compiled later, in loss.backward(), has no AOTAutograd time


# AOTAutograd's partitioners: min-cut recomputes cheap values in the backward rather than saving
# them (fewer bytes written by the forward, a lower peak); "inductor" is the op policy it knows
PARTITIONERS = {
    "min_cut": functools.partial(min_cut_rematerialization_partition, compiler="inductor"),
    "default": default_partition,
}
