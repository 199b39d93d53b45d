"""`python -m benchmarks --suite real --compile`: cold and warm compile time per model, stax and Inductor.

Every measurement is a process of its own (`python -m benchmarks.harness.compile_time --child ...`), so
no in-memory cache helps: per model and backend, a fresh temporary STAX_CACHE_DIR and
TORCHINDUCTOR_CACHE_DIR (and TRITON_CACHE_DIR), a first process (cold: the caches start empty) and a
second one on the caches the first filled (warm start), then the directory is removed. In each
process, as in runner.py: one untimed compile of a trivial function first (imports, the ISA probe,
Inductor's compile workers: one-time process costs), dynamo's cache cleared, then the first call of a
fresh torch.compile wrapper of the model's function is timed (dynamo, AOTAutograd, the backend, one
run; a training step's backward included). For stax the process also reports the backend's own part
(metrics.compile_time_s: inside compile_graph, cache lookups and loads included) and its phases.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

CHILD_TIMEOUT_S = 900


def child(args) -> dict:
    """One measurement, in this process (the caches come from the environment)."""
    import torch
    import torch._dynamo

    from ..workloads.real import Variant, make_case
    from . import backends as bk

    if args.threads:
        torch.set_num_threads(args.threads)
    variant = Variant(args.train, args.dtype, args.autocast)
    case = make_case(args.workload, variant, args.device, args.quick)
    x = torch.randn(8, 8, device=args.device)
    torch._dynamo.reset()
    bk.first_call(args.backend, lambda t: (t * 2).sum(-1), (x,))  # one-time process costs, untimed
    torch._dynamo.reset()
    if args.backend == "stax":
        bk.reset_stax_counters()
    sync = (lambda: torch.cuda.synchronize(args.device)) if args.device.startswith("cuda") else (lambda: None)
    case.reset()
    _, _, seconds = bk.first_call(args.backend, case.fn, case.inputs, sync)
    out = {"first_call_s": seconds}
    if args.backend == "stax":
        from stax.frontend import metrics

        m = metrics.snapshot()
        out.update(backend_s=m.compile_time_s, phases={k: round(v, 4) for k, v in m.phase_s.items()},
                   graphs=m.graphs_compiled, graphs_failed=m.graphs_failed, cache_hits=m.graph_cache_hits,
                   cache_misses=m.graph_cache_misses, cache_skipped=dict(m.graph_cache_skipped),
                   kernels=m.kernels_generated)
    return out


def _run_child(workload: str, backend: str, cache: str, opts, env_extra: dict) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.harness.compile_time", "--child", "--workload", workload,
           "--backend", backend, "--device", opts.device, "--dtype", opts.dtype]
    cmd += ["--train"] * opts.train + ["--autocast"] * opts.autocast + ["--quick"] * opts.quick
    cmd += ["--threads", str(opts.threads)] if opts.threads else []
    env = {**os.environ, **env_extra, "STAX_CACHE_DIR": os.path.join(cache, "stax"),
           "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache, "inductor"),
           "TRITON_CACHE_DIR": os.path.join(cache, "triton")}
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
                           cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {CHILD_TIMEOUT_S} s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit {p.returncode}: {tail}"[:300]}
    return {**json.loads(lines[-1]), "process_s": time.perf_counter() - t0}


def measure(workloads: list[str], backends: tuple, opts, progress=None, deadline_s: float | None = None
            ) -> list[dict]:
    """Per model and backend: cold (fresh caches) then warm (the caches kept), each in a new process.
    `deadline_s`: start no model after this many seconds (its rows say so: a bounded GPU call keeps its table)."""
    rows = []
    t0 = time.perf_counter()
    for w in workloads:
        late = deadline_s is not None and time.perf_counter() - t0 > deadline_s
        for b in backends:
            if late:
                skipped = {"error": f"skipped: --deadline {deadline_s:g} s passed"}
                rows.append({"workload": w, "backend": b, "cold": skipped, "warm": skipped})
                continue
            cache = tempfile.mkdtemp(prefix="stax-bench-compile-")
            row = {"workload": w, "backend": b}
            try:
                for phase in ("cold", "warm"):
                    if progress is not None:
                        progress.step(f"{w}: {b} {phase}")
                    row[phase] = _run_child(w, b, cache, opts, {})
            finally:
                shutil.rmtree(cache, ignore_errors=True)
            rows.append(row)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", action="store_true", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--autocast", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)
    print(json.dumps(child(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
