"""Achieved bandwidth against the machine's measured copy bandwidth (same run, same device).

Copy bandwidth: `dst.copy_(src)` of a large float32 tensor (read + write counted),
median of several copies. A workload's achieved bandwidth is its minimum traffic
(workloads.min_bytes) over its median time; "% of copy" divides it by the copy
bandwidth measured in the same interleaved rounds as the backends (the same large copy,
timed once per round), so that on a shared machine whose bandwidth drifts during a run
both see the same conditions (a single figure taken at the start moved by +-20 % between
runs here). The copy is large (not the workload's size) so that it never fits in cache.
"""

from __future__ import annotations

import torch

from .timing import Stats, sync_for, time_once


def copy_bandwidth(device: str, nbytes: int = 256 << 20, reps: int = 10) -> float:
    """Bytes per second of a large tensor copy on `device` (reads + writes)."""
    src = torch.randn(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    sync = sync_for(device)
    dst.copy_(src)
    samples = [time_once(lambda: dst.copy_(src), 1, sync) for _ in range(reps)]
    return 2 * nbytes / Stats.of(samples).median


COPY = "copy"  # the reference's key among the timed functions


def big_copy(nbytes: int, device: str):
    """`dst.copy_(src)` over `nbytes` of float32 (2 * nbytes of traffic), for timing in rounds."""
    src = torch.randn(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def achieved(nbytes: int, seconds: float) -> float:
    return nbytes / seconds if seconds > 0 else float("nan")
