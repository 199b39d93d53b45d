"""stax.sched.schedule with the GPU policy, end to end through stax.gpu.

Example 7.2 on the GPU is one kernel (exp inlined, two reductions fused horizontally,
SAME_VARS_REDUCE); softmax is one kernel when the policy may fuse a reduction with one
that reads its result (stax-gpu runs such stages one after another in registers)."""

from gpu_testlib import config, run
from stax.gpu import compile_schedule
from stax.sched import GpuPolicy, schedule
from stax.sched.config import SchedulerConfig
from test_reduction import example_7_1, example_7_2, softmax_graph

GPU = GpuPolicy(SchedulerConfig(fuse_dependent_reductions=True))


def _check(graph, policy, n_kernels):
    sched = schedule(graph, policy)
    assert len(sched.kernels) == n_kernels, str(sched)
    module = compile_schedule(sched, config=config())
    groups = [list(k.nodes) for k in sched.kernels]
    run(graph, groups=groups, tol=dict(rtol=1e-5, atol=1e-7))
    return module


def test_example_7_1_and_7_2_are_one_kernel():
    assert "triton_per_fused_0" in _check(example_7_1(), GpuPolicy(), 1).source
    assert "buf1 stays in registers" in _check(example_7_1(), GPU, 1).source
    _check(example_7_2(), GpuPolicy(), 1)


def test_softmax_one_kernel_with_dependent_reductions():
    _check(softmax_graph(16, 64), GPU, 1)
    _check(softmax_graph(16, 64), GpuPolicy(), 2)  # the policy's default keeps reductions apart
