"""Scans (cumsum, cumprod, cummax/cummin and their indices, logcumsumexp) along an inner and an
outer axis, compiled vs the interpreter: the axis loop runs last and sequentially (W steps at a
time in the vector form)."""

import numpy as np
import pytest
from cpu_harness import assert_close, contiguous, run_both, single_kernel
from stax import ir
from stax.ir import dtypes as dt
from stax.ir.graph import Scan
from stax.ir.ops import SCANS, scan_result_dtype
from stax.sched import Kernel, MemoryEvent, MemoryPlan, Schedule

SHAPE = (6, 37)


@pytest.mark.parametrize("d", [dt.float32, dt.float64, dt.int64, dt.bfloat16], ids=str)
def test_scans(d, cfg):
    x = contiguous("x", SHAPE, d)
    i0, i1 = ir.pointwise_vars(2)
    nodes = []
    for stype in SCANS:
        if stype == "logcumsumexp" and not d.is_floating:
            continue
        for axis in (0, 1):
            body = Scan(SHAPE, axis, stype, ir.load("x", SHAPE[1] * i0 + i1, d))
            out_dt = scan_result_dtype(stype, d)
            nodes.append(ir.ComputedBuffer(f"{stype}_{axis}", ir.Layout.contiguous(SHAPE, out_dt), body))
    g = ir.Graph([x], nodes, [n.name for n in nodes])
    rng = np.random.default_rng(0)
    if d.is_floating:
        v = rng.standard_normal(SHAPE) * 0.5 + 1.0
        v[2, 5] = np.nan
        v[4, 3:9] = 0.75  # ties
    else:
        v = rng.integers(-3, 4, SHAPE)
    ours, ref, _ = run_both(g, {"x": v}, cfg, sched=single_kernel(g, "fused"))
    for node, o, r in zip(nodes, ours, ref):
        od = node.layout.dtype
        if od.is_floating and node.body.scan_type in ("cumsum", "cumprod", "logcumsumexp"):
            rtol = {dt.float32: 1e-5, dt.float64: 1e-12, dt.bfloat16: 2e-2}[od]
            assert_close(o, r, od, rtol=rtol, atol=rtol, what=node.name)
        else:
            assert_close(o, r, od, what=node.name)


@pytest.mark.parametrize("d", [dt.float32, dt.float64, dt.int32, dt.int64, dt.bfloat16], ids=str)
def test_vector_scans_on_long_rows(d, level_cfg):
    """cumsum/cumprod/cummax/cummin along a contiguous axis in the vector form (in-register prefix of W
    values, then the running value; a ragged tail of 7), each in its own kernel, every ISA level."""
    shape = (5, 1031)
    x = contiguous("x", shape, d)
    i0, i1 = ir.pointwise_vars(2)
    types = ("cumsum", "cumprod", "cummax", "cummin")
    nodes = [ir.ComputedBuffer(s, ir.Layout.contiguous(shape, d),
                               Scan(shape, 1, s, ir.load("x", shape[1] * i0 + i1, d)))
             for s in types]
    g = ir.Graph([x], nodes, [n.name for n in nodes])
    kernels = tuple(Kernel(f"kernel{k}", "reduction", (n.name,), ((), ()), "SchedulerNode")
                    for k, n in enumerate(nodes))
    sched = Schedule(g, kernels, MemoryPlan(tuple(MemoryEvent(k, "alloc", n.name) for k, n in enumerate(nodes))))
    rng = np.random.default_rng(3)
    if d.is_floating:
        v = 1 + 0.01 * rng.standard_normal(shape)  # products of a thousand values stay in range
        v[1, 700] = np.nan  # the running max/min/sum stays NaN from there on
        v[2, 100:140] = 1.5  # ties
        v[3, 1030] = np.nan  # in the tail only
    else:
        v = rng.integers(-3, 4, shape)
    ours, ref, mod = run_both(g, {"x": v}, level_cfg, sched=sched)
    for node, o, r in zip(nodes, ours, ref):
        if d.is_floating and node.name in ("cumsum", "cumprod"):  # in-vector sums round in another order
            rtol = {dt.float32: 1e-5, dt.float64: 1e-12, dt.bfloat16: 2e-2}[d]
            assert_close(o, r, d, rtol=rtol, atol=rtol, what=node.name)
        else:
            assert_close(o, r, d, what=node.name)
    assert (mod.source.count("stax::vec::scan_") == 4) == (level_cfg.isa != "none")


@pytest.mark.parametrize("out", [dt.float32, dt.bfloat16], ids=str)
def test_scans_store_their_out_dtype_from_a_wider_accumulator(out, level_cfg):
    """Scan.out_dtype: float32 input accumulated in float64 (bfloat16 output: in float32), each
    prefix rounded by the scan's own store. One kernel, which reads the input type and writes the
    output type (no buffer of the accumulator's type), along the contiguous axis (the vector form:
    the in-register prefix is converted before its store; a ragged tail of 7) and the outer one."""
    shape = (5, 1031)
    acc = dt.float64 if out == dt.float32 else dt.float32
    x = contiguous("x", shape, out)
    i0, i1 = ir.pointwise_vars(2)
    value = ir.cast(ir.load("x", shape[1] * i0 + i1, out), acc)
    types = ("cumsum", "cumprod", "cummax", "logcumsumexp")
    nodes = [ir.ComputedBuffer(f"{s}_{axis}", ir.Layout.contiguous(shape, out), Scan(shape, axis, s, value, out))
             for s in types for axis in (1, 0)]
    g = ir.Graph([x], nodes, [n.name for n in nodes])
    kernels = tuple(Kernel(f"kernel{k}", "reduction", (n.name,), ((), ()), "SchedulerNode")
                    for k, n in enumerate(nodes))
    sched = Schedule(g, kernels, MemoryPlan(tuple(MemoryEvent(k, "alloc", n.name) for k, n in enumerate(nodes))))
    rng = np.random.default_rng(5)
    v = 1 + 0.01 * rng.standard_normal(shape)  # a float32 running sum of these is ~1e-5 off by the end
    v[1, 700] = np.nan
    ours, ref, mod = run_both(g, {"x": v}, level_cfg, sched=sched)
    for node, o, r in zip(nodes, ours, ref):  # the accumulator's reference rounded once: within an ulp
        rtol = 2.5e-7 if out == dt.float32 else 8e-3
        assert_close(o, r, out, rtol=rtol, atol=rtol, what=node.name)
    acc_c, out_c = ("double", "float") if out == dt.float32 else ("float", "uint16_t")
    assert f"{acc_c} tmp_acc" in mod.source and f"{acc_c}* __restrict__ out_ptr" not in mod.source
    assert mod.source.count(f"{out_c}* __restrict__ out_ptr") == len(nodes)
    assert (mod.source.count("stax::vec::scan_") == 3) == (level_cfg.isa != "none")
