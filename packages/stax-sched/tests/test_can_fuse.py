"""The §7.3 legality conditions, each pinned by a graph where only that condition decides."""

from book_graphs import F32, i0, i1, r0, x_input
from stax.ir import ComputedBuffer, ExternKernel, Graph, InputBuffer, Layout, Pointwise, Reduction, load, op
from stax.ir.index import ModularIndexing
from stax.sched import CpuPolicy, GpuPolicy, SchedulerConfig, schedule
from stax.sched.can_fuse import compare_scores, sort_by_score


def pw(name, sizes, value, layout=None):
    return ComputedBuffer(name, layout or Layout.contiguous(sizes, F32), Pointwise(sizes, value))


def vec_input(name, n):
    return InputBuffer(name, Layout.contiguous((n,), F32))


def records(s, a, b):
    return [r for r in s.fusion_log if (r.a, r.b) == (a, b)]


def test_prop_7_3_distance_plus_one_is_rejected():
    """b reads a's output at i+1: after fusion the read would precede the write (Fig 7.1, right)."""
    for policy in (CpuPolicy(), GpuPolicy()):
        x = vec_input("x", 64)
        a = pw("buf1", (64,), op("exp", load("x", i0, F32)))
        shifted = pw("buf2", (64,), op("neg", load("buf1", ModularIndexing(i0 + 1, 1, 64), F32)))
        s = schedule(Graph((x,), (a, shifted), ("buf2",)), policy)
        (rec,) = records(s, "op0", "op1")
        assert not rec.fused and rec.reason.startswith("index mismatch"), rec
        assert len(s.kernels) == 2
        same = pw("buf2", (64,), op("neg", load("buf1", i0, F32)))  # distance 0: fuses
        s0 = schedule(Graph((x,), (a, same), ("buf2",)), policy)
        assert len(s0.kernels) == 1 and s0.fusion_log[0].fused


def test_affine_distance_plus_one_is_rejected_with_both_indices_in_the_reason():
    x = vec_input("x", 65)
    a = pw("buf1", (65,), op("exp", load("x", i0, F32)))
    b = pw("buf2", (64,), op("neg", load("buf1", i0 + 1, F32)))
    s = schedule(Graph((x,), (a, b), ("buf2",)), GpuPolicy())
    (rec,) = records(s, "op0", "op1")
    assert rec.reason == "index mismatch: buf1 written at c0 over {c0: 65}, read by op1 at c0 + 1 over {c0: 64}"


def test_unanalyzable_read_blocks_vertical_fusion():
    x, idx = vec_input("x", 64), InputBuffer("idx", Layout.contiguous((64,), __import__("stax.ir").ir.dtypes.int64))
    from stax.ir import dtypes
    from stax.ir.index import var

    s0 = var("s", 0)
    a = pw("buf1", (64,), op("exp", load("x", i0, F32)))
    gather = pw("buf2", (64,), load("buf1", s0, F32, indirect=((s0, load("idx", i0, dtypes.int64), 64),)))
    s = schedule(Graph((x, idx), (a, gather), ("buf2",)))
    (rec,) = records(s, "op0", "op1")
    assert "unanalyzable" in rec.reason and "StarDep('buf1')" in rec.reason


def test_too_many_nodes():
    x = vec_input("x", 16)
    nodes, prev = [], "x"
    for k in range(1, 8):
        nodes.append(pw(f"buf{k}", (16,), op("neg", load(prev, i0, F32))))
        prev = f"buf{k}"
    s = schedule(Graph((x,), tuple(nodes), (prev,)), CpuPolicy(SchedulerConfig(max_fusion_nodes=3)))
    assert max(len(k.nodes) for k in s.kernels) == 3
    assert any(r.reason == "too many nodes (4 > 3)" for r in s.fusion_log)


def test_default_limit_of_128_nodes():
    """Every node writes its own buffer, so the 32-buffer limit binds first; lift it to see 128."""
    x = vec_input("x", 4)
    nodes, prev = [], "x"
    for k in range(1, 141):
        nodes.append(pw(f"buf{k}", (4,), op("neg", load(prev, i0, F32))))
        prev = f"buf{k}"
    g = Graph((x,), tuple(nodes), (prev,))
    s = schedule(g, CpuPolicy(SchedulerConfig(max_fusion_buffers=1000)))
    assert max(len(k.nodes) for k in s.kernels) == 128
    assert any(r.reason == "too many nodes (140 > 128)" for r in s.fusion_log)
    assert max(len(k.nodes) for k in schedule(g).kernels) <= 31


def test_too_many_buffers():
    """a reads 20 inputs, b 16 (one shared), each writes one: together 37 buffers > 32."""
    xs = [vec_input(f"x{k}", 8) for k in range(36)]

    def total(names):
        v = load(names[0], i0, F32)
        for n in names[1:]:
            v = op("add", v, load(n, i0, F32))
        return v

    a = pw("buf1", (8,), total([f"x{k}" for k in range(20)]))
    b = pw("buf2", (8,), total(["x0"] + [f"x{k}" for k in range(20, 35)]))
    s = schedule(Graph(tuple(xs), (a, b), ("buf1", "buf2")))
    (rec,) = records(s, "op0", "op1")
    assert rec.reason == "too many buffers (37 > 32)"


def test_shared_bytes_below_threshold():
    """Both read x, one row-major, one transposed: no dependence with equal indices, sigma = 0."""
    x = x_input(rows=8, cols=8)
    a = pw("buf1", (8, 8), op("exp", load("primals_1", 8 * i0 + i1, F32)))
    b = pw("buf2", (8, 8), op("neg", load("primals_1", 8 * i1 + i0, F32)))
    s = schedule(Graph((x,), (a, b), ("buf1", "buf2")))
    (rec,) = records(s, "op0", "op1")
    assert rec.reason == "shared bytes 0 below threshold 1" and rec.score[1] == 0


def test_lifetime_extension_limit():
    """Two row sums of x 70 nodes apart (unrelated chain in between) are not fused."""
    x = x_input(rows=4, cols=8)
    y = vec_input("y", 4)
    first = ComputedBuffer("buf0", Layout.contiguous((4,), F32),
                           Reduction((4,), (8,), "sum", load("primals_1", 8 * i0 + r0, F32)))
    chain, prev = [], "y"
    for k in range(1, 70):
        chain.append(ComputedBuffer(f"chain{k}", Layout.contiguous((4, 1), F32),
                                    Reduction((4, 1), (3,), "max", load(prev, i0, F32))))
        prev = f"chain{k}"
    last = ComputedBuffer("buf9", Layout.contiguous((4,), F32),
                          Reduction((4,), (8,), "max", load("primals_1", 8 * i0 + r0, F32)))
    g = Graph((x, y), (first, *chain, last), ("buf0", prev, "buf9"))
    s = schedule(g, GpuPolicy())
    (rec,) = records(s, "op0", "op70")
    assert rec.reason.startswith("peak memory: 70 nodes apart")
    near = schedule(g, GpuPolicy(SchedulerConfig(max_fusion_distance=100)))
    assert records(near, "op0", "op70")[0].fused


def test_extern_kernels_are_never_fused():
    x = vec_input("x", 8)
    a = pw("buf1", (8,), op("exp", load("x", i0, F32)))
    e = ExternKernel("buf2", Layout.contiguous((8,), F32), "test.neg", ("buf1",))
    b = pw("buf3", (8,), op("neg", load("buf1", i0, F32)))
    s = schedule(Graph((x,), (a, e, b), ("buf2", "buf3")))
    ext = [k for k in s.kernels if k.kind == "extern"]
    assert [k.nodes for k in ext] == [("buf2",)] and ext[0].node_type == "ExternKernelSchedulerNode"
    assert all("op1" not in (r.a, r.b) for r in s.fusion_log)  # not even a candidate
    assert [k.nodes for k in s.kernels if k.kind != "extern"] == [("buf1", "buf3")]


def test_different_devices_are_not_fused():
    x = vec_input("x", 8)
    a = pw("buf1", (8,), op("exp", load("x", i0, F32)))
    b = pw("buf2", (8,), op("neg", load("buf1", i0, F32)), Layout("cuda", F32, (8,), (1,)))
    s = schedule(Graph((x,), (a, b), ("buf2",)))
    assert records(s, "op0", "op1")[0].reason == "different devices/streams cpu/cuda"


def softmax_like(R=8, C=16) -> Graph:
    """amax over rows, then sum(exp(x - max)): the second reduction needs the first one finished."""
    x = x_input(rows=R, cols=C)
    mx = ComputedBuffer("buf1", Layout.contiguous((R, 1), F32),
                        Reduction((R, 1), (C,), "max", load("primals_1", C * i0 + r0, F32)))
    e = op("exp", op("sub", load("primals_1", C * i0 + r0, F32), load("buf1", i0, F32)))
    sm = ComputedBuffer("buf2", Layout.contiguous((R, 1), F32), Reduction((R, 1), (C,), "sum", e))
    return Graph((x,), (mx, sm), ("buf2",))


def test_dependent_reductions():
    """CPU: outer-loop fusion (row by row: max, then the sum). GPU: one loop nest cannot hold both
    unless the codegen does one pass per reduction (fuse_dependent_reductions)."""
    cpu = schedule(softmax_like())
    (k,) = cpu.kernels
    assert (k.kind, k.outer_depth) == ("outer_loop_fused", 1)
    gpu = schedule(softmax_like(), GpuPolicy())
    assert len(gpu.kernels) == 2
    assert gpu.fusion_log[0].reason == "reduction order: op1 needs the finished reduction op0"
    multi = schedule(softmax_like(), GpuPolicy(SchedulerConfig(fuse_dependent_reductions=True)))
    assert [k.kind for k in multi.kernels] == ["fused"]


def test_score_order_and_16x_rule():
    """Lexicographic (tau, sigma, omega, -delta), except sigmas > 16x apart compare alone."""
    assert compare_scores((1, 100, 1, -1), (0, 1500, 1, -1)) > 0  # within 16x: tau decides
    assert compare_scores((1, 100, 1, -1), (0, 1700, 1, -1)) < 0  # 17x: sigma alone
    assert compare_scores((0, 64, 2, -1), (0, 64, 1, -1)) > 0  # omega
    assert compare_scores((0, 64, 1, -1), (0, 64, 1, -5)) > 0  # nearer first
    assert sort_by_score([(1, 100, 1, -1), (0, 1700, 1, -1)], key=lambda s: s)[0] == (0, 1700, 1, -1)
    assert sort_by_score([(0, 1500, 1, -1), (1, 100, 1, -1)], key=lambda s: s)[0] == (1, 100, 1, -1)
