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
import weakref

import torch


class HostGraphs:
    def __init__(self, fail: str = "", gpu_time_scale: float = 1.0, device_type: str = "cpu"):
        self.device_type = device_type  # where captured inputs must live (GraphedCall refuses others)
        self.fail = fail  # capture raises RuntimeError(fail) when set
        self.gpu_time_scale = gpu_time_scale  # `seconds` reports host time x this (a GPU-bound call: > 1)
        self.in_capture = False  # what capturing() answers: inside a user's capture
        self.captures = self.replays = 0
        self.pool_graphs: dict = {}  # pool handle -> weak references to the graphs captured into it

    def capturing(self) -> bool:
        return self.in_capture

    def new_pool(self) -> object:
        """A pool handle: host memory is not pooled here, but GraphedCall's rules for shared pools apply."""
        return object()

    def capture(self, call, args, pool=None):
        if self.fail:
            raise RuntimeError(self.fail)
        if pool is not None:  # CUDA's allocator refuses a pool whose graphs are all gone (its use count is 0)
            graphs = self.pool_graphs.setdefault(pool, [])
            if graphs and not any(g() is not None for g in graphs):
                raise RuntimeError("it->second->use_count > 0 INTERNAL ASSERT FAILED (HostGraphs: a capture "
                                   "into a shared pool whose graphs are all gone)")
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
        graph = _Graph(call, inputs, where)
        if pool is not None:
            self.pool_graphs[pool].append(weakref.ref(graph))
        return graph, outs

    def mark(self) -> float:
        return time.perf_counter()

    def seconds(self, start: float, end: float) -> float:
        return (end - start) * self.gpu_time_scale

    def replay(self, handle) -> None:
        self.replays += 1
        call, inputs, where = handle.call, handle.inputs, handle.where
        for (storage, offset, size, stride), new in zip(where, call(list(inputs))):
            _alias_of(storage, offset, size, stride, new).copy_(new)


class _Graph:
    """A captured call: what a replay runs again, and where it writes its outputs."""

    __slots__ = ("call", "inputs", "where", "__weakref__")

    def __init__(self, call, inputs, where):
        self.call, self.inputs, self.where = call, inputs, where


def _alias_of(storage, offset, size, stride, like: torch.Tensor) -> torch.Tensor:
    """A tensor over `storage` with its own version counter (writes through it bump no other's)."""
    return torch.empty(0, dtype=like.dtype, device=like.device).set_(storage, offset, size, stride)


def _alias(t: torch.Tensor) -> torch.Tensor:
    return _alias_of(t.untyped_storage(), t.storage_offset(), t.size(), t.stride(), t)
