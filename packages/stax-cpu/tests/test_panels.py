"""Vertical reductions in panels (panels.py) against the interpreter: per-column statistics of a
row-major tensor (NHWC batch norm, a layer norm's weight gradient) keep several vector blocks of
outputs live over one walk of the rows instead of walking the rows once per block.

The ragged end is a block clamped to end at the last column (its first lanes recompute the block
before it, bit for bit); with two threads and one panel the rows are split (split_kept.py) and each
thread's panel is stored as partials. Ties of argmin sit in the overlapped lanes and across threads.
"""

import re
from dataclasses import replace

import numpy as np
import pytest
from cpu_harness import assert_close, contiguous, isa_of, run_both, single_kernel
from stax import ir
from stax.cpu.panels import MIN_WALK
from stax.ir import dtypes as dt
from test_reductions import TOL, reduction_node

# accumulators of one block: 3 and 4 vector registers (panels.ACC_REGS), so AVX2 fits 2 blocks a panel
TYPES = {"stats": ("sum", "welford_mean", "welford_m2"), "extremes": ("max", "argmin")}
LANES = {"avx512": 16, "avx2": 8}


def _graph(shape, axis: int, types) -> ir.Graph:
    x = contiguous("x", shape)
    nodes = [reduction_node(r, x, r, (axis,), False) for r in types]
    return ir.Graph([x], nodes, [n.name for n in nodes])


def _values(shape, seed: int) -> np.ndarray:
    v = 1 + np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    flat = v.reshape(-1, shape[-1])
    flat[3, -2] = flat[len(flat) - 2, -2] = -9.0  # argmin tie in the last (overlapped) block, across threads
    return v


def _check(shape, axis: int, cfg, types=TYPES["stats"]):
    g = _graph(shape, axis, types)
    ours, ref, mod = run_both(g, {"x": _values(shape, shape[-1])}, cfg, sched=single_kernel(g, "fused"))
    for node, o, r in zip(g.nodes, ours, ref):
        if node.name == "argmin":
            assert (np.asarray(o) == np.asarray(r)).all(), node.name
        else:
            assert_close(o, r, dt.float32, *TOL[dt.float32], what=f"{node.name} {shape}")
    return mod


@pytest.mark.parametrize("types", TYPES)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("cols", [64, 40, 200])
def test_columns_reduced_in_panels(types, threads, cols, level_cfg):
    """Every column count (whole blocks, a ragged end, several panels) matches the interpreter, and a
    vector level reduces at least two blocks per walk of the rows."""
    mod = _check((257, cols), 0, replace(level_cfg, num_threads=threads), TYPES[types])
    lanes = LANES.get(isa_of(mod))
    if lanes is None:  # the scalar level has no vector blocks
        assert "x0_p" not in mod.source
        return
    step = re.search(r"x0_p \+= (\d+)\)", mod.source)
    assert step is not None and int(step.group(1)) >= 2 * lanes, mod.source[-4000:]
    if cols % lanes:  # the ragged end: a block clamped to end at the last column, no scalar tail
        assert f", {cols - lanes});" in mod.source and "x0_tail" not in mod.source
    one_panel = int(step.group(1)) >= -(-cols // lanes) * lanes
    if threads == 2 and one_panel and types == "stats":  # the rows are split (arg reductions are not: KEPT_SPLIT)
        assert "part_split" in mod.source


def test_outer_kept_loop_and_inner_panels(level_cfg):
    """Kept loops outside the panel loop (outputs (6, 48) of a (6, 300, 48) tensor over its middle dim)."""
    mod = _check((6, 300, 48), 1, replace(level_cfg, num_threads=2), TYPES["extremes"])
    assert ("x1_p" in mod.source) == (isa_of(mod) in LANES)


def test_short_walks_keep_one_block(cfg):
    """Fewer reduced iterations than MIN_WALK (a pool's window): one block per walk, no panel loop."""
    mod = _check((MIN_WALK - 1, 64), 0, cfg)
    assert "x0_p" not in mod.source
