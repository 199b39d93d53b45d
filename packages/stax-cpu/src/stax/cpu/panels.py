"""Vertical reductions in panels: several vector blocks of outputs reduced in one walk of the rows.

The vertical form keeps one vector block of W adjacent outputs per walk of the reduced loops, so a
reduction over the rows of an NHWC tensor (batch-norm statistics and their backward, a layer norm's
weight gradient) walks the whole tensor once per block, reading W of each row's elements at the row's
stride: 64 channels on AVX2 are 8 strided walks. A panel keeps the accumulators of P adjacent blocks
live across one walk (P x W contiguous elements of each row), as many as the vector registers hold.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .loops import NodeLoops

if TYPE_CHECKING:
    from .frame import Lines

# vector registers the accumulators of one panel may take, by vector width in bytes (AVX2 has 16
# registers, AVX-512 32; the rest hold the loaded rows and temporaries)
PANEL_REGS = {32: 8, 64: 16}
MAX_PANEL = 16  # blocks: the body is emitted once per block
# reduced iterations per output below which a walk is short enough to stay in cache (a max pool's
# backward over its 2 x 2 window): one block per walk, the body emitted once
MIN_WALK = 32
# registers one vector accumulator keeps live in the reduced loop (Welford: the float mean and m2
# lanes; its double lanes are touched once per 256 updates)
ACC_REGS = {"argmax": 3, "argmin": 3, "welford_mean": 2, "welford_m2": 2, "welford_count": 2}


def _acc_regs(group: list[NodeLoops]) -> int:
    """Registers of one block's accumulators (Welford outputs of one value share one accumulator)."""
    seen, regs = set(), 0
    for nl in group:
        if not nl.is_reduction:
            continue
        key = nl.node.body.value if nl.accumulate.startswith("welford") else nl.node.name
        if key in seen:
            continue
        seen.add(key)
        wide = 2 if nl.node.body.value.dtype.itemsize == 8 else 1
        regs += ACC_REGS.get(nl.accumulate, wide)
    return regs


def panel_blocks(group: list[NodeLoops], dim: int, lanes: int, vector_bytes: int) -> int:
    """Blocks per panel of a vertical reduction along loop `dim` (1: one block per walk, as before):
    as few panels as the register budget allows, of equal size (the last panel's blocks past the end
    repeat the last block). Static sizes, at least two blocks (a ragged end is one more block,
    overlapping the one before it) and walks of at least MIN_WALK rows."""
    head = group[0]
    n, walk = head.sizes[dim], head.sizes[head.npoint:]
    if not isinstance(n, int) or n < 2 * lanes or not walk or not all(isinstance(r, int) for r in walk):
        return 1
    if math.prod(walk) < MIN_WALK:
        return 1
    blocks = -(-n // lanes)
    fit = min(MAX_PANEL, blocks, PANEL_REGS.get(vector_bytes, 8) // max(1, _acc_regs(group)))
    if fit < 2:
        return 1
    return -(-blocks // -(-blocks // fit))  # panels of equal size, as few as fit


def emit_panels(em, lines: Lines, group: list[NodeLoops], plan) -> None:
    """The vertical form with `plan.panel` blocks per walk: the panel loop (work-shared like the block
    loop it replaces), P accumulator sets, the reduced loops with P bodies, then P stores (or, in a
    kept split, P stores of this thread's partials). A block that would pass the loop's end is clamped
    to end there: the ragged end overlaps the block before it, and the last panel's surplus blocks
    repeat the last one; their lanes recompute the same values, bit for bit, and store them again."""
    head = group[0]
    k, w, p = plan.dim, plan.lanes, plan.panel
    n, npoint = head.sizes[k], head.npoint
    last = (-(-n // (p * w)) - 1) * p * w  # where the last panel starts

    def block(j: int) -> str:
        start = f"x{k}_p + {j * w}"
        return f"std_min({start}, {n - w})" if last + j * w > n - w else start

    with lines.block(f"for (int64_t x{k}_p = 0; x{k}_p < {n}; x{k}_p += {p * w})"):
        sets = [em.init_accs(lines, group, vector=True, scalar=False) for _ in range(p)]
        inner: list = []
        em.open_loops(lines, head.sizes, npoint, len(head.sizes), inner)
        for j, accs in enumerate(sets):
            with lines.block(""):
                lines(f"const int64_t x{k} = {block(j)};")
                em._vector_bodies(lines, group, plan, accs, None)
        em.close_loops(inner, len(inner))
        for j, accs in enumerate(sets):
            with lines.block(""):
                lines(f"const int64_t x{k} = {block(j)};")
                em.store_vertical(lines, plan, accs)
