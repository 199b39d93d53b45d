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
