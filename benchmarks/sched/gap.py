"""Greedy fusion (Algorithm 7.1) vs the exact minimum-traffic fusion scheme (Def 7.3).

A fixed, seeded set of random graphs (stax.sched.random_graphs) of 8-12 nodes; for the
CPU and GPU policies, the Def 7.3 traffic of the greedy's kernels against the optimum
found by stax.sched.exact. Usage: python benchmarks/sched/gap.py [--graphs N] [--max-nodes M]
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
from stax.sched.exact import optimal_fusion, traffic  # noqa: E402
from stax.sched.random_graphs import random_graph  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", type=int, default=60)
    ap.add_argument("--min-nodes", type=int, default=8)
    ap.add_argument("--max-nodes", type=int, default=12)
    ap.add_argument("--seed", type=int, default=2024)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    graphs = [random_graph(random.Random(rng.randrange(2**32)), rng.randint(args.min_nodes, args.max_nodes),
                           extern_prob=0.04) for _ in range(args.graphs)]
    print(f"{len(graphs)} random graphs, {args.min_nodes}-{args.max_nodes} nodes, seed {args.seed}")
    print(f"{'policy':6} {'optimal':>8} {'mean gap':>9} {'max gap':>8} {'greedy B':>10} {'optimal B':>10} "
          f"{'exact s':>8} {'greedy ms':>9}")
    for policy in (CpuPolicy(), GpuPolicy()):
        gaps, greedy_total, best_total, t_exact, t_greedy, worst = [], 0, 0, 0.0, 0.0, None
        for g in graphs:
            t = time.perf_counter()
            s = schedule(g, policy)
            t_greedy += time.perf_counter() - t
            greedy = traffic(g, [set(k.nodes) for k in s.kernels])
            t = time.perf_counter()
            best, _ = optimal_fusion(g, policy, upper_bound=greedy)
            t_exact += time.perf_counter() - t
            assert best <= greedy
            gap = greedy / best - 1 if best else 0.0
            gaps.append(gap)
            greedy_total += greedy
            best_total += best
            if worst is None or gap > worst[0]:
                worst = (gap, len(s.kernels), greedy, best)
        optimal = sum(g == 0 for g in gaps)
        print(f"{policy.name:6} {optimal:>4}/{len(gaps):<3} {100 * statistics.mean(gaps):>8.2f}% "
              f"{100 * max(gaps):>7.1f}% {greedy_total:>10} {best_total:>10} {t_exact:>8.1f} "
              f"{1000 * t_greedy / len(graphs):>9.2f}")
        print(f"       total traffic gap {100 * (greedy_total / best_total - 1):.2f}%; worst graph: "
              f"greedy {worst[2]} B in {worst[1]} kernels vs optimal {worst[3]} B")


if __name__ == "__main__":
    main()
