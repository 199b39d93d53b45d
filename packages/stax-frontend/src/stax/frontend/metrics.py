"""Counters the outside world reads after a compile (documented in the README).

These are process-wide by nature (they describe what the backend did), so they
live in one `Metrics` object with `snapshot()` and `reset()`:

    from stax.frontend import metrics
    metrics.reset(); torch.compile(f, backend="stax")(x)
    metrics.snapshot().fallback_ops  # Counter of ATen op names that fell back
"""

from __future__ import annotations

import copy
import threading
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Metrics:
    graphs_compiled: int = 0  # ATen graphs lowered and compiled by Stax
    graphs_failed: int = 0  # graphs that failed to compile and run eagerly instead
    graphs_gpu: int = 0  # of graphs_compiled, those compiled by stax.gpu (Triton)
    graphs_no_backend: int = 0  # graphs run eagerly: their device's backend (stax-gpu / triton) is missing
    kernels_generated: int = 0  # Stax-generated (non-extern) kernels in all schedules
    nodes_lowered: int = 0  # ComputedBuffers in all IR graphs
    extern_calls: int = 0  # ExternKernel nodes calling a library op on purpose (mm, conv, ...)
    extern_ops: Counter = field(default_factory=Counter)  # ... by op name
    fallback_calls: int = 0  # ExternKernel nodes for ops Stax does not lower
    fallback_ops: Counter = field(default_factory=Counter)  # ... by ATen op name
    materialized: Counter = field(default_factory=Counter)  # §6.6 materializations by rule
    compile_time_s: float = 0.0  # wall time inside the backend (lowering+sched+codegen)
    # compile phases (phases.py), recorded after each graph's first call
    phase_s: Counter = field(default_factory=Counter)  # seconds per phase, over all graphs
    phase_runs: Counter = field(default_factory=Counter)  # graphs that ran each phase (a cache hit: no 'lower')
    graph_times: list = field(default_factory=list)  # phases.GraphTimes per graph, in order
    # the whole-graph cache (graph_cache.py, CPU graphs)
    graph_cache_hits: int = 0  # graphs loaded from it: not lowered, scheduled or generated
    graph_cache_misses: int = 0  # looked up and absent (then compiled and stored)
    graph_cache_stores: int = 0  # entries written
    graph_cache_corrupt: int = 0  # entries found truncated / corrupt (or not loading): never loaded, rebuilt
    graph_cache_skipped: Counter = field(default_factory=Counter)  # graphs not cached, by reason
    # symbolic shapes: calls of a compiled graph whose sizes broke an assumption Stax added to the
    # ShapeEnv's guards (a size >= 2): run eagerly, never with the compiled code
    calls_outside_assumptions: int = 0


_LOCK = threading.Lock()
_METRICS = Metrics()


def snapshot() -> Metrics:
    """A copy of the counters now."""
    with _LOCK:
        return copy.deepcopy(_METRICS)


def reset() -> None:
    """Zero every counter."""
    global _METRICS
    with _LOCK:
        _METRICS = Metrics()


def record(**deltas) -> None:
    """Add to counters: ints/floats are summed, Counters are merged."""
    with _LOCK:
        for k, v in deltas.items():
            cur = getattr(_METRICS, k)
            if isinstance(cur, Counter):
                cur.update(v)
            else:
                setattr(_METRICS, k, cur + v)


def __getattr__(name: str):
    """`metrics.kernels_generated` etc. read the live counter."""
    if name in Metrics.__dataclass_fields__:
        return getattr(_METRICS, name)
    raise AttributeError(name)
