"""Regions (consecutive kernels in one C++ function and one OpenMP parallel region, §8.5) and
localized intermediates (a buffer written by one loop and read only by the next, computed per chunk
of rows into per-thread scratch). Every case is checked against stax.ir.interpret; the generated
code is grepped for the structure the case must (or must not) have."""

import logging
from dataclasses import replace

import numpy as np
import pytest
from cpu_harness import F32, assert_close, contiguous, pointwise, run_both
from stax import ir
from stax.cpu import compile_schedule
from stax.ir import dtypes as dt
from stax.sched import Kernel, MemoryEvent, MemoryPlan, Schedule
from stax.sched import schedule as make_schedule

i0, i1 = ir.pointwise_vars(2)
(r0,) = ir.reduction_vars(1)


def exp_sum_amax(rows, cols, extra=(), outputs=("buf_sum", "buf_max")):
    """Example 7.2: exp materialized (buf1), then the row sum and row max of it."""
    x = contiguous("x", (rows, cols))
    buf1 = pointwise("buf1", (rows, cols), ir.op("exp", ir.load("x", cols * i0 + i1, F32)))
    red = [ir.ComputedBuffer(f"buf_{t}", ir.Layout.contiguous((rows, 1), F32), ir.Reduction(
        (rows, 1), (cols,), t, ir.load("buf1", cols * i0 + r0, F32))) for t in ("sum", "max")]
    return ir.Graph([x], [buf1, *red, *extra], list(outputs))


def chain(graph: ir.Graph, groups) -> Schedule:
    """One kernel per tuple of nodes, in order; each buffer allocated at its kernel and freed
    after its last reader (inputs too), never the outputs."""
    step = {n: k for k, names in enumerate(groups) for n in names}
    last: dict = {}
    for node in graph.nodes:
        for ld in ir.loads(node.body.value):
            last[ld.buffer] = max(last.get(ld.buffer, 0), step[node.name])
    events = [MemoryEvent(step[n.name], "alloc", n.name) for n in graph.nodes]
    events += [MemoryEvent(s, "free", b) for b, s in last.items() if b not in graph.outputs]
    kinds = {1: "pointwise"}
    ks = tuple(Kernel(f"kernel{k}", kinds.get(len(names), "fused"), tuple(names), ((), ()),
                      "SchedulerNode" if len(names) == 1 else "FusedSchedulerNode") for k, names in enumerate(groups))
    return Schedule(graph, ks, MemoryPlan(tuple(events)))


def region_code(mod, name="region0") -> str:
    src = mod.source
    start = src.index(f'extern "C" int {name}(')
    return src[start:src.index("\n}\n", start)]


def check_exp_sum_amax(g, mod, ours, ref):
    assert_close(ours[0], ref[0], F32, rtol=1e-5, what="sum")  # exp: 1 ulp vs numpy, summed
    assert_close(ours[1], ref[1], F32, rtol=2e-6, what="max")


@pytest.mark.parametrize("rows,cols,chunk_bytes", [(64, 128, 128 << 10), (13, 37, 600), (42, 1000, 16 << 10)])
def test_example_7_2_localized_every_isa(rows, cols, chunk_bytes, level_cfg, caplog):
    """The scheduler's two kernels (exp; sum & amax) become one function and one chunk loop: per
    chunk of rows, exp into a per-thread scratch, then the rows' sum and max. buf1 is never
    allocated. Ragged: 13 rows in chunks of 3 and 42 in chunks of 4 (the last one short), 37 columns
    (vector tails)."""
    g = exp_sum_amax(rows, cols)
    sched = make_schedule(g)
    assert [k.nodes for k in sched.kernels] == [("buf1",), ("buf_sum", "buf_max")]
    cfg = replace(level_cfg, localize_bytes=chunk_bytes)
    x = np.random.default_rng(rows).standard_normal((rows, cols))
    with caplog.at_level(logging.DEBUG, logger="stax.cpu"):
        ours, ref, mod = run_both(g, {"x": x}, cfg, sched=sched)
    check_exp_sum_amax(g, mod, ours, ref)
    assert "localize buf1 into kernel0+kernel1" in caplog.text
    code = region_code(mod)
    assert "local_buf1[" in code and "out_ptr" in code
    assert "buf1 = empty_strided" not in mod.source
    assert "buf1 never allocated" in mod.source
    assert mod.kernel_names == ("kernel0", "kernel1")


def test_example_7_2_region_without_localization_keeps_the_barrier(cfg):
    """localize=False: both loops in one parallel region; the reduction reads what the exp loop
    wrote, so the exp loop ends in a barrier (no nowait); regions=False: two functions. (x is an
    output too: it lives to the end, so one call holds no more than the plan's peak.)"""
    g = exp_sum_amax(64, 256, outputs=("buf_sum", "buf_max", "x"))
    x = np.random.default_rng(2).standard_normal((64, 256))
    sched = chain(g, [("buf1",), ("buf_sum", "buf_max")])
    ours, ref, mod = run_both(g, {"x": x}, replace(cfg, localize=False), sched=sched)
    check_exp_sum_amax(g, mod, ours, ref)
    code = region_code(mod)
    assert code.count("#pragma omp parallel num_threads") == 1
    pragmas = [ln.strip() for ln in code.splitlines() if ln.strip().startswith("#pragma omp for")]
    assert pragmas == ["#pragma omp for", "#pragma omp for nowait"]  # the region's end is the last barrier
    assert "buf1 = empty_strided" in mod.source
    ours, ref, mod = run_both(g, {"x": x}, replace(cfg, regions=False), sched=sched)
    check_exp_sum_amax(g, mod, ours, ref)
    assert 'extern "C" int kernel0(' in mod.source and 'extern "C" int kernel1(' in mod.source


def test_not_localized_when_also_an_output(cfg):
    g = exp_sum_amax(48, 64, outputs=("buf_sum", "buf_max", "buf1"))
    x = np.random.default_rng(3).standard_normal((48, 64))
    ours, ref, mod = run_both(g, {"x": x}, cfg, sched=chain(g, [("buf1",), ("buf_sum", "buf_max")]))
    check_exp_sum_amax(g, mod, ours, ref)
    assert_close(ours[2], ref[2], F32, rtol=2e-6, what="exp")
    assert "local_buf1" not in mod.source and "buf1 = empty_strided" in mod.source


def test_not_localized_when_read_by_two_loops(cfg):
    """buf1 is also read by a later kernel (buf3 = buf1 * 2): it must stay in memory."""
    buf3 = pointwise("buf3", (48, 64), ir.op("mul", ir.load("buf1", 64 * i0 + i1, F32), ir.const(2.0, F32)))
    g = exp_sum_amax(48, 64, extra=(buf3,), outputs=("buf_sum", "buf_max", "buf3"))
    x = np.random.default_rng(4).standard_normal((48, 64))
    ours, ref, mod = run_both(g, {"x": x}, cfg, sched=chain(g, [("buf1",), ("buf_sum", "buf_max"), ("buf3",)]))
    check_exp_sum_amax(g, mod, ours, ref)
    assert_close(ours[2], ref[2], F32, rtol=2e-6, what="2 exp")
    assert "local_buf1" not in mod.source


@pytest.mark.parametrize("how", ["shifted", "transposed"])
def test_not_localized_when_read_at_another_row(how, cfg):
    """Row x0 of the consumer reads row x0+1 of buf1 (shifted), or a column of it (transposed):
    rows of one chunk would read what another chunk writes."""
    rows, cols = 40, 48
    x = contiguous("x", (rows, cols))
    buf1 = pointwise("buf1", (rows, cols), ir.op("exp", ir.load("x", cols * i0 + i1, F32)))
    if how == "shifted":
        red = ir.ComputedBuffer("buf2", ir.Layout.contiguous((rows - 1,), F32), ir.Reduction(
            (rows - 1,), (cols,), "sum", ir.load("buf1", cols * (i0 + 1) + r0, F32)))
    else:  # column sums: row x0 of the output reads column x0 of buf1
        red = ir.ComputedBuffer("buf2", ir.Layout.contiguous((cols,), F32), ir.Reduction(
            (cols,), (rows,), "sum", ir.load("buf1", cols * r0 + i0, F32)))
    g = ir.Graph([x], [buf1, red], ["buf2"])
    ours, ref, mod = run_both(g, {"x": np.random.default_rng(5).standard_normal((rows, cols))}, cfg,
                              sched=chain(g, [("buf1",), ("buf2",)]))
    assert_close(ours[0], ref[0], F32, rtol=1e-5)
    assert "local_buf1" not in mod.source


def test_localized_pointwise_consumer_and_config_off(cfg):
    """A pointwise consumer reading its row of the producer's output at the same index (a(x) then
    b(a) as two kernels): chunked, b written to memory, a kept local; localize=False keeps a."""
    rows, cols = 33, 40
    x = contiguous("x", (rows, cols))
    a = pointwise("a", (rows, cols), ir.op("tanh", ir.load("x", cols * i0 + i1, F32)))
    b = pointwise("b", (rows, cols), ir.op("mul", ir.load("a", cols * i0 + i1, F32), ir.load("x", cols * i0 + i1, F32)))
    g = ir.Graph([x], [a, b], ["b"])
    sched = chain(g, [("a",), ("b",)])
    vals = {"x": np.random.default_rng(6).standard_normal((rows, cols))}
    for c, local in ((replace(cfg, localize_bytes=1024), True), (replace(cfg, localize=False), False)):
        ours, ref, mod = run_both(g, vals, c, sched=sched)
        assert_close(ours[0], ref[0], F32, rtol=3e-6, atol=1e-7)
        assert ("local_a" in mod.source) == local


def test_independent_loops_do_not_wait_dependent_ones_do(cfg):
    """y = x + 1 and z = 2x share nothing written: the first loop is `nowait`; w reads y transposed
    (no chunking possible), so the loop before it ends in a barrier. (w reads x too, so x lives to
    the end and one call holds no more than the plan's peak.)"""
    n = 64
    x = contiguous("x", (n, n))
    y = pointwise("y", (n, n), ir.op("add", ir.load("x", n * i0 + i1, F32), ir.const(1.0, F32)))
    z = pointwise("z", (n, n), ir.op("mul", ir.load("x", n * i0 + i1, F32), ir.const(2.0, F32)))
    w = pointwise("w", (n, n), ir.op("sub", ir.load("y", n * i1 + i0, F32), ir.op(
        "mul", ir.load("z", n * i0 + i1, F32), ir.load("x", n * i0 + i1, F32))))
    g = ir.Graph([x], [y, z, w], ["w", "z"])
    ours, ref, mod = run_both(g, {"x": np.random.default_rng(8).standard_normal((n, n))}, cfg,
                              sched=chain(g, [("y",), ("z",), ("w",)]))
    for o, r in zip(ours, ref):
        assert_close(o, r, F32, rtol=1e-6)
    code = region_code(mod)
    pragmas = [ln.strip() for ln in code.splitlines() if ln.strip().startswith("#pragma omp for")]
    assert pragmas == ["#pragma omp for nowait", "#pragma omp for", "#pragma omp for nowait"]


def test_storage_reused_inside_a_region(cfg):
    """buf2 takes buf0's storage (memory plan reuse) while kernels of the same region still read
    buf0: the donor is released after the call, the pointers lose __restrict__, and the loop
    writing buf2 waits for the ones reading buf0."""
    x = contiguous("x", (64, 64))
    b0 = pointwise("buf0", (64, 64), ir.op("exp", ir.load("x", 64 * i0 + i1, F32)))
    b1 = pointwise("buf1", (64, 64), ir.op("neg", ir.load("buf0", 64 * i0 + i1, F32)))
    b2 = ir.ComputedBuffer("buf2", ir.Layout("cpu", F32, (64, 64), (1, 64)),
                           ir.Pointwise((64, 64), ir.op("abs", ir.load("buf1", 64 * i1 + i0, F32))))
    g = ir.Graph([x], [b0, b1, b2], ["buf2"])
    ev = (MemoryEvent(0, "alloc", "buf0"), MemoryEvent(0, "alloc", "buf1"), MemoryEvent(0, "free", "x"),
          MemoryEvent(1, "free", "buf0"), MemoryEvent(2, "reuse", "buf2", "buf0"), MemoryEvent(2, "free", "buf1"))
    ks = tuple(Kernel(f"kernel{k}", "pointwise", (n,), ((4096,), ())) for k, n in enumerate(("buf0", "buf1", "buf2")))
    sched = Schedule(g, ks, MemoryPlan(ev))
    ours, ref, mod = run_both(g, {"x": np.random.default_rng(9).random((64, 64))}, replace(cfg, localize=False),
                              sched=sched)
    assert_close(ours[0], ref[0], F32, rtol=1e-6)
    assert "buf0 is released after region0" in mod.source
    assert mod.source.count("buf0 = empty_strided") == 1  # not allocated anew after the reuse took it
    code = region_code(mod)
    assert "float* out_ptr0" in code and "float* out_ptr2" in code  # buf0 / buf2: one storage, no restrict
    assert "float* __restrict__ out_ptr1" in code
    pragmas = [ln.strip() for ln in code.splitlines() if ln.strip().startswith("#pragma omp for")]
    assert pragmas == ["#pragma omp for", "#pragma omp for", "#pragma omp for nowait"]


def test_errors_name_the_kernel_of_the_region(cfg):
    """An integer division by zero in the second kernel of a region names that kernel."""
    a, b = contiguous("a", (600,), dt.int32), contiguous("b", (600,), dt.int32)
    c = pointwise("c", (600,), ir.op("add", ir.load("a", i0, dt.int32), ir.const(1, dt.int32)))
    d = pointwise("d", (600,), ir.op("floordiv", ir.op("add", ir.load("c", i0, dt.int32), ir.load("a", i0, dt.int32)),
                                     ir.load("b", i0, dt.int32)))
    g = ir.Graph([a, b], [c, d], ["d", "c"])
    mod = compile_schedule(chain(g, [("c",), ("d",)]), config=replace(cfg, localize=False))
    assert 'extern "C" int region0(' in mod.source
    av, bv = np.arange(600, dtype=np.int32), np.ones(600, dtype=np.int32)
    d_out, c_out = mod.call([av, bv.copy()])
    assert (d_out == 2 * av + 1).all() and (c_out == av + 1).all()
    bv[599] = 0
    with pytest.raises(ZeroDivisionError, match="kernel1"):
        mod.call([av, bv])


def test_region_not_formed_when_peak_would_rise(cfg, caplog):
    """a = exp(x) then b = a transposed: one call would hold x, a and b at once (x dies after the
    first kernel, a after the second): 256 KiB more than the plan's peak, so they stay two calls."""
    n = 256
    x = contiguous("x", (n, n))
    a = pointwise("a", (n, n), ir.op("exp", ir.load("x", n * i0 + i1, F32)))
    b = pointwise("b", (n, n), ir.op("neg", ir.load("a", n * i1 + i0, F32)))
    g = ir.Graph([x], [a, b], ["b"])
    with caplog.at_level(logging.DEBUG, logger="stax.cpu"):
        ours, ref, mod = run_both(g, {"x": np.random.default_rng(10).standard_normal((n, n))}, cfg,
                                  sched=chain(g, [("a",), ("b",)]))
    assert_close(ours[0], ref[0], F32, rtol=2e-6)
    assert "kernel1 not joined to the region of kernel0" in caplog.text
    assert 'extern "C" int kernel0(' in mod.source and 'extern "C" int kernel1(' in mod.source


def test_random_graphs_same_bits_with_and_without_regions(cfg):
    """Seeded random graphs (stax.sched.random_graphs: shifted, transposed, flattened and broadcast
    reads, row and full reductions, scans, extern calls) at parallel sizes: regions and localized
    intermediates change where loops run and where data lives, never a value, so the outputs are
    bit for bit those of one call per kernel (which test_kernels & co. check against the interpreter).
    Both configurations are checked against the interpreter for shape and NaN placement too."""
    import random

    from stax.sched.random_graphs import EXTERN_KERNELS, random_graph

    seen = {"region": 0, "local": 0}
    for seed in range(24):
        rng = random.Random(seed)
        g = random_graph(rng, n_nodes=rng.choice([4, 6, 8, 12]), R=rng.choice([64, 37, 128]),
                         C=rng.choice([40, 64, 33]), recent=rng.choice([None, 3]))
        gen = np.random.default_rng(seed)
        vals = {i.name: gen.uniform(-1, 1, tuple(int(s) for s in i.layout.sizes)) for i in g.inputs}
        base, ref, _ = run_both(g, vals, replace(cfg, regions=False), extern=EXTERN_KERNELS)
        ours, _, mod = run_both(g, vals, replace(cfg, localize_bytes=2048), extern=EXTERN_KERNELS)
        for a, b, r, name in zip(base, ours, ref, g.outputs):
            a, b = np.asarray(a), np.asarray(b)
            assert a.shape == b.shape == np.shape(r), (seed, name)
            assert ((a == b) | (np.isnan(a) & np.isnan(b))).all(), f"seed {seed}: {name} differs with regions"
            assert (np.isnan(b) == np.isnan(r)).all(), f"seed {seed}: {name} NaN placement"
        wrapper = mod.source.split("# ---- Python wrapper")[1]
        seen["region"] += "in one parallel region" in wrapper
        seen["local"] += "kernel-local" in wrapper
    assert seen["region"] >= 12 and seen["local"] >= 3, seen


def test_escaping_buffers_are_the_reads_of_every_other_kernel():
    """regions.EscapingBuffers (each kernel's reads walked once) gives, per kernel, exactly the graph's
    outputs plus what any other kernel reads: the pairwise definition it replaced, on seeded random graphs."""
    import random

    from stax.cpu.regions import EscapingBuffers, reads_of
    from stax.sched.random_graphs import random_graph

    checked = 0
    for seed in range(12):
        rng = random.Random(seed)
        g = random_graph(rng, n_nodes=rng.choice([4, 8, 12]), R=64, C=40, recent=rng.choice([None, 3]))
        sched = make_schedule(g)
        escaping = EscapingBuffers(sched)
        for k in sched.kernels:
            want = set(g.outputs).union(*[reads_of(g, o.nodes) for o in sched.kernels if o is not k])
            assert escaping(k) == want, (seed, k.name)
            checked += 1
    assert checked > 24
