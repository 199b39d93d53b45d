"""The vector loop of a group cut where its bodies' branches change (stax.ir.index_split).

A concatenation or constant pad along the vector loop evaluates every input for every lane: a
16-lane gather per input and a select (GPT-2's backward concatenation of q, k, v gradients: 0.3 ms
for what a copy does in 0.04 ms). Cut at the points where the comparisons and clamps change, each
piece runs the bodies specialized to it: one input, read with plain vector loads.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from stax.ir import ValueRange, map_indices
from stax.ir.index_split import specialize, split_points

from .loops import NodeLoops, loop_var
from .vec_body import VecPlan

MAX_PIECES = 8  # more pieces: more code for little (an irregular body is left whole)


@dataclass(frozen=True)
class Piece:
    """Loop `plan.dim` over [lo, hi), running `group` (the bodies specialized to it) with `plan`."""

    lo: int
    hi: int
    group: list
    plan: VecPlan


def _with_value(nl: NodeLoops, value) -> NodeLoops:
    """`nl` computing `value` (already over the loop variables: the rewrites leave it as it is)."""
    node = replace(nl.node, body=replace(nl.node.body, value=value))
    return NodeLoops(node, nl.sizes, nl.nred, nl.rewrites)


def loop_pieces(group: list[NodeLoops], plan: VecPlan, size_ranges: dict) -> list[Piece] | None:
    """The pieces of the group's vector loop, or None where it stays one loop (no branch changes along
    it, a symbolic extent, or more than MAX_PIECES pieces). `size_ranges`: the graph's size symbols."""
    sizes = group[0].sizes
    n = sizes[plan.dim]
    if not isinstance(n, int):
        return None
    x = loop_var(plan.dim)
    values = [map_indices(nl.node.body.value, nl.index) for nl in group]
    points = sorted({p for v in values for p in split_points(v, x, 0, n)})
    if not points or len(points) >= MAX_PIECES:
        return None
    ranges: dict = {loop_var(k): s for k, s in enumerate(sizes)}
    ranges.update(size_ranges)
    out = []
    for lo, hi in zip([0, *points], [*points, n]):
        ranges[x] = ValueRange(lo, hi - 1)
        pieces = [_with_value(nl, specialize(v, ranges)) for nl, v in zip(group, values)]
        out.append(Piece(lo, hi, pieces, replace(plan, tail=(hi - lo) % plan.lanes != 0)))
    return out
