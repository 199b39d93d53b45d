"""Outer-loop-fused nests whose later groups re-read the row (log_softmax: the exp-sum after the row
max) prefetch the next rows of their inputs while they compute (prefetch.py); the first group, which
reads the row from memory, and buffers written in the kernel are not prefetched. Values are checked
against the interpreter at every ISA level."""

import re

import numpy as np
import sympy
from cpu_harness import F32, assert_close, contiguous, pointwise, run_both, single_kernel
from stax import ir
from stax.cpu.loops import loop_var
from stax.cpu.prefetch import PREFETCH_BYTES, row_ahead

i0, i1 = ir.pointwise_vars(2)
(r0,) = ir.reduction_vars(1)


def _log_softmax_graph(rows, cols):
    """log_softmax as the frontend lowers it: row max, row sum of exp(x - max), its log, x - max - log."""
    x = contiguous("x", (rows, cols))
    row = ir.Layout.contiguous((rows, 1), F32)
    mx = ir.ComputedBuffer("mx", row, ir.Reduction((rows, 1), (cols,), "max", ir.load("x", cols * i0 + r0, F32)))
    e = ir.op("exp", ir.op("sub", ir.load("x", cols * i0 + r0, F32), ir.load("mx", i0, F32)))
    s = ir.ComputedBuffer("s", row, ir.Reduction((rows, 1), (cols,), "sum", e))
    lse = pointwise("lse", (rows, 1), ir.op("log", ir.load("s", i0, F32)))
    out = pointwise("out", (rows, cols), ir.op("sub", ir.op("sub", ir.load("x", cols * i0 + i1, F32),
                                                             ir.load("mx", i0, F32)), ir.load("lse", i0, F32)))
    return ir.Graph([x], [mx, s, lse, out], ["out", "mx"])


def test_later_groups_prefetch_the_next_rows(level_cfg):
    rows, cols = 23, 301  # 1204-byte rows: 4 rows ahead is the first distance >= 4 KiB
    g = _log_softmax_graph(rows, cols)
    v = np.random.default_rng(3).standard_normal((rows, cols)) * 4
    ours, ref, mod = run_both(g, {"x": v}, level_cfg, sched=single_kernel(g, "outer_loop_fused", 1))
    assert_close(ours[0], ref[0], F32, rtol=2e-6, atol=2e-6, what="out")
    assert_close(ours[1], ref[1], F32, what="mx")
    fetches = re.findall(r"__builtin_prefetch\(([^;]*)\);", mod.source.split("// ---- Python wrapper")[0])
    if level_cfg.isa == "none":
        assert not fetches  # scalar form: no vector loads, no prefetches
        return
    assert fetches and all(f == "in_ptr0 + (301*x0 + x1) + 1204, 0, 0" for f in fetches), fetches
    # the first group (the max) reads the row from memory itself: its loop has no prefetch
    kernel = mod.source.split('extern "C" int kernel0', 1)[1]
    assert "__builtin_prefetch" not in kernel.split("stax::vec::op_max{}", 1)[0]


def test_row_ahead_distance():
    x0, x1 = loop_var(0), loop_var(1)
    assert row_ahead(1024 * x0 + x1, x0, 4) == 1024  # a 4 KiB row: the next one
    assert row_ahead(301 * x0 + x1, x0, 4) == 4 * 301
    assert row_ahead(4 * x0 + x1, x0, 4) == PREFETCH_BYTES // 4
    assert row_ahead(x1, x0, 4) == 0  # a broadcast along the rows: nothing new to fetch
    assert row_ahead(sympy.Symbol("s0") * x0 + x1, x0, 4) == 0  # stride unknown at compile time
