"""python -m benchmarks --suite micro|models|real --backends stax,inductor,eager --device cpu|cuda [--quick]

    python -m benchmarks --suite real [--device cpu|cuda] [--dtype float32|bfloat16] [--autocast] [--train]
                         [--quick] [--only a,b]

Writes <out>/<device>-<suite>[-quick].json / .md / .png (the real suite:
<out>/real-<device>[-bfloat16|-autocast][-train][-quick].*) and prints the markdown table.
A full run writes to benchmarks/results/ (the committed results); a --quick run, a smoke
test, writes to bench_out/ at the repository root (scratch, not committed) unless --out
says otherwise. Compile caches (Stax's and Inductor's) start empty in a temporary
directory, so the first compile of each workload is cold and the second warm; --keep-caches
uses the usual cache directories instead.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")  # full runs: the committed results
SCRATCH = os.path.join(os.path.dirname(HERE), "bench_out")  # --quick runs: never the committed results


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description="Stax vs Inductor vs eager, one process.")
    ap.add_argument("--suite", default="micro", choices=("micro", "models", "real"),
                    help="micro: fusion patterns; models: small models from code; real: timm / transformers models")
    ap.add_argument("--backends", default="stax,inductor,eager", help="comma list of stax, inductor, eager")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (cuda:N)")
    ap.add_argument("--quick", action="store_true",
                    help="a few small workloads, few rounds: a smoke run (< 2 min; real: < 3 min on 2 cores)")
    ap.add_argument("--train", action="store_true", help="real: one training step (forward, backward, SGD) instead "
                                                         "of inference")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                    help="real: the models' parameters and inputs")
    ap.add_argument("--autocast", action="store_true", help="real: float32 weights under torch.autocast(bfloat16)")
    ap.add_argument("--compile", action="store_true",
                    help="real: compile time only: per model and backend, cold (fresh caches) and warm (caches "
                         "kept), one process each -> compile-<device>[...].{md,json} (harness/compile_time.py)")
    ap.add_argument("--deadline", type=float, default=None,
                    help="start no workload after this many seconds (the rest are reported as skipped)")
    ap.add_argument("--only", default="", help="comma list of workload name prefixes "
                    "(so t5 does not pick resnet50; overrides --quick's pick)")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved timing rounds (default 25, quick 8)")
    ap.add_argument("--out", default=None, help=f"output directory (default {os.path.relpath(RESULTS)}; "
                                                f"--quick: {os.path.relpath(SCRATCH)}, not committed)")
    ap.add_argument("--name", default=None, help="output file stem (default <device>-<suite>[-quick]; "
                                                 "real: real-<device>[-bfloat16|-autocast][-train][-quick])")
    ap.add_argument("--reports", default=None, help="keep each workload's Stax HTML reports under this directory")
    ap.add_argument("--no-chart", action="store_true", help="skip the PNG (no matplotlib needed)")
    ap.add_argument("--threads", type=int, default=None,
                    help="threads for every backend (torch.set_num_threads and OMP_NUM_THREADS); default: all cores")
    ap.add_argument("--keep-caches", action="store_true",
                    help="use the existing compile caches (cold is then not cold)")
    ap.add_argument("--malloc", default="tuned", choices=("tuned", "default"),
                    help="tuned: stax.cpu's glibc malloc settings for the whole process (every backend); "
                         "default: glibc's (sets STAX_CPU_TUNE_MALLOC=0)")
    return ap.parse_args(argv)


def output_dir(args) -> str:
    """--out, else the committed results for a full run and the scratch directory for --quick."""
    return args.out or (SCRATCH if args.quick else RESULTS)


def stem(args) -> str:
    """The output file stem for these arguments."""
    if args.name:
        return args.name
    device = args.device.split(":")[0]
    quick = "-quick" if args.quick else ""
    if args.suite != "real":
        return f"{device}-{args.suite}{quick}"
    from .workloads.real import Variant

    head = "compile" if args.compile else "real"
    return f"{head}-{device}{Variant(args.train, args.dtype, args.autocast).stem}{quick}"


def write(data: dict, path_stem: str, chart: bool) -> list[str]:
    """JSON, markdown and (unless `chart` is False or matplotlib is missing) the PNG."""
    from .harness import output, real_output

    real = data["meta"]["suite"] == "real"
    output.write_json(data, path_stem + ".json")
    with open(path_stem + ".md", "w") as f:
        f.write(real_output.markdown(data) if real else output.markdown(data))
    written = [path_stem + ".json", path_stem + ".md"]
    if chart:
        try:
            (real_output.chart if real else output.chart)(data, path_stem + ".png")
            written.append(path_stem + ".png")
        except ImportError:
            print("matplotlib is not installed: no chart (pip install -r benchmarks/requirements.txt)", file=sys.stderr)
    return written


def main(argv=None) -> int:
    args = parse(argv)
    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    if args.suite != "real" and (args.train or args.autocast or args.dtype != "float32"):
        print("--train, --dtype and --autocast belong to --suite real", file=sys.stderr)
        return 2
    if args.autocast and args.dtype != "float32":
        print("--autocast keeps float32 weights: use it without --dtype bfloat16", file=sys.stderr)
        return 2
    if args.compile and args.suite != "real":
        print("--compile belongs to --suite real", file=sys.stderr)
        return 2
    out_dir = output_dir(args)
    if args.compile:
        return compile_suite(args, backends, out_dir)
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
              only=tuple(o.strip() for o in args.only.split(",") if o.strip()), report_dir=args.reports,
              deadline_s=args.deadline)
    if args.suite == "real":
        from .workloads.real import Variant

        opts = Options.real(Variant(args.train, args.dtype, args.autocast), quick=args.quick, **kw)
    else:
        opts = Options.quick_defaults(**kw) if args.quick else Options(**kw)
    if args.rounds:
        opts = Options(**{**opts.__dict__, "rounds": args.rounds})
    os.makedirs(out_dir, exist_ok=True)
    path_stem = os.path.join(out_dir, stem(args))
    try:  # the real suite writes its files after every workload: a run cut short keeps what it measured
        data = run(opts, on_workload=(lambda d: write(d, path_stem, False)) if args.suite == "real" else None)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    written = write(data, path_stem, not args.no_chart)
    print(open(path_stem + ".md").read())
    print("wrote " + ", ".join(written) + ("" if args.out or not args.quick else
                                           "  (--quick: scratch output; --out DIR to write elsewhere)"),
          file=sys.stderr)
    return 0 if any(r["status"] == "ok" for r in data["results"]) else 1


def compile_suite(args, backends: tuple, out_dir: str) -> int:
    """--suite real --compile: compile_time.measure per model (its own processes and caches), then the table."""
    import json
    import time

    from .harness import compile_output, compile_time
    from .harness.progress import Progress
    from .harness.runner import Options, _loadavg, machine, selected
    from .workloads.real import Variant

    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    variant = Variant(args.train, args.dtype, args.autocast)
    opts = Options.real(variant, quick=args.quick, device=args.device,
                        only=tuple(o.strip() for o in args.only.split(",") if o.strip()))
    names = [w.name for w in selected(opts)]
    compiled = tuple(b for b in backends if b != "eager")
    progress = Progress(len(names) * len(compiled) * 2)
    t0 = time.time()
    load_before = _loadavg()
    rows = compile_time.measure(names, compiled, args, progress, deadline_s=args.deadline)
    progress.close()
    data = {"meta": {"suite": "real", "mode": "compile", "device": args.device, "label": variant.label,
                     "quick": args.quick, "threads": args.threads, "backends": list(compiled),
                     "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "wall_s": time.time() - t0,
                     "machine": machine(opts), "load_average": {"start": load_before, "end": _loadavg()}},
            "results": rows}
    os.makedirs(out_dir, exist_ok=True)
    path_stem = os.path.join(out_dir, stem(args))
    with open(path_stem + ".json", "w") as f:
        json.dump(data, f, indent=1)
    text = compile_output.markdown(data)
    with open(path_stem + ".md", "w") as f:
        f.write(text)
    print(text)
    print(f"wrote {path_stem}.json, {path_stem}.md", file=sys.stderr)
    return 0 if any("error" not in (r.get("cold") or {"error": 1}) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
