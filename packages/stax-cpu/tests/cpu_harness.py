"""Shared helpers for stax-cpu tests: run a graph compiled and interpreted, compare.

Inputs are given as logical arrays; both sides get the same flat storages
(`stax.ir.to_storage`), the compiled side sees the strided views the layouts
describe (bf16 as uint16 bit patterns, the numpy allocator's convention).
"""

from __future__ import annotations

import numpy as np
from stax import ir
from stax.cpu import CpuConfig, bf16_from_float32, bf16_to_float32, compile_schedule
from stax.cpu import isa as isa_mod
from stax.cpu.toolchain import Toolchain, open_cache
from stax.ir import dtypes as dt
from stax.sched import Kernel, MemoryEvent, MemoryPlan, Schedule
from stax.sched import schedule as make_schedule

F32 = dt.float32


def ours_view(flat: np.ndarray, layout: ir.Layout) -> np.ndarray:
    if layout.dtype == dt.bfloat16:
        flat = bf16_from_float32(flat)
    return ir.from_storage(flat, layout)


def as_values(arr: np.ndarray, d: dt.DType) -> np.ndarray:
    arr = np.asarray(arr)
    return bf16_to_float32(arr) if d == dt.bfloat16 else arr


def supported_levels(cache_dir) -> list[str]:
    """The ISA levels this machine (CPU and compiler) runs, widest first."""
    return isa_mod.supported_levels(Toolchain.from_config(CpuConfig()), open_cache(cache_dir))


def isa_of(mod) -> str:
    """The ISA level a module was compiled for (its source's first line: `// ---- C++ (avx2, 2 threads)`)."""
    return mod.source.split("(", 1)[1].split(",", 1)[0]


def run_both(graph: ir.Graph, values: dict, config, sched: Schedule | None = None, extern=None):
    """(ours, reference, module): outputs of the compiled module and of the interpreter."""
    flats = {i.name: ir.to_storage(values[i.name], i.layout) for i in graph.inputs}
    ref = ir.outputs(graph, ir.interpret(graph, {k: v.copy() for k, v in flats.items()}, extern))
    mod = compile_schedule(sched or make_schedule(graph), config=config, extern_kernels=extern)
    args = [ours_view(flats[i.name].copy(), i.layout) for i in graph.inputs]
    outs = mod.call(args)
    assert args == []
    ours = [as_values(o, graph.buffer_layout(n).dtype) for o, n in zip(outs, graph.outputs)]
    return ours, ref, mod


def assert_close(ours, ref, d: dt.DType, rtol: float = 0.0, atol: float = 0.0, what: str = "") -> None:
    ours, ref = np.asarray(ours), np.asarray(ref)
    assert ours.shape == ref.shape, f"{what}: shape {ours.shape} != {ref.shape}"
    if not d.is_floating:
        bad = ours != ref
        assert not bad.any(), f"{what}: {bad.sum()} mismatches, e.g. ours {ours[bad][:5]} ref {ref[bad][:5]}"
        return
    o, r = ours.astype(np.float64), ref.astype(np.float64)
    nan_o, nan_r = np.isnan(o), np.isnan(r)
    assert (nan_o == nan_r).all(), f"{what}: NaN mismatch at {np.argwhere(nan_o != nan_r)[:5].tolist()}"
    with np.errstate(invalid="ignore"):  # inf - inf where both are the same inf: caught by o == r
        ok = nan_r | (o == r) | (np.abs(o - r) <= atol + rtol * np.abs(r))
    if not ok.all():
        idx = np.argwhere(~ok)[:5]
        detail = [(o[tuple(i)], r[tuple(i)]) for i in idx]
        raise AssertionError(f"{what}: {(~ok).sum()} mismatches (rtol={rtol}, atol={atol}), (ours, ref): {detail}")


def single_kernel(graph: ir.Graph, kind: str, outer_depth: int = 0) -> Schedule:
    """All nodes of `graph` in one kernel of `kind` (for fused / outer_loop_fused forms)."""
    names = tuple(n.name for n in graph.nodes)
    node_type = {"fused": "FusedSchedulerNode", "outer_loop_fused": "OuterLoopFusedSchedulerNode"}.get(
        kind, "SchedulerNode")
    events = [MemoryEvent(0, "alloc", n) for n in names]
    events += [MemoryEvent(0, "free", n) for n in names if n not in graph.outputs]
    return Schedule(graph, (Kernel("kernel0", kind, names, ((), ()), node_type, outer_depth),),
                    MemoryPlan(tuple(events)))


def contiguous(name: str, sizes, d: dt.DType = F32) -> ir.InputBuffer:
    return ir.InputBuffer(name, ir.Layout.contiguous(tuple(sizes), d))


def pointwise(name: str, sizes, value, d: dt.DType | None = None) -> ir.ComputedBuffer:
    d = d or value.dtype
    return ir.ComputedBuffer(name, ir.Layout.contiguous(tuple(sizes), d), ir.Pointwise(tuple(sizes), value))
