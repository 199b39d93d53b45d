"""Reductions in the forms added for speed, against the interpreter: full reductions split over
threads (per-thread partials combined in thread order), long rows with unrolled independent
vector accumulators, vector arg/any/all/Welford accumulators (horizontal and vertical).

Ties and NaNs are placed where a wrong combine would show: the same value in two threads'
ranges, in the same lane of two unrolled accumulators, in the ragged tail.
"""

import math
import re

import numpy as np
import pytest
from cpu_harness import assert_close, contiguous, isa_of, run_both, single_kernel
from stax import ir
from stax.cpu import CpuConfig
from stax.ir import REDUCTIONS
from stax.ir import dtypes as dt
from stax.sched import Kernel, MemoryEvent, MemoryPlan, Schedule
from test_reductions import TOL, reduction_node

FULL = 4099  # odd: two threads get [0, 2112) and [2112, 4099) (ranges aligned to the vector step)
ROWS = (5, 1031)  # 64 blocks of 16 lanes, unrolled by 4, then a ragged tail of 7
COLS = (300, 37)  # reduced over dim 0: the vertical form (W outputs per vector), tail of 5


def _types(d: dt.DType) -> list[str]:
    if d.is_bool:  # the others over bool run in the scalar form (test_reductions covers them)
        return ["any", "all"]
    return [r for r in REDUCTIONS if d.is_floating or not r.startswith("welford")]


def _near_one(rng, shape) -> np.ndarray:
    """Values around 1: sums do not cancel and products of thousands stay in range, so the
    float tolerances (relative to the result) measure the kernel, not the data's conditioning."""
    return 1 + 0.01 * rng.standard_normal(shape)


def _full_values(d: dt.DType, nan: bool) -> np.ndarray:
    rng = np.random.default_rng(3)
    if d.is_bool:
        v = np.ones(FULL, bool)
        v[3000] = False  # all: one False in the second thread's range
        return v
    v = rng.integers(-3, 4, FULL) if d.is_integer else _near_one(rng, FULL)
    v[[100, 3000]] = 5  # argmax tie across the threads: the first index wins
    v[[2500, 2113, 4000]] = -5  # argmin tie inside the second thread (2113: its first element)
    if nan:
        v[[3500, 3001]] = np.nan  # first NaN at 3001 (second thread)
    return v.astype(d.np) if not d.is_floating else v


def _row_values(d: dt.DType) -> np.ndarray:
    rng = np.random.default_rng(4)
    v = rng.integers(-3, 4, ROWS) if d.is_integer else _near_one(rng, ROWS)
    if d.is_bool:
        v = np.zeros(ROWS, bool)
        v[1, 1030] = True  # any: only the tail
        v[2] = True
        v[3] = True
        v[3, 68] = False  # all: one False in an unrolled copy
        return v
    v[1, [20, 68]] = 5  # lane 4 of unrolled copies 1 and 0: the merge must keep 20
    v[1, [84, 36]] = -5  # lane 4 of copies 1 and 2: argmin keeps 36
    v[4] = 1  # all equal: index 0
    if d.is_floating:
        v[2, [900, 700]] = np.nan  # first NaN at 700
        v[3, 1030] = np.nan  # a NaN in the tail only
    return v


def _graph(d: dt.DType, shape, axes) -> ir.Graph:
    x = contiguous("x", shape, d)
    nodes = [reduction_node(f"{r}_{k}", x, r, a, keepdim=False) for r in _types(d) for k, a in enumerate(axes)]
    return ir.Graph([x], nodes, [n.name for n in nodes])


def _per_node(g: ir.Graph) -> Schedule:
    """One kernel per node: each reduction alone in its loops (so it gets unrolled accumulators)."""
    kernels = tuple(Kernel(f"kernel{k}", "reduction", (n.name,), ((), ()), "SchedulerNode")
                    for k, n in enumerate(g.nodes))
    return Schedule(g, kernels, MemoryPlan(tuple(MemoryEvent(k, "alloc", n.name) for k, n in enumerate(g.nodes))))


def _check(g: ir.Graph, values: np.ndarray, cfg, fused: bool = True) -> str:
    sched = single_kernel(g, "fused") if fused else _per_node(g)
    ours, ref, mod = run_both(g, {"x": values}, cfg, sched=sched)
    for node, o, r in zip(g.nodes, ours, ref):
        od, rtype = node.layout.dtype, node.body.reduction_type
        if od.is_floating and (rtype in ("sum", "prod") or rtype.startswith("welford")):
            rtol, atol = TOL[od]
            if rtype == "prod":  # products of thousands of values: overflow/underflow agree, the rest is rounding
                rtol = max(rtol, 1e-4)
            assert_close(o, r, od, rtol=rtol, atol=atol, what=node.name)
        else:
            assert_close(o, r, od, what=node.name)
    return mod.source


@pytest.mark.parametrize("d", [dt.float32, dt.float64, dt.float16, dt.int32, dt.int64, dt.bool_], ids=str)
def test_reductions_in_every_fast_form(d, level_cfg):
    vector = level_cfg.isa != "none"
    full = _graph(d, (FULL,), [(0,)])
    src = _check(full, _full_values(d, nan=False), level_cfg)
    assert "omp_get_thread_num()" in src  # split over the threads
    if d.is_floating:
        _check(full, _full_values(d, nan=True), level_cfg)
    src = _check(_graph(d, ROWS, [(1,)]), _row_values(d), level_cfg, fused=False)
    if vector:  # four independent accumulators per row, in every kernel (64-bit arg reductions: scalar)
        vectorized = [r for r in _types(d) if not (r.startswith("arg") and d.itemsize == 8)]
        assert src.count("const int64_t x1 = x1_u + ") == 4 * len(vectorized)
    cols = np.ascontiguousarray(_row_values(d)[:, :37].repeat(60, 0)[:300])
    src = _check(_graph(d, COLS, [(0,)]), cols, level_cfg, fused=False)
    if vector:
        # W columns per vector: any/all stored as bool lanes, arg indices as int64 lanes
        expect = {dt.bool_: "stax::vec::store_bool", dt.int32: "argmax_update", dt.int64: "stax::vec::vint64 tmp_acc"}
        assert expect.get(d, "VWelford") in src


@pytest.mark.parametrize("threads", [1, 3])
def test_full_reduction_thread_counts(threads, cache_dir):
    """One thread: no split; three threads (more than cores): three partials, same results."""
    cfg = CpuConfig(cache_dir=str(cache_dir), num_threads=threads)
    src = _check(_graph(dt.float32, (FULL,), [(0,)]), _full_values(dt.float32, nan=True), cfg)
    assert ("omp_get_thread_num()" in src) == (threads > 1)
    x = contiguous("x", (3, 1000))  # several reduced dims: loop 0 (of 3) is split
    g = ir.Graph([x], [reduction_node("s", x, "argmax", (0, 1), False), reduction_node("m", x, "max", (0, 1), False)],
                 ["s", "m"])
    v = np.random.default_rng(5).standard_normal((3, 1000))
    v[[0, 2], [5, 7]] = 4.0
    _check(g, v, cfg)


def test_welford_long_runs(cfg):
    """Float lanes are folded into double lanes every 256 updates: rows and a full reduction long
    enough for several folds per lane, on data whose mean dwarfs its spread (float drift shows)."""
    x = contiguous("x", (2, 40000))
    nodes = [reduction_node(f"{t}_{k}", x, f"welford_{t}", axes, False)
             for t in ("mean", "m2") for k, axes in enumerate([(1,), (0, 1)])]
    g = ir.Graph([x], nodes, [n.name for n in nodes])
    v = 1000 + np.random.default_rng(6).standard_normal((2, 40000))
    ours, ref, mod = run_both(g, {"x": v}, cfg, sched=_per_node(g))
    for node, o, r in zip(nodes, ours, ref):
        assert_close(o, r, dt.float32, rtol=2e-6, atol=0, what=node.name)
    if cfg.isa != "none" and "stax::vec::" in mod.source:
        assert "VWelford<stax::vec::vfloat>" in mod.source


def _columns(shape, types) -> ir.Graph:
    x = contiguous("x", shape)
    nodes = [reduction_node(f"{r}", x, r, (0,), False) for r in types]
    return ir.Graph([x], nodes, [n.name for n in nodes])


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("cols", [16, 40, 72])
def test_columns_split_over_the_reduced_loop(threads, cols, level_cfg):
    """Batch-norm statistics of NHWC activations: few outputs (one vector block of 16 channels; 40 and
    72 leave a ragged block) over many rows. Two or three threads split the rows and combine per-output
    partials (split_kept.py) when the vector blocks (or panels of them) give the threads unequal shares;
    one thread does not split. Every thread count matches the interpreter,
    and the ragged block is one overlapped vector block, not W-1 scalar reductions."""
    from dataclasses import replace

    cfg = replace(level_cfg, num_threads=threads)
    types = ["welford_mean", "welford_m2", "sum", "max", "min", "prod"]
    g = _columns((3001, cols), types)
    v = _near_one(np.random.default_rng(cols), (3001, cols))
    v[2999, 3] = 5.0  # the max in the last thread's rows
    v[17, cols - 1] = -5.0  # the min in the first thread's rows, in the ragged block
    ours, ref, mod = run_both(g, {"x": v}, cfg, sched=single_kernel(g, "fused"))
    for node, o, r in zip(g.nodes, ours, ref):
        rtol, atol = TOL[dt.float32]
        assert_close(o, r, dt.float32, rtol=max(rtol, 1e-4) if node.name == "prod" else rtol, atol=atol,
                     what=f"{node.name}, {threads} threads")
    split = "part_split" in mod.source
    lanes = {"avx512": 16, "avx2": 8}.get(level_cfg.isa)
    if lanes is None:  # the scalar level: every output is a work unit, the kept loop balances the threads
        assert not split
        return
    panel = re.search(r"x0_p \+= (\d+)\)", mod.source)  # panels.py: several blocks per walk of the rows
    units = -(-cols // (int(panel.group(1)) if panel else lanes))  # the kept loop's work units
    assert split == (threads > 1 and math.ceil(units / threads) / (units / threads) > 1.15), mod.source[-3000:]
    if cols % lanes:  # the ragged end: the block ending at the last column (clamped there in a panel)
        end = f", {cols - lanes});" if panel else f"const int64_t x0 = {cols} - {lanes};"
        assert end in mod.source and "x0_tail; x0 <" not in mod.source


def test_region_chunking_leaves_a_split_reduction_alone(cfg):
    """A pointwise producer whose rows a column reduction reads at its own output index (test_regions'
    random graph, seed 12): the reduction is split over the threads, so the pair is not chunked
    (chunks would reduce each output on one thread) and regions change no bit."""
    from dataclasses import replace

    from stax.cpu.nests import plan_nests
    from stax.cpu.split_kept import wants_kept_split
    from stax.sched import Kernel

    (i0,), (r0,) = ir.pointwise_vars(1), ir.reduction_vars(1)
    x, y = contiguous("x", (37,)), contiguous("y", (64, 37))
    t = ir.ComputedBuffer("t", ir.Layout.contiguous((37,), dt.float32),
                          ir.Pointwise((37,), ir.op("tanh", ir.load("x", i0, dt.float32))))
    s = ir.ComputedBuffer("s", ir.Layout.contiguous((37,), dt.float32), ir.Reduction(
        (37,), (64,), "sum", ir.op("mul", ir.load("t", i0, dt.float32), ir.load("y", 37 * r0 + i0, dt.float32))))
    g = ir.Graph([x, y], [t, s], ["s"])
    kernels = (Kernel("kernel0", "pointwise", ("t",), ((), ()), "SchedulerNode"),
               Kernel("kernel1", "reduction", ("s",), ((), ()), "SchedulerNode"))
    sched = Schedule(g, kernels, MemoryPlan((MemoryEvent(0, "alloc", "t"), MemoryEvent(1, "alloc", "s"),
                                             MemoryEvent(1, "free", "t"))))
    rng = np.random.default_rng(1)
    vals = {"x": rng.uniform(-1, 1, 37), "y": rng.uniform(-1, 1, (64, 37))}
    two = replace(cfg, num_threads=2)
    base, ref, _ = run_both(g, vals, replace(two, regions=False), sched=sched)
    ours, _, mod = run_both(g, vals, replace(two, localize_bytes=2048), sched=sched)
    assert (np.asarray(base[0]) == np.asarray(ours[0])).all()
    assert_close(ours[0], ref[0], dt.float32, rtol=1e-5, atol=1e-5)
    level = isa_of(mod)  # (cfg.isa may be the probe's: $STAX_CPU_ISA picks the level)
    if level != "none":  # (the scalar level balances 37 outputs over 2 threads: no split)
        (nest,) = plan_nests(kernels[1], g, merge=True)
        assert wants_kept_split(nest, 2, two.min_chunk, 64 if level == "avx512" else 32, two.tile)
        assert "part_split" in mod.source and "rows of this chunk" not in mod.source
