"""Which GPU kernels a real model's compiled call runs, per backend, side by side (issue 20, point 2).

For each model and backend: the step's wall time, then every GPU kernel of `--calls` profiled
calls grouped by name (microseconds per call, launches per call), largest first. Library kernel
names say what a backend chose: cuDNN's `nhwc` / `nchw` and `tf32` in a convolution's name,
cuBLAS's tile shape, and transposes such as `nchwToNhwc` are layout conversions.

    PYTHONPATH=$(ls -d packages/*/src | paste -sd:):. python3 -m benchmarks.gpu.kernel_table \\
        --models resnet18,vit --train --out DIR
"""

from __future__ import annotations

import argparse
import collections
import gc
import statistics
import sys
import time

import torch

from benchmarks.harness.backends import wrap
from benchmarks.workloads import real_models as R


def kernels_per_call(f, inputs, sync, calls: int) -> dict[str, tuple[float, float]]:
    """Kernel name -> (us per call, launches per call) over `calls` profiled calls."""
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.cuda.is_available()
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            f(*inputs)
        sync()
    kind = torch.autograd.DeviceType.CUDA if cuda else torch.autograd.DeviceType.CPU
    time_us: dict[str, float] = collections.defaultdict(float)
    count: dict[str, int] = collections.defaultdict(int)
    for e in prof.events():
        if e.device_type == kind:
            time_us[e.name] += e.time_range.elapsed_us()
            count[e.name] += 1
    return {k: (time_us[k] / calls, count[k] / calls) for k in time_us}


def step_ms(f, inputs, sync, steps: int) -> float:
    times = []
    for _ in range(steps):
        sync()
        t = time.perf_counter()
        f(*inputs)
        sync()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def table(name: str, a, device: str, sync) -> str:
    out = [f"## {name} ({'training' if a.train else 'inference'}, {a.dtype}, {device})", ""]
    for backend in a.backends.split(","):
        sample = R.build(name, a.preset or ("cuda" if device == "cuda" else "test"), device, getattr(torch, a.dtype))
        fn, inputs, _ = R.program(sample, a.train, device=device)
        torch._dynamo.reset()
        gc.collect()
        f = wrap(backend, fn)
        for _ in range(4):
            f(*inputs)
        wall = step_ms(f, inputs, sync, a.steps)
        ks = kernels_per_call(f, inputs, sync, a.calls)
        busy = sum(us for us, _ in ks.values()) / 1e3
        launches = sum(n for _, n in ks.values())
        out.append(f"### {backend}: step {wall:.2f} ms (median of {a.steps}), kernels {busy:.2f} ms, "
                   f"{launches:.0f} launches per call")
        out += ["", "| us/call | launches | kernel |", "|--:|--:|---|"]
        for k, (us, n) in sorted(ks.items(), key=lambda kv: -kv[1][0])[:a.top]:
            out.append(f"| {us:.1f} | {n:g} | `{k[:a.width]}` |")
        out.append("")
        del f
        gc.collect()
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet18", help="comma-separated real-model names or prefixes")
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    ap.add_argument("--backends", default="stax,inductor")
    ap.add_argument("--preset", default=None, help="sizes (default: cuda on a GPU, test elsewhere)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--calls", type=int, default=5, help="profiled calls")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--width", type=int, default=110, help="characters of each kernel name")
    ap.add_argument("--out", default=None, help="also write the tables to this file")
    a = ap.parse_args(argv)
    R.ensure_timm()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    names = [m.name for m in R.MODELS if any(m.name.startswith(p) for p in a.models.split(","))]
    for name in names:
        text = table(name, a, device, sync)
        print(text, flush=True)
        if a.out:
            with open(a.out, "a") as fh:
                fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
