"""Achieved bandwidth against the machine's measured copy bandwidth (same run, same device).

Copy bandwidth: `dst.copy_(src)` of a large float32 tensor (read + write counted),
median of several copies. A workload's achieved bandwidth is its minimum traffic
(workloads.min_bytes) over its median time; "% of copy" says how close it gets.
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


def achieved(nbytes: int, seconds: float) -> float:
    return nbytes / seconds if seconds > 0 else float("nan")
