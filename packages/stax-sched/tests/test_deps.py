"""Dependences (Def 7.1), iteration groups, topological sort and dead-node removal (§7.1, §7.6)."""

import pytest
from book_graphs import F32, i0, i1, x_input
from stax.ir import ComputedBuffer, ExternKernel, Graph, InputBuffer, Layout, Pointwise, Reduction, dtypes, load, op
from stax.ir.index import var
from stax.ir.normalize import normalize_index
from stax.sched import MemoryDep, StarDep, WeakDep, schedule
from stax.sched.create_nodes import create_nodes
from stax.sched.topo import topological_sort


def pw(name, sizes, value, strides=None):
    layout = Layout("cpu", F32, sizes, strides) if strides else Layout.contiguous(sizes, F32)
    return ComputedBuffer(name, layout, Pointwise(sizes, value))


def test_extern_and_indirect_reads_are_star_deps():
    x = x_input(rows=4, cols=8)
    idx = InputBuffer("idx", Layout.contiguous((4,), dtypes.int64))
    e = ExternKernel("buf1", Layout.contiguous((4, 8), F32), "aten.mm", ("primals_1",))
    s = var("s", 0)
    gather = pw("buf2", (4,), load("buf1", 8 * s, F32, indirect=((s, load("idx", i0, dtypes.int64), 4),)))
    n1, n2 = create_nodes(Graph((x, idx), (e, gather), ("buf2",)))
    assert n1.node_type == "ExternKernelSchedulerNode" and n1.is_extern
    assert n1.read_writes.reads == {StarDep("primals_1")} and n1.read_writes.writes == {StarDep("buf1")}
    assert StarDep("buf1") in n2.read_writes.reads
    assert MemoryDep("idx", normalize_index(i0, [(i0, 4)])) in n2.read_writes.reads
    assert str(StarDep("buf1")) == "StarDep('buf1')"


def test_transposed_write_index_is_kept_and_consumers_match_it():
    """A column-major buffer is written at i0 + 4*i1; a consumer reading it element-wise uses the same index."""
    x = x_input(rows=4, cols=8)
    t = pw("buf1", (4, 8), op("exp", load("primals_1", 8 * i0 + i1, F32)), strides=(1, 4))
    u = pw("buf2", (4, 8), op("neg", load("buf1", i0 + 4 * i1, F32)))
    a, b = create_nodes(Graph((x,), (t, u), ("buf2",)))
    assert str(a.write_dep) == "MemoryDep('buf1', c0 + 4*c1, {c0: 4, c1: 8})"
    assert MemoryDep("buf1", a.write_dep.index) in b.read_writes.reads
    assert a.group == ((4, 8), ())  # write index and read index walk differently: no coalescing
    s = schedule(Graph((x,), (t, u), ("buf2",)))
    assert [k.kind for k in s.kernels] == ["fused"]


def test_keepdim_and_size_one_dims_are_dropped_from_groups():
    x = x_input(rows=4, cols=8)
    red = ComputedBuffer("buf1", Layout.contiguous((4, 1), F32),
                         Reduction((4, 1), (1, 8), "sum", load("primals_1", 8 * i0 + var("r", 1), F32)))
    (n,) = create_nodes(Graph((x,), (red,), ("buf1",)))
    assert n.sizes == ((4,), (8,)) and n.group == ((4,), (8,))


def test_injectivity():
    assert MemoryDep("b", normalize_index(i0 + 4 * i1, [(i0, 4), (i1, 8)])).is_injective()
    assert not MemoryDep("b", normalize_index(i0 + 2 * i1, [(i0, 4), (i1, 8)])).is_injective()
    assert not MemoryDep("b", normalize_index(i0 * i1, [(i0, 4), (i1, 8)])).is_injective()  # not affine


def test_dead_nodes_are_removed_and_order_is_topological():
    x = x_input(rows=2, cols=2)
    late = pw("buf3", (2, 2), op("neg", load("buf1", 2 * i0 + i1, F32)))
    early = pw("buf1", (2, 2), op("exp", load("primals_1", 2 * i0 + i1, F32)))
    dead = pw("buf2", (2, 2), op("abs", load("buf1", 2 * i0 + i1, F32)))
    g = Graph((x,), (late, early, dead), ("buf3",))  # out of order on purpose
    order = topological_sort(create_nodes(g), g.outputs)
    assert [n.buffer for n in order] == ["buf1", "buf3"]
    assert [n.name for n in order] == ["op1", "op0"]  # names follow graph order
    assert all("buf2" not in k.nodes for k in schedule(g).kernels)


def test_cycle_is_an_error():
    x = x_input(rows=2, cols=2)
    a = pw("buf1", (2, 2), op("neg", load("buf2", 2 * i0 + i1, F32)))
    b = pw("buf2", (2, 2), op("neg", load("buf1", 2 * i0 + i1, F32)))
    g = Graph((x,), (a, b), ("buf2",))
    with pytest.raises(ValueError, match="dependence cycle"):
        topological_sort(create_nodes(g), g.outputs)


def test_in_place_rewrite_is_renamed_with_weak_deps():
    """§7.1: buf3 overwrites buf1: buf2 (an earlier reader of buf1) gets ordered before buf3 by a
    WeakDep, and buf4's later read of buf1 becomes a read of buf3."""
    x = x_input(rows=2, cols=2)
    buf1 = pw("buf1", (2, 2), op("exp", load("primals_1", 2 * i0 + i1, F32)))
    buf2 = pw("buf2", (2, 2), op("neg", load("buf1", 2 * i0 + i1, F32)))
    buf3 = pw("buf3", (2, 2), op("abs", load("primals_1", 2 * i0 + i1, F32)))
    buf4 = pw("buf4", (2, 2), op("add", load("buf1", 2 * i0 + i1, F32), load("buf2", 2 * i0 + i1, F32)))
    g = Graph((x,), (buf1, buf2, buf3, buf4), ("buf4",))
    nodes = create_nodes(g, mutations={"buf3": "buf1"})
    assert WeakDep("buf2", "buf3") in nodes[2].read_writes.reads
    assert {d.name for d in nodes[3].read_writes.reads} == {"buf3", "buf2"}
    order = [n.buffer for n in topological_sort(nodes, g.outputs)]
    assert order.index("buf2") < order.index("buf3") < order.index("buf4")
