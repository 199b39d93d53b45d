"""Backends under test and how a compile is measured.

eager: the function itself. inductor: torch.compile(backend="inductor").
stax: torch.compile(backend="stax") (registered by stax.frontend).
Compile time is the wall time of the first call of a fresh torch.compile wrapper
(dynamo tracing + AOTAutograd + the backend + running once), after the dynamo
cache was cleared: "cold" with empty on-disk compile caches, "warm" with the caches
the cold compile filled (see runner.py). Wrappers of different backends for one
function coexist: dynamo guards each cache entry on the backend that made it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
import torch._dynamo

BACKENDS = ("stax", "inductor", "eager")


def wrap(backend: str, fn: Callable) -> Callable:
    if backend == "eager":
        return fn
    if backend == "stax":
        import stax.frontend

        stax.frontend.register()
        return torch.compile(fn, backend="stax", dynamic=False)
    if backend == "inductor":
        return torch.compile(fn, backend="inductor", dynamic=False)
    raise ValueError(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")


def first_call(backend: str, fn: Callable, inputs: tuple, sync=lambda: None) -> tuple[Callable, object, float]:
    """(compiled wrapper, its first output, seconds of that first call including compilation)."""
    compiled = wrap(backend, fn)
    sync()
    t0 = time.perf_counter()
    out = compiled(*inputs)
    sync()
    return compiled, out, time.perf_counter() - t0


def stax_counters() -> dict:
    """What the stax backend did since the last reset (graphs, kernels, fallbacks)."""
    from stax.frontend import metrics

    m = metrics.snapshot()
    return {
        "graphs_compiled": m.graphs_compiled, "graphs_failed": m.graphs_failed,
        "kernels": m.kernels_generated, "extern_calls": m.extern_calls, "extern_ops": dict(m.extern_ops),
        "fallback_calls": m.fallback_calls, "fallback_ops": dict(m.fallback_ops),
    }


def reset_stax_counters() -> None:
    from stax.frontend import metrics

    metrics.reset()
