"""Is a real model's compiled step host-bound on the GPU, and where does the host time go?

For each real model (benchmarks/workloads/real_models.py) and backend (stax, Inductor, eager), after
warm-up: the synchronized step (median wall ms), the host time of a call (from its start until it
returns, the GPU having been drained first: what the Python side costs when nothing waits on the
GPU), the GPU's kernel time per step (torch.profiler, kernels summed), then a cProfile of `--calls`
steps by own time and by cumulative time, and what stax's CUDA graph wrappers did. A step whose host
time is close to its wall time and well above its kernel time is launch-bound (issue 20).

    export PYTHONPATH=$(ls -d packages/*/src | paste -sd:):.
    python3 benchmarks/gpu/host_probe.py --models vit,bert --train --out DIR
    python3 benchmarks/gpu/host_probe.py --models resnet18 --train --dry-run   # CPU plumbing check
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import statistics
import sys
import tempfile
import time

if "--dry-run" in sys.argv:  # Triton reads TRITON_INTERPRET when imported, and importing torch imports it
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from benchmarks.harness.backends import wrap  # noqa: E402
from benchmarks.workloads import real_models as R  # noqa: E402


def timings(f, inputs, sync, steps: int) -> tuple[float, float]:
    """(median wall ms of a synchronized step, median host ms of a call made on an idle GPU)."""
    wall, host = [], []
    kept = None  # as `loss = step()` in a loop: last step's result is still held during this one
    for _ in range(steps):
        sync()
        t0 = time.perf_counter()
        kept = f(*inputs)  # noqa: F841
        t1 = time.perf_counter()
        sync()
        t2 = time.perf_counter()
        host.append((t1 - t0) * 1e3)
        wall.append((t2 - t0) * 1e3)
    return statistics.median(wall), statistics.median(host)


def allocator_counts() -> dict:
    """The caching allocator's counters that cost the host a device call (cudaMalloc / cudaFree, a
    retry after freeing cached blocks: both synchronize)."""
    if not torch.cuda.is_available():
        return {}
    st = torch.cuda.memory_stats()
    keys = ("num_device_alloc", "num_device_free", "num_alloc_retries", "num_sync_all_streams")
    return {k: st.get(k, 0) for k in keys}


def kernel_ms(f, inputs, sync, calls: int) -> tuple[float, int]:
    """(GPU kernel ms per step, kernels per step) from torch.profiler's device events."""
    from benchmarks.gpu.kernel_probe import kernels_per_call

    ks = kernels_per_call(f, inputs, sync, calls)
    return sum(us for us, _ in ks.values()) / 1e3, round(sum(n for _, n in ks.values()))


def host_profile(f, inputs, sync, calls: int, top: int) -> str:
    """cProfile of `calls` steps: functions by own time, then by cumulative time."""
    sync()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        f(*inputs)
    sync()
    prof.disable()
    buf = io.StringIO()
    st = pstats.Stats(prof, stream=buf)
    st.sort_stats("tottime").print_stats(top)
    st.sort_stats("cumulative").print_stats(top)
    return buf.getvalue()


def graph_wrappers() -> list[str]:
    """One line per live stax CUDA graph wrapper: its counters, and why graphs are off, if so."""
    try:
        from stax.gpu.graphs import GraphedCall
    except ImportError:
        return []
    return [f"{g.name}: {g.stats} keys={len(g.entries)}" + (f" disabled: {g.disabled}" if g.disabled else "")
            for g in gc.get_objects() if type(g) is GraphedCall]


def probe(name: str, a, device: str, sync) -> str:
    lines = [f"## {name} ({'training' if a.train else 'inference'}, {a.dtype}, {device})"]
    profiles = []
    for backend in a.backends.split(","):
        sample = R.build(name, "cuda" if device == "cuda" else "test", device, getattr(torch, a.dtype))
        fn, inputs, _ = R.program(sample, a.train, device=device)
        torch._dynamo.reset()
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        f = wrap(backend, fn)
        t = time.perf_counter()
        f(*inputs)
        sync()
        first = time.perf_counter() - t
        for _ in range(3):
            f(*inputs)
        before = allocator_counts()
        wall, host = timings(f, inputs, sync, a.steps)
        after = allocator_counts()
        gpu, n = kernel_ms(f, inputs, sync, 3)
        lines.append(f"{backend:9s} step {wall:8.2f} ms  host {host:8.2f} ms  kernels {gpu:7.2f} ms ({n} per step)"
                     f"  first call {first:.1f} s  allocator per step: "
                     + ", ".join(f"{k} {(after[k] - before[k]) / a.steps:g}" for k in after))
        if torch.cuda.is_available():  # since this backend's first call: its CUDA graph pools included
            lines.append(f"  peak memory: allocated {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB, "
                         f"reserved {torch.cuda.max_memory_reserved() / 2**30:.2f} GiB")
        if backend == "stax":
            lines += [f"  {s}" for s in graph_wrappers()]
        if backend in a.profile.split(","):
            profiles.append(f"==== {name} / {backend}: {a.calls} steps (cProfile)\n"
                            + host_profile(f, inputs, sync, a.calls, a.top))
        del f
        gc.collect()
    return "\n".join(lines) + "\n\n" + "\n".join(profiles)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="vit", help="comma-separated real-model name prefixes")
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    ap.add_argument("--backends", default="stax,inductor,eager")
    ap.add_argument("--profile", default="stax,inductor", help="backends to run under cProfile")
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--calls", type=int, default=10, help="steps under cProfile")
    ap.add_argument("--top", type=int, default=35)
    ap.add_argument("--out", default=None)
    ap.add_argument("--deadline", type=float, default=None, help="seconds: start no model after this")
    ap.add_argument("--dry-run", action="store_true", help="CPU tensors through Triton's interpreter")
    a = ap.parse_args(argv)
    if a.dry_run:
        from stax.frontend import config

        route = config.patch(device_override="gpu")  # kept: a dropped context manager would restore at once
        route.__enter__()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    out_dir = a.out or tempfile.mkdtemp(prefix="host_probe_")
    os.makedirs(out_dir, exist_ok=True)
    R.ensure_timm()
    names = [m.name for m in R.MODELS if any(m.name.startswith(p) for p in a.models.split(","))]
    start = time.perf_counter()
    path = os.path.join(out_dir, f"host-{'train' if a.train else 'infer'}-{a.dtype}.txt")
    for name in names:
        if a.deadline is not None and time.perf_counter() - start > a.deadline:
            print(f"{name}: skipped (past the {a.deadline:.0f} s deadline)", flush=True)
            continue
        try:
            text = probe(name, a, device, sync)
        except Exception as e:  # noqa: BLE001 - one model's failure must not lose the others'
            text = f"## {name}: {type(e).__name__}: {e}\n"
        print(text.split("\n\n")[0], flush=True)
        with open(path, "a") as fh:
            fh.write(text + "\n")
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
