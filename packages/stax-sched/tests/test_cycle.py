"""Prop 7.1: merging a and b creates a cycle iff a path a -> c -> ... -> b through a third node exists."""

import random

from book_graphs import F32, i0, i1, r0, x_input
from hypothesis import given, settings
from hypothesis import strategies as st
from stax.ir import ComputedBuffer, Graph, Layout, Pointwise, Reduction, load, op
from stax.sched import schedule
from stax.sched.ancestors import FusionDag, build_dag
from stax.sched.create_nodes import create_nodes
from stax.sched.deps import ReadWrites, StarDep


def a_c_b_graph(R=8, C=16) -> Graph:
    """a: buf1 = exp(x); c: buf2 = rowsum(buf1); b: buf3 = buf1 * buf2[row] — a -> c -> b and a -> b."""
    buf1 = ComputedBuffer("buf1", Layout.contiguous((R, C), F32),
                          Pointwise((R, C), op("exp", load("primals_1", C * i0 + i1, F32))))
    buf2 = ComputedBuffer("buf2", Layout.contiguous((R,), F32),
                          Reduction((R,), (C,), "sum", load("buf1", C * i0 + r0, F32)))
    buf3 = ComputedBuffer("buf3", Layout.contiguous((R, C), F32),
                          Pointwise((R, C), op("mul", load("buf1", C * i0 + i1, F32), load("buf2", i0, F32))))
    return Graph((x_input(rows=R, cols=C),), (buf1, buf2, buf3), ("buf3",))


def test_prop_7_1_a_c_b_forbids_fusing_a_with_b():
    dag = build_dag(create_nodes(a_c_b_graph()))
    a, c, b = dag.nodes()
    assert dag.would_create_cycle(a, b) and dag.would_create_cycle(b, a)
    assert not dag.would_create_cycle(a, c) and not dag.would_create_cycle(c, b)


def test_prop_7_1_in_the_greedy_loop():
    """a and b (same loops, tau=1) score highest but would close a -> c -> b; c and b fuse instead."""
    s = schedule(a_c_b_graph())
    by_pair = {(r.a, r.b): r for r in s.fusion_log if r.round == 1}
    assert by_pair[("op0", "op2")].reason == "would create a cycle (Prop 7.1)"
    assert by_pair[("op1", "op2")].fused
    assert [k.nodes for k in s.kernels] == [("buf1",), ("buf2", "buf3")]


class _Fake:
    """A minimal node: a buffer name and whole-buffer reads of its predecessors."""

    def __init__(self, k, preds):
        self.buffer = f"n{k}"
        self.name = f"n{k}"
        self.read_writes = ReadWrites(frozenset(StarDep(f"n{p}") for p in preds), frozenset())


def _closure_has_cycle(groups, edges) -> bool:
    """Brute force: contract groups and look for a cycle."""
    where = {m: gi for gi, g in enumerate(groups) for m in g}
    succ = {gi: set() for gi in range(len(groups))}
    for u, v in edges:
        if where[u] != where[v]:
            succ[where[u]].add(where[v])
    state = {}

    def visit(x):
        state[x] = 1
        for y in succ[x]:
            if state.get(y) == 1 or (y not in state and visit(y)):
                return True
        state[x] = 2
        return False

    return any(x not in state and visit(x) for x in succ)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**31))
def test_cycle_test_matches_brute_force_under_merges(seed):
    rng = random.Random(seed)
    n = rng.randint(3, 12)
    edges = [(u, v) for v in range(n) for u in range(v) if rng.random() < 0.3]
    fakes = [_Fake(v, [u for u, w in edges if w == v]) for v in range(n)]
    dag = FusionDag(fakes)
    members = {f: {k} for k, f in enumerate(fakes)}
    for _ in range(3 * n):
        cur = dag.nodes()
        if len(cur) < 2:
            break
        a, b = rng.sample(cur, 2)
        merged_groups = [m for g, m in members.items() if g not in (a, b)] + [members[a] | members[b]]
        assert dag.would_create_cycle(a, b) == _closure_has_cycle(merged_groups, edges)
        if not dag.would_create_cycle(a, b):
            new = object()
            dag.merge(a, b, new)
            members[new] = members.pop(a) | members.pop(b)
        # the maintained order stays topological for the quotient graph
        pos = {g: k for k, g in enumerate(dag.nodes())}
        for g in dag.nodes():
            assert all(pos[p] < pos[g] for p in dag.preds[g])
