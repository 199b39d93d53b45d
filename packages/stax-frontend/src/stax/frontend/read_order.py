"""The layout of a materialized pointwise value: the memory order its inputs are read in.

A value computed from channels-last activations (a batch norm + ReLU after a channels-last
convolution) written in NCHW order turns every kernel that produces or reads it into a
transpose: strided loads and gathers on both sides. Eager's TensorIterator keeps its
inputs' layout for such outputs, and so does this rule, for buffers no user sees.
"""

from __future__ import annotations

import torch
from stax.ir import loads
from stax.ir.simplify import memory_order

from .lowering import lookup
from .lowering.registry import VIEW

aten = torch.ops.aten


def strides_following_reads(value, ivars, sizes) -> tuple | None:
    """Strides that store `value` (over `ivars` with `sizes`) in the memory order of its
    full-size reads, when they all agree on one that is not row-major; None otherwise
    (keep contiguous). Broadcast, masked and indirect reads do not vote. Symbolic sizes: None
    (row-major; ordering strides by expressions is not done yet)."""
    if not all(isinstance(s, int) or getattr(s, "is_Integer", False) for s in sizes):
        return None
    dims = [v for v, s in zip(ivars, sizes) if int(s) > 1]
    if len(dims) < 2:
        return None
    orders = set()
    for ld in loads(value):
        if ld.indirect or ld.mask is not None or not all(v in ld.index.free_symbols for v in dims):
            continue
        order = memory_order(ld.index, dims)
        if order is None:
            return None
        orders.add(tuple(order))
    if len(orders) != 1:
        return None
    order = orders.pop()
    if list(order) == sorted(order):
        return None
    strides, step = {}, 1
    for k in reversed(order):
        strides[dims[k]] = step
        step *= int(sizes[ivars.index(dims[k])])
    return tuple(strides.get(v, step) for v in ivars)  # a size-1 dim's stride is never used


def may_follow_reads(ctx, node: torch.fx.Node) -> bool:
    """Whether `node`'s buffer may take its reads' layout: no user sees it (not a graph output
    returned to the caller) and no view reshapes it (a flatten of a channels-last buffer
    would need a copy)."""
    for u in node.users:
        if u.op == "output":
            if node not in ctx.saved_nodes:
                return False
            continue
        if u.op != "call_function":
            return False
        low = lookup(u.target)
        if low is not None and low.kind == VIEW and u.target is not aten.alias.default:
            return False
        if u.target is aten.alias.default and not may_follow_reads(ctx, u):
            return False
    return True
