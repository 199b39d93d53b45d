"""torch.compile(..., backend="stax", options={...}) reaches every package's config (issue 22):
frontend Config fields by name, stax.sched's SchedulerConfig as "scheduler.<field>", stax.cpu's
CpuConfig as "cpu.<field>", stax.gpu's GpuConfig as "gpu.<field>"."""

from __future__ import annotations

import pytest
import torch
from conftest import assert_same
from stax.frontend import config, metrics


def f(x):
    return (x.sin() * 2).exp() / x.cos().sum(-1, keepdim=True)


def _kernels(options):
    torch._dynamo.reset()
    metrics.reset()
    x = torch.randn(8, 16)
    assert_same(torch.compile(f, backend="stax", options=options)(x), f(x))
    return metrics.snapshot().kernels_generated


def test_scheduler_option_changes_fusion():
    fused = _kernels(None)
    apart = _kernels({"scheduler.max_fusion_nodes": 1})
    assert apart > fused, (apart, fused)


def test_cpu_option_reaches_stax_cpu(monkeypatch):
    seen = []
    import stax.cpu

    real = stax.cpu.prepare
    monkeypatch.setattr(stax.cpu, "prepare", lambda config: (seen.append(config), real(config))[1])
    _kernels({"cpu.isa": "none", "cpu.min_chunk": 4096})
    assert seen and all(c.isa == "none" and c.min_chunk == 4096 for c in seen)


def test_frontend_field_and_gpu_options():
    cfg = config.with_options(config.Config(), {"max_reads": 3, "gpu.hoist_loads": False, "scheduler.reorder": False})
    assert cfg.max_reads == 3 and dict(cfg.gpu_options) == {"hoist_loads": False} and not cfg.scheduler.reorder


@pytest.mark.parametrize("key", ["no_such_field", "cpu.no_such_field", "nested.x"])
def test_unknown_option_is_a_clear_error(key):
    with pytest.raises((ValueError, TypeError), match="no_such_field|unknown option"):
        config.with_options(config.Config(), {key: 1})


def test_cpu_kernels_use_torch_thread_count(monkeypatch):
    """stax's OpenMP team is torch's intra-op thread count unless cpu.num_threads says otherwise."""
    import stax.cpu

    seen = []
    real = stax.cpu.prepare
    monkeypatch.setattr(stax.cpu, "prepare", lambda config: (seen.append(config), real(config))[1])
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        _kernels(None)
        _kernels({"cpu.num_threads": 2})
    finally:
        torch.set_num_threads(before)
    assert [c.num_threads for c in seen] == [1, 2]
