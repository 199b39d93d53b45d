"""Device fusion policies: when may a set of nodes share loops (Def 7.2)?

stax-sched defines the protocol; codegen packages pick or configure a policy.
The CPU backend keeps the per-dimension ranges and fuses when the outer loops
agree (identical loops -> FusedSchedulerNode, a shared prefix of outer loops ->
OuterLoopFusedSchedulerNode, Listing 7.1); the GPU backend decides by element
counts (one kernel over the reduction's (n, r), pointwise nodes split to match).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from stax.ir import Load, body_roots, provably_equal, walk

from .config import SchedulerConfig
from .nodes import FUSED_NODE, OUTER_LOOP_FUSED_NODE, LoopFusion, LoopView, SchedulerNode

SAME_VARS_REDUCE = "SAME_VARS_REDUCE"  # identical loops (horizontal reductions, or same-size pointwise)
OUTER_LOOP_FUSION = "OUTER_LOOP_FUSION"  # CPU: shared outer loops only
SAME_NUMEL = "SAME_NUMEL"  # GPU, Def 7.2 case 2: pointwise nodes with n1 == n2
POINTWISE_WITH_REDUCTION = "POINTWISE_WITH_REDUCTION"  # GPU, Def 7.2 case 3: N == n or N == n*r


@runtime_checkable
class FusionPolicy(Protocol):
    """Decides how (and whether) a set of nodes can share one kernel's loops."""

    name: str
    config: SchedulerConfig

    def loop_fusion(self, snodes: Sequence[SchedulerNode], dependent_reductions: str | None) -> LoopFusion | str:
        """The loop structure for `snodes` as one kernel, or the reason they cannot share loops.

        `dependent_reductions` is None, or a description of a reduction in the set that
        needs another's finished result (then one interleaved loop nest is not allowed).
        """
        ...


def _groups(views: Sequence[LoopView]) -> str:
    """The distinct iteration groups, in the order of their values at the size hints (the text of a static
    group): symbolic sizes log the same line as static ones, up to the sizes."""
    return " vs ".join(g for _, g in sorted({v.group_text for v in views}))


def outer_loop_depth(views: Sequence[LoopView]) -> int:
    """Shared outer loops: equal leading pointwise sizes ending at a merged-dimension boundary of every node."""
    first = views[0].sizes[0]
    limit = min(len(v.sizes[0]) for v in views)
    best = 0
    for k in range(1, limit + 1):
        if not all(provably_equal(v.sizes[0][k - 1], first[k - 1]) for v in views):
            break
        if all(k in v.boundaries for v in views):
            best = k
    return best


@functools.lru_cache(maxsize=65536)
def _cpu_loop_fusion(views: tuple, dependent_reductions: str | None) -> LoopFusion | str:
    """CpuPolicy.loop_fusion for nodes with these LoopViews (in node order)."""
    sizes = {v.sizes for v in views}
    if len(sizes) == 1 and dependent_reductions is None:
        return LoopFusion(FUSED_NODE, SAME_VARS_REDUCE, 0, next(iter(sizes)))
    depth = outer_loop_depth(views)
    if depth == 0:
        why = f" ({dependent_reductions})" if dependent_reductions and len(sizes) == 1 else ""
        return f"incompatible iteration spaces: {_groups(views)} (outer loop fusion depth 0){why}"
    outer = views[0].sizes[0][:depth]
    return LoopFusion(OUTER_LOOP_FUSED_NODE, f"{OUTER_LOOP_FUSION} depth {depth}", depth, (outer, ()))


@dataclass(frozen=True)
class CpuPolicy:
    """Compatibility by outer loops (Example 7.1: depth 1; Example 7.2: exp vs row sums depth 0)."""

    config: SchedulerConfig = field(default_factory=SchedulerConfig)
    name: str = "cpu"

    def loop_fusion(self, snodes, dependent_reductions):
        return _cpu_loop_fusion(tuple(n.loop_view for n in snodes), dependent_reductions)


def splittable(sizes: Sequence[int], n: int) -> bool:
    """Can loops `sizes` be read as (n, rest): a prefix of dims, possibly splitting one, of product n?
    (A size-0 dim makes every longer prefix empty: only n == 0 matches it.) With symbolic sizes only
    whole-dim prefixes are proven (no dim split)."""
    if not (isinstance(n, int) and all(isinstance(s, int) for s in sizes)):
        acc = 1
        for s in sizes:
            if provably_equal(acc, n):
                return True
            acc = acc * s
        return provably_equal(acc, n)
    acc = 1
    for s in sizes:
        if acc == n or (acc and n and n % acc == 0 and s % (n // acc) == 0):
            return True
        acc *= s
    return acc == n


def gathers(snode: SchedulerNode) -> bool:
    """Does the node read through an indirect index (a gather)?"""
    if snode.is_extern:
        return False
    return any(isinstance(v, Load) and v.indirect for root in body_roots(snode.node.body) for v in walk(root))


@dataclass(frozen=True)
class GpuPolicy:
    """Compatibility by element counts (Def 7.2): one kernel per (n, r).

    `gather_min_outputs`: a pointwise node that gathers is not fused in as the input (N == n*r)
    of a reduction with fewer outputs n: its gathers would all run in the reduction's n
    programs (latency-bound), where on its own, or after a producer with N outputs, they run
    in parallel (log_softmax+nll's loss mean: otherwise one program does all the gathers).
    """

    config: SchedulerConfig = field(default_factory=SchedulerConfig)
    name: str = "gpu"
    gather_min_outputs: int = 64

    def loop_fusion(self, snodes, dependent_reductions):
        if dependent_reductions is not None and not self.config.fuse_dependent_reductions:
            return f"reduction order: {dependent_reductions}"
        reds = [n for n in snodes if n.is_reduction]
        points = [n for n in snodes if not n.is_reduction]
        if not reds:
            numels = {n.pointwise_numel() for n in points}
            if len(numels) > 1:
                return f"incompatible iteration spaces: element counts {_sorted(numels)} differ"
            return LoopFusion(FUSED_NODE, SAME_NUMEL, 0, points[0].sizes)
        nr = {(n.pointwise_numel(), n.reduction_numel()) for n in reds}
        if len(nr) > 1:
            return f"incompatible iteration spaces: reductions (n, r) {_sorted(nr)} differ"
        n, r = next(iter(nr))
        for p in points:
            numel = p.pointwise_numel()
            same = provably_equal(numel, n)
            if not same and not (provably_equal(numel, n * r) and splittable(p.sizes[0], n)):
                return f"incompatible iteration spaces: {numel} elements vs reduction (n={n}, r={r})"
            if not same and _below(n, self.gather_min_outputs) and gathers(p):
                return f"gathers of {p.buffer} would run in {n} program(s) of a reduction (n={n}, r={r})"
        reason = POINTWISE_WITH_REDUCTION if points else SAME_VARS_REDUCE
        return LoopFusion(FUSED_NODE, reason, 0, reds[0].sizes)


def _below(n, limit: int) -> bool:
    """n < limit; a symbolic n is compared at no value: it may be large (not below)."""
    return n < limit if isinstance(n, int) else False


def _sorted(xs) -> list:
    """Sorted for the log: by value when static, by text when some size is symbolic."""
    try:
        return sorted(xs)
    except TypeError:
        return sorted(xs, key=str)
