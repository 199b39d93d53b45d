"""Property tests on random graphs: every schedule is a valid execution of the graph.

For CPU and GPU policies: kernels form a topological order, the quotient graph is
acyclic, interpreting the nodes in schedule order reproduces the reference, and
running fused kernels chunk by chunk (forward and reverse, simulate.py) does too —
which fails if fusion ever accepted a dependence across loop iterations.
"""

import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from simulate import run_schedule
from stax.ir import ExternKernel, Graph, interpret
from stax.sched import CpuPolicy, GpuPolicy, SchedulerConfig, schedule
from stax.sched.random_graphs import EXTERN_KERNELS, random_graph, random_inputs

POLICIES = [CpuPolicy(), GpuPolicy(), GpuPolicy(SchedulerConfig(fuse_dependent_reductions=True))]


def reads(node):
    if isinstance(node, ExternKernel):
        return set(node.inputs)
    from stax.ir import loads

    return {ld.buffer for ld in loads(node.body.value)}


def check_schedule(graph, s):
    scheduled = [n for k in s.kernels for n in k.nodes]
    assert len(scheduled) == len(set(scheduled))
    names = {n.name for n in graph.nodes}
    assert set(scheduled) <= names and set(graph.outputs) & names <= set(scheduled)
    # topological: every read of a computed buffer is produced by an earlier kernel or earlier in the same kernel
    where = {b: (k, j) for k, kern in enumerate(s.kernels) for j, b in enumerate(kern.nodes)}
    for b, (k, j) in where.items():
        for r in reads(graph.node(b)) & names:
            assert r in where and where[r] < (k, j), f"{b} reads {r} before it is produced"
    # quotient graph acyclic: no kernel reads a buffer produced by a later kernel (implied above), and
    # kernel-level edges only go forward
    for b, (k, _) in where.items():
        for r in reads(graph.node(b)) & names:
            assert where[r][0] <= k


def reordered(graph, s) -> Graph:
    order = [graph.node(n) for k in s.kernels for n in k.nodes]
    return Graph(graph.inputs, tuple(order), graph.outputs)


def assert_same_outputs(graph, got, want):
    for o in graph.outputs:
        np.testing.assert_allclose(got[o], want[o], rtol=2e-6, atol=1e-6, err_msg=o)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31), st.integers(2, 16), st.sampled_from(range(len(POLICIES))))
def test_random_schedules_are_valid_executions(seed, n, p):
    rng = random.Random(seed)
    graph = random_graph(rng, n)
    s = schedule(graph, POLICIES[p])
    check_schedule(graph, s)
    inputs = random_inputs(graph, rng)
    want = interpret(graph, inputs, EXTERN_KERNELS)
    got = interpret(reordered(graph, s), inputs, EXTERN_KERNELS)
    for o in graph.outputs:
        np.testing.assert_array_equal(got[o], want[o])
    single_pass = not POLICIES[p].config.fuse_dependent_reductions
    for reverse in (False, True):
        assert_same_outputs(graph, run_schedule(s, inputs, EXTERN_KERNELS, reverse, single_pass), want)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31))
def test_fusion_happens_on_random_graphs(seed):
    """Guard against a vacuous pass: over a batch of graphs some fusions are accepted."""
    rng = random.Random(seed)
    fused = 0
    for _ in range(6):
        fused += sum(r.fused for r in schedule(random_graph(rng, 10), CpuPolicy()).fusion_log)
    assert fused > 0
