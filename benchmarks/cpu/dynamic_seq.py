"""Dynamic shapes on CPU (issue 23): the real-model suite's BERT and GPT-2 at many sequence lengths and
batch sizes, one process, inference.

Arms: eager; stax `dynamic=True` (one compile for all sizes: symbolic-size kernels, vector loops with
tails but no tiles, regions or local arrays); stax static (`dynamic=False`, a compile per size);
Inductor `dynamic=True`. Per arm it counts the graphs dynamo hands the backend (one counting wrapper
per arm: the same count for every backend) and the first-call seconds per size (compiles included),
then times every (batch, length) interleaved (benchmarks.harness.timing). A batch of 1 is specialized
by dynamo (0/1 specialization): a second graph.

    python -m benchmarks.cpu.dynamic_seq                      # small subset: bert, lengths 17 64 128, batch 2
    python -m benchmarks.cpu.dynamic_seq --models bert,gpt2 --lengths 17,33,64,128,256,512 --batches 1,8,32
    python -m benchmarks.cpu.dynamic_seq --out benchmarks/results/cpu-dynamic-seq.md
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch
import torch._dynamo

from benchmarks.harness.timing import calibrate, interleaved
from benchmarks.workloads import real_models as R

ARMS = ("eager", "stax dynamic", "stax static", "inductor dynamic")


class Counted:
    """A backend wrapper counting the graphs dynamo compiles with it (returned: dynamo may restart an
    analysis from inside the backend call, `_tensorify_python_scalars`, and call it again)."""

    def __init__(self, name: str):
        self.name, self.graphs = name, 0

    def __call__(self, gm, example_inputs):
        compiled = torch._dynamo.lookup_backend(self.name)(gm, example_inputs)
        self.graphs += 1
        return compiled


def arms(fn) -> tuple[dict, dict]:
    import stax.frontend

    stax.frontend.register()
    counters = {a: Counted("stax" if a.startswith("stax") else "inductor") for a in ARMS[1:]}
    wrapped = {"eager": fn}
    for a, c in counters.items():
        wrapped[a] = torch.compile(fn, backend=c, dynamic=(a != "stax static"))
    return wrapped, counters


def run_model(name: str, preset: str, lengths: list[int], batches: list[int], rounds: int, min_sample_s: float,
              device: str = "cpu", sync=lambda: None):
    """`device` / `sync`: where the model and inputs live and how to wait for it (benchmarks/gpu/dynamic_seq.py
    runs this on cuda)."""
    from stax.frontend import metrics

    failed_before = metrics.snapshot().graphs_failed
    sample = R.build(name, preset, device)
    fn, _, model = R.program(sample, train=False, device=device)
    vocab = model.config.vocab_size
    wrapped, counters = arms(fn)
    rows = []
    for batch in batches:
        for length in lengths:
            ids = torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(length)).to(device)
            first, ref = {}, fn(ids)
            for a, f in wrapped.items():
                t0 = time.perf_counter()
                out = f(ids)
                first[a] = time.perf_counter() - t0
                torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)  # (BERT/GPT-2 fp32 through matmuls)
            calls = {a: (lambda f=f, ids=ids: f(ids)) for a, f in wrapped.items()}
            inner = {a: calibrate(c, min_sample_s, sync) for a, c in calls.items()}
            samples = interleaved(calls, rounds, inner, sync)
            med = {a: statistics.median(s) for a, s in samples.items()}
            rows.append({"batch": batch, "length": length, "ms": {a: 1e3 * v for a, v in med.items()},
                         "first_s": first, "graphs": {a: c.graphs for a, c in counters.items()}})
            print(f"{name} batch {batch} x {length}: " + ", ".join(f"{a} {1e3 * v:.2f} ms" for a, v in med.items())
                  + "; graphs so far " + ", ".join(f"{a} {c.graphs}" for a, c in counters.items()), flush=True)
    return {"model": name, "shape": sample.shape, "rows": rows,
            "graphs": {a: c.graphs for a, c in counters.items()},
            "stax_failed": metrics.snapshot().graphs_failed - failed_before}


def markdown(results: list[dict], args, device: str = "CPU", script: str = "benchmarks/cpu/dynamic_seq.py",
             codegen: str = "stax.cpu") -> str:
    where = (f"{torch.get_num_threads()} threads, {platform.processor() or platform.machine()}" if device == "CPU"
             else device)
    lines = [f"# Dynamic shapes on {device}: BERT / GPT-2 over sequence lengths (`{script}`)", "",
             f"torch {torch.__version__}, {where}; "
             f"preset `{args.preset}`, {args.rounds} interleaved rounds per size; inference, fp32.", "",
             f"Speed is eager's median time over the arm's (> 1: faster than eager). `stax dynamic` runs {codegen}'s",
             "symbolic-size kernels; `stax static` compiles each size.", ""]
    for res in results:
        lines += [f"## {res['model']} ({res['shape'].split(' x ')[0]} at the preset; here the sizes below)", "",
                  "graphs compiled over all sizes: " + ", ".join(f"{a} {n}" for a, n in res["graphs"].items())
                  + f"; stax graphs that failed to compile and ran eagerly: {res.get('stax_failed', 0)}", "",
                  "| batch x length | eager ms | stax dynamic | stax static | inductor dynamic | "
                  "stax dyn / static | first call s (stax dyn, static, inductor dyn) |",
                  "|---|---|---|---|---|---|---|"]
        for r in res["rows"]:
            ms = r["ms"]
            sp = {a: ms["eager"] / ms[a] for a in ARMS[1:]}
            f = r["first_s"]
            lines.append(f"| {r['batch']} x {r['length']} | {ms['eager']:.2f} | {sp['stax dynamic']:.2f}x | "
                         f"{sp['stax static']:.2f}x | {sp['inductor dynamic']:.2f}x | "
                         f"{ms['stax dynamic'] / ms['stax static']:.2f} | "
                         f"{f['stax dynamic']:.2f}, {f['stax static']:.2f}, {f['inductor dynamic']:.2f} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="bert")
    p.add_argument("--preset", default="quick", choices=R.PRESETS)
    p.add_argument("--lengths", default="17,64,128")
    p.add_argument("--batches", default="2")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--min-sample-s", type=float, default=0.02)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=None, help="write the markdown table here")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    # a static arm compiles once per size: keep them all (dynamo's default limit is 8 per frame)
    torch._dynamo.config.recompile_limit = 256
    torch._dynamo.config.cache_size_limit = 256
    lengths = [int(x) for x in args.lengths.split(",")]
    batches = [int(x) for x in args.batches.split(",")]
    results = [run_model(m, args.preset, lengths, batches, args.rounds, args.min_sample_s)
               for m in args.models.split(",")]
    text = markdown(results, args)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
