"""Golden tests pinning §7's worked examples: dependences, fusion log, kernels, memory."""

import logging

import pytest
from book_graphs import example_7_1, example_7_2_cpu, example_7_2_gpu
from stax.sched import CpuPolicy, GpuPolicy, schedule
from stax.sched.create_nodes import create_nodes
from stax.sched.nodes import describe_nodes

EXAMPLE_7_1_NODES = """\
op0: SchedulerNode(ComputedBuffer)
op0.writes = [MemoryDep('buf1', c0, {c0: 64})]
op0.met_dependencies = [MemoryDep('primals_1', c0, {c0: 8192})]
op0.group.iteration = ((64,), (128,))

op1: SchedulerNode(ComputedBuffer)
op1.writes = [MemoryDep('buf2', c0, {c0: 8192})]
op1.unmet_dependencies = [MemoryDep('buf1', c0, {c0: 64})]
op1.met_dependencies = [MemoryDep('primals_1', c0, {c0: 8192})]
op1.group.iteration = ((64, 128), ())"""


def fusion_lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "stax.sched.fusion"]


def test_example_7_1_dependences():
    """§7.1: normalized indices (128*i0 + i1 -> c0 over 8192) and iteration groups, as printed in the book."""
    assert describe_nodes(create_nodes(example_7_1())) == EXAMPLE_7_1_NODES


def test_example_7_1_fusion_log(caplog):
    """§7.4: one possible fusion, score 33024 = 32768 (primals_1) + 256 (buf1), outer-loop fusion depth 1."""
    with caplog.at_level(logging.DEBUG, logger="stax.sched"):
        s = schedule(example_7_1())
    lines = fusion_lines(caplog)
    essential = ["found 1 possible fusions", "fusing op0 with op1",
                 "op0_op1: OuterLoopFusedSchedulerNode(SchedulerNode,SchedulerNode)"]
    assert [ln for ln in lines if ln in essential] == essential
    assert lines[-1] == "found 0 possible fusions"  # round 2 has nothing left to fuse
    (k,) = s.kernels
    assert (k.kind, k.node_type, k.outer_depth, k.nodes) == ("outer_loop_fused", "OuterLoopFusedSchedulerNode", 1,
                                                             ("buf1", "buf2"))
    assert k.group == ((64,), ()) and k.node_groups == (((64,), (128,)), ((64, 128), ()))
    (rec,) = s.fusion_log
    assert rec.fused and rec.score == (0, 32768 + 256, 2, -1)
    assert rec.score[1] == 33024


def test_example_7_1_buf1_is_still_written_and_freed_after_the_kernel():
    """buf1 (64 floats) is allocated in the wrapper and released right after the fused kernel."""
    s = schedule(example_7_1())
    events = [str(e) for e in s.memory.events]
    assert events == ["[0] buf1 = empty(...)", "[0] buf2 = empty(...)", "[0] del buf1", "[0] del primals_1"]
    assert s.memory.lower_bound_bytes == 8192 * 4 * 2 + 64 * 4 == s.memory.peak_bytes


def test_example_7_2_cpu(caplog):
    """Example 7.2 on CPU: exp materialized as buf1 ((8192,), ()) shares no outer loop with the row
    reductions (depth 0, vertical fusion rejected); sum and amax fuse as SAME_VARS_REDUCE; 2 kernels;
    the second round finds 0 possible fusions."""
    with caplog.at_level(logging.DEBUG, logger="stax.sched.fusion"):
        s = schedule(example_7_2_cpu(), CpuPolicy())
    lines = fusion_lines(caplog)
    assert lines.count("found 1 possible fusions") == 1 and lines[-1] == "found 0 possible fusions"
    assert "fusing op1 with op2" in lines
    assert "op1_op2: FusedSchedulerNode(SchedulerNode,SchedulerNode)" in lines
    rejected = {(r.a, r.b): r.reason for r in s.fusion_log if not r.fused and r.round == 1}
    assert set(rejected) == {("op0", "op1"), ("op0", "op2")}
    assert all("outer loop fusion depth 0" in why for why in rejected.values())
    (fused,) = [r for r in s.fusion_log if r.fused]
    assert (fused.a, fused.b, fused.reason) == ("op1", "op2", "SAME_VARS_REDUCE")
    assert any("SAME_VARS_REDUCE" in ln for ln in lines)
    assert [(k.kind, k.nodes) for k in s.kernels] == [("pointwise", ("buf1",)), ("fused", ("buf2", "buf3"))]
    assert s.kernels[0].group == ((64, 128), ()) and s.kernels[1].group == ((64,), (128,))


def test_example_7_2_gpu_one_kernel():
    """Example 7.2 on GPU: exp inlined into both reductions, fused horizontally into one kernel."""
    s = schedule(example_7_2_gpu(), GpuPolicy())
    (k,) = s.kernels
    assert (k.kind, k.nodes, k.group) == ("fused", ("buf1", "buf2"), ((64,), (128,)))
    assert s.fusion_log[0].reason == "SAME_VARS_REDUCE"


def test_example_7_1_gpu_one_kernel_by_element_count():
    """Def 7.2 case 3: the 64x128 divide (N = n*r) fuses with the row sum into one GPU kernel."""
    s = schedule(example_7_1(), GpuPolicy())
    (k,) = s.kernels
    assert (k.kind, k.group, k.nodes) == ("fused", ((64,), (128,)), ("buf1", "buf2"))


def test_example_7_2_cpu_graph_under_gpu_policy_fuses_everything():
    """By element counts exp (8192 = 64*128, splittable) joins the reductions: one kernel in two rounds."""
    s = schedule(example_7_2_cpu(), GpuPolicy())
    assert [k.nodes for k in s.kernels] == [("buf1", "buf2", "buf3")]
    assert max(r.round for r in s.fusion_log if r.fused) == 2


@pytest.mark.parametrize("policy", [CpuPolicy(), GpuPolicy()])
def test_schedule_str_and_hash_are_deterministic(policy):
    a, b = schedule(example_7_2_cpu(), policy), schedule(example_7_2_cpu(), policy)
    assert str(a) == str(b) and a.content_hash() == b.content_hash()
    assert "kernel0" in str(a) and "memory plan" in str(a)


EXAMPLE_7_2_CPU_LOG = [
    "cannot fuse op0 with op1: incompatible iteration spaces: ((64,), (128,)) vs ((8192,), ()) "
    "(outer loop fusion depth 0)",
    "cannot fuse op0 with op2: incompatible iteration spaces: ((64,), (128,)) vs ((8192,), ()) "
    "(outer loop fusion depth 0)",
    "found 1 possible fusions",
    "score op1 op2: (tau=1, sigma=32768, omega=1, -delta=-1)",
    "fusing op1 with op2",
    "op1_op2: FusedSchedulerNode(SchedulerNode,SchedulerNode)",
    "op1_op2: SAME_VARS_REDUCE, score (tau=1, sigma=32768, omega=1, -delta=-1)",
    "cannot fuse op0 with op1_op2: incompatible iteration spaces: ((64,), (128,)) vs ((8192,), ()) "
    "(outer loop fusion depth 0)",
    "found 0 possible fusions",
]


def test_example_7_2_cpu_full_log(caplog):
    """The whole fusion log of Example 7.2 on the CPU, line by line (README shows the same)."""
    with caplog.at_level(logging.DEBUG, logger="stax.sched.fusion"):
        schedule(example_7_2_cpu())
    assert fusion_lines(caplog) == EXAMPLE_7_2_CPU_LOG

