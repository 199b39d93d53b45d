"""Interleaved timing: every backend runs once per round, in a rotating order, in one process.

Machine noise (other jobs, frequency changes) then hits all backends alike; each
sample is `inner` back-to-back calls (chosen so one sample lasts >= `min_sample_s`)
divided by `inner`; results are the median and the interquartile range of samples.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Stats:
    median: float
    q1: float
    q3: float
    n: int

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @staticmethod
    def of(samples: list[float]) -> Stats:
        if not samples:
            raise ValueError("no samples")
        xs = sorted(samples)
        if len(xs) == 1:
            return Stats(xs[0], xs[0], xs[0], 1)
        q1, med, q3 = statistics.quantiles(xs, n=4, method="inclusive")
        return Stats(med, q1, q3, len(xs))


def sync_for(device: str) -> Callable[[], None]:
    if device.startswith("cuda"):
        import torch

        return torch.cuda.synchronize
    return lambda: None


def time_once(fn: Callable[[], object], inner: int = 1, sync: Callable[[], None] = lambda: None) -> float:
    """Seconds per call of `fn`, averaged over `inner` back-to-back calls."""
    sync()
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    sync()
    return (time.perf_counter() - t0) / inner


def calibrate(fn: Callable[[], object], min_sample_s: float, sync=lambda: None, cap: int = 1000) -> int:
    """Calls per sample so that one sample lasts about `min_sample_s` (at least 1)."""
    t = max(time_once(fn, 1, sync), 1e-7)
    return max(1, min(cap, int(min_sample_s / t + 0.5)))


def interleaved(fns: dict[str, Callable[[], object]], rounds: int, inner: dict[str, int] | None = None,
                sync=lambda: None, warmup: int = 1,
                on_round: Callable[[int], None] | None = None) -> dict[str, list[float]]:
    """Per-call seconds of each function, `rounds` samples each, in rotating order."""
    names = list(fns)
    inner = inner or {n: 1 for n in names}
    for _ in range(warmup):
        for n in names:
            time_once(fns[n], 1, sync)
    out: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            out[n].append(time_once(fns[n], inner[n], sync))
        if on_round:
            on_round(r)
    return out
