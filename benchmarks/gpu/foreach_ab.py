"""A/B of Config.gpu_foreach_kernels on a real model's cuda training step (issue 20).

Off: the optimizer's `_foreach_*` ops run as torch's multi-tensor kernels (an ATen fallback: the
module is not CUDA-graphed, and AOTAutograd copies each new parameter back). On: per-tensor Stax
kernels written into the donated parameters. Both arms are compiled in one process from the same
seeded model and timed in interleaved rounds (medians, quartiles); after equal steps their
parameters are compared, and every stax CUDA-graph wrapper's counters are printed.

    PYTHONPATH=$(ls -d packages/*/src | paste -sd:):. python3 -m benchmarks.gpu.foreach_ab --models resnet18,vit
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time

import torch

from benchmarks.harness.backends import wrap
from benchmarks.workloads import real_models as R


def compiled_arm(name: str, flag: bool, device: str, sync):
    """(compiled step, inputs, model) with gpu_foreach_kernels=flag, after two calls (compiles)."""
    from stax.frontend import config, metrics

    sample = R.build(name, "cuda" if device == "cuda" else "test", device)
    fn, inputs, model = R.program(sample, True, device=device)
    metrics.reset()
    t = time.perf_counter()
    with config.patch(gpu_foreach_kernels=flag):
        f = wrap("stax", fn)
        f(*inputs)
        f(*inputs)
    sync()
    m = metrics.snapshot()
    print(f"{name} gpu_foreach_kernels={flag}: two calls {time.perf_counter() - t:.1f} s, graphs {m.graphs_compiled}, "
          f"fallback ops {dict(m.fallback_ops)}", flush=True)
    return f, inputs, model


def ab(name: str, rounds: int, calls: int, device: str, sync) -> None:
    arms = {flag: compiled_arm(name, flag, device, sync) for flag in (False, True)}
    for f, inputs, _ in arms.values():
        for _ in range(3):
            f(*inputs)
    sync()
    samples: dict = {k: [] for k in arms}
    for r in range(rounds):
        for k, (f, inputs, _) in sorted(arms.items(), reverse=bool(r % 2)):
            sync()
            t = time.perf_counter()
            for _ in range(calls):
                f(*inputs)
            sync()
            samples[k].append((time.perf_counter() - t) / calls * 1e3)
    for k, v in samples.items():
        q = statistics.quantiles(v, n=4)
        print(f"{name} gpu_foreach_kernels={k}: step {statistics.median(v):.2f} ms (q1 {q[0]:.2f}, q3 {q[2]:.2f})",
              flush=True)
    diff = max((a - b).abs().max().item() for a, b in zip(arms[False][2].parameters(), arms[True][2].parameters()))
    print(f"{name}: largest parameter difference between the arms after equal steps: {diff:.3g}", flush=True)
    from stax.gpu.graphs import GraphedCall

    for g in gc.get_objects():
        if type(g) is GraphedCall:
            print(f"   {g.name}: {g.stats} keys={len(g.entries)}" + (f" disabled: {g.disabled}" if g.disabled else ""))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=5, help="steps per timed sample")
    a = ap.parse_args(argv)
    R.ensure_timm()
    torch._dynamo.config.cache_size_limit = 32  # two compiled arms of one step function
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for name in [m.name for m in R.MODELS if any(m.name.startswith(p) for p in a.models.split(","))]:
        ab(name, a.rounds, a.calls, device, sync)
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
