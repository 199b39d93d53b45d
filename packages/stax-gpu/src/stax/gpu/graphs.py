"""CUDA graph replay of a module's wrapper: one host call instead of one launch per kernel.

A module's `call(args)` is a pure function of the memory its inputs point at: shapes are
static and every kernel argument other than a pointer is a constant. So a CUDA graph
captured for one tuple of input addresses (and layouts) replays the call exactly for any
later call with those addresses, whatever they hold by then. What a graph cannot do is
give fresh outputs: it writes the same buffers (in its memory pool) each replay.
`GraphedCall` therefore replays an instance only when nothing outside it holds that
instance's previous outputs (each output's Python reference count, tensor use count and
storage use count are back at their values right after capture); otherwise it captures
another instance for the key (up to `instances`) or makes a plain call. A user who keeps
`y = f(x)` across calls gets two instances used in turn; nothing is ever overwritten
while reachable. One-element outputs (a loss) are handed out as copies, so a caller that
keeps last step's loss does not cost a second instance.

Instance k of every module captures into the process's shared pool k (graph_pools.py), so a
later capture reuses what an earlier one freed, as plain calls do: a graphed training step
keeps about a plain step's memory, not the sum of its graphs' peaks. An instance then replays
only while every instance captured after it into its pool is idle too (graph_pools's rule).

Modules that call fallback ATen ops (any may synchronize) are not graphed; lowered extern
kernels (matmuls, convolutions) are captured. An output written into an input's memory (§7.5
in-place reuse of a donated input: an optimizer step's new parameters) is not the graph's: each
call hands it out as a view of that call's input, which the key's address makes the same memory.
A small input whose address changes each call (a backward's loss gradient, fresh token ids) is
copied into a buffer of the graph's own and left out of the key (staging, STAGE_BYTES): keyed by
it, the graph would never replay. Larger inputs at new addresses most calls cost a capture
each: a module that has captured 4 x its keys with fewer than REPLAYS_PER_CAPTURE replays per
capture turns its graphs off. A module whose error flag is read synchronously (error_sync, or
the interpreter) is captured without that read, and GraphedCall reads the flag after each
replay, so the call raises as a plain one does (an asserted flag's device-side assert is captured).

With programmatic dependent launch (GpuConfig.pdl) a graph has a cost too: PDL overlaps
a kernel's launch with the previous kernel's drain within a graph but not across two
graph launches. So before capturing, `GraphedCall(gpu_bound_ratio=r)` times a few plain
calls (`probe_calls`): when their median GPU time is at least r x their least host time,
launches already hide behind the kernels, and that key stays on plain launches (a host-bound
one stays graphed). The least host time: one call slowed by the host (a page fault, a
collector pause) must not make a GPU-bound key look launch-bound, hence three timed calls.
The GPU span of a call made on an idle GPU includes the host's launch time, so a key whose
kernels take about as long as its host work can be misjudged GPU-bound (config.pdl).
"""

from __future__ import annotations

import functools
import logging
import statistics
import sys
import time
import warnings
from collections import OrderedDict

import torch

log = logging.getLogger("stax.gpu")


REPLAYS_PER_CAPTURE = 4  # fewer, once a module has captured 4 x its keys, and its graphs are turned off
STAGE_BYTES = 1 << 16  # inputs that move each call, up to this many bytes in all, are copied in (GraphedCall)


class CudaGraphs:
    """The real backend: torch.cuda.CUDAGraph, captured into a shared pool (graph_pools) or a private one."""

    device_type = "cuda"  # what a captured input must live on (a host tensor's value would be baked in)

    @staticmethod
    def capturing() -> bool:
        return torch.cuda.is_current_stream_capturing()

    @staticmethod
    def new_pool():
        return torch.cuda.graph_pool_handle()

    @staticmethod
    def capture(call, args: list, pool=None):
        g = torch.cuda.CUDAGraph()
        try:  # thread_local: other threads may use the GPU meanwhile
            with torch.cuda.graph(g, pool=pool, capture_error_mode="thread_local"):
                outs = call(args)
        except Exception:
            _close_generator_capture()
            raise
        return g, outs

    @staticmethod
    def replay(handle) -> None:
        handle.replay()

    @staticmethod
    def mark():
        """A point on the current stream's timeline (a timing event recorded now)."""
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    @staticmethod
    def seconds(start, end) -> float:
        """GPU seconds from mark `start` to mark `end` (waits for `end` if need be: once per key)."""
        end.synchronize()
        return start.elapsed_time(end) / 1e3


def _close_generator_capture() -> None:
    """A capture that fails ends in an error from cudaStreamEndCapture, before torch runs the default
    generator's capture epilogue: the generator stays 'capturing', and the next eager random op raises
    "Offset increment outside graph capture". One empty capture runs the prologue and epilogue again."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ("the CUDA graph is empty")
            with torch.cuda.graph(torch.cuda.CUDAGraph()):
                pass
    except Exception as e:  # noqa: BLE001 - the failed capture's error is the one to report
        log.warning("stax-gpu: closing the RNG state of a failed CUDA graph capture failed too (%s)", e)


BACKEND = CudaGraphs  # what GraphedCall captures with (tests: host_graphs.HostGraphs() graphs any module)


def _use_counts(outs) -> tuple:
    """Who holds each output: (Python refs, tensor use count, storage use count)."""
    storage_count = torch._C._storage_Use_Count
    return tuple((sys.getrefcount(o), o._use_count(), storage_count(c)) for o, c in outs)


class _Instance:
    __slots__ = ("handle", "outs", "result", "base", "copied", "pool", "views", "__weakref__")

    def __init__(self, handle, result: list, pool=None, views: dict | None = None):
        self.handle = handle
        self.result = result  # the outputs in the graph's memory: each call hands out a new tuple of them
        self.outs = tuple((o, o.untyped_storage()._cdata) for o in result)
        self.base = _use_counts(self.outs)
        # one-element outputs (a loss) are handed out as copies: a caller that keeps last step's loss
        # while calling again would otherwise cost a second instance (a second copy of every saved activation)
        self.copied = tuple(k for k, o in enumerate(result) if o.numel() <= 1)
        self.pool = pool  # graph_pools.Pool shared with other instances, or None (a private pool)
        # output position -> (input, offset from the input's start, size, stride): outputs written into an
        # input's memory (in-place reuse of a donated input), handed out as views of that call's input
        self.views = views or {}

    def idle(self) -> bool:
        return _use_counts(self.outs) == self.base

    def views_of(self, args: list) -> list:
        """This call's outputs in its inputs' memory (taken before the call lets go of its inputs)."""
        if not self.views:
            return []
        return [(k, args[i].as_strided(size, stride, args[i].storage_offset() + rel))
                for k, (i, rel, size, stride) in sorted(self.views.items())]

    def hand_out(self, views: list) -> tuple:
        """This call's outputs, after its replay (`views`: views_of's)."""
        if not self.copied and not views:
            return tuple(self.result)
        out = list(self.result)
        for k in self.copied:
            out[k] = out[k].clone()
        for k, v in views:
            out.insert(k, v)
        return tuple(out)


def _input_views(outs, args: list):
    """{output position: (input, offset, size, stride)} for outputs in an input's memory, or why not replayable.

    Such an output must lie within its input's own extent (the key holds the input's address and layout, not
    its storage's), so a later input at the same address backs the same elements."""
    owner = {a.untyped_storage().data_ptr(): i for i, a in enumerate(args)}
    views = {}
    for k, o in enumerate(outs):
        i = owner.get(o.untyped_storage().data_ptr())
        if i is None:
            continue
        a = args[i]
        rel = o.storage_offset() - a.storage_offset()
        if o.dtype != a.dtype or rel < 0 or rel + _extent(o) > _extent(a):
            return f"output {k} reaches outside input {i}, whose memory it shares"
        views[k] = (i, rel, tuple(o.size()), tuple(o.stride()))
    return views


def _extent(t: torch.Tensor) -> int:
    """Elements from a tensor's first to one past its last (0 when empty)."""
    if t.numel() == 0:
        return 0
    return 1 + sum((n - 1) * abs(st) for n, st in zip(t.size(), t.stride()))


class _Entry:
    __slots__ = ("layouts", "instances", "staging")

    def __init__(self, layouts):
        self.layouts = layouts
        self.instances: list[_Instance] = []
        self.staging: tuple = ()  # ((input position, buffer the graph reads instead), ...)

    def stage(self, args: list) -> None:
        """Copy each staged input into the buffer the graphs read, which takes its place in `args`."""
        for k, buf in self.staging:
            buf.copy_(args[k])
            args[k] = buf


def _layouts(args) -> tuple:
    return tuple((a.size(), a.stride(), a.dtype) for a in args)


class GraphedCall:
    """`call(args)` that replays CUDA graphs keyed by the inputs' addresses.

    A key's first `warmup` calls run plainly (the first one autotunes); the next captures.
    At most `keys` input-address tuples keep graphs (least recently used dropped), each
    with at most `instances` graphs. `stats` counts replays, captures and plain calls.
    With `gpu_bound_ratio` > 0 the `probe_calls` calls after the warmup are timed plain
    calls, and the next one captures only if they were not GPU-bound (module docstring).
    """

    def __init__(self, call, name: str, errors=None, warmup: int = 1, instances: int = 2, keys: int = 4,
                 backend=None, gpu_bound_ratio: float = 0.0, probe_calls: int = 3, pools=None,
                 stage_bytes: int = STAGE_BYTES):
        self.call = call
        self.name = name
        self.errors = errors
        # an error flag read synchronously: read after each replay (the capture holds the wrapper's read)
        self.sync_errors = bool(errors) and getattr(errors, "sync", False)
        self.warmup = warmup
        self.max_instances = instances
        self.max_keys = keys
        self.backend = backend if backend is not None else BACKEND
        self.entries: OrderedDict[tuple, _Entry] = OrderedDict()
        self.seen: dict[tuple, int] = {}
        self.gpu_bound_ratio = gpu_bound_ratio
        self.probe_calls = max(1, probe_calls)
        self.probes: dict[tuple, list] = {}  # key -> [(start mark, end mark, host seconds)] of its timed calls
        self.gpu_bound: set[tuple] = set()  # keys that stay on plain launches
        self.disabled = ""  # why graphs were turned off for this module, once they were
        self.stats = {"replays": 0, "captures": 0, "plain": 0}
        self.pools = pools  # graph_pools.PoolRegistry: instance k captures into its shared pool k; None: private
        self.stage_bytes = stage_bytes
        self.staged: frozenset[int] = frozenset()  # input positions copied into the graph's buffers (learned)
        self.last: tuple = ()  # the previous call's input addresses

    def __call__(self, args: list, sizes: tuple | None = None):
        """`sizes`: a symbolic-shape module's size values (its call's second argument): part of the
        key, since a capture bakes them in (kernel arguments, grids, allocations)."""
        call = self.call if sizes is None else functools.partial(_sized, self.call, sizes)
        if self.disabled or self.backend.capturing():  # inside a user's capture: launches join it
            self.stats["plain"] += 1
            return call(args)
        ptrs = tuple(a.data_ptr() for a in args)
        key = self._key(ptrs, sizes)
        entry = self.entries.get(key)
        if entry is None and self.stage_bytes and self._learn_staging(ptrs, args):
            key = self._key(ptrs, sizes)
        self.last = ptrs
        if self.gpu_bound and key in self.gpu_bound:  # (empty unless pdl: no lookup on the replay path)
            self.stats["plain"] += 1
            return call(args)
        if entry is not None and entry.layouts == _layouts(args):
            for inst in entry.instances:
                if inst.idle() and (inst.pool is None or inst.pool.clear_for(inst)):
                    entry.stage(args)
                    views = inst.views_of(args)
                    args.clear()
                    if self.errors:
                        self.errors.begin()  # raise what an earlier call flagged
                    self.entries.move_to_end(key)
                    self.stats["replays"] += 1
                    if self.sync_errors:
                        self._replay_then_read(inst.handle)
                    else:
                        self.backend.replay(inst.handle)
                    return inst.hand_out(views)
            if len(entry.instances) >= self.max_instances:
                self.stats["plain"] += 1
                return call(args)
            return self._capture(key, entry, args, call)
        n = self.seen.get(key, 0) + 1
        if n <= self.warmup or entry is not None:  # entry with other layouts: a plain call checks them
            self.seen[key] = n
            if len(self.seen) > 64 * self.max_keys:  # addresses that never repeat: forget them
                self.seen.clear()
            self.stats["plain"] += 1
            return call(args)
        if self.gpu_bound_ratio > 0:
            if len(self.probes.get(key, ())) < self.probe_calls:
                return self._timed_call(key, args, call)
            if self._is_gpu_bound(key, self.probes.pop(key)):
                self.stats["plain"] += 1
                return call(args)
        entry = _Entry(_layouts(args))
        return self._capture(key, entry, args, call)

    def _key(self, ptrs: tuple, sizes) -> tuple:
        """What a graph is keyed by: the addresses of the inputs it reads in place, and the sizes."""
        if self.staged:
            ptrs = tuple(p for k, p in enumerate(ptrs) if k not in self.staged)
        return ptrs if sizes is None else (*ptrs, *sizes)

    def _learn_staging(self, ptrs: tuple, args: list) -> bool:
        """Stage the inputs that moved since the last call, when they are small (STAGE_BYTES in all).

        A training step's backward gets a fresh loss gradient each step, and a model called on fresh
        token ids gets new addresses each call: keyed by them, its graph would never replay. Copying
        them into buffers of the graph's own costs a launch each; their old keys are dropped."""
        if len(ptrs) != len(self.last):
            return False
        moved = [k for k, (p, q) in enumerate(zip(ptrs, self.last)) if p != q and k not in self.staged]
        size = sum(args[k].untyped_storage().nbytes() for k in moved)
        if not moved or size > self.stage_bytes:
            return False
        self.staged = self.staged | frozenset(moved)
        self.entries.clear()
        self.seen.clear()
        self.probes.clear()
        self.gpu_bound.clear()
        log.info("%s: inputs %s move each call (%d bytes): copied into buffers its CUDA graphs read",
                 self.name, sorted(self.staged), size)
        return True

    def _timed_call(self, key, args: list, call):
        """A plain call whose host and GPU time (with the key's other timed calls) decide whether to capture."""
        if key not in self.probes and len(self.probes) > 64 * self.max_keys:
            self.probes.clear()
        start = self.backend.mark()
        t0 = time.perf_counter()
        outs = call(args)
        host = time.perf_counter() - t0
        self.probes.setdefault(key, []).append((start, self.backend.mark(), host))
        self.stats["plain"] += 1
        return outs

    def _is_gpu_bound(self, key, probes: list) -> bool:
        gpu = statistics.median(self.backend.seconds(start, end) for start, end, _ in probes)
        host = min(h for _, _, h in probes)
        if gpu < self.gpu_bound_ratio * host:
            log.info("%s: input addresses %s launch-bound (median %.1f us on the GPU, least %.1f us on the host "
                     "of %d timed calls): graphed", self.name, ",".join(hex(p) for p in key), gpu * 1e6, host * 1e6,
                     len(probes))
            return False
        if len(self.gpu_bound) >= 64 * self.max_keys:
            self.gpu_bound.clear()
        self.gpu_bound.add(key)
        self.seen.pop(key, None)
        log.info("%s: no CUDA graph for input addresses %s: GPU-bound (median %.1f us on the GPU, least %.1f us "
                 "on the host of %d timed calls; plain launches overlap calls under PDL)", self.name,
                 ",".join(hex(p) for p in key), gpu * 1e6, host * 1e6, len(probes))
        return True

    def _capture(self, key, entry: _Entry, args: list, call):
        captures, replays = self.stats["captures"], self.stats["replays"]
        if captures >= 4 * self.max_keys and replays < REPLAYS_PER_CAPTURE * captures:
            # inputs at new addresses most calls (an optimizer step reading an ungraphed backward's fresh
            # gradients): a capture costs more than the launches its few replays save
            return self._disable(f"input addresses keep changing ({captures} captures, {replays} replays)",
                                 args, call)
        if self.errors:
            self.errors.begin()  # raise what an earlier call flagged here, not inside the capture
        host = [k for k, a in enumerate(args) if a.device.type != self.backend.device_type]
        if not host and self.staged and not entry.staging:
            entry.staging = tuple((k, torch.empty_strided(args[k].size(), args[k].stride(), dtype=args[k].dtype,
                                                          device=args[k].device)) for k in sorted(self.staged))
        given, args = args, list(args)  # a plain call after all gets the caller's inputs, not their staged copies
        entry.stage(args)
        if host:  # a CPU scalar (attention RNG state) is read by the host when launching: a replay would reuse it
            return self._disable(f"inputs {host} are on the host (a graph would keep their first values)", given, call)
        pool = None
        if self.pools is not None:
            pool = self.pools.pool(self.backend, args[0].device if args else "", len(entry.instances))
            pool.sweep()
        if self.sync_errors:
            self.errors.held = True
        try:
            handle, outs = self.backend.capture(call, list(args), pool=None if pool is None else pool.handle)
        except Exception as e:  # noqa: BLE001 - a capture failure costs the graphs, never the call
            return self._disable(f"capture failed ({type(e).__name__}: {e})", given, call, logging.WARNING)
        finally:
            if self.sync_errors:
                self.errors.held = False
        if not all(isinstance(o, torch.Tensor) for o in outs):
            return self._disable("an output is not a tensor", given, call)
        views = _input_views(outs, args)
        if not isinstance(views, str) and any(i in self.staged for i, *_ in views.values()):
            views = "an output is written into a staged input (a copy of the caller's)"
        if isinstance(views, str):
            return self._disable(views, given, call)
        result = [o for k, o in enumerate(outs) if k not in views]
        del outs  # the baseline counts below must see only this module's own references
        inst = _Instance(handle, result, pool, views)
        if pool is not None:
            pool.join(inst)
        entry.instances.append(inst)
        self.entries[key] = entry
        self.entries.move_to_end(key)
        self.seen.pop(key, None)
        while len(self.entries) > self.max_keys:  # a shared pool minds a dropped instance's outputs
            self.entries.popitem(last=False)
        self.stats["captures"] += 1
        log.info("%s: captured CUDA graph %d for input addresses %s%s", self.name, len(entry.instances),
                 ",".join(hex(p) for p in key), "" if pool is None else f" (shared pool {len(entry.instances) - 1})")
        views = inst.views_of(args)
        args.clear()
        given.clear()
        if self.sync_errors:  # (capture recorded the kernels without running them)
            self._replay_then_read(inst.handle)
        else:
            self.backend.replay(inst.handle)
        return inst.hand_out(views)

    def _replay_then_read(self, handle) -> None:
        """A replay of a module whose flag is read synchronously: the read the capture held, after it
        (a stand-in backend's replay runs the wrapper, whose own read is held too)."""
        self.errors.held = True
        try:
            self.backend.replay(handle)
        finally:
            self.errors.held = False
        self.errors.end()

    def _disable(self, why: str, args: list, call, level: int = logging.INFO):
        """Graphs off for this module (a failed capture is a warning: something in the call syncs the host)."""
        self.disabled = why
        self.entries.clear()
        log.log(level, "%s: CUDA graphs off: %s", self.name, why)
        self.stats["plain"] += 1
        return call(args)


def _sized(call, sizes: tuple, args: list):
    return call(args, sizes)
