"""Where does a compiled function's time per call go: its kernels, or the gaps between them?

For one suite workload, compiles stax and Inductor, then records `--calls` back-to-back calls
of each under torch.profiler and reads the GPU timeline: per call, the kernels' durations
(by name) and the idle time between consecutive kernels. Two implementations whose kernels
take the same time but whose calls differ were separated by the gaps (launch or host cost).

    PYTHONPATH=$(ls -d packages/*/src | paste -sd:):. python3 benchmarks/gpu/trace_probe.py layernorm --out DIR
"""

from __future__ import annotations

import argparse
import statistics
import sys

import bench_gpu as B
import torch


def gpu_timeline(fn, calls: int) -> list[tuple[str, float, float]]:
    """(kernel name, start us, duration us) of every GPU kernel in `calls` back-to-back calls."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    B.sync()
    kind = ProfilerActivity.CPU if B.DRY else ProfilerActivity.CUDA  # the dry run exercises the plumbing on CPU ops
    with profile(activities=[kind]) as prof:
        for _ in range(calls):
            fn()
        B.sync()
    device = torch.autograd.DeviceType.CPU if B.DRY else torch.autograd.DeviceType.CUDA
    events = [e for e in prof.events() if e.device_type == device]
    return sorted(((e.name, e.time_range.start, e.time_range.elapsed_us()) for e in events), key=lambda k: k[1])


def first_call_us(fn, samples: int = 20) -> float:
    """Host time of a call made while the GPU is idle (after a sync): how long a timed burst of
    calls leaves the GPU waiting before its first kernel."""
    import time

    ts = []
    for _ in range(samples):
        B.sync()
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e6)
    B.sync()
    return statistics.median(ts)


def summarize(name: str, timeline: list, calls: int) -> list[str]:
    by_kernel: dict[str, list[float]] = {}
    for k, _, d in timeline:
        by_kernel.setdefault(k, []).append(d)
    gaps = [b[1] - (a[1] + a[2]) for a, b in zip(timeline, timeline[1:])]
    span = timeline[-1][1] + timeline[-1][2] - timeline[0][1] if timeline else 0.0
    lines = [f"{name}: {len(timeline)} kernels in {calls} calls, {span / max(calls, 1):.2f} us per call "
             "(first start to last end)"]
    for k, ds in by_kernel.items():
        lines.append(f"  {k[:70]:70s} x{len(ds):4d}  median {statistics.median(ds):8.2f} us  min {min(ds):8.2f}")
    if gaps:
        top = sorted(range(len(gaps)), key=gaps.__getitem__, reverse=True)[:3]
        lines.append(f"  gaps between kernels: median {statistics.median(gaps):.2f} us, "
                     f"mean {statistics.mean(gaps):.2f},"
                     f" first three {[round(g, 2) for g in gaps[:3]]}, "
                     f"largest {[(k, round(gaps[k], 2)) for k in top]} (index, us)")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload")
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--variants", default="",
                    help="comma list of GpuConfig overrides ('a=1+b=2'), each traced as stax[v]")
    ap.add_argument("--out", default=None)
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    (w,) = [w for w in B.suite() if w.name == a.workload]
    inputs = w.make_inputs()
    impls = {"stax": B.stax_frontend(w.fn, inputs)}
    for v in filter(None, a.variants.split(",")):
        impls[f"stax[{v}]"] = B.stax_frontend(w.fn, inputs, variant=v)
    impls["inductor"] = torch.compile(B.fresh_copy(w.fn, "inductor"))
    impls["eager"] = w.fn
    lines = []
    for name, f in impls.items():
        if f is None:
            lines.append(f"{name}: not routed to stax.gpu")
            continue
        tl = gpu_timeline(lambda f=f: f(*inputs), a.calls)
        lines += summarize(name, tl, a.calls)
        lines.append(f"  host time of a call after a sync: median {first_call_us(lambda f=f: f(*inputs)):.1f} us")
    stem = "trace_" + "".join(c if c.isalnum() else "_" for c in w.name)  # no shell or path characters
    B.report(a.out, stem, "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
