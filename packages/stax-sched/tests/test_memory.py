"""Memory planning (§7.5): lifetimes, M*, reordering, reuse from the free pool, in-place reuse, arena."""

import dataclasses
import random

from book_graphs import F32, i0, i1, r0, x_input
from hypothesis import given, settings
from hypothesis import strategies as st
from stax.ir import (
    ComputedBuffer,
    ExternKernel,
    Graph,
    InputBuffer,
    Layout,
    Pointwise,
    Reduction,
    const,
    load,
    loads,
    op,
)
from stax.ir.index import ModularIndexing
from stax.sched import CpuPolicy, GpuPolicy, SchedulerConfig, schedule
from stax.sched.ancestors import build_dag
from stax.sched.create_nodes import create_nodes
from stax.sched.fusion import greedy_fusion
from stax.sched.lifetimes import MemoryModel
from stax.sched.random_graphs import random_graph
from stax.sched.reorder import candidate_orders
from stax.sched.topo import topological_sort

NO_FUSION = SchedulerConfig(max_rounds=0, reorder=False)


def reads_of(graph, name):
    node = graph.node(name)
    if isinstance(node, ExternKernel):
        return set(node.inputs)
    return {ld.buffer for ld in loads(node.body.value)}


def replay(s) -> int:
    """Execute the memory events; check every access hits live storage; return the peak (bytes)."""
    g = s.graph
    size = {b.name: b.layout.nbytes() for b in (*g.inputs, *g.nodes)}
    key = {b.name: (b.layout.device, b.layout.dtype, b.layout.storage_size()) for b in (*g.inputs, *g.nodes)}
    storage = {i.name: i.name for i in g.inputs}  # buffer -> storage id
    live = {i.name: size[i.name] for i in g.inputs}  # storage id -> bytes
    by_step: dict = {}
    for e in s.memory.events:
        by_step.setdefault(e.step, []).append(e)
    later_reads = {}
    for k, kern in enumerate(s.kernels):
        for b in kern.nodes:
            for r in reads_of(g, b):
                later_reads[r] = k
    peak = 0
    for k, kern in enumerate(s.kernels):
        in_place = []
        for e in by_step.get(k, []):
            if e.kind == "alloc":
                assert e.buffer not in storage
                storage[e.buffer] = e.buffer
                live[e.buffer] = size[e.buffer]
            elif e.kind == "reuse":
                assert e.reuses in storage and key[e.reuses] == key[e.buffer], e
                assert later_reads.get(e.reuses, -1) <= k, f"{e}: {e.reuses} still read later"
                assert e.reuses not in g.outputs
                storage[e.buffer] = storage[e.reuses]
                in_place.append(e.reuses)  # the old name is gone after this kernel
        for b in kern.nodes:
            assert b in storage, f"kernel {k} writes {b} without storage"
            for r in reads_of(g, b):
                assert r in storage, f"kernel {k} reads {r} after it was freed"
        peak = max(peak, sum(live.values()))
        for name in in_place:
            del storage[name]
        for e in by_step.get(k, []):
            if e.kind == "free":
                sid = storage.pop(e.buffer)
                assert later_reads.get(e.buffer, -1) <= k and e.buffer not in g.outputs
                assert sid not in storage.values()
                del live[sid]
    assert set(g.outputs) <= set(storage)
    return peak


def in_place_writes(s) -> dict[int, int]:
    """step -> bytes of the buffer its kernel writes over a buffer that same kernel reads (and
    that dies there): the plan's in-place reuse events, told apart from pool reuse by the read."""
    g = s.graph
    return {e.step: g.node(e.buffer).layout.nbytes() for e in s.memory.events
            if e.kind == "reuse" and e.reuses in reads_of(g, e.buffer)}


def def_7_5_peak(s, in_place: bool = False) -> int:
    """M* straight from Def 7.5 over the schedule's kernels; with `in_place`, a buffer written
    over a dying input of its kernel shares that input's storage there (counted once)."""
    g = s.graph
    shared = in_place_writes(s) if in_place else {}
    T = len(s.kernels)
    step = {b: k for k, kern in enumerate(s.kernels) for b in kern.nodes}
    last = {}
    for k, kern in enumerate(s.kernels):
        for b in kern.nodes:
            for r in reads_of(g, b):
                last[r] = max(last.get(r, -1), k)
    best = 0
    for t in range(T):
        total = 0
        for b in (*g.inputs, *g.nodes):
            if b.name not in step and b not in g.inputs:
                continue
            lo = step.get(b.name, 0)
            hi = T - 1 if b.name in g.outputs else last.get(b.name, lo)
            if lo <= t <= hi:
                total += b.layout.nbytes()
        best = max(best, total - shared.get(t, 0))
    return best


def pw(name, sizes, value):
    return ComputedBuffer(name, Layout.contiguous(sizes, F32), Pointwise(sizes, value))


def chain(n=4, R=4, C=8):
    x = x_input(rows=R, cols=C)
    nodes, prev = [], "primals_1"
    for k in range(1, n + 1):
        nodes.append(pw(f"buf{k}", (R, C), op("neg", load(prev, C * i0 + i1, F32))))
        prev = f"buf{k}"
    return Graph((x,), tuple(nodes), (prev,))


def test_reuse_line_and_input_free():
    s = schedule(chain(), CpuPolicy(NO_FUSION))
    lines = [str(e) for e in s.memory.events]
    assert "[2] buf3 = buf1; del buf1  # reuse" in lines
    assert "[3] buf4 = empty(...)" in lines  # a graph output never takes pooled storage
    assert "[0] del primals_1" in lines  # inputs are released after their last use
    assert not any("del buf4" in ln for ln in lines)  # outputs never
    assert replay(s) == s.memory.peak_bytes == def_7_5_peak(s) == s.memory.lower_bound_bytes


def test_reuse_that_would_raise_the_peak_is_refused():
    """buf5 could take buf1's storage (same size, freed after step 1) only by holding it through
    step 2, the peak (x + buf2 + the 4x buf3): refused, buf5 gets fresh storage."""
    R, C = 4, 8
    x = x_input(rows=R, cols=C)
    buf1 = pw("buf1", (R, C), op("neg", load("primals_1", C * i0 + i1, F32)))
    buf2 = ComputedBuffer("buf2", Layout.contiguous((R,), F32),
                          Reduction((R,), (C,), "sum", load("buf1", C * i0 + r0, F32)))
    big = op("add", load("primals_1", C * ModularIndexing(i0, 1, R) + i1, F32),
             load("buf2", ModularIndexing(i0, 1, R), F32))
    buf3 = pw("buf3", (4 * R, C), big)
    buf5 = pw("buf5", (R, C), op("neg", load("buf3", C * i0 + i1, F32)))
    g = Graph((x,), (buf1, buf2, buf3, buf5), ("buf3", "buf5"))
    s = schedule(g, CpuPolicy(NO_FUSION))
    assert not any(e.kind == "reuse" for e in s.memory.events)
    assert replay(s) == s.memory.peak_bytes == def_7_5_peak(s)


def test_in_place_reuse_is_optional():
    off = schedule(chain(2), CpuPolicy(NO_FUSION))
    assert not any(e.kind == "reuse" for e in off.memory.events)
    on = schedule(chain(3), CpuPolicy(SchedulerConfig(max_rounds=0, reorder=False, inplace_reuse=True)))
    lines = [str(e) for e in on.memory.events]
    assert "[1] buf2 = buf1; del buf1  # reuse" in lines and not any(e.kind == "free" and e.buffer == "buf1"
                                                                   for e in on.memory.events)
    assert replay(on) == on.memory.peak_bytes == on.memory.lower_bound_bytes == def_7_5_peak(on, in_place=True)
    inputs_too = SchedulerConfig(max_rounds=0, inplace_reuse=True, inplace_reuse_graph_inputs=True)
    assert "[0] buf1 = primals_1; del primals_1  # reuse" in [
        str(e) for e in schedule(chain(2), CpuPolicy(inputs_too)).memory.events]


def test_donated_input_takes_only_its_own_output():
    """An optimizer step: out = p + g, returned, and the caller then overwrites p with it. Donating
    (p, out) lets out be written into p's storage; no other output may take it (the caller's copy
    into p would overwrite that output), and without the pair p is never written."""
    n = 16
    p = InputBuffer("p", Layout.contiguous((n,), F32))
    g = InputBuffer("g", Layout.contiguous((n,), F32))
    out = pw("out", (n,), op("add", load("p", i0, F32), load("g", i0, F32)))
    other = pw("other", (n,), op("neg", load("g", i0, F32)))
    graph = Graph((p, g), (out, other), ("out", "other"))
    base = SchedulerConfig(max_rounds=0, reorder=False, inplace_reuse=True)

    def reuses(cfg):
        return {(e.buffer, e.reuses) for e in schedule(graph, CpuPolicy(cfg)).memory.events if e.kind == "reuse"}

    assert reuses(base) == set()
    assert reuses(dataclasses.replace(base, donated_inputs=(("p", "out"),))) == {("out", "p")}
    assert reuses(dataclasses.replace(base, donated_inputs=(("g", "out"),))) == set()  # g is read later
    assert reuses(dataclasses.replace(base, donated_inputs=(("p", "other"),))) == set()  # other never reads p


def test_in_place_pair_is_one_storage_in_m_star():
    """x (R) -> buf1 = 2x broadcast to (R, C) -> buf2 = -buf1 -> buf3 = row sums (the output).
    Def 7.5 counts buf1 and buf2 together at step 1 (two (R, C) buffers, its maximum); written in
    place, buf2 is buf1's storage, so every step holds one (R, C) buffer and one (R) buffer. M*
    must bound the plan's peak: it was Def 7.5's 2 (R, C), above the peak the plan reached."""
    R, C = 4, 8
    big, row = R * C * 4, R * 4
    x = InputBuffer("primals_1", Layout.contiguous((R,), F32))
    buf1 = pw("buf1", (R, C), op("mul", load("primals_1", i0, F32), const(2.0, F32)))
    buf2 = pw("buf2", (R, C), op("neg", load("buf1", C * i0 + i1, F32)))
    buf3 = ComputedBuffer("buf3", Layout.contiguous((R,), F32),
                          Reduction((R,), (C,), "sum", load("buf2", C * i0 + r0, F32)))
    g = Graph((x,), (buf1, buf2, buf3), ("buf3",))
    off = schedule(g, CpuPolicy(NO_FUSION))
    assert off.memory.lower_bound_bytes == off.memory.peak_bytes == replay(off) == 2 * big == def_7_5_peak(off)
    on = schedule(g, CpuPolicy(SchedulerConfig(max_rounds=0, reorder=False, inplace_reuse=True)))
    assert "[1] buf2 = buf1; del buf1  # reuse" in [str(e) for e in on.memory.events]
    assert replay(on) == on.memory.peak_bytes == big + row
    assert on.memory.lower_bound_bytes == big + row == def_7_5_peak(on, in_place=True)
    assert def_7_5_peak(on) == 2 * big  # Def 7.5 alone: above the plan's peak, no bound of it


def fused_dag(graph, policy):
    snodes = topological_sort(create_nodes(graph), graph.outputs)
    dag = build_dag(snodes)
    greedy_fusion(dag, policy, policy.config)
    return dag


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**31), st.integers(2, 14), st.booleans(), st.booleans())
def test_memory_plans_on_random_graphs(seed, n, gpu, inplace):
    cfg = SchedulerConfig(inplace_reuse=inplace, plan_arena=True)
    policy = GpuPolicy(cfg) if gpu else CpuPolicy(cfg)
    graph = random_graph(random.Random(seed), n)
    s = schedule(graph, policy)
    # events are executable, reuse never raises the peak, M* is Def 7.5's (in-place pairs counted
    # once) and bounds the plan's peak from below
    peak = replay(s)
    assert s.memory.lower_bound_bytes <= peak == s.memory.peak_bytes
    assert s.memory.lower_bound_bytes == def_7_5_peak(s, in_place=True) <= def_7_5_peak(s)
    if not inplace:
        assert not in_place_writes(s) and s.memory.lower_bound_bytes == def_7_5_peak(s)
    no_reuse = schedule(graph, type(policy)(SchedulerConfig(reuse=False, plan_arena=True)))
    assert [k.nodes for k in no_reuse.kernels] == [k.nodes for k in s.kernels]
    assert peak <= replay(no_reuse) == no_reuse.memory.lower_bound_bytes
    # the chosen order is never worse than the original order, and it is the best candidate
    dag = fused_dag(graph, policy)
    model = MemoryModel(graph, dag.nodes())
    peaks = {name: model.peak(order) for name, order in candidate_orders(dag, model).items()}
    assert def_7_5_peak(s) == min(peaks.values()) <= peaks["original"]
    # arena: buffers alive at the same time never overlap; size between live max and total
    check_arena(s)


def check_arena(s):
    g = s.graph
    offsets = dict(s.memory.offsets)
    step = {b: k for k, kern in enumerate(s.kernels) for b in kern.nodes}
    last = {}
    for k, kern in enumerate(s.kernels):
        for b in kern.nodes:
            for r in reads_of(g, b):
                last[r] = max(last.get(r, -1), k)
    span = {}
    for b, off in offsets.items():
        nbytes = g.node(b).layout.nbytes()
        span[b] = (step[b], last.get(b, step[b]), off, off + nbytes)
        assert off % 64 == 0 and off + nbytes <= s.memory.arena_bytes
    items = list(span.items())
    for x, (lo, hi, a0, a1) in items:
        for y, (lo2, hi2, b0, b1) in items:
            if x < y and not (hi < lo2 or hi2 < lo):
                assert a1 <= b0 or b1 <= a0, f"{x} and {y} overlap in time and address"
    expected = {b for b in step if not isinstance(g.node(b), ExternKernel) and b not in g.outputs}
    assert set(offsets) == expected


def test_arena_shares_space_between_disjoint_lifetimes():
    """A chain of six (4, 8) intermediates: at most three are live together (producer, its input,
    and nothing else), so the arena holds far fewer than six buffers."""
    g = chain(7)
    s = schedule(g, CpuPolicy(SchedulerConfig(max_rounds=0, reorder=False, plan_arena=True)))
    nbytes = 4 * 8 * 4
    offsets = dict(s.memory.offsets)
    assert set(offsets) == {f"buf{k}" for k in range(1, 7)}  # buf7 is an output
    assert s.memory.arena_bytes == 2 * nbytes
    assert len(set(offsets.values())) == 2
    check_arena(s)
    assert "arena[0] buf1" in str(s.memory)


def test_reordering_lowers_the_peak():
    """Two branches a1 -> a2 and b1 -> b2 off x, written interleaved (a1, b1, a2, b2): finishing
    branch a first frees a1 before b1 exists, so one 64x128 buffer less is live at the peak."""
    R, C = 64, 128
    x = x_input(rows=R, cols=C)

    def big(name):
        return pw(name, (R, C), op("mul", load("primals_1", C * i0 + i1, F32), load("primals_1", C * i0 + i1, F32)))

    def small(name, src):
        return ComputedBuffer(name, Layout.contiguous((R,), F32),
                              Reduction((R,), (C,), "sum", load(src, C * i0 + r0, F32)))

    g = Graph((x,), (big("a1"), big("b1"), small("a2", "a1"), small("b2", "b1")), ("a2", "b2"))
    cfg = SchedulerConfig(max_rounds=0)
    s = schedule(g, CpuPolicy(cfg))
    original = schedule(g, CpuPolicy(SchedulerConfig(max_rounds=0, reorder=False)))
    assert [k.nodes for k in original.kernels] == [("a1",), ("b1",), ("a2",), ("b2",)]
    assert s.memory.lower_bound_bytes == 2 * R * C * 4 + R * 4 < original.memory.lower_bound_bytes
    assert s.memory.lower_bound_bytes == def_7_5_peak(s) and original.memory.lower_bound_bytes == def_7_5_peak(original)
    order = [k.nodes[0] for k in s.kernels]
    assert order.index("a2") < order.index("b1") or order.index("b2") < order.index("a1")


def test_empty_graph_schedules_to_nothing():
    """A graph that only returns its input has no kernels and nothing to allocate or free."""
    from stax.ir import Graph, InputBuffer, Layout, dtypes
    from stax.sched import schedule

    x = InputBuffer("x", Layout.contiguous((4, 5), dtypes.float32))
    s = schedule(Graph((x,), (), ("x",)))
    assert s.kernels == ()
    assert s.memory.events == ()
