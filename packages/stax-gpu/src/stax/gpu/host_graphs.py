"""A stand-in for CUDA graphs that runs anywhere (CPU tensors, the interpreter), for tests.

It behaves as a CUDA graph does where GraphedCall can tell: capture returns the outputs
without computing them (they hold NaN), keeps their memory but not the output tensors,
and reads the inputs' memory again at each replay. Install it with
`monkeypatch.setattr(stax.gpu.graphs, "BACKEND", HostGraphs())` to graph every module.
Unlike CUDA, it keeps the captured inputs alive (it reads them through their tensors), so
an input that is fresh each call (a dropout seed) never comes back at the same address.
"""

from __future__ import annotations

import math
import time

import torch


class HostGraphs:
    def __init__(self, fail: str = "", gpu_time_scale: float = 1.0, device_type: str = "cpu"):
        self.device_type = device_type  # where captured inputs must live (GraphedCall refuses others)
        self.fail = fail  # capture raises RuntimeError(fail) when set
        self.gpu_time_scale = gpu_time_scale  # `seconds` reports host time x this (a GPU-bound call: > 1)
        self.in_capture = False  # what capturing() answers: inside a user's capture
        self.captures = self.replays = 0

    def capturing(self) -> bool:
        return self.in_capture

    def new_pool(self) -> object:
        """A pool handle: host memory is not pooled here, but GraphedCall's rules for shared pools apply."""
        return object()

    def capture(self, call, args, pool=None):
        if self.fail:
            raise RuntimeError(self.fail)
        inputs = list(args)
        stores = {a.untyped_storage().data_ptr(): a.untyped_storage() for a in inputs}
        saved = [(st, st.clone()) for st in stores.values()]  # whole storages: an output may lie past a view
        outs = call(args)
        # through aliases: a CUDA graph's capture bumps no tensor's version counter, and autograd
        # checks those (an input saved for an eager backward would look modified in place)
        for o in outs:
            if o.is_floating_point():
                _alias(o).fill_(math.nan)
        for st, s in saved:  # as if nothing ran (an output written in place included)
            st.copy_(s)
        self.captures += 1
        where = [(o.untyped_storage(), o.storage_offset(), o.size(), o.stride()) for o in outs]
        return (call, inputs, where), outs

    def mark(self) -> float:
        return time.perf_counter()

    def seconds(self, start: float, end: float) -> float:
        return (end - start) * self.gpu_time_scale

    def replay(self, handle) -> None:
        self.replays += 1
        call, inputs, where = handle
        for (storage, offset, size, stride), new in zip(where, call(list(inputs))):
            _alias_of(storage, offset, size, stride, new).copy_(new)


def _alias_of(storage, offset, size, stride, like: torch.Tensor) -> torch.Tensor:
    """A tensor over `storage` with its own version counter (writes through it bump no other's)."""
    return torch.empty(0, dtype=like.dtype, device=like.device).set_(storage, offset, size, stride)


def _alias(t: torch.Tensor) -> torch.Tensor:
    return _alias_of(t.untyped_storage(), t.storage_offset(), t.size(), t.stride(), t)
