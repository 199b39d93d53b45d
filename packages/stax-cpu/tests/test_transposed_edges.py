"""Transposed tiles with long edges along the vector loop (tiles.transposed_edges): x.t() + y where
the output and x are contiguous along the vector loop and y along the other, against the
interpreter at every ISA level; sizes that give no whole tiles fall back to lane-by-lane loads."""

from dataclasses import replace

import numpy as np
import pytest
from cpu_harness import F32, assert_close, contiguous, run_both, single_kernel
from stax import ir
from stax.cpu.tiles import transposed_edges
from stax.cpu.vec_body import VecPlan

i0, i1 = ir.pointwise_vars(2)


def _transpose_add(rows, cols):
    x, y = contiguous("x", (cols, rows)), contiguous("y", (rows, cols))
    v = ir.op("add", ir.load("x", i0 + rows * i1, F32), ir.load("y", cols * i0 + i1, F32))
    out = ir.ComputedBuffer("out", ir.Layout("cpu", F32, (rows, cols), (1, rows)), ir.Pointwise((rows, cols), v))
    return ir.Graph([x, y], [out], ["out"])


def test_edges_long_along_the_vector_loop_with_work_for_every_thread():
    plan = VecPlan(0, 16, False, False, 1, 32)
    assert transposed_edges([2048, 4096], plan, 2) == (512, 32)  # 4 outer tiles: 2 per thread
    assert transposed_edges([2048, 4096], plan, 1) == (1024, 32)
    assert transposed_edges([64, 128], plan, 2) == (64, 32)  # the smallest whole edge
    assert transposed_edges([2048, 40], plan, 2) is None  # no whole tile along the transposed side
    assert transposed_edges([100, 64], plan, 2) is None


@pytest.mark.parametrize("rows,cols", [(1024, 96), (512, 40)])
def test_long_transposed_tiles(rows, cols, level_cfg):
    g = _transpose_add(rows, cols)
    rng = np.random.default_rng(11)
    vals = {"x": rng.standard_normal((cols, rows)), "y": rng.standard_normal((rows, cols))}
    ours, ref, mod = run_both(g, vals, replace(level_cfg, num_threads=2))  # edges depend on the threads
    assert_close(ours[0], ref[0], F32)
    transposed = cols % 32 == 0 and level_cfg.isa != "none"
    assert ("stax::vec::transpose(" in mod.source) == transposed
    if transposed:
        assert "x0_t += 256)" in mod.source and "x1_t += 32)" in mod.source


def test_no_transposed_preload_of_the_groups_own_output(level_cfg):
    """buf1 (x stored column-major) and buf2 = x * buf1 read back transposed share one loop nest:
    a transposed load is read before the block's stores, so it must not read buf1 (it did: garbage)."""
    n = 64
    x = contiguous("x", (n, n))
    buf1 = ir.ComputedBuffer("buf1", ir.Layout("cpu", F32, (n, n), (1, n)),
                             ir.Pointwise((n, n), ir.load("x", n * i0 + i1, F32)))
    buf2 = ir.ComputedBuffer("buf2", ir.Layout.contiguous((n, n), F32), ir.Pointwise((n, n), ir.op(
        "mul", ir.load("x", n * i0 + i1, F32), ir.load("buf1", i0 + n * i1, F32))))
    g = ir.Graph([x], [buf1, buf2], ["buf2", "buf1"])
    ours, ref, _ = run_both(g, {"x": np.random.default_rng(12).standard_normal((n, n))}, level_cfg,
                            sched=single_kernel(g, "fused"))
    for o, r in zip(ours, ref):
        assert_close(o, r, F32)
