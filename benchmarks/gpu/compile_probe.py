"""Cold compile of one models-suite workload with torch.compile(backend="stax"), in this process
with empty compile caches: the first call's wall time, and what stax.gpu's compile workers did.

    PYTHONPATH=$(ls -d packages/*/src | paste -sd:) python3 benchmarks/gpu/compile_probe.py "GPT eval"
    STAX_GPU_CONFIG=compile_workers=0 python3 benchmarks/gpu/compile_probe.py "GPT eval"   # the JIT alone
    python3 benchmarks/gpu/compile_probe.py "GPT eval" --backend inductor
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

_TMP = tempfile.mkdtemp(prefix="stax-compile-probe-")
for var, sub in (("STAX_CACHE_DIR", "stax"), ("TRITON_CACHE_DIR", "triton"), ("TORCHINDUCTOR_CACHE_DIR", "inductor")):
    os.environ[var] = os.path.join(_TMP, sub)  # cold: nothing compiled before

import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from benchmarks.workloads.models import WORKLOADS  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload")
    ap.add_argument("--backend", default="stax", choices=("stax", "inductor"))
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    (w,) = [w for w in WORKLOADS if w.name == a.workload]
    case = w.make(a.device, False)
    if a.backend == "stax":
        from stax.frontend.backend import register

        register()
    fn = torch.compile(case.fn, backend=a.backend if a.backend == "stax" else "inductor")
    t = time.perf_counter()
    fn(*case.inputs)
    if a.device.startswith("cuda"):
        torch.cuda.synchronize()
    cold = time.perf_counter() - t
    stats = ""
    if a.backend == "stax":
        from stax.gpu import precompile

        stats = f" compile workers: {dict(precompile.STATS)} ({os.environ.get('STAX_GPU_CONFIG', 'default config')})"
    print(f"{w.name} {a.backend}: cold first call {cold:.2f} s{stats}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
