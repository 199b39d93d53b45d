"""Where one call's time goes, per backend, from torch.profiler: so that the cause of a loss is visible.

Each backend's timed function runs a few more times under `torch.profiler.profile` (CPU
activity; CUDA too on a GPU), each call inside a `bench::call` range. The profile is split into:

- generated kernels: stax's own kernels. stax.cpu's wrapper calls each kernel through a
  ctypes function it looks up by name (`k_<kernel>`) in the wrapper's namespace at call time,
  and each extern call through `ext_<node>`; `instrument_stax()` replaces those entries, for
  the profile only, by the same callables inside a `stax::kernel <name>` /
  `stax::extern <op>` range, and wraps every compiled graph's call (`CompiledGraph.__call__`)
  in `stax::graph`. The kernel time is then measured, not inferred. Inductor's kernels have no
  range: for Inductor this is the time inside its graphs (`## Call CompiledFxGraph ##`) outside
  any ATen op, i.e. its kernels plus its wrapper's host code.
- extern calls by op: ATen ops a compiled graph calls on purpose (convolution, mm, sdpa, ...);
- fallbacks by op: for stax, the ATen ops it does not lower (metrics.fallback_ops);
- ATen outside compiled graphs: ops run between graphs (graph breaks, autograd's
  gradient accumulation, eager's whole model);
- stax wrapper: the Python of stax's generated wrappers inside its graphs (allocations, data
  pointers, error checks): a graph's time minus its kernels and extern calls;
- host overhead: the rest of the call — dynamo's guards, AOTAutograd's wrappers, the
  autograd engine, the optimizer's Python — the call's time minus everything above.
  The ranges the instrumentation adds cost a few microseconds each while profiling; that cost,
  measured in the same profile (`range_cost_us`), is taken off the wrapper (kernel and extern
  ranges) and the host overhead (graph ranges). The timed medians in the table carry no ranges.

On cuda the same host view is kept and the device side is added: kernel time per call from the
CUDA activity, `triton_*` kernels (stax's and Inductor's generated kernels) against library
kernels (cuBLAS, cuDNN, ATen's), and what they add up to.

The same profile records memory (`profile_memory=True`): on CPU the peak of tensor memory
during a call is read from its allocation events (see memory.cpu_tensor_peak).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections import Counter, defaultdict

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from .memory import cpu_tensor_peak

CALL = "bench::call"
GRAPH = "stax::graph"
KERNEL = "stax::kernel "
EXTERN = "stax::extern "
INDUCTOR_GRAPH = "## Call CompiledFxGraph"
RANGE_PREFIXES = ("autograd::", "torch::autograd", "stax::", "bench::", "Optimizer.", "## ")


def _ranged(fn, label: str):
    def run(*args, **kwargs):
        with record_function(label):
            return fn(*args, **kwargs)

    return run


_EXTERN_USE = re.compile(r"\b(ext_\w+|EXTERN_\d+)\b")
_ATEN = re.compile(r"\b(aten|stax)\.(\w+)\.(\w+)")  # (stax.packed_conv2d, stax.packed_linear: CPU inference)


def op_name(kernel: str) -> str:
    """'aten.addmm.default' -> 'aten::addmm' (the profiler's spelling); other overloads are kept."""
    ns, name, overload = kernel.split(".")
    return f"{ns}::{name}" + ("" if overload == "default" else f".{overload}")


def extern_ops(source: str) -> dict:
    """{wrapper name of an extern callable: its ATen op} from a compiled module's source: stax.cpu's
    wrapper ends each extern call's line with the op's name, stax.gpu's in a comment."""
    ops = {}
    for line in source.splitlines():
        use, aten = _EXTERN_USE.search(line), _ATEN.findall(line)
        if use and aten:
            ns, name, overload = aten[-1]
            ops[use.group(1)] = op_name(f"{ns}.{name}.{overload}")
    return ops


def _op_label(fn, key: str, ops: dict) -> str:
    """An extern callable's op: from the module's source, else from its name (aten_kernel names it)."""
    if key in ops:
        return ops[key]
    name = getattr(fn, "__name__", key)
    if name == "getitem_kernel":  # an item of a multi-output extern's result
        return "getitem"
    return "aten::" + name.removeprefix("aten_").removesuffix("_default")


@contextlib.contextmanager
def instrument_stax():
    """For the duration: every stax graph call, generated kernel and extern call is a profiler range."""
    try:
        from stax.frontend import runtime
    except ImportError:
        yield
        return
    cls = runtime.CompiledGraph
    original = cls.__call__
    patched: list = []
    seen: set = set()

    def instrument(graph) -> None:
        call = getattr(graph, "_call", None)
        wrapper = getattr(call, "call", call)  # stax.gpu's CUDA graph wrapper holds the wrapper function
        ns = getattr(wrapper, "__globals__", None)
        if ns is None or id(ns) in seen:
            return
        seen.add(id(ns))
        ops = extern_ops(getattr(getattr(graph, "module", None), "source", "") or "")
        for key, val in list(ns.items()):
            if not callable(val):
                continue
            if key.startswith("k_"):  # stax.cpu: ctypes kernel functions
                label = KERNEL + key[2:]
            elif key.startswith("launch_"):  # stax.gpu: kernel launchers
                label = KERNEL + str(getattr(val, "name", key))
            elif key.startswith(("ext_", "EXTERN_")):
                label = EXTERN + _op_label(val, key, ops)
            else:
                continue
            ns[key] = _ranged(val, label)
            patched.append((ns, key, val))

    def call(self, args):
        instrument(self)
        with record_function(GRAPH):
            return original(self, args)

    cls.__call__ = torch._dynamo.disable(call, recursive=True)
    try:
        yield
    finally:
        cls.__call__ = original
        for ns, key, val in reversed(patched):
            ns[key] = val


def _canon(op: str) -> str:
    return op.replace(".", "_")


def _is_op(name: str) -> bool:
    return "::" in name and " " not in name and not name.startswith(RANGE_PREFIXES)


class _Acc:
    def __init__(self):
        self.total = 0.0
        self.graph = 0.0
        self.kernels: Counter = Counter()
        self.kernel_calls: Counter = Counter()
        self.externs: Counter = Counter()
        self.graph_ops: Counter = Counter()  # ATen ops inside a compiled graph, outside an extern range
        self.outside_ops: Counter = Counter()
        self.inner_ranges = 0  # the ranges instrument_stax added inside graphs (kernels, externs) ...
        self.graph_ranges = 0  # ... and around them (stax::graph)

    def walk(self, ev, inside: bool) -> None:
        name, us = ev.name, ev.time_range.elapsed_us()
        if name.startswith(KERNEL):
            self.kernels[name[len(KERNEL):]] += us
            self.kernel_calls[name[len(KERNEL):]] += 1
            self.inner_ranges += 1
            return
        if name.startswith(EXTERN):
            self.externs[name[len(EXTERN):]] += us
            self.inner_ranges += 1
            return
        if name == CALL:
            self.total += us
        elif name == GRAPH or name.startswith(INDUCTOR_GRAPH):
            if not inside:
                self.graph += us
                self.graph_ranges += name == GRAPH
            inside = True
        elif _is_op(name):
            (self.graph_ops if inside else self.outside_ops)[name] += us
            return
        for c in ev.cpu_children:
            self.walk(c, inside)


def _ms(counter: Counter, calls: int, top: int | None = None) -> dict:
    items = counter.most_common(top)
    return {k: v / 1e3 / calls for k, v in items}


def summarize(events, calls: int, fallback_ops=(), device_events=(), range_us: float = 0.0) -> dict:
    """Per-call milliseconds by category from a profile's FunctionEvents (see the module doc).
    `range_us`: what one added range costs while profiling (`range_cost_us`), taken off the
    stax wrapper (for the kernel and extern ranges) and off the host overhead (graph ranges)."""
    acc = _Acc()
    for ev in events:
        if ev.cpu_parent is None and ev.device_type == torch.autograd.DeviceType.CPU:
            acc.walk(ev, False)
    fallback = {_canon(op_name("aten." + op if op.count(".") == 1 else op)) for op in fallback_ops}
    fb = Counter({k: v for k, v in acc.externs.items() if _canon(k) in fallback})
    ext = acc.externs - fb
    ext.update(acc.graph_ops)  # Inductor's (and stax's wrapper-level) ATen calls inside graphs
    kernels = sum(acc.kernels.values())
    measured = bool(acc.kernels)
    in_graph_other = acc.graph - kernels - sum(acc.externs.values()) - sum(acc.graph_ops.values())
    generated = kernels if measured else max(in_graph_other, 0.0)
    wrapper = max(in_graph_other - acc.inner_ranges * range_us, 0.0) if measured else 0.0
    accounted = (generated + sum(ext.values()) + sum(fb.values()) + sum(acc.outside_ops.values())
                 + (in_graph_other if measured else 0.0) + acc.graph_ranges * range_us)
    out = {
        "calls": calls,
        "total_ms": acc.total / 1e3 / calls,
        "in_graphs_ms": acc.graph / 1e3 / calls,
        "generated_ms": generated / 1e3 / calls,
        "generated_measured": measured,  # False: Inductor's kernels + its wrapper, inferred
        "kernels": len(acc.kernels),
        "top_kernels": _ms(acc.kernels, calls, 5),
        "extern_ms": _ms(ext, calls),
        "fallback_ms": _ms(fb, calls),
        "outside_ms": _ms(acc.outside_ops, calls),
        "host_ms": max(acc.total - accounted, 0.0) / 1e3 / calls,
        "range_cost_us": range_us,
        "added_ranges": (acc.inner_ranges + acc.graph_ranges) / calls,
    }
    if measured:  # the stax wrapper's own Python inside the graphs (allocations, pointers, checks)
        out["wrapper_ms"] = wrapper / 1e3 / calls
    if device_events:
        out["device"] = _device(device_events, calls)
    return out


def _device(kernels, calls: int) -> dict:
    """CUDA kernels: (name, microseconds) pairs -> per-call ms, generated (triton_*) vs library."""
    by = defaultdict(float)
    for name, us in kernels:
        by[name] += us
    gen = {k: v for k, v in by.items() if k.startswith("triton_")}
    lib = {k: v for k, v in by.items() if not k.startswith("triton_")}
    top = sorted(by.items(), key=lambda kv: -kv[1])[:5]
    return {"kernel_ms": sum(by.values()) / 1e3 / calls, "generated_ms": sum(gen.values()) / 1e3 / calls,
            "library_ms": sum(lib.values()) / 1e3 / calls, "kernels": len(by),
            "top": {k[:60]: v / 1e3 / calls for k, v in top}}


def _device_kernel(e) -> bool:
    """A kernel on the GPU: not a copy or a fill, and not the GPU-side span kineto draws for each CPU range
    (`bench::call` and the like are user annotations on the device timeline too: counting them doubles)."""
    name = e.name()
    return (e.device_type() == torch.autograd.DeviceType.CUDA and not e.is_user_annotation() and name != "[memory]"
            and not name.startswith(("Memcpy", "Memset", "cuda", *RANGE_PREFIXES)) and not _is_op(name))


def range_cost_us(n: int = 200) -> float:
    """Microseconds one record_function range costs its caller while the profiler records (enter + exit
    of a range around a trivial callable, as instrument_stax adds them), mean of `n`; call inside a profile."""
    f = _ranged(lambda: None, "bench::range cost")
    t0 = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t0) / n * 1e6


def profile_backend(backend: str, fn, calls: int, device: str, sync, fallback_ops=()) -> dict:
    """Run `fn` `calls` times under the profiler: {'breakdown': ..., 'peak_bytes': CPU tensor peak or None}."""
    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with instrument_stax() if backend == "stax" else contextlib.nullcontext():
        fn()  # outside the profile: instrumenting the graphs, anything lazy (a CUDA graph capture)
        sync()
        with profile(activities=activities, profile_memory=not cuda) as prof:
            for _ in range(calls):
                with record_function(CALL):
                    fn()
            sync()
            cost = range_cost_us()
    raw = prof.profiler.kineto_results.events() if prof.profiler else []
    dev = [(e.name(), e.duration_ns() / 1e3) for e in raw if cuda and _device_kernel(e)]
    return {"breakdown": summarize(prof.events(), calls, fallback_ops, dev, cost if backend == "stax" else 0.0),
            "peak_bytes": None if cuda else cpu_tensor_peak(raw)}
