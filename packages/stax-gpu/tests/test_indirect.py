"""Indirect (gather) loads: bounds-checked through the error flag, checks dropped when
value ranges prove them, and the log_softmax + nll_loss pattern in one kernel.
An out-of-range float gather reads NaN; on cuda the flag is read back asynchronously and a
later call raises; an integer gather's module ends each call with a device-side assert
(error_sync=True raises in the faulting call, at a host sync)."""

from pathlib import Path

import numpy as np
import pytest
import torch
from gpu_testlib import (
    AOT,
    ON_CUDA,
    assert_raised_later,
    async_flag,
    build_schedule,
    compile_schedule,
    config,
    f32,
    i0,
    i1,
    i64,
    inp,
    kernel_src,
    make_inputs,
    pw,
    r0,
    red,
    run,
)
from stax.gpu.compile import generated_module
from stax.ir import Graph, IndexValue, const, load, op
from stax.ir import cast as ir_cast
from stax.ir.index import var

S = var("s", 0)  # the symbol an indirect value binds


def embedding_graph(table_dtype=f32, vocab=10, dim=4, n=7):
    idx = load("idx", i0, i64)
    row = load("table", dim * S + i1, table_dtype, indirect=((S, idx, vocab),))
    table = inp("table", (vocab, dim), table_dtype)
    return Graph((table, inp("idx", (n,), i64)), (pw("buf0", (n, dim), row, table_dtype),), ("buf0",))


def test_gather_in_bounds():
    m = run(embedding_graph(), idx=(0, 10), cfg=config(xblock_cap=8))
    assert "triton_helpers.flag_error(err_ptr" in m.source and "ERRORS.end()" in m.source


@pytest.mark.skipif(AOT, reason="runs the module")
@pytest.mark.parametrize("bad", [10, -1])
def test_gather_out_of_bounds_raises(bad):
    idx = np.array([0, 3, 9, bad, 2, 1, 0], np.int64)
    with pytest.raises(IndexError, match="out of bounds reading table"):
        run(embedding_graph(), arrays={"idx": idx}, cfg=config(error_sync=True))


def _bad_and_good_inputs(bad):
    g = embedding_graph()
    idx = np.array([0, 3, 9, bad, 2, 1, 0], np.int64)
    _, bad_in = make_inputs(g, {"idx": idx})
    _, good_in = make_inputs(g, {"idx": np.where(idx == bad, 4, idx)})
    return bad_in, good_in


@pytest.mark.skipif(AOT, reason="runs the module")
@pytest.mark.parametrize("bad", [10, -1])
def test_out_of_range_gather_reads_nan_and_is_raised_later(bad):
    """Never silently wrong: the faulting row is NaN, the flag raises once, then resets."""
    m = compile_embedding()
    flag = async_flag(m)
    bad_in, good_in = _bad_and_good_inputs(bad)
    (out,) = m.call(list(bad_in))
    out = out.cpu()
    assert torch.isnan(out[3]).all() and not torch.isnan(out[[0, 1, 2, 4, 5, 6]]).any()
    assert torch.equal(out[2], bad_in[0].cpu().reshape(10, 4)[9])
    assert_raised_later(m, flag, good_in, "out of bounds reading table")
    (out,) = m.call(list(good_in))  # reported once: the module works again
    assert not torch.isnan(out.cpu()).any()


def compile_embedding(table_dtype=f32, **kw):
    return compile_schedule(build_schedule(embedding_graph(table_dtype), None), config=config(**kw))


def test_no_check_syncs_on_cuda_unless_error_sync():
    """On cuda a float gather reads its flag asynchronously; an integer gather cannot be poisoned
    with NaN, so its module ends each call with a device-side assert on the flag (no host sync:
    BERT's token_type_ids gather cost a sync per call, 2.1 ms of a 9.8 ms H100 call), and the flag
    says why; error_sync=True reads it in the call. On cpu every module reads it in the call."""
    flag = lambda m: generated_module(m).ERRORS  # noqa: E731

    assert not flag(compile_embedding(device="cuda")).sync and not flag(compile_embedding(device="cuda")).asserted
    assert not flag(compile_embedding(i64, device="cuda")).sync and flag(compile_embedding(i64, device="cuda")).asserted
    assert flag(compile_embedding(device="cuda", error_sync=True)).sync
    assert not flag(compile_embedding(i64, device="cuda", error_sync=True)).asserted
    assert flag(compile_embedding(i64, device="cpu")).sync and not flag(compile_embedding(i64, device="cpu")).asserted
    assert flag(compile_embedding(i64, device="cuda")).why == (
        "unpoisoned checks: indirect index out of bounds reading table: not in [0, 10)")
    assert flag(compile_embedding(device="cuda", error_sync=True)).why == "GpuConfig.error_sync"


@pytest.mark.skipif(not ON_CUDA, reason="a device-side assert")
def test_an_asserted_module_runs_graphed_and_a_fault_stops_cuda_work():
    """An integer gather on cuda: in-range calls replay a CUDA graph with no host sync; an index out
    of range fires the device-side assert, so the process's next sync fails (a subprocess: the
    assert leaves its CUDA context unusable, as eager's does)."""
    import subprocess
    import sys
    import textwrap

    m = compile_embedding(i64, device="cuda")
    table = torch.arange(40, dtype=torch.int64, device="cuda").reshape(10, 4)
    idx = torch.tensor([0, 3, 9, 4], device="cuda")
    for _ in range(4):
        assert torch.equal(m.call([table, idx])[0], table[idx])
    assert m.call.stats["replays"] >= 2, m.call.stats
    code = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_indirect import compile_embedding, i64
        m = compile_embedding(i64, device="cuda")
        table = torch.arange(40, dtype=torch.int64, device="cuda").reshape(10, 4)
        out = m.call([table, torch.tensor([0, 10], device="cuda")])
        torch.cuda.synchronize()
        print("NO ERROR", out)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "NO ERROR" not in r.stdout, (r.stdout, r.stderr[-2000:])
    assert "device-side assert" in r.stderr, r.stderr[-2000:]


def test_provably_in_bounds_index_needs_no_check():
    """table[i % 10]: value ranges prove 0 <= v < 10, so no flag and no sync."""
    v = op("remainder", IndexValue(i0, i64), const(10, i64))
    row = load("table", 4 * S + i1, f32, indirect=((S, v, 10),))
    g = Graph((inp("table", (10, 4)),), (pw("buf0", (25, 4), row),), ("buf0",))
    m = run(g)
    assert "flag_error" not in m.source and "err" not in kernel_src(m, "triton_poi_fused_0").split(":")[0]


def test_bounds_check_off_trusts_the_input():
    m = run(embedding_graph(), idx=(0, 10), cfg=config(bounds_check="off"))
    assert "flag_error" not in m.source


def test_log_softmax_nll_one_kernel_with_a_gather():
    """loss_i = -(x[i, t_i] - max_i - log(sum_j exp(x_ij - max_i))): max, sum and the
    per-row gather share one persistent kernel; the mean over rows is a second kernel."""
    n, c = 12, 33
    xv = lambda idx: load("x", idx, f32)  # noqa: E731
    mx = red("buf0", (n,), (c,), "max", xv(c * i0 + r0))
    se = red("buf1", (n,), (c,), "sum", op("exp", op("sub", xv(c * i0 + r0), load("buf0", i0, f32))))
    t = load("t", i0, i64)
    picked = load("x", c * i0 + S, f32, indirect=((S, t, c),))
    lse = op("add", load("buf0", i0, f32), op("log", load("buf1", i0, f32)))
    loss = pw("buf2", (n,), op("neg", op("sub", picked, lse)))
    mean = red("buf3", (), (n,), "sum", op("truediv", load("buf2", r0, f32), const(float(n), f32)))
    g = Graph((inp("x", (n, c)), inp("t", (n,), i64)), (mx, se, loss, mean), ("buf3",))
    for cfg in (config(xblock_cap=4), config(xblock_cap=4, persistent_reduction_max=8, r0_block_cap=8)):
        m = run(g, groups=[["buf0", "buf1", "buf2"], ["buf3"]], cfg=cfg, t=(0, c), tol=dict(rtol=1e-5, atol=1e-6))
        assert "buf2 = empty_strided" in m.source  # read by the second kernel
    assert ir_cast is not None

