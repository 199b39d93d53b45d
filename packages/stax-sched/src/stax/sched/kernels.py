"""The scheduled (fused) nodes as Kernels for codegen, in execution order.

A single node is a 'pointwise' or 'reduction' kernel over its own sizes; an
extern node an 'extern' call; a Scatter node a 'scatter' kernel over ((output sizes),
(scatter sizes)); a FusedSchedulerNode a 'fused' kernel over the
policy's iteration group (CPU: the members' common loops; GPU: the reduction's
(n, r) with pointwise members split to match); an OuterLoopFusedSchedulerNode an
'outer_loop_fused' kernel whose members share their first `outer_depth` loops
(group = (shared outer sizes, ())). Members are listed in graph order, which is
a valid execution order inside the kernel.
"""

from __future__ import annotations

from .nodes import EXTERN_NODE, FUSED_NODE, SCHEDULER_NODE
from .schedule import EXTERN, FUSED, OUTER_LOOP_FUSED, POINTWISE, REDUCTION, SCATTER, Kernel


def to_kernel(step: int, g) -> Kernel:
    name = f"kernel{step}"
    nodes = tuple(n.buffer for n in g.snodes)
    node_groups = tuple(n.sizes for n in g.snodes)
    if g.node_type == EXTERN_NODE:
        return Kernel(name, EXTERN, nodes, ((), ()), EXTERN_NODE, 0, node_groups)
    if g.node_type == SCHEDULER_NODE:
        kind = SCATTER if g.is_scatter else REDUCTION if g.is_reduction else POINTWISE
        return Kernel(name, kind, nodes, g.sizes, SCHEDULER_NODE, 0, node_groups)
    lf = g.loop_fusion
    kind = FUSED if g.node_type == FUSED_NODE else OUTER_LOOP_FUSED
    return Kernel(name, kind, nodes, lf.group, g.node_type, lf.outer_depth, node_groups)


def to_kernels(order) -> tuple[Kernel, ...]:
    return tuple(to_kernel(k, g) for k, g in enumerate(order))
