"""How much does a streaming kernel's speed depend on where its output lies relative to its input?

A first layernorm probe (20 launches per timing) showed the same kernel 8 % faster into one
preallocated buffer than inside either compiled function; with 100 launches the gap was ~1 %
(the first call's host time, not placement: results/gpu-h200-layernorm.md). This sweeps the
output's offset inside one pool (so y - x takes chosen values below and above the 2 MiB page)
for the layernorm kernel stax
picks and for a plain copy, in interleaved rounds; repeated offsets measure the noise.

    PYTHONPATH=$(ls -d packages/*/src | paste -sd:):. python3 benchmarks/gpu/offset_probe.py --out DIR
    ... --dry-run   # CPU tensors under TRITON_INTERPRET=1 (the sweep's plumbing only)
"""

from __future__ import annotations

import argparse
import sys

import bench_gpu as B
import torch
from layernorm_probe import DRY, C, N, ln_per_hoist

KIB, MIB = 1024, 1024 * 1024
# output offsets in bytes: within the 2 MiB page, then across pages; 0 and 4 MiB twice (noise)
OFFSETS = [0, 512, 4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, 512 * KIB, MIB, 1536 * KIB,
           2 * MIB, 4 * MIB, 6 * MIB, 8 * MIB, 16 * MIB, 32 * MIB + 8 * KIB, 0, 4 * MIB]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--out", default=None)
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    dev = "cpu" if DRY else "cuda"
    x, w, b = (torch.randn(*s, device=dev) for s in ((N, C), (C,), (C,)))
    n = N * C
    offsets = [o for o in OFFSETS if o < (MIB if DRY else 64 * MIB)]
    pool = torch.empty(n + max(offsets) // 4, device=dev)
    impls, where = {}, {}
    for k, off in enumerate(offsets):
        y = pool[off // 4: off // 4 + n].view(N, C)
        tag = f"{k:02d} +{off} B"
        where[tag] = y.data_ptr() - x.data_ptr()
        impls[f"ln  {tag}"] = lambda y=y: ln_per_hoist[(N // 2,)](x, w, b, y, C, 2, num_warps=16)
        impls[f"cpy {tag}"] = lambda y=y: y.copy_(x)
    from benchmarks.workloads.micro import layernorm

    stax_fn = B.stax_frontend(layernorm, [x, w, b])
    ind = torch.compile(B.fresh_copy(layernorm, "inductor"))
    impls["stax"] = lambda: stax_fn(x, w, b)
    impls["inductor"] = lambda: ind(x, w, b)
    impls["ln  fresh empty_like"] = lambda: ln_per_hoist[(N // 2,)](x, w, b, torch.empty_like(x), C, 2, num_warps=16)
    for name in ("stax", "inductor"):
        where[name] = impls[name]().data_ptr() - x.data_ptr()
    for f in impls.values():
        f()
    B.sync()
    names = list(impls)
    iters, rounds = (1, 1) if DRY else (a.iters, a.rounds)
    med, samples = B.interleaved(impls, rounds, iters)
    lines = [f"{N}x{C} fp32: output offset sweep, {rounds} interleaved rounds x {iters} launches, medians (us);"
             " y-x: output address minus input address", ""]
    for nm in names:
        tag = nm[4:] if nm[:4] in ("ln  ", "cpy ") else nm
        d = where.get(tag)
        lines.append(f"{nm:28s} {med[nm] * 1e3:9.2f}   y-x {d / MIB:+10.4f} MiB (mod 2 MiB: {d % (2 * MIB) // KIB} KiB)"
                     if d is not None else f"{nm:28s} {med[nm] * 1e3:9.2f}")
    B.report(a.out, "offset_probe", "\n".join(lines), {"medians_ms": med, "samples_ms": samples, "y_minus_x": where})
    return 0


if __name__ == "__main__":
    sys.exit(main())
