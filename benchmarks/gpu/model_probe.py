"""Where a models-suite step's time goes on the GPU machine: stax vs Inductor vs eager.

For one models workload: per-step time interleaved (each step synchronized, and bursts of
back-to-back steps), then each backend's host profile (cProfile by own time) and kernels by
device time (torch.profiler), and what stax's CUDA graph wrappers did (replays, captures,
plain calls, why a module was not graphed). A launch-bound step is decided on the host.

    export PYTHONPATH=$(ls -d packages/*/src | paste -sd:):.
    python3 benchmarks/gpu/model_probe.py "GPT training step" --out DIR
    python3 benchmarks/gpu/model_probe.py "GPT training step" --dry-run   # CPU plumbing check, small shapes
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import statistics
import sys
import time

import bench_gpu as B
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from benchmarks.harness.backends import wrap  # noqa: E402
from benchmarks.workloads.models import WORKLOADS  # noqa: E402


def step_ms(fn, steps: int, synced: bool) -> float:
    """Median wall ms per step: each step synchronized (host + GPU, as a training loop that
    reads its loss) or the mean of a burst of `steps` back-to-back steps."""
    if synced:
        ts = []
        for _ in range(steps):
            B.sync()
            t = time.perf_counter()
            fn()
            B.sync()
            ts.append((time.perf_counter() - t) * 1e3)
        return statistics.median(ts)
    B.sync()
    t = time.perf_counter()
    for _ in range(steps):
        fn()
    B.sync()
    return (time.perf_counter() - t) * 1e3 / steps


def graph_wrappers() -> list[str]:
    """One line per live stax CUDA graph wrapper: its counters and why graphs are off, if so."""
    try:
        from stax.gpu.graphs import GraphedCall
    except ImportError:
        return []
    return [f"{g.name}: {g.stats} keys={len(g.entries)}" + (f" disabled: {g.disabled}" if g.disabled else "")
            for g in gc.get_objects() if type(g) is GraphedCall]  # (type: weak proxies fail isinstance)


class _GraphLog(logging.Handler):
    """stax.gpu's decisions about CUDA graphs (why a module was not graphed, captures)."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record) -> None:
        msg = record.getMessage()
        if "graph" in msg.lower():
            self.lines.append(msg[:300])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload")
    ap.add_argument("--out", default=os.environ.get("OUT", ""))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--dry-run", action="store_true", help="CPU, small shapes")
    a = ap.parse_args()
    (w,) = [w for w in WORKLOADS if w.name == a.workload]
    case = w.make("cpu" if B.DRY else "cuda", B.DRY)
    graph_log = _GraphLog()
    gpu_log = logging.getLogger("stax.gpu")
    gpu_log.addHandler(graph_log)
    gpu_log.setLevel(logging.INFO)
    impls, lines = {}, [f"# {a.workload}: {'cpu (dry run)' if B.DRY else torch.cuda.get_device_name()}, "
                        f"torch {torch.__version__}"]
    for backend in ("stax", "inductor", "eager"):
        f = wrap(backend, B.fresh_copy(case.fn, backend))
        t = time.perf_counter()
        f(*case.inputs)
        B.sync()
        lines.append(f"{backend}: first call {time.perf_counter() - t:.2f} s")
        for _ in range(3):
            f(*case.inputs)
        impls[backend] = lambda f=f: f(*case.inputs)
    for synced in (True, False):
        samples = {k: [] for k in impls}
        order = list(impls)
        for r in range(a.rounds):
            for k in order[r % len(order):] + order[: r % len(order)]:
                samples[k].append(step_ms(impls[k], a.steps, synced))
        med = {k: statistics.median(v) for k, v in samples.items()}
        lines.append(f"{'synchronized steps' if synced else 'back-to-back steps'} (median ms of {a.rounds} rounds): "
                     + ", ".join(f"{k} {v:.3f}" for k, v in med.items())
                     + f"; stax/inductor {med['inductor'] / med['stax']:.3f}")
    lines += ["stax CUDA graph wrappers:"] + [f"  {s}" for s in graph_wrappers()]
    lines += ["stax.gpu on CUDA graphs:"] + [f"  {m}" for m in dict.fromkeys(graph_log.lines)]
    B.report(a.out or None, "model_probe", "\n".join(lines))
    if a.out:
        B.profile_host(a.workload.replace(" ", "_"), impls, a.out, calls=50)
    return 0


if __name__ == "__main__":
    sys.exit(main())
