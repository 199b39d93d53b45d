"""One model, one process: a `dynamic=True` stax compile (made at another length first, so every timed size
runs the symbolic-size module) against a static compile per size, interleaved (issue 23, point 6).

    PYTHONPATH=. python -m benchmarks.cpu.dynamic_static_ab --model gpt2 --sizes 1x17,1x64,8x17
Prints per size eager / dynamic / static medians and dynamic over static (1.00: no cost for symbolic sizes).
"""

from __future__ import annotations

import argparse
import statistics

import torch

from benchmarks.harness.timing import calibrate, interleaved
from benchmarks.workloads import real_models as R


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="gpt2")
    p.add_argument("--preset", default="cpu", choices=R.PRESETS)
    p.add_argument("--sizes", default="1x17,1x64,8x17", help="batch x length, comma separated")
    p.add_argument("--warm-length", type=int, default=40, help="the length the dynamic graph is compiled at")
    p.add_argument("--rounds", type=int, default=21)
    args = p.parse_args(argv)
    import stax.frontend

    stax.frontend.register()
    sample = R.build(args.model, args.preset)
    fn, _, model = R.program(sample, train=False)
    vocab = model.config.vocab_size
    dyn = torch.compile(fn, backend="stax", dynamic=True)
    static = torch.compile(fn, backend="stax", dynamic=False)
    dyn(torch.randint(0, vocab, (1, args.warm_length)))
    print(f"{args.model} ({args.preset}), torch threads {torch.get_num_threads()}, {args.rounds} rounds")
    for size in args.sizes.split(","):
        b, t = map(int, size.split("x"))
        ids = torch.randint(0, vocab, (b, t), generator=torch.Generator().manual_seed(t))
        ref = fn(ids)
        for f in (dyn, static):
            torch.testing.assert_close(f(ids), ref, rtol=1e-4, atol=1e-4)
        calls = {a: (lambda f=f, ids=ids: f(ids)) for a, f in (("eager", fn), ("dynamic", dyn), ("static", static))}
        inner = {a: calibrate(c, 0.05) for a, c in calls.items()}
        med = {a: 1e3 * statistics.median(v) for a, v in interleaved(calls, args.rounds, inner).items()}
        print(f"{b} x {t}: " + ", ".join(f"{a} {v:.2f} ms" for a, v in med.items())
              + f"; dynamic / static {med['dynamic'] / med['static']:.3f}", flush=True)


if __name__ == "__main__":
    main()
