"""What did stax's autotuner see while it chose a kernel's launch config?

Compiles one suite workload with torch.compile(backend="stax") in empty caches and records
every timing the autotuner took: per candidate and round, the GPU time per launch (CUDA
events) and the wall time per launch of the whole timing (its warm-up launch, which may wait
for the kernel's compile, and the final sync included).

    PYTHONPATH=$(ls -d packages/*/src | paste -sd:):. python3 benchmarks/gpu/autotune_probe.py layernorm
    STAX_GPU_CONFIG=compile_workers=0 python3 benchmarks/gpu/autotune_probe.py layernorm
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import bench_gpu as B
from stax.gpu import autotune


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload")
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    (w,) = [w for w in B.suite() if w.name == a.workload]
    records = []
    real_timer = autotune.cuda_event_timer

    def recording_timer(fn, reps: int = 20, rounds: int = 3) -> float:
        t = time.perf_counter()
        ms = real_timer(fn, reps, rounds)
        records.append((ms, (time.perf_counter() - t) * 1e3 / (reps * rounds + 1)))
        return ms

    autotune.cuda_event_timer = recording_timer
    real_select = autotune.BenchmarkAutotuner.select

    def select(self, key, candidates, run):
        order = []

        def traced(c):
            order.append(c.key())
            return run(c)

        start = len(records)
        best = real_select(self, key, candidates, traced)
        print(f"kernel {key[:12]}: chose {best.key()}")
        for k, (gpu, wall) in zip(_per_timing(order), records[start:]):
            print(f"  {k:60s} gpu {gpu * 1e3:8.2f} us/launch  wall {wall * 1e3:9.2f} us/launch")
        return best

    autotune.BenchmarkAutotuner.select = select
    inputs = w.make_inputs()
    t = time.perf_counter()
    fn = B.stax_frontend(w.fn, inputs)
    print(f"{w.name}: first call {time.perf_counter() - t:.2f} s "
          f"({os.environ.get('STAX_GPU_CONFIG', 'default config')}),"
          f" {'routed to stax.gpu' if fn is not None else 'NOT routed to stax.gpu'}")
    return 0


def _per_timing(order: list[str]) -> list[str]:
    """One candidate key per timer call: consecutive runs of the same key are one timing."""
    out = []
    for k in order:
        if not out or out[-1][1] != k:
            out.append([1, k])
        else:
            out[-1][0] += 1
    return [k for _, k in out]


if __name__ == "__main__":
    sys.exit(main())
