"""The fast scheduler decides exactly what the plain one does (issue 24: 10k nodes in under 2 s).

Every graph is scheduled twice in the same test: with the fast paths, and with each fast path replaced
by the computation it stands for (reference_paths.py: the code before the speed work). The whole
Schedule text (kernels in order, every fusion record with its reason and score, the memory plan), its
content hash and the DEBUG log lines of stax.sched must be identical — the §7 log lines, thresholds
and score tuple are unchanged by construction, not only on average.
"""

import logging
import random

import pytest
import reference_paths
from book_graphs import example_7_1, example_7_2_cpu, example_7_2_gpu
from stax.ir import SizeVars, size_var
from stax.sched import CpuPolicy, GpuPolicy, SchedulerConfig, schedule
from stax.sched.random_graphs import random_graph
from test_scatter_node import embedding_backward

POLICIES = {
    "cpu": CpuPolicy(),
    "gpu": GpuPolicy(),
    "gpu_dependent_reductions": GpuPolicy(SchedulerConfig(fuse_dependent_reductions=True)),
    "cpu_inplace_arena": CpuPolicy(SchedulerConfig(inplace_reuse=True, plan_arena=True)),
}

s0, s1 = size_var("s0"), size_var("s1")
SYM = SizeVars.of(s0=(2, 1 << 16, 64), s1=(2, 1 << 16, 128))

GRAPHS = {
    "example_7_1": example_7_1,
    "example_7_2_cpu": example_7_2_cpu,
    "example_7_2_gpu": example_7_2_gpu,
    "example_7_1_symbolic": lambda: example_7_1(s0, s1, size_vars=SYM),
    "example_7_2_cpu_symbolic": lambda: example_7_2_cpu(s0, s1, size_vars=SYM),
    "embedding_backward": embedding_backward,
    **{f"random_small_{seed}": (lambda seed=seed: random_graph(random.Random(seed), 14)) for seed in range(12)},
    # many shared buffers (reads among the last 20): long candidate lists, big fused groups
    "random_200_wide": lambda: random_graph(random.Random(7), 200, R=8, C=16, recent=20),
    # the benchmark's graph family (benchmarks/sched/scaling.py) at 300 nodes
    **{f"random_300_{seed}": (lambda seed=seed: random_graph(random.Random(seed), 300, R=64, C=128, recent=6))
       for seed in (1, 2)},
}


def _logged(caplog, graph, policy) -> tuple[str, str, list[str]]:
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="stax.sched"):
        s = schedule(graph, policy)
    return str(s), s.content_hash(), [r.getMessage() for r in caplog.records if r.name.startswith("stax.sched")]


@pytest.mark.parametrize("policy", list(POLICIES), ids=list(POLICIES))
@pytest.mark.parametrize("graph", list(GRAPHS), ids=list(GRAPHS))
def test_fast_paths_decide_what_the_reference_does(caplog, monkeypatch, graph, policy):
    g, pol = GRAPHS[graph](), POLICIES[policy]
    fast = _logged(caplog, g, pol)
    with monkeypatch.context() as m:
        reference_paths.install(m)
        reference = _logged(caplog, g, pol)
    assert fast[0] == reference[0]
    assert fast[1] == reference[1]
    assert fast[2] == reference[2]
    assert any("fusing" in line or "cannot fuse" in line or "never fused" in line for line in fast[2]) or \
        len(g.nodes) < 2


def test_every_reference_replaces_a_fast_path(monkeypatch):
    """Each patched name exists and is really swapped out while installed (a renamed fast path would
    otherwise leave the comparison above comparing the fast code with itself)."""
    before = [getattr(owner, name) for owner, name, _ in reference_paths.PATCHES]
    with monkeypatch.context() as m:
        reference_paths.install(m)
        for (owner, name, ref), old in zip(reference_paths.PATCHES, before):
            assert getattr(owner, name) is ref and ref is not old
    assert [getattr(owner, name) for owner, name, _ in reference_paths.PATCHES] == before
