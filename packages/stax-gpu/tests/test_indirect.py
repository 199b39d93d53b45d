"""Indirect (gather) loads: bounds-checked through the error flag, checks dropped when
value ranges prove them, and the log_softmax + nll_loss pattern in one kernel."""

import numpy as np
import pytest
from gpu_testlib import config, f32, i0, i1, i64, inp, kernel_src, pw, r0, red, run
from stax.ir import Graph, IndexValue, const, load, op
from stax.ir import cast as ir_cast
from stax.ir.index import var

S = var("s", 0)  # the symbol an indirect value binds


def embedding_graph(vocab=10, dim=4, n=7):
    idx = load("idx", i0, i64)
    row = load("table", dim * S + i1, f32, indirect=((S, idx, vocab),))
    return Graph((inp("table", (vocab, dim)), inp("idx", (n,), i64)), (pw("buf0", (n, dim), row),), ("buf0",))


def test_gather_in_bounds():
    m = run(embedding_graph(), idx=(0, 10), cfg=config(xblock_cap=8))
    assert "triton_helpers.flag_error(err_ptr" in m.source and "check_errors(err, ERRORS)" in m.source


@pytest.mark.parametrize("bad", [10, -1])
def test_gather_out_of_bounds_raises(bad):
    idx = np.array([0, 3, 9, bad, 2, 1, 0], np.int64)
    with pytest.raises(IndexError, match="out of bounds reading table"):
        run(embedding_graph(), arrays={"idx": idx})


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
