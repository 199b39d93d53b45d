"""Autotuning: time candidate launch configs once, remember the winner on disk.

Two interchangeable choosers with one method, `select(key, candidates, run)`:
`FirstChoice` takes the heuristic's first candidate (the interpreter, or autotune
off); `BenchmarkAutotuner` times each candidate with `timer(run_candidate)` and
caches the winner in a JSON file keyed by kernel source + shapes + device + Triton
version, so a second process pays nothing. The timer is injectable, which is how
the CPU test suite exercises the benchmarking path without a GPU.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable

log = logging.getLogger("stax.gpu")


def autotune_key(sources: list[str], numels: tuple, device: str, triton_version: str) -> str:
    h = hashlib.sha256()
    for s in sources:
        h.update(s.encode())
        h.update(b"\0")
    h.update(repr((numels, device, triton_version)).encode())
    return h.hexdigest()


class AutotuneCache:
    """One JSON file per key under `directory`; writes are atomic (rename)."""

    def __init__(self, directory: str):
        self.directory = directory

    def _path(self, key: str) -> str:
        return os.path.join(self.directory, key[:2], f"{key}.json")

    def get(self, key: str) -> dict | None:
        try:
            with open(self._path(key)) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def put(self, key: str, value: dict) -> None:
        path = self._path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(value, f, indent=1, sort_keys=True)
        os.replace(tmp, path)


class FirstChoice:
    """No timing: the heuristic's first candidate."""

    def select(self, key: str, candidates: list, run: Callable) -> object:
        return candidates[0]


class BenchmarkAutotuner:
    """Times every candidate at first use; the fastest is cached on disk under `key`.

    `rounds` > 1 interleaves the candidates (each round times all of them, starting one further
    along) and takes each one's median: a clock or neighbour drift during tuning then lands on
    every candidate alike (timed one after another, noise of a few percent decides).
    `margin`: the heuristic's first candidate stays unless another is faster by more than this
    fraction; below it five short rounds cannot tell.
    """

    def __init__(self, cache: AutotuneCache, timer: Callable[[Callable[[], None]], float], rounds: int = 1,
                 margin: float = 0.0):
        self.cache = cache
        self.timer = timer
        self.rounds = max(1, rounds)
        self.margin = margin

    def cached_choice(self, key: str, candidates: list):
        """The candidate a previous run chose for `key` (on disk), or None."""
        hit = self.cache.get(key)
        if hit is not None:
            for c in candidates:
                if c.key() == hit.get("choice"):
                    return c
        return None

    def select(self, key: str, candidates: list, run: Callable) -> object:
        if len(candidates) == 1:
            return candidates[0]
        hit = self.cached_choice(key, candidates)
        if hit is not None:
            log.info("autotune cache hit %s: %s", key[:12], hit.key())
            return hit
        samples: dict[str, list[float]] = {}
        alive = list(candidates)
        for r in range(self.rounds):
            if not alive:
                break
            for c in alive[r % len(alive):] + alive[: r % len(alive)]:
                try:
                    samples.setdefault(c.key(), []).append(float(self.timer(lambda c=c: run(c))))
                except Exception as e:  # noqa: BLE001 - a config that fails to compile or launch is skipped
                    log.info("autotune: %s failed: %s", c.key(), str(e).splitlines()[0] if str(e) else type(e).__name__)
                    samples.pop(c.key(), None)
                    alive.remove(c)
        timings = {k: sorted(v)[len(v) // 2] for k, v in samples.items()}
        if not timings:
            raise RuntimeError(f"stax-gpu: every launch config failed for kernel {key[:12]}: "
                               f"{[c.key() for c in candidates]}")
        best = min(candidates, key=lambda c: timings.get(c.key(), float("inf")))
        first = timings.get(candidates[0].key())
        if first is not None and timings[best.key()] * (1 + self.margin) >= first:
            best = candidates[0]
        log.info("autotune %s: %s (%.4f ms) of %d configs", key[:12], best.key(), timings[best.key()], len(candidates))
        self.cache.put(key, {"choice": best.key(), "timings_ms": timings})
        return best


def cuda_event_timer(fn: Callable[[], None], reps: int = 20, rounds: int = 3) -> float:
    """Median over `rounds` of the mean time (ms) of `reps` back-to-back launches."""
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / reps)
    return sorted(times)[len(times) // 2]


def default_autotuner(config) -> object:
    if config.autotuner is not None:
        return config.autotuner
    if not config.autotune or config.interpret:
        return FirstChoice()
    from .load import writable_dir  # (an unwritable cache directory: a private one, not a failed first call)

    one_round = lambda fn: cuda_event_timer(fn, rounds=1)  # noqa: E731 - the rounds interleave candidates
    return BenchmarkAutotuner(AutotuneCache(os.path.join(writable_dir(config.cache_dir), "autotune")), one_round,
                              rounds=5, margin=0.005)
