"""Kernel kinds and loop structure: Example 7.1/7.2, fused and outer-loop-fused kernels,
strided/transposed/offset views, size-1 and empty dims, extern kernels, memory reuse."""

import logging
from dataclasses import replace

import numpy as np
import pytest
from cpu_harness import F32, assert_close, contiguous, isa_of, pointwise, run_both, single_kernel
from stax import ir
from stax.cpu.loops import parallel_depth
from stax.ir import dtypes as dt
from stax.ir.examples import example_7_1
from stax.sched import Kernel, MemoryEvent, MemoryPlan, Schedule
from stax.sched import schedule as make_schedule

i0, i1, i2 = ir.pointwise_vars(3)
(r0,) = ir.reduction_vars(1)


def outer_fused_schedule(g, depth=1):
    events = (MemoryEvent(0, "alloc", "buf1"), MemoryEvent(0, "alloc", "buf2"), MemoryEvent(0, "free", "buf1"),
              MemoryEvent(0, "free", "primals_1"))
    k = Kernel("cpp_fused_div_sum_0", "outer_loop_fused", ("buf1", "buf2"), ((64,), (128,)),
               "OuterLoopFusedSchedulerNode", depth)
    return Schedule(g, (k,), MemoryPlan(events))


def test_parallel_depth_algorithm_8_1():
    """The book's numbers: 64x128 on P=4 -> depth 1; 1024 iterations -> serial; P=1 -> serial."""
    assert parallel_depth([64, 128], 8192, 4) == 1
    assert parallel_depth([8, 128], 1024, 4) == 0
    assert parallel_depth([64, 128], 8192, 1) == 0
    assert parallel_depth([3, 5, 4096], 3 * 5 * 4096, 4) == 2  # 3 < P: go one deeper, 15 >= 2P stops
    assert parallel_depth([2, 1 << 20], 2 << 20, 2) == 1  # par == P stops


@pytest.mark.parametrize("rows,cols", [(64, 128), (13, 37)])
def test_example_7_1_unfused_and_outer_loop_fused(rows, cols, cfg):
    g = example_7_1(rows, cols)
    x = np.random.default_rng(0).random((rows, cols)) + 0.5
    ours, ref, _ = run_both(g, {"primals_1": x}, cfg)
    assert_close(ours[0], ref[0], F32, rtol=1e-6)
    if (rows, cols) == (64, 128):
        ours, ref, mod = run_both(g, {"primals_1": x}, cfg, sched=outer_fused_schedule(g))
        assert_close(ours[0], ref[0], F32, rtol=1e-6)
        src = mod.source[mod.source.index('extern "C" int cpp_fused_div_sum_0'):]
        # Listing 7.1's shape: one parallel loop over x0 holding the row sum, its store, then the row divide
        lines = [ln.strip() for ln in src.splitlines()]
        outer = lines.index("for (int64_t x0 = 0; x0 < 64; x0 += 1) {")
        assert lines[outer - 1].startswith("#pragma omp")
        body = "\n".join(lines[outer:])
        assert body.index("tmp_acc0") < body.index("out_ptr0[x0] =") < body.index("out_ptr1")
        assert body.count("x0 < 64") == 1


def test_example_7_2_two_loops_one_parallel_region(cfg):
    """exp materialized, then sum and amax of it in one loop with two accumulators (SAME_VARS_REDUCE),
    all in one C++ function sharing one OpenMP region."""
    x = contiguous("x", (64, 128))
    buf1 = pointwise("buf1", (64, 128), ir.op("exp", ir.load("x", 128 * i0 + i1, F32)))
    red = {t: ir.ComputedBuffer(f"buf_{t}", ir.Layout.contiguous((64,), F32), ir.Reduction(
        (64,), (128,), t, ir.load("buf1", 128 * i0 + r0, F32))) for t in ("sum", "max")}
    g = ir.Graph([x], [buf1, red["sum"], red["max"]], ["buf_sum", "buf_max"])
    sched = single_kernel(g, "fused")
    ours, ref, mod = run_both(g, {"x": np.random.default_rng(1).standard_normal((64, 128))}, cfg, sched=sched)
    assert_close(ours[0], ref[0], F32, rtol=1e-5)
    assert_close(ours[1], ref[1], F32, rtol=2e-6)  # exp: libm vs numpy differ by an ulp
    src = mod.source[mod.source.index('extern "C" int kernel0'):]
    assert src.count("#pragma omp parallel num_threads") == 1
    assert src.count("#pragma omp for") == 2
    tail = src[src.index("buf_sum"):]
    assert tail.count("for (int64_t x1 = 0") == 1  # one loop feeds both accumulators


def test_outer_loop_fusion_falls_back_when_illegal(cfg, caplog):
    """A consumer reading the producer transposed cannot share the outer loop: sequential nests, same result."""
    x = contiguous("x", (16, 16))
    a = pointwise("a", (16, 16), ir.op("mul", ir.load("x", 16 * i0 + i1, F32), ir.const(2.0, F32)))
    b = pointwise("b", (16, 16), ir.op("add", ir.load("a", 16 * i1 + i0, F32), ir.const(1.0, F32)))
    g = ir.Graph([x], [a, b], ["b"])
    with caplog.at_level(logging.WARNING, logger="stax.cpu"):
        ours, ref, _ = run_both(g, {"x": np.arange(256.0).reshape(16, 16)}, cfg,
                                sched=single_kernel(g, "outer_loop_fused", 1))
    assert_close(ours[0], ref[0], F32)
    assert "not provably legal" in caplog.text


def test_transposed_offset_and_strided_views(cfg):
    """Inputs as views: a transposed input, a slice with a storage offset, a stepped slice; a transposed output."""
    n, m = 13, 29
    xt = ir.InputBuffer("xt", ir.Layout("cpu", F32, (n, m), (1, n)))  # x.T of an (m, n) array
    big = ir.InputBuffer("big", ir.Layout.contiguous((n + 3, 2 * m + 1), F32))
    # big[3:, 1::2] as an index map: offset 3*(2m+1)+1, strides (2m+1, 2)
    view = ir.load("big", (2 * m + 1) * (i0 + 3) + 1 + 2 * i1, F32)
    val = ir.op("add", ir.load("xt", i0 + n * i1, F32), view)
    out = ir.ComputedBuffer("out", ir.Layout("cpu", F32, (n, m), (1, n)), ir.Pointwise((n, m), val))
    g = ir.Graph([xt, big], [out], ["out"])
    rng = np.random.default_rng(3)
    ours, ref, _ = run_both(g, {"xt": rng.random((n, m)), "big": rng.random((n + 3, 2 * m + 1))}, cfg)
    assert ours[0].strides == (4, 4 * n)
    assert_close(ours[0], ref[0], F32)


def test_size_one_dims_are_dropped_and_contiguous_dims_merged(cfg):
    """(3, 1, 5, 7) contiguous pointwise with a broadcast (1, 1, 5, 1) operand: the size-1 dim vanishes,
    the 5x7 tail merges only where every index allows it."""
    x = contiguous("x", (3, 1, 5, 7))
    y = contiguous("y", (5,))
    i = ir.pointwise_vars(4)
    v = ir.op("mul", ir.load("x", 35 * i[0] + 7 * i[2] + i[3], F32), ir.load("y", i[2], F32))
    w = ir.op("neg", ir.load("x", 35 * i[0] + 7 * i[2] + i[3], F32))
    g = ir.Graph([x, y], [pointwise("a", (3, 1, 5, 7), v), pointwise("b", (3, 1, 5, 7), w)], ["a", "b"])
    rng = np.random.default_rng(4)
    ours, ref, mod = run_both(g, {"x": rng.random((3, 1, 5, 7)), "y": rng.random(5)}, cfg)
    for o, r in zip(ours, ref):
        assert_close(o, r, F32)
    assert "x0 < 105" in mod.source  # b: all dims merged into one loop
    assert "x2 < 7" in mod.source  # a: y's index keeps the 5 and 7 apart


def test_empty_tensors(cfg):
    x = contiguous("x", (0, 5))
    g = ir.Graph([x], [pointwise("y", (0, 5), ir.op("exp", ir.load("x", 5 * i0 + i1, F32)))], ["y"])
    ours, ref, _ = run_both(g, {"x": np.zeros((0, 5), np.float32)}, cfg)
    assert ours[0].shape == (0, 5)


def test_gather_and_masked_load(cfg):
    """Indirect (embedding-style) loads, and a masked load (constant_pad) reading nothing where masked."""
    table = contiguous("table", (10, 3))
    idx = contiguous("idx", (6,), dt.int64)
    s = ir.var("ind", 0)
    gathered = ir.load("table", 3 * s + i1, F32, indirect=((s, ir.load("idx", i0, dt.int64), 10),))
    emb = pointwise("emb", (6, 3), gathered)
    x = contiguous("x", (5,))
    inside = ir.op("lt", ir.index_value(i0, dt.int64), ir.const(5, dt.int64))
    pad = pointwise("pad", (8,), ir.load("x", i0, F32, mask=inside, other=-1.0))
    g = ir.Graph([table, idx, x], [emb, pad], ["emb", "pad"])
    rng = np.random.default_rng(5)
    vals = {"table": rng.random((10, 3)), "idx": np.array([0, 9, 3, 3, 7, 1]), "x": rng.random(5)}
    ours, ref, _ = run_both(g, vals, cfg)
    assert_close(ours[0], ref[0], F32)
    assert_close(ours[1], ref[1], F32)


@pytest.mark.parametrize("d", [F32, dt.bfloat16], ids=str)
def test_gathered_rows_are_read_as_vectors(cfg, d):
    """An embedding: the row index is the same in every lane of the column loop, so each block checks it
    once and reads the row with a plain vector load (no lane loop); out-of-range indices still raise."""
    V, D, N = 50, 40, 7  # 40 columns: whole vectors and a ragged end
    table, idx = contiguous("table", (V, D), d), contiguous("idx", (N,), dt.int64)
    s = ir.var("ind", 0)
    row = ir.load("table", D * s + i1, d, indirect=((s, ir.load("idx", i0, dt.int64), V),))
    out = pointwise("out", (N, D), ir.op("mul", ir.cast(row, F32), ir.const(2.0, F32)))
    g = ir.Graph([table, idx], [out], ["out"])
    rng = np.random.default_rng(6)
    ids = np.array([0, 49, 3, 3, 17, 1, 30])
    ours, ref, mod = run_both(g, {"table": rng.random((V, D)).astype(np.float32), "idx": ids}, cfg)
    assert_close(ours[0], ref[0], F32)
    if isa_of(mod) != "none":
        kernels = mod.source.split("# ---- Python wrapper ----")[0].split('extern "C" int kernel0', 1)[1]
        assert "for (int64_t l = 0" not in kernels and "check_index" in kernels
    with pytest.raises(IndexError, match=r"index 50 is out of bounds .* size 50 .*table"):
        mod.call([np.zeros((V, D), np.float32 if d == F32 else np.uint16), np.array([1, 50, 2, 3, 4, 5, 6])])


def test_a_reduction_over_gathered_rows_runs_along_the_rows(cfg):
    """sum over each gathered row (an embedding's layer norm statistics): vectorized along the row, whose
    index is one per block, not over the tokens, whose every element would be a checked lane read
    (access_score counts a gather along a loop with its index)."""
    V, D, N = 30, 64, 48
    table, idx = contiguous("table", (V, D)), contiguous("idx", (N,), dt.int64)
    s = ir.var("ind", 0)
    row = ir.load("table", D * s + r0, F32, indirect=((s, ir.load("idx", i0, dt.int64), V),))
    red = ir.ComputedBuffer("sums", ir.Layout.contiguous((N,), F32), ir.Reduction((N,), (D,), "sum", row))
    g = ir.Graph([table, idx], [red], ["sums"])
    rng = np.random.default_rng(7)
    ours, ref, mod = run_both(g, {"table": rng.random((V, D)).astype(np.float32), "idx": rng.integers(0, V, N)}, cfg)
    assert_close(ours[0], ref[0], F32, rtol=1e-5, atol=1e-5)
    if isa_of(mod) != "none":
        kernels = mod.source.split("# ---- Python wrapper ----")[0].split('extern "C" int kernel0', 1)[1]
        assert "for (int64_t l = 0" not in kernels and "stax::vec::loadu<stax::vec::vfloat>" in kernels


def _matmul_graph(transposed_result: bool):
    a, b = contiguous("a", (5, 7)), contiguous("b", (7, 3))
    mm = ir.ExternKernel("buf0", ir.Layout.contiguous((5, 3), F32), "test.mm", ("a", "b"),
                         (("transposed", transposed_result),))
    out = pointwise("buf1", (5, 3), ir.op("relu", ir.load("buf0", 3 * i0 + i1, F32)))
    return ir.Graph([a, b], [mm, out], ["buf1", "buf0"])


def _mm(a, b, transposed=False):
    r = np.matmul(a, b)
    return np.ascontiguousarray(r.T).T if transposed else r  # same values, column-major strides


@pytest.mark.parametrize("transposed", [False, True])
def test_extern_kernel_result_layout_fixed(transposed, cfg):
    """An extern result with other strides than the node's layout is copied into the right layout."""
    g = _matmul_graph(transposed)
    rng = np.random.default_rng(6)
    ours, ref, _ = run_both(g, {"a": rng.random((5, 7)) - 0.5, "b": rng.random((7, 3))}, cfg,
                            extern={"test.mm": _mm})
    assert ours[1].strides == (12, 4)
    for o, r in zip(ours, ref):
        assert_close(o, r, F32, rtol=1e-6)


def test_an_extern_that_binds_its_constants_is_called_with_buffers_only(cfg):
    """An extern callable with `bind(**constants)` is bound once per node at compile time; the
    wrapper then passes only the buffers (no `**consts_<node>` per call). Results as without."""
    bound = []

    def mm(a, b, transposed=False):
        return _mm(a, b, transposed)

    def bind(**constants):
        bound.append(constants)
        return lambda a, b: _mm(a, b, **constants)

    mm.bind = bind
    g = _matmul_graph(True)
    rng = np.random.default_rng(6)
    ours, ref, mod = run_both(g, {"a": rng.random((5, 7)) - 0.5, "b": rng.random((7, 3))}, cfg, extern={"test.mm": mm})
    assert bound == [{"transposed": True}]
    assert "ext_buf0(a, b)" in mod.source and "consts_buf0" not in mod.source
    for o, r in zip(ours, ref):
        assert_close(o, r, F32, rtol=1e-6)


def test_memory_plan_reuse_lines(cfg):
    """`buf2 = buf0; del buf0  # reuse`: same-size storage is reused; an output alias keeps its layout."""
    x = contiguous("x", (8, 6))
    b0 = pointwise("buf0", (8, 6), ir.op("exp", ir.load("x", 6 * i0 + i1, F32)))
    b1 = pointwise("buf1", (8, 6), ir.op("neg", ir.load("buf0", 6 * i0 + i1, F32)))
    b2 = ir.ComputedBuffer("buf2", ir.Layout("cpu", F32, (6, 8), (1, 6)),  # transposed view of storage
                           ir.Pointwise((6, 8), ir.op("abs", ir.load("buf1", 6 * i1 + i0, F32))))
    g = ir.Graph([x], [b0, b1, b2], ["buf2"])
    ev = (MemoryEvent(0, "alloc", "buf0"), MemoryEvent(0, "free", "x"), MemoryEvent(1, "alloc", "buf1"),
          MemoryEvent(1, "free", "buf0"), MemoryEvent(2, "reuse", "buf2", "buf0"), MemoryEvent(2, "free", "buf1"))
    ks = tuple(Kernel(f"kernel{k}", "pointwise", (n,), ((48,), ())) for k, n in enumerate(("buf0", "buf1", "buf2")))
    ours, ref, mod = run_both(g, {"x": np.random.default_rng(7).random((8, 6))}, replace(cfg, regions=False),
                              sched=Schedule(g, ks, MemoryPlan(ev)))  # one call per kernel (test_regions: in one)
    assert "buf2 = as_strided(buf0, (6, 8), (1, 6), dt_float32); del buf0  # reuse" in mod.source
    assert ours[0].strides == (4, 24)
    assert_close(ours[0], ref[0], F32, rtol=1e-6)


def test_output_is_an_input_and_default_schedule(cfg):
    x = contiguous("x", (4,))
    g = ir.Graph([x], [pointwise("y", (4,), ir.op("sqrt", ir.load("x", i0, F32)))], ["y", "x"])
    arr = np.arange(4, dtype=np.float32)
    from stax.cpu import compile_schedule

    mod = compile_schedule(make_schedule(g), config=cfg)
    y, x_out = mod.call([arr])
    assert x_out is arr
    np.testing.assert_array_equal(y, np.sqrt(arr))


@pytest.mark.parametrize("shape", [(64, 96), (45, 70)])
def test_tiled_transpose_add(shape, cfg):
    """§8.2: x.t() + y with a transposed output: 2-D tiled loops, vectorized along the contiguous side,
    ragged tiles at odd sizes; same values as the interpreter."""
    n, m = shape
    x = contiguous("x", (m, n))  # used as x.t(): (n, m) view with strides (1, n)
    y = contiguous("y", (n, m))
    v = ir.op("add", ir.load("x", i0 + n * i1, F32), ir.load("y", m * i0 + i1, F32))
    out = ir.ComputedBuffer("out", ir.Layout("cpu", F32, (n, m), (1, n)), ir.Pointwise((n, m), v))
    g = ir.Graph([x, y], [out], ["out"])
    rng = np.random.default_rng(8)
    ours, ref, mod = run_both(g, {"x": rng.random((m, n)), "y": rng.random((n, m))}, cfg)
    assert_close(ours[0], ref[0], F32)
    if "stax::vec::" in mod.source:
        assert "x0_t" in mod.source and "x1_t" in mod.source


def test_vertical_reduction_and_strided_vector_loads(cfg):
    """Column sums (reduction over the outer dim, contiguous inner): one accumulator per lane, stored
    as a vector; plus a reduction reading a strided (every 3rd) element through a lane loop."""
    r, c = 19, 53
    x = contiguous("x", (r, 3 * c))
    col = ir.ComputedBuffer("col", ir.Layout.contiguous((c,), F32), ir.Reduction(
        (c,), (r,), "sum", ir.load("x", 3 * c * r0 + i0 + 2, F32)))
    row = ir.ComputedBuffer("row", ir.Layout.contiguous((r,), F32), ir.Reduction(
        (r,), (c,), "max", ir.load("x", 3 * c * i0 + 3 * r0 + 1, F32)))
    g = ir.Graph([x], [col, row], ["col", "row"])
    ours, ref, _ = run_both(g, {"x": np.random.default_rng(9).standard_normal((r, 3 * c))}, cfg)
    assert_close(ours[0], ref[0], F32, rtol=1e-5, atol=1e-6)
    assert_close(ours[1], ref[1], F32)


def _softmax_graph(rows, cols):
    """softmax as the frontend lowers it: row max, exp(x - max) materialized, row sum, divide."""
    x = contiguous("x", (rows, cols))
    lx = ir.load("x", cols * i0 + i1, F32)
    mx = ir.ComputedBuffer("mx", ir.Layout.contiguous((rows, 1), F32), ir.Reduction(
        (rows, 1), (cols,), "max", ir.load("x", cols * i0 + r0, F32)))
    e = pointwise("e", (rows, cols), ir.op("exp", ir.op("sub", lx, ir.load("mx", i0, F32))))
    sm = ir.ComputedBuffer("sm", ir.Layout.contiguous((rows, 1), F32), ir.Reduction(
        (rows, 1), (cols,), "sum", ir.load("e", cols * i0 + r0, F32)))
    out = pointwise("out", (rows, cols), ir.op("truediv", ir.load("e", cols * i0 + i1, F32), ir.load("sm", i0, F32)))
    return ir.Graph([x], [mx, e, sm, out], ["out"])


@pytest.mark.parametrize("stream", [None, 0])
def test_softmax_row_stays_kernel_local(stream, cfg):
    """In the outer-loop-fused softmax, the exp row is written and read only inside the kernel: it becomes
    a per-iteration array (no buffer in the wrapper); with streaming stores on, the output uses them."""
    g = _softmax_graph(37, 301)
    names = tuple(n.name for n in g.nodes)
    ev = [MemoryEvent(0, "alloc", n) for n in names] + [MemoryEvent(0, "free", n) for n in names if n != "out"]
    sched = Schedule(g, (Kernel("kernel0", "outer_loop_fused", names, ((37,), ()), "OuterLoopFusedSchedulerNode", 1),),
                     MemoryPlan(tuple(ev)))
    from dataclasses import replace

    ours, ref, mod = run_both(g, {"x": np.random.default_rng(10).standard_normal((37, 301))},
                              replace(cfg, stream_bytes=stream), sched=sched)
    assert_close(ours[0], ref[0], F32, rtol=3e-6, atol=1e-7)
    assert "float local_e[301];" in mod.source
    assert "e = empty_strided" not in mod.source and "data_ptr(e)" not in mod.source
    if stream == 0 and "stax::vec::" in mod.source:
        assert "stax::vec::stream(out_ptr" in mod.source and "__builtin_ia32_sfence" in mod.source


def test_large_outputs_ask_for_huge_pages(cfg):
    """Outputs >= huge_page_bytes are advised (MADV_HUGEPAGE on their 2 MB-aligned inside) before the
    kernel writes them; smaller ones are not; values are unaffected."""
    from dataclasses import replace

    n = (5 << 20) // 4 + 3
    x = contiguous("x", (n,))
    g = ir.Graph([x], [pointwise("big", (n,), ir.op("neg", ir.load("x", i0, F32))),
                       pointwise("small", (1000,), ir.op("abs", ir.load("x", i0, F32)))], ["big", "small"])
    ours, ref, mod = run_both(g, {"x": np.random.default_rng(11).standard_normal(n)},
                              replace(cfg, huge_page_bytes=4 << 20))
    assert_close(ours[0], ref[0], F32)
    assert_close(ours[1], ref[1], F32)
    assert mod.source.count("stax::advise_huge(out_ptr0, ") == 1 and "advise_huge(out_ptr1" not in mod.source


def test_channels_last_mean_keeps_its_vector_loop(cfg, caplog):
    """mean over H*W of an NHWC tensor, outer-loop fused with its division (depth 2: n, c): the
    reduction's reads are contiguous along c, so the nest shares only n and the reduction
    vectorizes along c with one accumulator per lane (vertical) instead of gathering along h*w."""
    n, hw, c = 3, 40, 32
    x = contiguous("x", (n, hw, c))
    s = ir.ComputedBuffer("s", ir.Layout.contiguous((n, c), F32), ir.Reduction(
        (n, c), (hw,), "sum", ir.op("relu", ir.load("x", hw * c * i0 + i1 + c * r0, F32))))
    mean = pointwise("mean", (n, c), ir.op("truediv", ir.load("s", c * i0 + i1, F32), ir.const(float(hw), F32)))
    g = ir.Graph([x], [s, mean], ["mean"])
    with caplog.at_level(logging.INFO, logger="stax.cpu"):
        ours, ref, mod = run_both(g, {"x": np.random.default_rng(4).standard_normal((n, hw, c))}, cfg,
                                  sched=single_kernel(g, "outer_loop_fused", 2))
    assert_close(ours[0], ref[0], F32, rtol=1e-5, atol=1e-6)
    assert "outer loops shared to depth 1, not 2" in caplog.text
    src = mod.source[mod.source.index('extern "C" int kernel0'):]
    assert "++l)" not in src, "a lane loop: the reduction gathers along h*w"


def test_channels_last_batch_stats_leave_the_channel_loop_unshared(cfg, caplog):
    """Batch-norm statistics of an NHWC tensor (sum over n*h*w per channel), outer-loop fused at
    depth 1 (c) with their epilogue: sharing c would leave each channel's reduction a strided
    gather, so each node gets its own nest and the sum vectorizes along c (vertical)."""
    nhw, c = 96, 32
    x = contiguous("x", (nhw, c))
    s = ir.ComputedBuffer("s", ir.Layout.contiguous((c,), F32), ir.Reduction(
        (c,), (nhw,), "sum", ir.load("x", i0 + c * r0, F32)))
    mean = pointwise("mean", (c,), ir.op("truediv", ir.load("s", i0, F32), ir.const(float(nhw), F32)))
    g = ir.Graph([x], [s, mean], ["mean"])
    with caplog.at_level(logging.INFO, logger="stax.cpu"):
        ours, ref, mod = run_both(g, {"x": np.random.default_rng(5).standard_normal((nhw, c))}, cfg,
                                  sched=single_kernel(g, "outer_loop_fused", 1))
    assert_close(ours[0], ref[0], F32, rtol=1e-5, atol=1e-6)
    assert "outer loops shared to depth 0, not 1" in caplog.text
    src = mod.source[mod.source.index('extern "C" int kernel0'):]
    assert "++l)" not in src, "a lane loop: the reduction gathers along n*h*w"


def test_wrapper_names_cover_the_wrapper_namespace(cfg):
    """stax.cpu.WRAPPER_NAMES / WRAPPER_PREFIXES list every global the generated wrapper binds, so
    a caller that keeps graph input names clear of them can never shadow a helper."""
    import stax.cpu
    from stax.cpu import compile_schedule
    from stax.sched import schedule as make_schedule

    mod = compile_schedule(make_schedule(example_7_1(8, 16)), config=cfg)
    names = {k for k in mod.call.__globals__ if not k.startswith("__")}
    stray = {k for k in names if k not in stax.cpu.WRAPPER_NAMES and not k.startswith(stax.cpu.WRAPPER_PREFIXES)}
    assert not stray, stray
