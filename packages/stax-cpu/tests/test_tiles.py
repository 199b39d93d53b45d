"""The tiled form's transposed loads (W x W blocks transposed in registers) against the
interpreter: x.t() + y on whole tiles, float32 and int32, every ISA level, plus a ragged
size that must keep the lane-by-lane form."""

import numpy as np
import pytest
from cpu_harness import assert_close, contiguous, run_both
from stax import ir
from stax.ir import dtypes as dt

i0, i1 = ir.pointwise_vars(2)


def _transpose_add(rows: int, cols: int, d: dt.DType) -> ir.Graph:
    x, y = contiguous("x", (cols, rows), d), contiguous("y", (rows, cols), d)
    v = ir.op("add", ir.load("x", i0 + rows * i1, d), ir.load("y", cols * i0 + i1, d))
    out = ir.ComputedBuffer("out", ir.Layout(x.layout.device, d, (rows, cols), (1, rows)),
                            ir.Pointwise((rows, cols), v))
    return ir.Graph([x, y], [out], ["out"])


@pytest.mark.parametrize("d", [dt.float32, dt.int32], ids=str)
@pytest.mark.parametrize("rows,cols", [(64, 128), (37, 50)])
def test_transposed_tiles(rows, cols, d, level_cfg):
    g = _transpose_add(rows, cols, d)
    rng = np.random.default_rng(7)
    vals = {"x": rng.integers(-50, 50, (cols, rows)), "y": rng.integers(-50, 50, (rows, cols))}
    if d.is_floating:
        vals = {k: rng.standard_normal(v.shape) for k, v in vals.items()}
    ours, ref, mod = run_both(g, vals, level_cfg)
    assert_close(ours[0], ref[0], d)
    whole = rows % 64 == 0 and cols % 64 == 0
    assert ("stax::vec::transpose(" in mod.source) == (whole and level_cfg.isa != "none")


@pytest.mark.parametrize("rows,cols", [(64, 128), (37, 50)])
def test_permuted_output_loops_in_its_memory_order(rows, cols, level_cfg):
    """exp(x.t()) into x.t()'s layout (eager's strides for it): the load and the store agree, so
    the nest walks them in memory order as one contiguous loop, not as transposed tiles."""
    x = contiguous("x", (cols, rows))
    v = ir.op("exp", ir.load("x", i0 + rows * i1, dt.float32))
    out = ir.ComputedBuffer("out", ir.Layout(x.layout.device, dt.float32, (rows, cols), (1, rows)),
                            ir.Pointwise((rows, cols), v))
    g = ir.Graph([x], [out], ["out"])
    ours, ref, mod = run_both(g, {"x": np.random.default_rng(8).standard_normal((cols, rows))}, level_cfg)
    assert_close(ours[0], ref[0], dt.float32, rtol=1e-6)
    assert "x1_t" not in mod.source and f"x0 < {rows * cols}" in mod.source, mod.source
