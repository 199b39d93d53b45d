"""A/B of one boolean Stax option on one real model's CPU call (issue 21): the model compiled with the
option off and on (and eager, and Inductor with --inductor) in one process, timed interleaved, medians
with quartiles; each arm's output checked against eager first.

    python -m benchmarks.cpu.option_ab resnet18 conv_prepack [--train] [--preset cpu] [--rounds 21] [--inductor]
        [--threads 2] [--clock wall|process]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from benchmarks.workloads import real_models as R


def _max_err(a, b) -> float:
    a, b = (x if isinstance(x, torch.Tensor) else getattr(x, "logits", x[0] if isinstance(x, (tuple, list)) else x)
            for x in (a, b))
    return float((a.double() - b.double()).abs().max())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("option")
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--preset", default="cpu")
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--inductor", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--clock", choices=("wall", "process"), default="wall",
                    help="process: this process's CPU time (with --threads 1, a machine shared with other jobs "
                         "disturbs it less than wall time; it does not count time spent waiting)")
    args = ap.parse_args()
    R.ensure_timm()
    torch.set_num_threads(args.threads)
    arms = {}
    ref = None
    labels = [("eager", None), (f"{args.option} off", False), (f"{args.option} on", True)]
    if args.inductor:
        labels.append(("inductor", None))
    for label, on in labels:
        fn, inputs, _ = R.program(R.build(args.model, args.preset), train=args.train)
        if label == "inductor":
            fn = torch.compile(fn)
        elif on is not None:
            fn = torch.compile(fn, backend="stax", options={args.option: on, "strict": True})
        out = fn(*inputs)
        fn(*inputs)
        if ref is None:
            ref = out
        elif not args.train:
            print(f"{label}: max abs error vs eager {_max_err(out, ref):.2e}")
        arms[label] = (fn, inputs)
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    times: dict[str, list[float]] = {k: [] for k in arms}
    for _ in range(args.rounds):
        for label, (fn, inputs) in arms.items():
            t0 = clock()
            fn(*inputs)
            times[label].append(clock() - t0)
    for label, ts in times.items():
        ts.sort()
        print(f"{args.model} {label} ({args.clock}, {args.threads} threads): "
              f"median {1e3 * statistics.median(ts):.2f} ms "
              f"(q1 {1e3 * ts[len(ts) // 4]:.2f}, q3 {1e3 * ts[3 * len(ts) // 4]:.2f}), {args.rounds} rounds")
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{args.model}: on / off {med[labels[2][0]] / med[labels[1][0]]:.3f}"
          + (f", on / inductor {med[labels[2][0]] / med['inductor']:.3f}" if args.inductor else ""))


if __name__ == "__main__":
    main()
