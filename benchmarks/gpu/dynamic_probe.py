"""Where a dynamic-shape compile loses to the static one on cuda (issue 23, point 6), per arm.

Compiles the model's `dynamic=True` arm in benchmarks/gpu/dynamic_seq.py's order (batch 1, then 8
and 32, over the lengths: the same three graphs and size hints), then for each measured size and
arm (stax dynamic, stax static) prints the wall and host time of a synchronized call, the GPU
kernels of 5 profiled calls by name, and every stax CUDA-graph wrapper's counters (replays,
captures, plain calls, why graphs are off).

    PYTHONPATH=$(ls -d packages/*/src | paste -sd:):. python3 -m benchmarks.gpu.dynamic_probe --model bert
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time

import torch
import torch._dynamo

from benchmarks.cpu import dynamic_seq as seq
from benchmarks.gpu.kernel_probe import kernels_per_call
from benchmarks.workloads import real_models as R

WARM = [(1, 17), (1, 128), (1, 512), (8, 17), (8, 128), (8, 512), (32, 17), (32, 128), (32, 512)]


def wrappers() -> list[str]:
    from stax.gpu.graphs import GraphedCall

    return [f"{g.name}: {g.stats} keys={len(g.entries)}" + (f" disabled: {g.disabled}" if g.disabled else "")
            for g in gc.get_objects() if type(g) is GraphedCall]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="bert")
    ap.add_argument("--sizes", default="32x512,8x128,1x17", help="batch x length to measure")
    ap.add_argument("--top", type=int, default=14)
    a = ap.parse_args(argv)
    torch._dynamo.config.recompile_limit = 256
    torch._dynamo.config.cache_size_limit = 256
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sample = R.build(a.model, "quick", device)
    fn, _, model = R.program(sample, train=False, device=device)
    vocab = model.config.vocab_size
    wrapped, _ = seq.arms(fn)
    del wrapped["inductor dynamic"]

    def ids(b, t):
        return torch.randint(0, vocab, (b, t), generator=torch.Generator().manual_seed(t)).to(device)

    for b, t in WARM:
        wrapped["stax dynamic"](ids(b, t))
    sync()
    print("graph wrappers after the dynamic warm-up:", *wrappers(), sep="\n  ", flush=True)
    for size in a.sizes.split(","):
        b, t = (int(v) for v in size.split("x"))
        x = ids(b, t)
        print(f"=== {a.model} {b} x {t}", flush=True)
        for arm, f in wrapped.items():
            for _ in range(3):
                f(x)
            host, wall = [], []
            for _ in range(20):
                sync()
                t0 = time.perf_counter()
                f(x)
                t1 = time.perf_counter()
                sync()
                host.append((t1 - t0) * 1e3)
                wall.append((time.perf_counter() - t0) * 1e3)
            ks = kernels_per_call(f, (x,), sync, 5)
            busy = sum(us for us, _ in ks.values()) / 1e3
            print(f"--- {arm}: wall {statistics.median(wall):.3f} ms, host {statistics.median(host):.3f} ms, "
                  f"kernels {busy:.3f} ms, {sum(n for _, n in ks.values()):.0f} launches", flush=True)
            for k, (us, n) in sorted(ks.items(), key=lambda kv: -kv[1][0])[:a.top]:
                print(f"   {us:9.1f} us {n:5g}x  {k[:120]}", flush=True)
        print("graph wrappers:", *wrappers(), sep="\n  ", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
