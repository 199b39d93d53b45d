"""python -m benchmarks --suite micro|models --backends stax,inductor,eager --device cpu|cuda [--quick]

Writes <out>/<device>-<suite>[-quick].json / .md / .png and prints the markdown table.
Compile caches (Stax's and Inductor's) start empty in a temporary directory, so the
first compile of each workload is cold and the second warm; --keep-caches uses the
usual cache directories instead.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description="Stax vs Inductor vs eager, one process.")
    ap.add_argument("--suite", default="micro", choices=("micro", "models"))
    ap.add_argument("--backends", default="stax,inductor,eager", help="comma list of stax, inductor, eager")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (cuda:N)")
    ap.add_argument("--quick", action="store_true", help="a few small workloads, few rounds: a smoke run (< 2 min)")
    ap.add_argument("--only", default="", help="comma list of workload name substrings (overrides --quick's pick)")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved timing rounds (default 25, quick 8)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"), help="output directory")
    ap.add_argument("--name", default=None, help="output file stem (default <device>-<suite>[-quick])")
    ap.add_argument("--reports", default=None, help="keep each workload's Stax HTML reports under this directory")
    ap.add_argument("--no-chart", action="store_true", help="skip the PNG (no matplotlib needed)")
    ap.add_argument("--threads", type=int, default=None,
                    help="threads for every backend (torch.set_num_threads and OMP_NUM_THREADS); default: all cores")
    ap.add_argument("--keep-caches", action="store_true", help="use the existing compile caches (cold is then not cold)")
    ap.add_argument("--malloc", default="tuned", choices=("tuned", "default"),
                    help="tuned: stax.cpu's glibc malloc settings for the whole process (every backend); "
                         "default: glibc's (sets STAX_CPU_TUNE_MALLOC=0)")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    tmp = None
    if not args.keep_caches:  # before torch / inductor / stax read them
        tmp = tempfile.mkdtemp(prefix="stax-bench-cache-")
        os.environ["STAX_CACHE_DIR"] = os.path.join(tmp, "stax")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, "inductor")
        os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(tmp, "triton"))

    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # stax.cpu reads it when compiling
    if args.malloc == "default":
        os.environ["STAX_CPU_TUNE_MALLOC"] = "0"

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    from .harness import output
    from .harness.backends import BACKENDS
    from .harness.runner import Options, run

    bad = [b for b in backends if b not in BACKENDS]
    if bad:
        print(f"unknown backend(s) {bad}; choose from {BACKENDS}", file=sys.stderr)
        return 2
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("--device cuda: no CUDA device is available", file=sys.stderr)
        return 2
    kw = dict(suite=args.suite, backends=backends, device=args.device,
              only=tuple(o.strip() for o in args.only.split(",") if o.strip()), report_dir=args.reports)
    opts = Options.quick_defaults(**kw) if args.quick else Options(**kw)
    if args.rounds:
        opts = Options(**{**opts.__dict__, "rounds": args.rounds})
    try:
        data = run(opts)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, args.name or f"{args.device.split(':')[0]}-{args.suite}{'-quick' if args.quick else ''}")
    output.write_json(data, stem + ".json")
    table = output.markdown(data)
    with open(stem + ".md", "w") as f:
        f.write(table)
    written = [stem + ".json", stem + ".md"]
    if not args.no_chart:
        try:
            output.chart(data, stem + ".png")
            written.append(stem + ".png")
        except ImportError:
            print("matplotlib is not installed: no chart (pip install -r benchmarks/requirements.txt)", file=sys.stderr)
    print(table)
    print("wrote " + ", ".join(written), file=sys.stderr)
    return 0 if any(r["status"] == "ok" for r in data["results"]) else 1


if __name__ == "__main__":
    sys.exit(main())
