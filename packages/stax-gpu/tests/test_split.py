"""Split reductions (split.py) and pointwise nodes split inside one dim (plan._dims).

Split kernels run with a forced small threshold (SPLIT: 2 SMs, r >= 64, chunks >= 8) so
the grids stay tiny under the interpreter. Outputs are compared with the numpy
interpreter on the unsplit graph (gpu_testlib.run) and, for the loss-shaped graphs,
with eager PyTorch on the same inputs.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gpu_testlib import (
    AOT,
    ON_CUDA,
    as_numpy,
    b8,
    config,
    f32,
    i0,
    i1,
    i2,
    i64,
    inp,
    make_inputs,
    pw,
    r0,
    r1,
    red,
    run,
    var,
)
from stax.gpu import compile_schedule
from stax.gpu.config import GpuConfig, parse_overrides
from stax.gpu.split import split_factor, split_reductions
from stax.gpu.testing import build_schedule
from stax.ir import Graph, const, load, op
from stax.ir.index import FloorDiv
from stax.sched import GpuPolicy, schedule
from stax.sched.config import SchedulerConfig

SPLIT = dict(num_sms=2, split_min_rnumel=64, split_min_chunk=8)  # n_out < 4, S <= 8 / n_out
EAGER_TOL = dict(rtol=1e-5, atol=1e-5)


def _kernels(module) -> int:
    return module.source.count("@triton.jit")


# ---------------------------------------------------------------- the rule


def test_split_factor_rule():
    h200 = GpuConfig(interpret=True)  # defaults: n_out < 2*132, r >= 65536, chunks >= 128, S <= 4*132 / n_out
    assert split_factor(1, 16384, h200, 132) == 1  # nll's mean: measured faster unsplit on the H200
    assert split_factor(1, 1 << 20, h200, 132) == 512  # largest power of two <= 528
    assert split_factor(64, 65536, h200, 132) == 8  # 528 // 64
    assert split_factor(263, 1 << 20, h200, 132) == 2
    assert split_factor(264, 1 << 20, h200, 132) == 1  # enough rows to fill the device
    assert split_factor(1, 65535, h200, 132) == 1  # row too short
    assert split_factor(1, 65537, h200, 132) == 1  # prime: no divisor gives chunks >= 128
    assert split_factor(1, 1 << 20, h200.with_(split_reductions=False), 132) == 1
    low = h200.with_(split_min_rnumel=4096)
    assert split_factor(1, 16384, low, 132) == 128  # 528 programs allowed, chunks of 128
    assert split_factor(3, 3 * 5 * 1024, low, 132) == 120  # largest divisor <= min(528 // 3, 15360 // 128)


def test_parse_overrides_types_fields():
    assert parse_overrides("hoist_loads=0, xblock_cap=4,num_sms=none,math=portable") == dict(
        hoist_loads=False, xblock_cap=4, num_sms=None, math="portable")
    with pytest.raises(ValueError):
        parse_overrides("no_such_knob=1")


# ---------------------------------------------------------------- numerics


def _full_sum(n=24, m=40):
    x = inp("x", (n, m))
    return Graph((x,), (red("buf0", (), (n, m), "sum", load("x", m * r0 + r1, f32)),), ("buf0",))


def _eager(graph, module, fn, **ranges):
    """Run `module` on random inputs and compare with fn(*torch inputs) (eager), under the
    interpreter (on a GPU, `run` already checks every output against the error model's
    bounds; eager's own summation order is not that tight)."""
    if AOT or ON_CUDA:
        return
    _, tensors = make_inputs(graph, **ranges)
    got = module.call([t.clone() for t in tensors])
    want = fn(*tensors)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want):
        np.testing.assert_allclose(as_numpy(g).astype(np.float64), as_numpy(w).astype(np.float64), **EAGER_TOL)


def test_full_sum_splits_and_matches_eager():
    g = _full_sum()
    m = run(g, cfg=config(**SPLIT), tol=dict(rtol=1e-5, atol=1e-5))
    assert _kernels(m) == 2 and "buf0_part = empty_strided((8,)" in m.source
    _eager(g, m, lambda x: x.sum())
    assert _kernels(run(g, tol=dict(rtol=1e-5, atol=1e-5))) == 1  # default threshold: r=960 stays whole


def test_mse_loss_mean_matches_eager():
    n, m = 16, 36
    d = op("sub", load("a", m * r0 + r1, f32), load("b", m * r0 + r1, f32))
    s = red("buf0", (), (n, m), "sum", op("mul", d, d))
    mean = pw("buf1", (), op("truediv", load("buf0", 0, f32), const(float(n * m), f32)))
    g = Graph((inp("a", (n, m)), inp("b", (n, m))), (s, mean), ("buf1",))
    module = run(g, cfg=config(**SPLIT), tol=dict(rtol=1e-5, atol=1e-6))
    assert _kernels(module) == 2  # the mean's divide runs in the final kernel
    _eager(g, module, lambda a, b: F.mse_loss(a, b))


def nll_graph(n=64, c=32):
    """log_softmax + nll_loss(mean) as the frontend lowers it: row max and sum(exp) in one
    kernel, then the mean over rows of the gathered losses (one output)."""
    x, t = inp("x", (n, c)), inp("t", (n,), i64)
    mx = red("buf0", (n,), (c,), "max", load("x", c * i0 + r0, f32))
    se = red("buf1", (n,), (c,), "sum", op("exp", op("sub", load("x", c * i0 + r0, f32), load("buf0", i0, f32))))
    s = var("t", 0)
    picked = load("x", c * r0 + s, f32, indirect=((s, load("t", r0, i64), c),))
    lse = op("add", load("buf0", r0, f32), op("log", load("buf1", r0, f32)))
    loss = red("buf2", (), (n,), "sum", op("truediv", op("neg", op("sub", picked, lse)), const(float(n), f32)))
    return Graph((x, t), (mx, se, loss), ("buf2",)), [["buf0", "buf1"], ["buf2"]]


def test_log_softmax_nll_mean_splits_and_matches_eager():
    g, groups = nll_graph()
    module = run(g, groups=groups, cfg=config(**SPLIT), tol=dict(rtol=1e-5, atol=1e-6), t=(0, 32))
    assert _kernels(module) == 3
    _eager(g, compile_schedule(build_schedule(g, groups), config=config(**SPLIT)),
           lambda x, t: F.nll_loss(F.log_softmax(x, -1), t), t=(0, 32))


@pytest.mark.parametrize("rtype", ["sum", "prod", "max", "min"])
def test_horizontal_reductions_with_epilogue_and_stored_pointwise(rtype):
    """Three rows of 96: two reductions of one value share the partial kernel, the stored
    pointwise value stays in it, the row-level epilogue moves to the final kernel."""
    n, m = 3, 96
    v = op("mul", load("x", m * i0 + r0, f32), const(1.01, f32))
    y = pw("buf0", (n, m), op("mul", load("x", m * i0 + i1, f32), const(1.01, f32)))
    a = red("buf1", (n,), (m,), rtype, v)
    b = red("buf2", (n,), (m,), "max", v)
    e = pw("buf3", (n,), op("sub", load("buf1", i0, f32), load("buf2", i0, f32)))
    g = Graph((inp("x", (n, m)),), (y, a, b, e), ("buf0", "buf3", "buf1"))
    module = run(g, cfg=config(**SPLIT), tol=dict(rtol=1e-5, atol=1e-5), x=(0.9, 1.1))
    assert _kernels(module) == 2
    assert "buf1_part" in module.source and "buf2_part" in module.source


def test_partial_reads_a_pointwise_node_of_its_kernel_from_registers():
    """The reduction reads a stored pointwise node of the same kernel: after the split the
    partial still finds it at its own point (forwarded, not reloaded)."""
    n, m = 2, 128
    y = pw("buf0", (n, m), op("exp", load("x", m * i0 + i1, f32)))
    s = red("buf1", (n,), (m,), "sum", load("buf0", m * i0 + r0, f32))
    g = Graph((inp("x", (n, m)),), (y, s), ("buf0", "buf1"))
    module = run(g, cfg=config(**SPLIT), tol=dict(rtol=1e-5, atol=1e-5))
    assert _kernels(module) == 2 and "buf1_part" in module.source


def test_column_sums_split():
    """An outer reduction (columns of a row-major (256, 3) tensor) with few outputs: the partials
    are laid out (S, columns), so the partial kernel's neighbouring lanes read neighbouring columns."""
    rows, cols = 256, 3
    g = Graph((inp("x", (rows, cols)),), (red("buf0", (1, cols), (rows,), "sum", load("x", cols * r0 + i1, f32)),),
              ("buf0",))
    m = run(g, cfg=config(**SPLIT), tol=dict(rtol=1e-5, atol=1e-5))
    assert _kernels(m) == 2
    assert "buf0_part = empty_strided((8, 1, 3), (3, 3, 1)" in m.source  # S = 8 chunks of 32 rows, columns inner
    _eager(g, m, lambda x: x.sum(0, keepdim=True))


def test_split_factor_of_column_reductions_counts_programs():
    """A column reduction's program takes COLUMN_OUTPUTS outputs: ConvNeXt's LayerNorm weight
    gradient (80 channels over 50176 rows) ran on 2 programs of the H200's 132 SMs, unsplit."""
    from stax.gpu.split import COLUMN_OUTPUTS

    h200 = GpuConfig(interpret=True)
    assert split_factor(80, 50176, h200, 132) == 1  # as rows: r < split_min_rnumel
    assert split_factor(80, 50176, h200, 132, COLUMN_OUTPUTS) == 256  # 2 programs -> 528 / 2 = 264 >= S
    assert split_factor(640, 4096, h200, 132, COLUMN_OUTPUTS) == 32  # 10 programs -> S <= 52 and chunks >= 128
    assert split_factor(64 * 264, 4096, h200, 132, COLUMN_OUTPUTS) == 1  # 264 programs fill the device


def test_row_chunks_of_an_nchw_tensor_are_not_columns():
    """BatchNorm's backward sums over (N, H, W) of an NCHW tensor, split into chunks that span
    images: the partial kernel reads `C*HW*(r // HW) + r % HW`, contiguous along r. Read as a
    column reduction (the digit hid the unit stride), ResNet-18's took 3.4 ms on the H200 in
    blocks of 64 rows x 32 elements on 8 programs; as rows, one row per program."""
    from stax.gpu.plan import plan_kernels
    from stax.gpu.split import split_reductions

    n, c, hw = 4, 3, 64
    x = load("x", c * hw * r0 + hw * i1 + r1, f32)
    mean = load("m", i1, f32)
    s1 = red("buf0", (1, c), (n, hw), "sum", x)
    s2 = red("buf1", (1, c), (n, hw), "sum", op("mul", x, op("sub", x, mean)))
    g = Graph((inp("x", (n, c, hw)), inp("m", (c,))), (s1, s2), ("buf0", "buf1"))
    cfg = config(**dict(SPLIT, split_min_chunk=16))  # S = 2 chunks of 2 images each: chunks span images
    sched = split_reductions(build_schedule(g, [["buf0", "buf1"]]), cfg)
    partial = plan_kernels(sched, cfg)[0]
    assert partial.name.endswith("_split") and not partial.outer
    run(g, groups=[["buf0", "buf1"]], cfg=cfg, tol=dict(rtol=1e-5, atol=1e-5))


@pytest.mark.parametrize("rtype", ["any", "all"])
def test_bool_reductions_split(rtype):
    n, m = 2, 128
    x = np.ones((n, m), dtype=bool)
    x[0, 77] = False
    x[1, :] = False
    x[1, 3] = True
    g = Graph((inp("x", (n, m), b8),), (red("buf0", (n,), (m,), rtype, load("x", m * i0 + r0, b8)),), ("buf0",))
    assert _kernels(run(g, cfg=config(**SPLIT), arrays={"x": x})) == 2


def test_reduction_over_inner_dims_of_3d_splits_across_dims():
    """Chunks that straddle the reduction dims (r = 12 * 10, S = 8: chunks of 15)."""
    a, b, c = 2, 12, 10
    g = Graph((inp("x", (a, b, c)),),
              (red("buf0", (a, 1, 1), (b, c), "sum", load("x", b * c * i0 + c * r0 + r1, f32)),), ("buf0",))
    cfg = config(**dict(SPLIT, split_min_chunk=5, split_target_programs=16))
    assert _kernels(run(g, cfg=cfg, tol=dict(rtol=1e-5, atol=1e-5))) == 2


@pytest.mark.parametrize("rtype", ["argmax"])
def test_unsplittable_reductions_stay_whole(rtype):
    g = Graph((inp("x", (2, 128)),), (red("buf0", (2,), (128,), rtype, load("x", 128 * i0 + r0, f32)),), ("buf0",))
    assert _kernels(run(g, cfg=config(**SPLIT), tol=dict(rtol=1e-5, atol=1e-5))) == 1


@pytest.mark.parametrize("outputs", [("welford_mean", "welford_m2", "welford_count"), ("welford_m2",),
                                     ("welford_mean",)])
def test_welford_splits_into_chunk_means_and_m2(outputs):
    """BatchNorm's statistics (ResNet-18 on the H200: 64 channels over 802816 values, unsplit 64
    programs, 122 us): mean and m2 per chunk, combined with Chan's formula; an m2 alone gets a mean
    of its own for the combine; the variance epilogue moves to the final kernel."""
    n, m = 3, 256
    v = op("mul", load("x", m * i0 + r0, f32), const(1.5, f32))
    reds = [red(f"buf{k}", (n,), (m,), kind, v) for k, kind in enumerate(outputs)]
    m2 = next((nd.name for nd in reds if nd.body.reduction_type == "welford_m2"), None)
    epi = [pw("var", (n,), op("truediv", load(m2, i0, f32), const(float(m - 1), f32)))] if m2 else []
    g = Graph((inp("x", (n, m)),), tuple(reds + epi), tuple(nd.name for nd in reds + epi))
    module = run(g, cfg=config(**SPLIT), tol=dict(rtol=1e-5, atol=1e-5), x=(-2.0, 3.0))
    assert _kernels(module) == 2 and "_part" in module.source
    if m2:
        _eager(g, module, lambda x: tuple(
            {"welford_mean": (1.5 * x).mean(1), "welford_m2": (1.5 * x).var(1, correction=0) * m,
             "welford_count": torch.full((n,), float(m))}[k] for k in outputs) + ((1.5 * x).var(1),))


def test_dependent_reductions_stay_whole():
    """A reduction that reads another of its kernel (softmax's sum of exp(x - max)) is not split."""
    from test_reduction import softmax_graph

    g = softmax_graph(2, 128)
    sched = schedule(g, GpuPolicy(SchedulerConfig(fuse_dependent_reductions=True)))
    assert split_reductions(sched, config(**SPLIT)) is sched


def test_split_schedule_memory_plan():
    g, groups = nll_graph()
    sched = split_reductions(build_schedule(g, groups), config(**SPLIT))
    assert [k.nodes for k in sched.kernels] == [("buf0", "buf1"), ("buf2_part",), ("buf2",)]
    ev = {(e.kind, e.buffer): e.step for e in sched.memory.events}
    assert ev[("alloc", "buf2_part")] == 1 and ev[("free", "buf2_part")] == 2
    assert ev[("free", "buf0")] == 1 and ev[("free", "x")] == 1  # last read by the partial kernel


# ---------------------------------------------------------------- group_norm's split dim


def group_norm_graph(n=4, c=6, hw=8, groups=2):
    """Pointwise nodes over (n, c, hw) fused with (n*groups, c/groups*hw) reductions: the
    planner must split the c dim into (groups, c/groups) (GpuPolicy.splittable)."""
    cg = c // groups
    x = inp("x", (n, c, hw))
    xr = load("x", c * hw * i0 + cg * hw * i1 + hw * r0 + r1, f32)
    mean = red("buf0", (n, groups, 1), (cg, hw), "welford_mean", xr)
    m2 = red("buf1", (n, groups, 1), (cg, hw), "welford_m2", xr)
    row = groups * i0 + FloorDiv(i1, cg)
    rstd = op("rsqrt", op("add", op("truediv", load("buf1", row, f32), const(float(cg * hw), f32)), const(1e-5, f32)))
    y = op("mul", op("sub", load("x", c * hw * i0 + hw * i1 + i2, f32), load("buf0", row, f32)), rstd)
    out = pw("buf2", (n, c, hw), op("add", op("mul", y, load("w", i1, f32)), load("b", i1, f32)))
    return Graph((x, inp("w", (c,)), inp("b", (c,))), (mean, m2, out), ("buf2",))


def test_group_norm_pointwise_split_inside_one_dim():
    g = group_norm_graph()
    sched = schedule(g, GpuPolicy())
    assert len(sched.kernels) == 1, str(sched)
    module = compile_schedule(sched, config=config())
    assert _kernels(module) == 1
    run(g, tol=dict(rtol=1e-5, atol=1e-5))


@pytest.mark.skipif(ON_CUDA, reason="eager comparison of the interpreter run only")
def test_group_norm_matches_eager():
    g = group_norm_graph()
    module = compile_schedule(build_schedule(g), config=config())
    _eager(g, module, lambda x, w, b: F.group_norm(x.view(4, 6, 8), 2, w, b, eps=1e-5))


@pytest.mark.skipif(AOT or ON_CUDA, reason="the eager comparison runs under the interpreter")
def test_eager_helper_catches_a_wrong_result():
    g = _full_sum()
    module = compile_schedule(build_schedule(g), config=config(**SPLIT))
    with pytest.raises(AssertionError):
        _eager(g, module, lambda x: x.sum() + 1e-2)


__all__ = ["i2", "torch"]
