"""The GPU kernels of a real model's call under stax and under Inductor, side by side (issue 20).

The suite's breakdown splits a call into generated and library time; this names the kernels. Per
backend: the call's median time (interleaved), then its kernels by device time per call (name, launches
per call, us per call), from torch.profiler over `--calls` back-to-back calls. Two backends with the same
library calls but different cuDNN / cuBLAS kernels (an NCHW variant, a layout transpose such as
nchwToNhwc, a TF32 or not) differ here, and so do their generated kernels.

    export PYTHONPATH=$(ls -d packages/*/src | paste -sd:):.
    python3 -m benchmarks.gpu.real_kernels --models resnet18,convnext_atto [--train] [--dtype bfloat16]
    python3 -m benchmarks.gpu.real_kernels --models resnet18 --dry-run   # CPU, `test` preset: ops, not kernels
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time

import torch

from benchmarks.harness.backends import wrap
from benchmarks.workloads import real_models as R


def kernel_table(fn, inputs, calls: int, cuda: bool, top: int) -> list[str]:
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    with profile(activities=acts) as prof:
        for _ in range(calls):
            fn(*inputs)
        if cuda:
            torch.cuda.synchronize()
    per = collections.defaultdict(lambda: [0, 0.0])
    for e in prof.events():
        gpu = e.device_type == torch.autograd.DeviceType.CUDA
        if gpu != cuda or (not cuda and e.cpu_parent is not None):
            continue  # (CPU dry run: top-level ops only)
        per[e.name][0] += 1
        per[e.name][1] += e.device_time if cuda else e.cpu_time
    total = sum(t for _, t in per.values()) / calls
    rows = sorted(per.items(), key=lambda kv: -kv[1][1])
    out = [f"  {'kernel' if cuda else 'op'} time per call {total:.0f} us, {len(per)} distinct"]
    for name, (n, t) in rows[:top]:
        out.append(f"  {t / calls:9.1f} us  {n / calls:5.1f}x  {name[:110]}")
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18")
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    ap.add_argument("--backends", default="stax,inductor")
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--top", type=int, default=18)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    cuda = not args.dry_run and torch.cuda.is_available()
    device, preset = ("cuda", "cuda") if cuda else ("cpu", "test")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    dtype = getattr(torch, args.dtype)
    for name in args.models.split(","):
        full = next(m.name for m in R.MODELS if m.name.startswith(name))  # (a prefix: vit, mobilenet)
        sample = R.build(full, preset, device, dtype)
        fn, inputs, _ = R.program(sample, train=args.train, device=device)
        compiled = {}
        for b in args.backends.split(","):
            compiled[b] = wrap(b, fn)
            for _ in range(3):
                compiled[b](*inputs)
            sync()
        times = collections.defaultdict(list)
        for r in range(args.rounds):
            order = list(compiled.items())
            for b, f in order[r % len(order):] + order[:r % len(order)]:
                sync()
                t0 = time.perf_counter()
                f(*inputs)
                sync()
                times[b].append(1e3 * (time.perf_counter() - t0))
        print(f"== {sample.name} ({sample.shape}), {'training step' if args.train else 'inference'}, {args.dtype}, "
              f"{'cuda ' + torch.cuda.get_device_name() if cuda else 'cpu dry run'}")
        for b, f in compiled.items():
            print(f"{b}: {statistics.median(times[b]):.3f} ms per call (median of {args.rounds})")
            print("\n".join(kernel_table(f, inputs, args.calls, cuda, args.top)), flush=True)


if __name__ == "__main__":
    main()
