"""Which stax.gpu modules of a real model make the host wait for the GPU, and why (issue 20).

A module whose bounds checks cannot poison their lanes (integer gathers, 'set' scatters) read its error
flag at the end of every call until 2c763c6 (a host sync: BERT's `token_type_ids` gather cost 2.1 ms
of a 9.8 ms H100 inference call); it now ends each call with a device-side assert. This prints each
module's error-flag mode (async: pinned host flag; asserted; sync: read in the call) with the checks
that decided it, and the host syncs per call the profiler sees (`aten::_local_scalar_dense`, under
`item()` and `if tensor`) under stax and under eager.

    PYTHONPATH=$(ls -d packages/*/src | paste -sd:):. python3 -m benchmarks.gpu.sync_probe --models bert,gpt2 --train
On a machine without cuda it runs the `test` preset through the GPU route (TRITON_INTERPRET=1 needed).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys

import torch

from benchmarks.harness.backends import wrap
from benchmarks.workloads import real_models as R

SYNC_OPS = ("aten::_local_scalar_dense",)  # (what item() and `if tensor` call: counted once each)


def flag_modes() -> list[str]:
    """One line per live stax.gpu error flag: its mode and why."""
    from stax.gpu.runtime import ErrorFlag

    out = []
    for f in gc.get_objects():
        if type(f) is ErrorFlag:
            mode = "asserted" if f.asserted else ("sync" if f.sync else "async")
            out.append(f"{mode:8s} {len(f.table)} checks  {f.why or '(every check poisons its lanes)'}")
    return sorted(out)


def syncs_per_call(f, inputs, calls: int, sync) -> float:
    from torch.profiler import profile

    with profile() as p:
        for _ in range(calls):
            f(*inputs)
        sync()
    return sum(e.count for e in p.key_averages() if e.key in SYNC_OPS) / calls


def probe(name: str, train: bool, device: str, sync) -> None:
    from stax.frontend import config

    preset = "cuda" if device == "cuda" else "test"
    fn, inputs, _ = R.program(R.build(name, preset, device), train, device=device)
    route = contextlib.nullcontext() if device == "cuda" else config.patch(device_override="gpu")
    with route:
        compiled = wrap("stax", fn)
        for _ in range(3):
            compiled(*inputs)
        sync()
        print(f"== {name} ({'training step' if train else 'inference'}, {preset} preset)", flush=True)
        for line in flag_modes():
            print("   " + line)
        print(f"   host syncs per call: stax {syncs_per_call(compiled, inputs, 3, sync):.1f}, "
              f"eager {syncs_per_call(fn, inputs, 3, sync):.1f}", flush=True)
    torch._dynamo.reset()
    gc.collect()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="bert,gpt2")
    ap.add_argument("--train", action="store_true")
    a = ap.parse_args(argv)
    R.ensure_timm()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for name in [m.name for m in R.MODELS if any(m.name.startswith(p) for p in a.models.split(","))]:
        probe(name, a.train, device, sync)
    return 0


if __name__ == "__main__":
    sys.exit(main())
