"""Iteration groups (§7.1): a node's (pointwise, reduction) loop sizes, before and after coalescing.

`sizes` keeps the body's dimensions with size-1 ones dropped: that is the loop
structure the codegen receives (Kernel.group). `group` additionally merges adjacent
dimensions that every index of the body walks contiguously — the book's
`group.iteration`, e.g. ((8192,), ()) for exp over a contiguous 64x128 tensor — and is
what the CPU policy compares: outer loops agree only at boundaries of the merged
dimensions (Example 7.2: exp's single 8192 loop shares no outer loop with a row sum).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from stax.ir import ComputedBuffer, Reduction, Scan, Scatter
from stax.ir.affine import affine_parts, contiguous_runs
from stax.ir.index import pointwise_vars, reduction_vars
from stax.ir.sizevars import canonical_size

from .deps import index_exprs


@dataclass(frozen=True)
class LoopInfo:
    sizes: tuple  # ((pointwise sizes), (reduction sizes)), size-1 dropped
    group: tuple  # same, with coalescible neighbours merged (the iteration group)
    boundaries: frozenset  # k such that the first k pointwise `sizes` form whole merged dims


def _product(xs):
    """An int for static sizes; with symbolic ones the expanded product (one spelling per value)."""
    out = 1
    for x in xs:
        out *= x
    return out if isinstance(out, int) else canonical_size(out)


def _size(n):
    """A loop size as the scheduler keeps it: an int, or a sympy expression in size symbols."""
    return canonical_size(n)


def loop_info(node: ComputedBuffer, body_nodes=None) -> LoopInfo:
    """Sizes and iteration group of `node` (`body_nodes`: its walked value DAG, if at hand)."""
    body = node.body
    if isinstance(body, Scan):
        return _scan_info(body)
    if isinstance(body, Scatter):
        return _scatter_info(body)
    red = body.reduction_ranges if isinstance(body, Reduction) else ()
    p, r = _loop_vars(tuple(body.ranges), tuple(red))
    return _coalesce(p, r, tuple(index_exprs(node, body_nodes)))


@functools.lru_cache(maxsize=4096)
def _loop_vars(ranges: tuple, red: tuple) -> tuple[tuple, tuple]:
    """((var, size), ...) for the size>1 pointwise and reduction dims."""
    p = tuple((v, n) for v, n in zip(pointwise_vars(len(ranges)), map(_size, ranges)) if n != 1)
    r = tuple((v, n) for v, n in zip(reduction_vars(len(red)), map(_size, red)) if n != 1)
    return p, r


@functools.lru_cache(maxsize=8192)
def _coalesce(p: tuple, r: tuple, exprs: tuple) -> LoopInfo:
    """Merge neighbouring dims (pointwise with pointwise, reduction with reduction) every index allows."""
    loop_vars = {v for v, _ in p + r}
    parts = [affine_parts(e, loop_vars) for e in set(exprs)]
    # Merged runs never mix pointwise and reduction dimensions. Only loops every index walks
    # linearly merge (stax.ir.affine.contiguous), not coalesce_loops' merges through views'
    # FloorDiv/ModularIndexing: the CPU policy compares outer loops at these boundaries (§7.1).
    p_runs = contiguous_runs([v for v, _ in p], [s for _, s in p], parts)
    r_runs = contiguous_runs([v for v, _ in r], [s for _, s in r], parts)
    p_sizes = tuple(s for _, s in p)
    r_sizes = tuple(s for _, s in r)
    group = (
        tuple(_product(p_sizes[k] for k in run) for run in p_runs),
        tuple(_product(r_sizes[k] for k in run) for run in r_runs),
    )
    bounds = {0}
    for run in p_runs:
        bounds.add(run[-1] + 1)
    return LoopInfo((p_sizes, r_sizes), group, frozenset(bounds))


def _scan_info(body: Scan) -> LoopInfo:
    """A scan runs its axis sequentially: ((the other dims), (axis size,)), never coalesced."""
    sizes = [_size(s) for s in body.ranges]
    rest = tuple(s for k, s in enumerate(sizes) if k != body.axis and s != 1)
    axis = (sizes[body.axis],) if sizes[body.axis] != 1 else ()
    return LoopInfo((rest, axis), (rest, axis), frozenset({0}))


def _scatter_info(body: Scatter) -> LoopInfo:
    """A scatter: ((output sizes), (scatter sizes)) for its two passes, never coalesced or fused."""
    out = tuple(n for n in map(_size, body.ranges) if n != 1)
    pts = tuple(n for n in map(_size, body.scatter_ranges) if n != 1)
    return LoopInfo((out, pts), (out, pts), frozenset({0}))
