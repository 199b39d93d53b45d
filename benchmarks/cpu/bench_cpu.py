"""CPU benchmark: stax vs Inductor vs eager, interleaved in one process (issue 5 item 7).

For each workload: compile with backend="stax" and with Inductor (fresh caches, so the
first call measures compile time), check both against eager, then time the three in
interleaved rounds (median of rounds). Reports speedup over eager, achieved bandwidth
(minimum bytes / time) as % of a measured copy bandwidth, and compile time per graph.

    PYTHONPATH=packages/stax-ir/src:packages/stax-sched/src:packages/stax-cpu/src:packages/stax-frontend/src \\
        python benchmarks/cpu/bench_cpu.py [--only softmax,silu] [--rounds 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time

# fresh compile caches for both compilers, before torch is imported
_TMP = tempfile.mkdtemp(prefix="stax-bench-")
os.environ.setdefault("STAX_CACHE_DIR", os.path.join(_TMP, "stax"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(_TMP, "inductor"))
os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import torch  # noqa: E402
import torch._dynamo  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from workloads import Workload, nbytes, suite  # noqa: E402


def copy_bandwidth(nbytes_: int = 256 << 20, reps: int = 10) -> float:
    """Bytes/s of dst.copy_(src) (read + write) on large float32 tensors: the machine's practical peak."""
    src = torch.randn(nbytes_ // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        dst.copy_(src)
        ts.append(time.perf_counter() - t)
    return 2 * nbytes_ / min(ts)


def _timeit(fn, inputs, iters: int) -> float:
    t = time.perf_counter()
    for _ in range(iters):
        fn(*inputs)
    return (time.perf_counter() - t) / iters


def _close(a, b) -> bool:
    if isinstance(a, (tuple, list)):
        return all(_close(x, y) for x, y in zip(a, b))
    return torch.allclose(a.float(), b.float(), rtol=1e-3, atol=1e-3)


def _compile(fn, backend: str, inputs):
    torch._dynamo.reset()
    cf = torch.compile(fn, backend=backend, dynamic=False)
    t = time.perf_counter()
    out = cf(*inputs)
    first = time.perf_counter() - t
    return cf, out, first


def run_workload(w: Workload, rounds: int, min_time: float) -> dict:
    torch.manual_seed(0)
    inputs = w.make_inputs()
    ref = w.fn(*inputs)
    impls = {"eager": w.fn}
    compile_s, ok = {}, {}
    for backend in ("stax", "inductor"):
        try:
            cf, out, first = _compile(w.fn, backend, inputs)
            steady = _timeit(cf, inputs, 1)
            compile_s[backend] = max(first - steady, 0.0)
            ok[backend] = _close(out, ref)
            impls[backend] = cf
        except Exception as e:  # report, keep benchmarking the others
            print(f"  {w.name}: {backend} failed: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
    # iterations per round so that a round takes ~min_time for eager
    iters = max(1, int(min_time / max(_timeit(w.fn, inputs, 1), 1e-6)))
    times: dict[str, list] = {k: [] for k in impls}
    for _ in range(rounds):
        for name, fn in impls.items():
            times[name].append(_timeit(fn, inputs, iters))
    med = {k: statistics.median(v) for k, v in times.items()}
    moved = nbytes(inputs) + nbytes(ref)
    return {"name": w.name, "memory_bound": w.memory_bound, "time_s": med, "compile_s": compile_s,
            "correct": ok, "bytes": moved}


def geomean(xs) -> float:
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def _fmt(x, spec: str, unit: str = "") -> str:
    return "—" if x is None else f"{x:{spec}}{unit}"


def report(results: list[dict], copy_bw: float) -> str:
    rows = [
        f"copy bandwidth: {copy_bw / 1e9:.1f} GB/s, threads: {torch.get_num_threads()}\n",
        "| workload | eager ms | inductor ms | stax ms | inductor x | stax x | inductor %bw | stax %bw "
        "| inductor compile s | stax compile s | ok (inductor/stax) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    speedups: dict[str, list] = {"stax": [], "inductor": []}
    for r in results:
        t, e = r["time_s"], r["time_s"]["eager"]
        ms = {k: t[k] * 1e3 if k in t else None for k in ("inductor", "stax")}
        sp = {k: e / t[k] if k in t else None for k in ("inductor", "stax")}
        bw = {k: (r["bytes"] / t[k] / copy_bw * 100 if k in t and r["memory_bound"] else None)
              for k in ("inductor", "stax")}
        for k, v in sp.items():
            if v is not None:
                speedups[k].append(v)
        ok = "/".join("y" if r["correct"].get(k) else "n" for k in ("inductor", "stax"))
        rows.append(
            f"| {r['name']} | {e * 1e3:.2f} | {_fmt(ms['inductor'], '.2f')} | {_fmt(ms['stax'], '.2f')} "
            f"| {_fmt(sp['inductor'], '.2f')} | {_fmt(sp['stax'], '.2f')} | {_fmt(bw['inductor'], '.0f', '%')} "
            f"| {_fmt(bw['stax'], '.0f', '%')} | {_fmt(r['compile_s'].get('inductor'), '.2f')} "
            f"| {_fmt(r['compile_s'].get('stax'), '.2f')} | {ok} |"
        )
    rows.append(f"\ngeomean speedup over eager: inductor {geomean(speedups['inductor']):.2f}x, "
                f"stax {geomean(speedups['stax']):.2f}x")
    ci = [r["compile_s"]["inductor"] for r in results if "inductor" in r["compile_s"]]
    cs = [r["compile_s"]["stax"] for r in results if "stax" in r["compile_s"]]
    if ci and cs:
        rows.append(f"compile time per workload (median): inductor {statistics.median(ci):.2f} s, "
                    f"stax {statistics.median(cs):.2f} s")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--min-time", type=float, default=0.2, help="seconds per timing round (eager)")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    try:
        import stax.frontend as sf

        sf.register()
    except ImportError as e:
        sys.exit(f"stax.frontend is not importable ({e}); put packages/*/src on PYTHONPATH")
    wanted = {s.strip() for s in args.only.split(",") if s.strip()}
    ws = [w for w in suite() if not wanted or w.name in wanted]
    bw = copy_bandwidth()
    results = []
    for w in ws:
        print(f"running {w.name} ...", file=sys.stderr, flush=True)
        results.append(run_workload(w, args.rounds, args.min_time))
    text = report(results, bw)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"copy_bandwidth": bw, "results": results}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
