"""Scheduling time vs graph size: 100, 1,000 and 10,000 nodes (goal: near-linear, 10k in < 2 s).

Graphs come from stax.sched.random_graphs with local reads (each node reads among the
last few buffers, as in real models) over 64x128 tensors. Reported: median wall and
CPU time of `stax.sched.schedule` over --repeat runs (caches warm after the first),
the cold first run, microseconds per node, kernels and fusions, and the growth factor
per 10x nodes (10 = linear). Inductor's fusion is quadratic (pytorch#154652).
Usage: python benchmarks/sched/scaling.py [--sizes 100 1000 10000] [--repeat 3] [--gpu]
"""

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for pkg in ("stax-ir", "stax-sched"):
    sys.path.insert(0, str(ROOT / "packages" / pkg / "src"))

from stax.sched import CpuPolicy, GpuPolicy, schedule  # noqa: E402
from stax.sched.random_graphs import random_graph  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--gpu", action="store_true", help="GpuPolicy instead of CpuPolicy")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    policy = GpuPolicy() if args.gpu else CpuPolicy()
    print(f"policy {policy.name}, graphs: random_graph(seed={args.seed}, R=64, C=128, recent=6)")
    print(f"{'nodes':>7} {'cold s':>8} {'wall s':>8} {'cpu s':>8} {'us/node':>8} {'kernels':>8} {'fusions':>8} "
          f"{'growth':>7}")
    prev = None
    for n in args.sizes:
        g = random_graph(random.Random(args.seed), n, R=64, C=128, recent=6)
        t = time.perf_counter()
        s = schedule(g, policy)
        cold = time.perf_counter() - t
        walls, cpus = [], []
        for _ in range(args.repeat):
            t, c = time.perf_counter(), time.process_time()
            s = schedule(g, policy)
            walls.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        fusions = sum(r.fused for r in s.fusion_log)
        growth = f"{wall / prev[1] / (n / prev[0]) * 10:.1f}" if prev else "-"
        print(f"{n:>7} {cold:>8.3f} {wall:>8.3f} {cpu:>8.3f} {1e6 * wall / n:>8.1f} {len(s.kernels):>8} "
              f"{fusions:>8} {growth:>7}")
        prev = (n, wall)


if __name__ == "__main__":
    main()
