"""Dynamic shapes on the GPU (issue 23, stax.gpu): benchmarks/cpu/dynamic_seq.py's arms on cuda.

eager; stax `dynamic=True` (stax.gpu's symbolic-size Triton kernels: one compile for all sizes, CUDA graphs
keyed by sizes and input addresses); stax static (a compile per size, replayed as CUDA graphs); Inductor
`dynamic=True`. Times are medians of interleaved rounds with a device synchronization around each sample.

    python -m benchmarks.gpu.dynamic_seq --models bert,gpt2 --lengths 17,33,64,128,256,512 --batches 1,8,32
    python -m benchmarks.gpu.dynamic_seq --out benchmarks/results/gpu-dynamic-seq.md
    TRITON_INTERPRET=1 python -m benchmarks.gpu.dynamic_seq --dry-run   # no GPU: CPU tensors, the interpreter
"""

from __future__ import annotations

import argparse
import contextlib

import torch
import torch._dynamo

from benchmarks.cpu import dynamic_seq as seq


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="bert")
    p.add_argument("--preset", default="quick")
    p.add_argument("--lengths", default="17,64,128")
    p.add_argument("--batches", default="2")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--min-sample-s", type=float, default=0.02)
    p.add_argument("--dry-run", action="store_true",
                   help="CPU tensors through stax.gpu under TRITON_INTERPRET=1 (config.device_override='gpu')")
    p.add_argument("--out", default=None, help="write the markdown table here")
    args = p.parse_args(argv)
    torch._dynamo.config.recompile_limit = 256  # a static arm compiles once per size
    torch._dynamo.config.cache_size_limit = 256
    if args.dry_run:
        from stax.frontend import config

        device, sync, route = "cpu", (lambda: None), config.patch(device_override="gpu")
    else:
        device, sync, route = "cuda", torch.cuda.synchronize, contextlib.nullcontext()
    lengths = [int(x) for x in args.lengths.split(",")]
    batches = [int(x) for x in args.batches.split(",")]
    with route:
        results = [seq.run_model(m, args.preset, lengths, batches, args.rounds, args.min_sample_s, device, sync)
                   for m in args.models.split(",")]
    name = "CPU tensors through the interpreter (dry run)" if args.dry_run else torch.cuda.get_device_name()
    text = seq.markdown(results, args, name, "benchmarks/gpu/dynamic_seq.py", "stax.gpu")
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
