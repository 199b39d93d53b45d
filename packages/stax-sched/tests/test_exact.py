"""The exact minimum-traffic fusion (Def 7.3) for small graphs, checked against brute force."""

import random

from book_graphs import example_7_1, example_7_2_cpu
from hypothesis import given, settings
from hypothesis import strategies as st
from stax.sched import CpuPolicy, GpuPolicy, schedule
from stax.sched.can_fuse import fusion_legality
from stax.sched.create_nodes import create_nodes
from stax.sched.exact import optimal_fusion, traffic
from stax.sched.nodes import LoopFusion
from stax.sched.random_graphs import random_graph
from stax.sched.topo import topological_sort
from test_cycle import _closure_has_cycle


def kernels_as_partition(s):
    return [set(k.nodes) for k in s.kernels]


def test_example_7_1_greedy_is_optimal():
    """Fused, x is read once and buf2 written once: 32768 + 32768 bytes; unfused adds buf1 twice and x again."""
    g = example_7_1()
    cost, part = optimal_fusion(g, CpuPolicy())
    assert cost == 2 * 32768 == traffic(g, kernels_as_partition(schedule(g)))
    assert part == [{"buf1", "buf2"}]
    assert traffic(g, [{"buf1"}, {"buf2"}]) == 32768 + 256 + 256 + 32768 + 32768


def test_example_7_2_cpu_optimum_matches_greedy():
    g = example_7_2_cpu()
    cost, _ = optimal_fusion(g, CpuPolicy())
    assert cost == traffic(g, kernels_as_partition(schedule(g)))


def _set_partitions(items):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _set_partitions(rest):
        for i in range(len(part)):
            yield part[:i] + [part[i] | {first}] + part[i + 1 :]
        yield [{first}] + part


def brute_force(graph, policy):
    snodes = topological_sort(create_nodes(graph), graph.outputs)
    by_name = {n.buffer: n for n in snodes}
    edges = [(p, n.buffer) for n in snodes for p in {d.name for d in n.read_writes.reads} if p in by_name]
    best = None
    for part in _set_partitions([n.buffer for n in snodes]):
        if any(len(b) > 1 and not isinstance(fusion_legality(sorted((by_name[x] for x in b), key=lambda n: n.pos),
                                                             policy, policy.config), LoopFusion) for b in part):
            continue
        if _closure_has_cycle(part, edges):
            continue
        cost = traffic(graph, part)
        best = cost if best is None else min(best, cost)
    return best


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.integers(2, 6), st.booleans())
def test_exact_matches_brute_force_and_bounds_greedy(seed, n, gpu):
    policy = GpuPolicy() if gpu else CpuPolicy()
    g = random_graph(random.Random(seed), n)
    cost, part = optimal_fusion(g, policy)
    assert cost == brute_force(g, policy)
    assert traffic(g, part) == cost
    assert cost <= traffic(g, kernels_as_partition(schedule(g, policy)))
