"""The README demo: one model of the real-model suite compiled with backend="stax" on CPU.

The model is the suite's BERT encoder (transformers' BertModel from a small config, random
init, nothing downloaded: benchmarks/workloads/real_models.py) at the suite's --quick size:
2 layers, hidden size 256, 2 sequences of 64 tokens, inference. It is a representative one,
not a flattering one: most of its time is matrix multiplications, which every backend hands
to the same ATen kernels, so what a compiler can win is in the rest.

Prints: the error of stax and of Inductor against eager; each backend's first call (compile);
the median time per call of eager, stax and Inductor measured interleaved in one process (the
benchmark harness's rounds: every backend once per round, rotating order) with the quartile
range; where stax's time goes per call (its generated kernels, measured one by one, against the
extern matmul / attention calls and the host code, from torch.profiler); its kernels, extern
calls and fallbacks; and the fusion summary from the scheduler's log. Needs transformers
(`pip install transformers`). ~30 s on 2 cores, most of it Inductor's compile.
"""

from __future__ import annotations

import logging
import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the benchmark harness and the suite's model builders live in benchmarks/

MODEL, PRESET, ROUNDS = "bert", "quick", 40


class FusionLog(logging.Handler):
    """Collects the scheduler's `fusing a with b` lines for the summary."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.fused: list[str] = []

    def emit(self, record):
        msg = record.getMessage()
        if msg.startswith("fusing "):
            self.fused.append(msg)


def first_call(backend: str, fn, inputs):
    compiled = fn if backend == "eager" else torch.compile(fn, backend=backend, dynamic=False)
    t0 = time.perf_counter()
    out = compiled(*inputs)
    return compiled, out, time.perf_counter() - t0


def main() -> int:
    from stax.frontend import metrics

    from benchmarks.harness.breakdown import profile_backend
    from benchmarks.harness.timing import Stats, calibrate, interleaved
    from benchmarks.workloads.real_models import build, program

    log = FusionLog()
    sched_logger = logging.getLogger("stax.sched")
    sched_logger.addHandler(log)
    sched_logger.setLevel(logging.DEBUG)

    sample = build(MODEL, PRESET)
    fn, inputs, _ = program(sample, train=False)
    ref = fn(*inputs)
    metrics.reset()
    fns, lines = {"eager": fn}, []
    for backend in ("stax", "inductor"):
        compiled, out, t = first_call(backend, fn, inputs)
        err = (out - ref).abs().max().item()
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
        lines.append(f"  {backend:8s} first call (compiles; with the caches as they are) {t:5.2f} s, "
                     f"max abs error vs eager {err:.1e}")
        fns[backend] = compiled
    m = metrics.snapshot()  # stax's counters (Inductor adds nothing to them)

    calls = {b: (lambda f=f: f(*inputs)) for b, f in fns.items()}
    inner = {b: calibrate(f, 0.02) for b, f in calls.items()}
    samples = interleaved(calls, ROUNDS, inner)
    stats = {b: Stats.of(xs) for b, xs in samples.items()}
    e = stats["eager"]
    bd = profile_backend("stax", calls["stax"], 5, "cpu", lambda: None, dict(m.fallback_ops))["breakdown"]

    print(f"Stax demo: {MODEL} ({sample.shape}), inference, float32, CPU, {torch.get_num_threads()} threads")
    print("  transformers BertModel from a small config, random init; attention through sdpa")
    print("\n".join(lines))
    print(f"  median per call over {ROUNDS} interleaved rounds (quartiles):")
    for b, s in stats.items():
        vs = "" if b == "eager" else f"  -> {e.median / s.median:.2f}x eager ({e.q1 / s.q3:.2f}-{e.q3 / s.q1:.2f})"
        print(f"    {b:8s} {s.median * 1e3:8.3f} ms ({s.q1 * 1e3:.3f}-{s.q3 * 1e3:.3f}){vs}")
    print(f"    stax / Inductor time: {stats['stax'].median / stats['inductor'].median:.2f} (below 1: stax faster)")
    ext = ", ".join(f"{k.removeprefix('aten::')} {v:.3f}"
                    for k, v in sorted(bd["extern_ms"].items(), key=lambda kv: -kv[1]))
    print(f"  stax per call (torch.profiler, {bd['calls']} calls, ms): its {bd['kernels']} kernels "
          f"{bd['generated_ms']:.3f}; "
          f"extern calls {sum(bd['extern_ms'].values()):.3f} ({ext}); wrapper {bd.get('wrapper_ms', 0.0):.3f}; "
          f"other host code {bd['host_ms']:.3f}")
    print(f"  graphs {m.graphs_compiled}, IR buffers {m.nodes_lowered}, kernels generated {m.kernels_generated}")
    print(f"  extern calls {m.extern_calls} {dict(m.extern_ops)}; fallbacks {m.fallback_calls} {dict(m.fallback_ops)}")
    print(f"  fusion: {len(log.fused)} fusions" + (" (the first 8:)" if len(log.fused) > 8 else ""))
    for line in log.fused[:8]:
        print(f"    {line}")
    if m.graphs_failed:
        print(f"  ERROR: {m.graphs_failed} graph(s) failed to compile", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
