"""Where a graph's compile time goes: wall time per phase, one log line per graph.

Phases the backend sees (dynamo runs before it): `aot` (AOTAutograd tracing and partitioning
before this graph reached Stax), `cache` (whole-graph cache: key, lookup, load or store), `lower`,
`schedule`, `codegen` (C++ source, or stax.gpu's generate_artifact: Triton source), `cxx` (g++ builds,
stax.cpu's .so cache hits included), `load` (dlopen and wrapper exec, or stax.gpu's load_artifact),
`first_run` (the first call: on the GPU target Triton's compiles and the autotuner's races happen
there). The line goes to `stax.frontend.compile` (`STAX_LOG=compile`) after the graph's first call;
the record goes to `metrics.graph_times`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field

log = logging.getLogger("stax.frontend.compile")

PHASES = ("aot", "cache", "lower", "schedule", "codegen", "cxx", "load", "first_run")


@dataclass(frozen=True)
class GraphTimes:
    """One graph's compile: seconds per phase (PHASES order, phases that ran), and what the
    whole-graph cache did ('hit', 'miss', 'off', 'skipped: <reason>', ...)."""

    kind: str
    ident: str  # the graph's key (or its IR hash) prefix: names it in the log and the report
    phases: tuple  # ((phase, seconds), ...)
    cache: str
    kernels: int = 0

    @property
    def total_s(self) -> float:
        return sum(s for _, s in self.phases)

    def line(self) -> str:
        parts = " + ".join(f"{name.replace('_', ' ')} {s:.3f}" for name, s in self.phases)
        return (f"{self.kind} graph {self.ident} ({self.kernels} kernels): {self.total_s:.3f} s = {parts}; "
                f"graph cache {self.cache}")


@dataclass
class PhaseClock:
    """Accumulates one graph's phase times (a phase may run more than once: variants, rebuilds)."""

    kind: str
    seconds: dict = field(default_factory=dict)
    cache: str = "off"
    ident: str = ""

    @contextlib.contextmanager
    def phase(self, name: str):
        if name not in PHASES:
            raise ValueError(f"unknown compile phase {name!r}; phases are {PHASES}")
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def record(self, kernels: int) -> GraphTimes:
        return GraphTimes(self.kind, self.ident, tuple((p, self.seconds[p]) for p in PHASES if p in self.seconds),
                          self.cache, kernels)


@dataclass
class AotClock:
    """AOTAutograd's time before each graph it hands Stax: from aot_compile's start (or the end of
    the previous graph's compile) to this graph's compile, while aot_module_simplified runs (aot.py
    holds it in a ContextVar for that call). A backward compiled later, inside loss.backward(), gets
    no aot time (AOTAutograd's part is done)."""

    last: float = field(default_factory=time.perf_counter)

    def take(self) -> float:
        return time.perf_counter() - self.last

    def resume(self) -> None:
        self.last = time.perf_counter()
