"""The policy protocol: codegen packages pass their own policy; the book's two are provided."""

from book_graphs import example_7_1, example_7_2_cpu
from stax.sched import CpuPolicy, FusionPolicy, GpuPolicy, SchedulerConfig, schedule
from stax.sched.policy import splittable


class RefuseAll:
    """A policy that never shares loops: every node is its own kernel."""

    name = "none"
    config = SchedulerConfig()

    def loop_fusion(self, snodes, dependent_reductions):
        return "this backend does not fuse"


def test_builtin_policies_satisfy_the_protocol():
    assert isinstance(CpuPolicy(), FusionPolicy) and isinstance(GpuPolicy(), FusionPolicy)
    assert isinstance(RefuseAll(), FusionPolicy)


def test_custom_policy_is_used_and_its_reason_logged():
    s = schedule(example_7_1(), RefuseAll())
    assert [k.kind for k in s.kernels] == ["reduction", "pointwise"]
    assert s.fusion_log[0].reason == "this backend does not fuse"


def test_config_argument_overrides_the_policys():
    s = schedule(example_7_2_cpu(), CpuPolicy(), config=SchedulerConfig(max_rounds=0))
    assert len(s.kernels) == 3 and s.fusion_log == ()


def test_splittable():
    """Def 7.2 case 3: a pointwise range read as (n, r)."""
    assert splittable((64, 128), 64) and splittable((8192,), 64) and splittable((4, 16, 128), 64)
    assert not splittable((6, 10), 4) and not splittable((128, 64), 48)
    # a size-0 dim (fuzzer, seed 6 graph 305: a log_softmax backward over a (3, 0, 1, 17) input): no
    # ZeroDivisionError; the empty loops are read as (0, rest) only
    assert not splittable((3, 0, 17), 17) and splittable((3, 0, 17), 3) and splittable((0, 17), 0)


def _gather_then_sum(gathered: bool):
    """loss[i] = x[i, t[i]] (or x[i, 0]), then one sum over the rows: a reduction with n = 1."""
    from book_graphs import F32
    from stax.ir import ComputedBuffer, Graph, InputBuffer, Layout, Pointwise, Reduction, dtypes, load
    from stax.ir.index import pointwise_vars, reduction_vars, var

    (i0,), (r0,), s = pointwise_vars(1), reduction_vars(1), var("s", 0)
    x = InputBuffer("x", Layout.contiguous((512, 32), F32))
    t = InputBuffer("t", Layout.contiguous((512,), dtypes.int64))
    picked = (load("x", 32 * i0 + s, F32, indirect=((s, load("t", i0, dtypes.int64), 32),)) if gathered
              else load("x", 32 * i0, F32))
    loss = ComputedBuffer("buf0", Layout.contiguous((512,), F32), Pointwise((512,), picked))
    total = ComputedBuffer("buf1", Layout.contiguous((), F32), Reduction((), (512,), "sum", load("buf0", r0, F32)))
    return Graph((x, t), (loss, total), ("buf1",))


def test_gpu_keeps_a_gather_out_of_a_reduction_with_few_outputs():
    """On the GPU a gather fused as the input of a 1-output reduction would run in one program;
    it stays a kernel of its own (many programs). Without a gather, or with a lower bound of 1
    output, it fuses as before."""
    s = schedule(_gather_then_sum(True), GpuPolicy())
    assert len(s.kernels) == 2
    assert s.fusion_log[0].reason == "gathers of buf0 would run in 1 program(s) of a reduction (n=1, r=512)"
    assert len(schedule(_gather_then_sum(False), GpuPolicy()).kernels) == 1
    assert len(schedule(_gather_then_sum(True), GpuPolicy(gather_min_outputs=1)).kernels) == 1
