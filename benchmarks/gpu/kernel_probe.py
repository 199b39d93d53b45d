"""Which generated kernels make a real model's step slow on the GPU: stax's, one by one, beside Inductor's.

For each real model (benchmarks/workloads/real_models.py) and phase, compiles stax and Inductor, runs a
few steps under torch.profiler and writes, per backend, every generated (triton_*) kernel's device time
per call, plus the library kernels'. Stax's kernel names repeat across compiled graphs
(`triton_poi_fused_0` in the forward and in the backward), so its launches are recorded in order on the
host (each module's `launch_K`, CUDA graphs off) and matched one to one with the triton kernels of the
GPU timeline, which run in launch order on one stream: each row names its graph, its launch, the chosen
launch config and the kernel's source. Inductor's rows are by kernel name; its generated code is kept
as a tarball. A first look at where the 2-4x gap in generated-kernel time (issue 20) comes from.

    export PYTHONPATH=$(ls -d packages/*/src | paste -sd:):.
    python3 benchmarks/gpu/kernel_probe.py --models resnet18,vit --train --out DIR
    python3 benchmarks/gpu/kernel_probe.py --models resnet18 --train --dry-run   # CPU plumbing check
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import sys
import tarfile
import tempfile
import time
from collections import defaultdict

if "--dry-run" in sys.argv:  # Triton reads TRITON_INTERPRET when imported, and importing torch imports it
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from benchmarks.harness.backends import wrap  # noqa: E402
from benchmarks.harness.breakdown import _device_kernel  # noqa: E402
from benchmarks.workloads import real_models as R  # noqa: E402


class LaunchLog:
    """Every stax.gpu kernel launch while `recording`: (graph number, launcher key, launcher)."""

    def __init__(self):
        self.recording = False
        self.launches: list[tuple[int, str, object]] = []
        self.graphs: dict[int, str] = {}  # graph number -> its module's source
        self._seen: dict[int, int] = {}
        self._patched: list = []

    def __enter__(self):
        from stax.frontend import runtime

        cls, original, log = runtime.CompiledGraph, runtime.CompiledGraph.__call__, self

        def call(graph, args):
            log._instrument(graph)
            return original(graph, args)

        cls.__call__ = torch._dynamo.disable(call, recursive=True)
        self._patched.append((cls, "__call__", original))
        return self

    def __exit__(self, *exc):
        for owner, key, val in reversed(self._patched):
            if isinstance(owner, dict):
                owner[key] = val
            else:
                setattr(owner, key, val)

    def _instrument(self, graph) -> None:
        call = getattr(graph, "_call", None)
        wrapper = getattr(call, "call", call)
        ns = getattr(wrapper, "__globals__", None)
        if ns is None or id(ns) in self._seen:
            return
        number = self._seen[id(ns)] = len(self._seen)
        self.graphs[number] = getattr(getattr(graph, "module", None), "source", "") or ""
        for key, val in list(ns.items()):
            if key.startswith("launch_") and callable(val):
                ns[key] = self._recorded(number, key, val)
                self._patched.append((ns, key, val))

    def _recorded(self, number: int, key: str, launcher):
        def run(*args):
            if self.recording:
                self.launches.append((number, key, launcher))
            return launcher(*args)

        return run


def kernel_source(module_source: str, name: str) -> str:
    """The text of `def name(...)` and its body in a module's source."""
    m = re.search(rf"^def {re.escape(name)}\(.*?(?=^\S)", module_source + "\n#", re.S | re.M)
    return m.group(0).rstrip() if m else ""


def gpu_kernels(prof) -> list[tuple[str, float, float]]:
    """(name, start ns, duration us) of every device kernel of a profile, in start order."""
    raw = prof.profiler.kineto_results.events() if prof.profiler else []
    ks = [(e.name(), e.start_ns(), e.duration_ns() / 1e3) for e in raw if _device_kernel(e)]
    return sorted(ks, key=lambda k: k[1])


def profiled(fn, inputs, calls: int, sync):
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=acts) as prof:
        for _ in range(calls):
            fn(*inputs)
        sync()
    return prof


def kernels_per_call(fn, inputs, sync, calls: int) -> dict[str, tuple[float, float]]:
    """Kernel name -> (device us per call, launches per call) of `calls` profiled calls, as they run
    (CUDA graph replays included: host_probe.py, dynamic_probe.py)."""
    by: dict = defaultdict(lambda: [0.0, 0])
    for name, _, us in gpu_kernels(profiled(fn, inputs, calls, sync)):
        by[name][0] += us
        by[name][1] += 1
    return {k: (us / calls, n / calls) for k, (us, n) in by.items()}


def library_rows(kernels, calls: int, top: int = 25) -> list[dict]:
    by = defaultdict(lambda: [0.0, 0])
    for name, _, us in kernels:
        if not name.startswith("triton_"):
            by[name][0] += us
            by[name][1] += 1
    rows = sorted(by.items(), key=lambda kv: -kv[1][0])[:top]
    return [{"name": k[:120], "us_per_call": v[0] / calls, "launches_per_call": v[1] / calls} for k, v in rows]


def stax_rows(log: LaunchLog, kernels, calls: int) -> tuple[list[dict], str]:
    """Per (graph, launch): device us per call, matched in order; and a note if the match failed."""
    triton = [k for k in kernels if k[0].startswith("triton_")]
    note = ""
    if len(triton) != len(log.launches):
        note = f"{len(triton)} triton kernels on the GPU, {len(log.launches)} launches recorded: rows unmatched"
    by: dict = {}
    for (name, _, us), (number, key, launcher) in zip(triton, log.launches):
        variants = [v[0].name for v in (getattr(launcher, "variants", {}) or {}).values()]
        if variants and name not in variants and not note:
            note = f"kernel {name} matched to {key} of graph {number} ({sorted(variants)}): order lost"
        row = by.setdefault((number, key, name), {"graph": number, "launch": key, "name": name, "us": [], "n": 0})
        row["us"].append(us)
        row["n"] += 1
        choice = getattr(launcher, "choice", None)
        row["config"] = choice.key() if choice is not None and hasattr(choice, "key") else str(choice)
    rows = []
    for row in by.values():  # the median launch: a burst of other work on the GPU inflates a few launches only
        row["median_us"] = statistics.median(row["us"])
    for row in sorted(by.values(), key=lambda r: -r["median_us"] * r["n"]):
        rows.append({"graph": row["graph"], "launch": row["launch"], "name": row["name"], "config": row["config"],
                     "us_per_call": row["median_us"] * row["n"] / calls, "launches_per_call": row["n"] / calls,
                     "us_min": min(row["us"]), "us_max": max(row["us"]),
                     "source": kernel_source(log.graphs.get(row["graph"], ""), row["name"])})
    return rows, note


def inductor_rows(kernels, calls: int) -> list[dict]:
    by = defaultdict(lambda: [0.0, 0])
    for name, _, us in kernels:
        if name.startswith("triton_"):
            by[name][0] += us
            by[name][1] += 1
    return [{"name": k, "us_per_call": v[0] / calls, "launches_per_call": v[1] / calls}
            for k, v in sorted(by.items(), key=lambda kv: -kv[1][0])]


def probe(name: str, train: bool, dtype: torch.dtype, device: str, calls: int, sync,
          backends=("stax", "inductor")) -> dict:
    out: dict = {"model": name, "train": train, "dtype": str(dtype).removeprefix("torch."), "calls": calls}
    for backend in backends:
        sample = R.build(name, "cuda" if device == "cuda" else "test", device, dtype)
        fn, inputs, _ = R.program(sample, train, device=device)
        torch._dynamo.reset()
        t0 = time.perf_counter()
        with LaunchLog() if backend == "stax" else contextlib.nullcontext() as log:
            compiled = wrap(backend, fn)
            compiled(*inputs)
            sync()
            compile_s = time.perf_counter() - t0
            for _ in range(3):
                compiled(*inputs)
            sync()
            if log is not None:
                log.recording = True
            prof = profiled(compiled, inputs, calls, sync)
            if log is not None:
                log.recording = False
        ks = gpu_kernels(prof)
        part = {"compile_s": compile_s, "library": library_rows(ks, calls),
                "generated_us": sum(us for n, _, us in ks if n.startswith("triton_")) / calls,
                "library_us": sum(us for n, _, us in ks if not n.startswith("triton_")) / calls}
        if backend == "stax":
            part["kernels"], part["note"] = stax_rows(log, ks, calls)
            part["graphs"] = len(log.graphs)
        else:
            part["kernels"] = inductor_rows(ks, calls)
        out[backend] = part
        print(f"{name} {backend}: generated {part['generated_us'] / 1e3:.2f} ms, library "
              f"{part['library_us'] / 1e3:.2f} ms per call, compile {compile_s:.1f} s {part.get('note', '')}",
              flush=True)
        del compiled, prof
    return out


def summary(result: dict, top: int) -> str:
    lines = [f"## {result['model']} ({'training' if result['train'] else 'inference'}, {result['dtype']})"]
    for backend in ("stax", "inductor"):
        if backend not in result:
            continue
        p = result[backend]
        lines.append(f"{backend}: generated {p['generated_us'] / 1e3:.2f} ms, library {p['library_us'] / 1e3:.2f} ms "
                     f"per call, {len(p['kernels'])} kernels {p.get('note', '')}")
        for r in p["kernels"][:top]:
            where = f"g{r['graph']} {r['launch']} " if "graph" in r else ""
            lines.append(f"  {r['us_per_call']:9.1f} us  x{r['launches_per_call']:.0f}  {where}{r['name']} "
                         f"{r.get('config', '')}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="resnet18", help="comma-separated real-model name prefixes")
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--backends", default="stax,inductor")
    ap.add_argument("--tag", default="", help="suffix of the output names")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--out", default=None)
    ap.add_argument("--deadline", type=float, default=None, help="seconds: start no model after this")
    ap.add_argument("--dry-run", action="store_true", help="CPU tensors through Triton's interpreter")
    a = ap.parse_args(argv)
    if a.dry_run:
        from stax.frontend import config

        route = config.patch(device_override="gpu")  # kept: a dropped context manager would restore at once
        route.__enter__()
    os.environ["STAX_GPU_CONFIG"] = ",".join(filter(None, [os.environ.get("STAX_GPU_CONFIG", ""), "cuda_graphs=0"]))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    out_dir = a.out or tempfile.mkdtemp(prefix="kernel_probe_")
    os.makedirs(out_dir, exist_ok=True)
    ind_dir = os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor_"))
    R.ensure_timm()
    dtype = getattr(torch, a.dtype)
    names = [m.name for m in R.MODELS if any(m.name.startswith(p) for p in a.models.split(","))]
    results = []
    start = time.perf_counter()
    for name in names:
        if a.deadline is not None and time.perf_counter() - start > a.deadline:
            print(f"{name}: skipped (past the {a.deadline:.0f} s deadline)", flush=True)
            continue
        try:
            results.append(probe(name, a.train, dtype, device, a.calls, sync, a.backends.split(",")))
        except Exception as e:  # noqa: BLE001 - one model's failure must not lose the others' rows
            print(f"{name}: {type(e).__name__}: {e}", flush=True)
            continue
        stem = os.path.join(out_dir, f"kernels-{'train' if a.train else 'infer'}-{a.dtype}{a.tag}")
        with open(stem + ".json", "w") as f:
            json.dump(results, f, indent=1)
        with open(stem + ".txt", "w") as f:
            f.write("\n\n".join(summary(r, a.top) for r in results) + "\n")
        print(summary(results[-1], a.top), flush=True)
    with tarfile.open(os.path.join(out_dir, f"inductor-code-{'train' if a.train else 'infer'}-{a.dtype}{a.tag}.tar.gz"),
                      "w:gz") as tar:
        for root, _, files in os.walk(ind_dir):
            for fname in files:
                path = os.path.join(root, fname)
                if fname.endswith(".py") and "triton_" in open(path, errors="replace").read():
                    tar.add(path, arcname=os.path.relpath(path, ind_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
