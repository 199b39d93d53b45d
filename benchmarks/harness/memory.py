"""Peak memory: measured on CUDA, planned or measured on CPU.

cuda: torch.cuda.max_memory_allocated over one call, minus what was allocated
before it (inputs and parameters are not counted). cpu: the Stax memory plan's
peak and its lower bound M* (Def 7.5), next to the estimated peak of eager PyTorch
running the same ATen graphs op by op — read from the per-graph reports Stax
writes (stax.frontend.report); with several graphs (forward + backward) the
largest of each is shown. cpu, measured (the real suite, every backend alike):
`cpu_tensor_peak`, the peak of tensor memory during the calls of a torch.profiler
profile with profile_memory=True — every allocation and free of torch's CPU allocator
is an event with its size, so the running sum of sizes is the tensor memory live
beyond what was allocated before the profile (the counterpart of the cuda number;
not process RSS, and not scratch memory a kernel mallocs for itself).
"""

from __future__ import annotations

import glob
import os

import torch


def cuda_peak(fn, device: str, sync) -> int:
    sync()
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    fn()
    sync()
    return int(torch.cuda.max_memory_allocated(device) - base)


def stax_plan(report_dir: str) -> dict | None:
    """Peak / M* / eager estimate over the graphs reported in `report_dir` (None when there are none)."""
    from stax.frontend.report import load

    graphs = []
    for path in sorted(glob.glob(os.path.join(report_dir, "*.html"))):
        if os.path.basename(path) == "index.html":
            continue
        data = load(path)
        mem = data.get("memory")
        if mem:
            graphs.append({"graph": data.get("ident"), "peak_bytes": mem["peak_bytes"],
                           "lower_bound_bytes": mem["lower_bound_bytes"],
                           "eager_estimate_bytes": mem.get("eager_peak_bytes")})
    if not graphs:
        return None
    eager = [g["eager_estimate_bytes"] for g in graphs if g["eager_estimate_bytes"] is not None]
    return {
        "kind": "stax_plan",
        "peak_bytes": max(g["peak_bytes"] for g in graphs),
        "lower_bound_bytes": max(g["lower_bound_bytes"] for g in graphs),
        "eager_estimate_bytes": max(eager) if eager else None,
        "graphs": graphs,
    }


def cpu_tensor_peak(kineto_events) -> int | None:
    """Peak bytes of CPU tensor memory allocated during a profile, relative to its start
    (`prof.profiler.kineto_results.events()` of a profile taken with profile_memory=True)."""
    mem = sorted((e.start_ns(), e.nbytes()) for e in kineto_events
                 if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU)
    if not mem:
        return None
    live = peak = 0
    for _, n in mem:
        live += n
        peak = max(peak, live)
    return int(peak)
