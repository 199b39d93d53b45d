"""Kernel -> loop nests: which nodes share which loops (fused / outer-loop fused), checked.

A Nest is `outer` shared outer loops with sub-groups of nodes inside; a sub-group
shares all its remaining loops. Sharing is only used where it is provably legal:
a node may share loops with an earlier node of the kernel only if it does not read
its output (horizontal), or reads it at exactly the index it was written in the
same iteration; inside outer-loop-fused nests each intra-kernel read must hit the
block the producer wrote in the same outer iteration. Anything else falls back to
sequential nests, which are always correct.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import sympy
from stax.ir import ComputedBuffer, Graph, Load, provably_equal, walk
from stax.ir.sizevars import provably_nonnegative
from stax.sched.schedule import FUSED, OUTER_LOOP_FUSED, Kernel

from .loops import NodeLoops, linear_coeffs, loop_var, node_loops
from .vec_body import access_score

log = logging.getLogger("stax.cpu")


@dataclass
class Nest:
    outer: int  # number of shared outer loops
    groups: list  # list[list[NodeLoops]]; each group shares the loops after `outer`

    @property
    def sizes(self) -> list:
        return self.groups[0][0].sizes[: self.outer]

    def node_loops(self) -> list[NodeLoops]:
        return [nl for g in self.groups for nl in g]

    def total(self) -> int:
        return sum(nl.total() for nl in self.node_loops())


def _intra_loads(nl: NodeLoops, written: set) -> list[Load]:
    return [n for n in walk(nl.node.body.value) if isinstance(n, Load) and n.buffer in written]


def _can_join(group: list[NodeLoops], nl: NodeLoops) -> bool:
    head = group[0]
    if nl.sizes != head.sizes or nl.nred != head.nred:
        return False
    members = {g.node.name: g for g in group}
    for ld in _intra_loads(nl, set(members)):
        prod = members[ld.buffer]
        if ld.indirect or prod.is_reduction or nl.nred:
            return False
        if sympy.expand(nl.index(ld.index) - prod.store_index()) != 0:
            return False
    return True


def share_groups(nls: list[NodeLoops]) -> list[list[NodeLoops]]:
    groups: list[list[NodeLoops]] = []
    for nl in nls:
        if groups and _can_join(groups[-1], nl):
            groups[-1].append(nl)
        else:
            groups.append([nl])
    return groups


def dense_extent(coeffs: dict, sizes: dict) -> int | None:
    """Number of elements if the inner index c.x covers [0, N) densely (strides nest), else None."""
    if not all(isinstance(c, int) and isinstance(sizes[v], int) for v, c in coeffs.items()):
        return _dense_extent_symbolic(coeffs, sizes)
    dims = sorted((c, sizes[v]) for v, c in coeffs.items() if c != 0)
    n = 1
    for c, s in dims:
        if c != n:
            return None
        n *= s
    return n


def _dense_extent_symbolic(coeffs: dict, sizes: dict):
    """dense_extent with strides or sizes in size symbols: each next stride provably the extent so far."""
    left = [(c, sizes[v]) for v, c in coeffs.items() if c != 0]
    n = 1
    while left:
        k = next((k for k, (c, _) in enumerate(left) if provably_equal(c, n)), None)
        if k is None:
            return None
        n = n * left.pop(k)[1]
    return n


def _covered(cons: NodeLoops, ld: Load, prod: NodeLoops, depth: int) -> bool:
    """Does every read of `ld` in outer iteration o hit what `prod` wrote in iteration o?"""
    if ld.indirect:
        return False
    cvars = [loop_var(k) for k in range(len(cons.sizes))]
    pvars = [loop_var(k) for k in range(len(prod.sizes))]
    L, S = cons.index(ld.index), prod.store_index()
    cl, cs = linear_coeffs(L, cvars), linear_coeffs(S, pvars)
    if cl is None or cs is None:
        return False
    l0 = L.xreplace({v: sympy.Integer(0) for v in cvars})
    s0 = S.xreplace({v: sympy.Integer(0) for v in pvars})
    if not (l0.is_Integer and s0.is_Integer):
        return False
    if any(cl.get(v, 0) != cs.get(v, 0) for v in cvars[:depth]):
        return False
    pin = {v: c for v, c in cs.items() if v in pvars[depth:]}
    extent = dense_extent(pin, dict(zip(pvars, prod.sizes)))
    if extent is None:
        return False
    lo = hi = int(l0) - int(s0)
    for v, s in zip(cvars[depth:], cons.sizes[depth:]):
        c = cl.get(v, 0) * (s - 1)
        if not isinstance(c, int):  # symbolic: only a provable sign moves one end
            if provably_nonnegative(c):
                hi = hi + c
            elif provably_nonnegative(-c):
                lo = lo + c
            else:
                return False
            continue
        lo, hi = lo + min(0, c), hi + max(0, c)
    if not all(isinstance(x, int) for x in (lo, hi, extent)):
        return provably_nonnegative(lo) and provably_nonnegative(extent - 1 - hi)
    return 0 <= lo and hi <= extent - 1


def _outer_fusable(nls: list[NodeLoops], depth: int) -> bool:
    head = nls[0].sizes[:depth]
    if any(nl.npoint < depth or nl.sizes[:depth] != head for nl in nls):
        return False
    done: dict[str, NodeLoops] = {}
    for nl in nls:
        for ld in _intra_loads(nl, set(done)):
            if not _covered(nl, ld, done[ld.buffer], depth):
                return False
        done[nl.node.name] = nl
    return True


def _blocks_vertical(nls: list[NodeLoops], depth: int) -> bool:
    """Does sharing `depth` outer loops take a reduction's best vector loop away from it? Its
    innermost pointwise loop (shared at this depth) is the one its reads are contiguous along
    (a channels-last mean over H, W: C is innermost), while its reduction loop is strided."""
    for nl in nls:
        if nl.is_reduction and not nl.is_scan and nl.npoint == depth and nl.nred:
            if access_score([nl], depth - 1) > max(0, access_score([nl], len(nl.sizes) - 1)):
                return True
    return False


def _in_memory_order(nodes: list, depth: int, merge: bool) -> Nest | None:
    """An outer-loop fusion over every pointwise dim of its nodes, with those dims in their
    outputs' memory order (node_loops' write order) where that differs from the logical one and
    stays legal: a channels-last max pool with indices (max, argmax, the flat index: 4 nodes
    over [N, C, H, W]) ran C outside H and W, every store strided by C. Where sharing C too would
    take the reductions' vector loop (C, contiguous) away, one loop fewer is shared (N, H, W)."""
    if any(len(n.body.ranges) != depth for n in nodes):
        return None  # a node has pointwise dims the fusion does not share: their order is its own
    nls = [node_loops(n, merge=merge) for n in nodes]
    npoint = {nl.npoint for nl in nls}
    if len(npoint) != 1 or nls[0].store_index() == node_loops(nodes[0], protect=depth, merge=merge).store_index():
        return None  # nodes disagree, or nothing moved
    d = npoint.pop()
    if d > 1 and _blocks_vertical(nls, d) and _outer_fusable(nls, d - 1):
        return Nest(d - 1, share_groups(nls))  # C stays inside: the window reductions vectorize along it
    return Nest(d, share_groups(nls)) if d and _outer_fusable(nls, d) else None


def plan_nests(kernel: Kernel, graph: Graph, merge: bool = True) -> list[Nest]:
    nodes = [graph.node(n) for n in kernel.nodes]
    assert all(isinstance(n, ComputedBuffer) for n in nodes), kernel
    if kernel.kind == OUTER_LOOP_FUSED and kernel.outer_depth > 0:
        depth = kernel.outer_depth
        nls = [node_loops(n, protect=depth, merge=merge) for n in nodes]
        if _blocks_vertical(nls, depth):
            nests = None
            if depth == 1:  # nothing left to share (NHWC batch statistics): one nest per group
                nests = [Nest(0, [g]) for g in share_groups([node_loops(n, merge=merge) for n in nodes])]
            else:
                shallower = [node_loops(n, protect=depth - 1, merge=merge) for n in nodes]
                if _outer_fusable(shallower, depth - 1):
                    nests = [Nest(depth - 1, share_groups(shallower))]
            if nests is not None:
                log.info("%s: outer loops shared to depth %d, not %d: a reduction vectorizes along loop %d",
                         kernel.name, depth - 1, depth, depth - 1)
                return nests
        ordered = _in_memory_order(nodes, depth, merge)
        if ordered is not None:
            return [ordered]
        if _outer_fusable(nls, depth):
            return [Nest(depth, share_groups(nls))]
        log.warning(
            "%s: outer-loop fusion at depth %d not provably legal here; emitting sequential loop nests",
            kernel.name, depth,
        )
    nls = [node_loops(n, merge=merge) for n in nodes]
    if kernel.kind in (FUSED, OUTER_LOOP_FUSED):
        return [Nest(0, [g]) for g in share_groups(nls)]
    return [Nest(0, [[nl]]) for nl in nls]
