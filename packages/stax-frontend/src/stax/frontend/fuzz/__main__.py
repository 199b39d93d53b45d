"""CLI: python -m stax.frontend.fuzz --count N --seed S [--device cpu|cuda] [--workers K]
[--out DIR] [--time-limit SEC] [--no-backward] ... (see --help)."""

from __future__ import annotations

import argparse
import json
import sys

from .generate import GenConfig
from .runner import Fuzzer, Options


def parse(argv=None) -> tuple[Options, str | None]:
    ap = argparse.ArgumentParser(prog="python -m stax.frontend.fuzz", description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=100, help="graphs to run (default 100)")
    ap.add_argument("--seed", type=int, default=0, help="run seed: (seed, graph index) fixes each graph")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    ap.add_argument("--out", default="fuzz_failures", help="directory for reproducers and logs")
    ap.add_argument("--time-limit", type=float, default=None, help="start no new graph after SEC seconds")
    ap.add_argument("--no-backward", action="store_true", help="forward graphs only")
    ap.add_argument("--graph-timeout", type=float, default=180.0, help="seconds before a graph counts as a hang")
    ap.add_argument("--shrink-budget", type=float, default=240.0, help="seconds spent shrinking each new failure")
    ap.add_argument("--no-shrink", action="store_true", help="write failures unshrunk")
    ap.add_argument("--max-ops", type=int, default=30)
    ap.add_argument("--max-numel", type=int, default=1 << 17, help="elements per input at most")
    ap.add_argument("--replay", metavar="JSONL", help="re-run (and shrink) the programs of a failures.jsonl instead")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args(argv)
    gen = GenConfig(max_ops=a.max_ops, max_numel=a.max_numel, backward=not a.no_backward, device=a.device)
    opts = Options(seed=a.seed, count=a.count, workers=a.workers, out=a.out, time_limit=a.time_limit,
                   graph_timeout=a.graph_timeout, shrink_budget=a.shrink_budget, shrink=not a.no_shrink, gen=gen,
                   verbose=a.verbose)
    return opts, a.replay


def main(argv=None) -> int:
    opts, replay = parse(argv)
    programs = None
    if replay:
        with open(replay) as f:
            programs = [json.loads(line)["program"] for line in f if line.strip()]
        programs = [p for p in programs if p]
    stats = Fuzzer(opts, print_fn=lambda s: print(s, flush=True)).run(programs)
    return 1 if stats.failures else 0


if __name__ == "__main__":
    sys.exit(main())
