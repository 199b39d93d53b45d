"""Does a stax-vs-Inductor comparison survive a change of where buffers land?

For one suite workload, compile stax and Inductor afresh in K allocation states (state k
first allocates a pad of k x 148 MB, so the allocator hands out other addresses) and time
all 2K implementations in interleaved rounds. On the H200 the same experiment (as an inline
script, before this file) measured layernorm at stax 1.005x, 1.005x and 1.010x Inductor in three
states, while the suite's single state said 0.992x; this file has only been dry-run.

    PYTHONPATH=$(ls -d packages/*/src | paste -sd:) python3 benchmarks/gpu/placement_probe.py --workload layernorm
"""

from __future__ import annotations

import argparse
import sys

import bench_gpu as B
import torch


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="layernorm")
    ap.add_argument("--states", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--dry-run", action="store_true", help="tiny CPU tensors under the interpreter (read by bench_gpu)")
    a = ap.parse_args()
    (w,) = [w for w in B.suite() if w.name == a.workload]
    inputs = w.make_inputs()
    impls, pads = {}, []
    for k in range(a.states):
        pads.append(torch.empty(k * B.PAD_FLOATS, device="cpu" if B.DRY else "cuda"))
        stax = B.stax_frontend(w.fn, inputs, tag=f"stax{k}")  # a fresh compile in this state
        ind = torch.compile(B.fresh_copy(w.fn, f"inductor{k}"))
        for f in (lambda s=stax: s(*inputs), lambda i=ind: i(*inputs)):
            for _ in range(3):
                f()
        impls[f"stax{k}"] = lambda s=stax: s(*inputs)
        impls[f"inductor{k}"] = lambda i=ind: i(*inputs)
    B.sync()
    med, _ = B.interleaved(impls, a.rounds, 1 if B.DRY else 20)
    for k in range(a.states):
        s, i = med[f"stax{k}"], med[f"inductor{k}"]
        print(f"{w.name} state {k}: stax {s * 1e3:.2f} us, inductor {i * 1e3:.2f} us, stax/inductor {i / s:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
