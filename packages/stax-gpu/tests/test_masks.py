"""All-true masks (GpuConfig.static_masks): an axis whose size every launch config's
block divides gets a constant mask, as Inductor emits, and the results do not change."""

import pytest
from gpu_testlib import config, f32, i0, i1, inp, kernel_src, pw, r0, red, run
from stax.ir import Graph, load, op
from test_reduction import LOOPED


def _row_sums(n, m):
    x = inp("x", (n, m))
    s = red("buf0", (n, 1), (m,), "sum", load("x", m * i0 + r0, f32))
    y = pw("buf1", (n, m), op("truediv", load("x", m * i0 + i1, f32), load("buf0", i0, f32)))
    return Graph((x,), (s, y), ("buf1",))


@pytest.mark.parametrize("static", [True, False])
def test_divisible_sizes_get_constant_masks(static):
    m = run(_row_sums(64, 128), cfg=config(static_masks=static, xblock_cap=16), x=(0.5, 1.5))
    src = kernel_src(m, "triton_per_fused_0")
    assert ("xmask = tl.full([XBLOCK, 1], True, tl.int1)" in src) == static
    assert ("xmask = xindex < xnumel" in src) == (not static)


def test_looped_divisible_reduction_gets_constant_r_mask():
    m = run(_row_sums(16, 64), cfg=config(**LOOPED), x=(0.5, 1.5))
    src = kernel_src(m, "triton_red_fused_0")
    assert "r0_mask = tl.full([1, R0_BLOCK], True, tl.int1)" in src and "xmask = tl.full(" in src


def test_ragged_sizes_keep_their_masks():
    m = run(_row_sums(13, 37), cfg=config(**LOOPED), x=(0.5, 1.5))
    src = kernel_src(m, "triton_red_fused_0")
    assert "r0_mask = r0_index < r0_numel" in src  # R0_BLOCK 8 does not divide 37
    assert ("xmask = xindex < xnumel" in src) == config().interpret  # XBLOCK 4 (GPU heuristics: 1)


def test_tiled_transpose_constant_masks():
    n, c = 64, 32
    g = Graph((inp("a", (c, n)), inp("b", (n, c))),
              (pw("buf0", (n, c), op("add", load("a", i0 + n * i1, f32), load("b", c * i0 + i1, f32))),), ("buf0",))
    m = run(g, cfg=config())
    src = kernel_src(m, "triton_poi_fused_0")
    assert "YBLOCK" in src and "ymask = tl.full([YBLOCK, 1], True, tl.int1)" in src
    assert "xmask = tl.full([1, XBLOCK], True, tl.int1)" in src


@pytest.mark.parametrize("write_order", [True, False])
@pytest.mark.parametrize("store_major", [False, True])
def test_tile_store_major_walks_the_stores_axis_on_program_0(write_order, store_major):
    """a.t() + b into a.t()'s layout: the store runs along the tile's x axis with write_order,
    along y without it; tile_store_major puts that axis's tiles on program_id(0). Same results."""
    n, c = 50, 70  # ragged against 16x16 tiles
    v = op("add", load("a", i0 + n * i1, f32), load("b", c * i0 + i1, f32))
    g = Graph((inp("a", (c, n)), inp("b", (n, c))), (pw("buf0", (n, c), v, strides=(1, n)),), ("buf0",))
    m = run(g, cfg=config(tile_store_major=store_major, write_order=write_order, xblock_cap=16))
    src = kernel_src(m, "triton_poi_fused_0")
    assert ("yoffset = tl.program_id(0) * YBLOCK" in src) == (store_major and not write_order), src
    assert "ymask = yindex < ynumel" in src and "xmask = xindex < xnumel" in src


@pytest.mark.parametrize("hint", [True, False])
def test_tile_evict_last_marks_the_tiles_loads(hint):
    """tile_evict_last (on by default; an A/B knob for transposes) adds evict_last to the 2-D tile's loads;
    same results."""
    n, c = 50, 70
    g = Graph((inp("a", (c, n)), inp("b", (n, c))),
              (pw("buf0", (n, c), op("add", load("a", i0 + n * i1, f32), load("b", c * i0 + i1, f32))),), ("buf0",))
    src = kernel_src(run(g, cfg=config(tile_evict_last=hint, xblock_cap=16)), "triton_poi_fused_0")
    assert src.count("eviction_policy='evict_last'") == (2 if hint else 0)
