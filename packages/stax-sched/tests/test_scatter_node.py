"""Scatter nodes in the scheduler: their own kernel kind, never fused, dependences and lifetimes as any node."""

import logging

import numpy as np
from stax.ir import (
    ComputedBuffer,
    Graph,
    InputBuffer,
    Layout,
    Pointwise,
    Scatter,
    const,
    interpret,
    load,
    op,
    pointwise_vars,
    reduction_vars,
    var,
)
from stax.ir import dtypes as dt
from stax.sched import CpuPolicy, GpuPolicy, MemoryDep, SchedulerConfig, StarDep, schedule
from stax.sched.can_fuse import SCATTER_REASON, can_fuse
from stax.sched.create_nodes import create_nodes
from stax.sched.exact import optimal_fusion

F32 = dt.float32
i0, i1 = pointwise_vars(2)
r0, r1 = reduction_vars(2)
t0 = var("t", 0)
V, D, N = 50, 16, 24


def embedding_backward() -> Graph:
    """g2 = 2 * grad (pointwise); gw[ids[r0], r1] += g2[r0, r1] (scatter); out = gw + 1 (pointwise)."""
    ins = (InputBuffer("grad", Layout.contiguous((N, D), F32)), InputBuffer("ids", Layout.contiguous((N,), dt.int64)))
    g2 = ComputedBuffer("buf0", Layout.contiguous((N, D), F32),
                        Pointwise((N, D), op("mul", load("grad", D * i0 + i1, F32), const(2.0, F32))))
    body = Scatter((V, D), const(0.0, F32), (N, D), (t0, r1), ((t0, load("ids", r0, dt.int64), V),),
                   load("buf0", D * r0 + r1, F32), "add")
    gw = ComputedBuffer("buf1", Layout.contiguous((V, D), F32), body)
    out = ComputedBuffer("buf2", Layout.contiguous((V, D), F32),
                         Pointwise((V, D), op("add", load("buf1", D * i0 + i1, F32), const(1.0, F32))))
    return Graph(ins, (g2, gw, out), ("buf2",))


def test_dependences():
    """Reads: the value at its r-index (MemoryDep), the indices through a StarDep (they are data);
    the write is a StarDep: where a scatter stores depends on data."""
    g = embedding_backward()
    op1 = create_nodes(g)[1]
    reads = {d.name: d for d in op1.read_writes.reads}
    assert isinstance(reads["buf0"], MemoryDep) and reads["buf0"].numel() == N * D
    assert isinstance(reads["ids"], MemoryDep) and reads["ids"].numel() == N  # the index value itself is affine
    assert op1.read_writes.writes == frozenset({StarDep("buf1")})
    assert op1.is_scatter and not op1.is_reduction
    assert op1.sizes == ((V, D), (N, D))


def test_own_kernel_never_fused_cpu_and_gpu(caplog):
    g = embedding_backward()
    for policy in (CpuPolicy(), GpuPolicy()):
        with caplog.at_level(logging.DEBUG, logger="stax.sched.fusion"):
            s = schedule(g, policy)
        assert [(k.kind, k.nodes) for k in s.kernels] == [
            ("pointwise", ("buf0",)), ("scatter", ("buf1",)), ("pointwise", ("buf2",))]
        assert s.kernels[1].group == ((V, D), (N, D))
        assert not any(r.fused for r in s.fusion_log)
        assert "op1: scatter, never fused" in caplog.text
        caplog.clear()


def test_can_fuse_reason_both_directions():
    snodes = create_nodes(embedding_backward())
    cfg = SchedulerConfig()
    for a, b in ((snodes[0], snodes[1]), (snodes[1], snodes[2])):
        v = can_fuse(a, b, CpuPolicy(), cfg)
        assert not v.ok and v.reason == SCATTER_REASON


def test_exact_solver_keeps_scatter_alone():
    """Def 7.3's optimum: buf0 and buf2 cannot join the scatter; each is its own block."""
    cost, partition = optimal_fusion(embedding_backward(), CpuPolicy())
    assert sorted(map(sorted, partition)) == [["buf0"], ["buf1"], ["buf2"]]
    assert cost > 0


def test_memory_plan_frees_value_after_scatter_and_no_inplace():
    """buf0 dies at the scatter kernel; even with in-place reuse on the scatter never writes
    into a buffer it reads (its second pass reads the value after the first pass wrote)."""
    g = embedding_backward()
    s = schedule(g, CpuPolicy(SchedulerConfig(inplace_reuse=True)))
    ev = [(e.step, e.kind, e.buffer, e.reuses) for e in s.memory.events]
    assert (1, "free", "buf0", None) in ev
    assert not any(e.kind == "reuse" and e.buffer == "buf1" for e in s.memory.events)
    assert s.memory.peak_bytes <= s.memory.lower_bound_bytes


def test_schedule_order_runs_like_the_graph():
    """Executing the kernels in schedule order with the interpreter gives the graph's result."""
    g = embedding_backward()
    rng = np.random.default_rng(0)
    feed = {"grad": rng.standard_normal(N * D).astype(np.float32), "ids": rng.integers(0, V, N)}
    want = interpret(g, feed)["buf2"]
    s = schedule(g)
    order = [n for k in s.kernels for n in k.nodes]
    g2 = Graph(g.inputs, tuple(g.node(n) for n in order), g.outputs)
    np.testing.assert_array_equal(interpret(g2, feed)["buf2"], want)
    ref = np.zeros((V, D), np.float32)
    np.add.at(ref, feed["ids"], 2 * feed["grad"].reshape(N, D))
    np.testing.assert_allclose(want.reshape(V, D), ref + 1, rtol=1e-6)
