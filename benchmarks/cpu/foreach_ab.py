"""A/B of Stax's optimizer-step kernels (issue 21): one real model's CPU training step compiled twice in one
process, with `foreach_kernels` off (the `_foreach_*` ops as ATen fallbacks, AOTAutograd copying the new
parameters back) and on (per-tensor Stax kernels writing the parameters in place), timed interleaved.

    python -m benchmarks.cpu.foreach_ab bert [preset] [rounds]
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

from benchmarks.workloads import real_models as R


def main(argv: list[str]) -> None:
    name = argv[0] if argv else "bert"
    preset = argv[1] if len(argv) > 1 else "cpu"
    rounds = int(argv[2]) if len(argv) > 2 else 21
    R.ensure_timm()
    torch.set_num_threads(2)
    arms = {}
    for label, on in (("foreach_kernels off", False), ("foreach_kernels on", True)):
        fn, inputs, _ = R.program(R.build(name, preset), train=True)
        step = torch.compile(fn, backend="stax", options={"foreach_kernels": on})
        step(*inputs)
        step(*inputs)
        arms[label] = (step, inputs)
    times: dict[str, list[float]] = {k: [] for k in arms}
    for _ in range(rounds):
        for label, (step, inputs) in arms.items():
            t0 = time.perf_counter()
            step(*inputs)
            times[label].append(time.perf_counter() - t0)
    for label, ts in times.items():
        ts.sort()
        print(f"{name} {label}: median {1e3 * statistics.median(ts):.1f} ms "
              f"(q1 {1e3 * ts[len(ts) // 4]:.1f}, q3 {1e3 * ts[3 * len(ts) // 4]:.1f}), {rounds} rounds")
    off, on = (statistics.median(v) for v in times.values())
    print(f"{name}: on / off {on / off:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
