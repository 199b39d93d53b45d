"""Size arithmetic in a symbolic-shape ATen graph (sym_size.int, operator.mul, ...): an expression.

Each such node's result is its traced SymInt, so it lowers to that SymInt's expression in stax.ir
size symbols (symbolic.py): the ShapeEnv already did the arithmetic, and no second implementation
of it lives here. A result that is not an int (SymBool, SymFloat) is unsupported: the graph runs eagerly.
"""

from __future__ import annotations

import operator

import torch

from .errors import GraphUnsupported

aten = torch.ops.aten

SYM_OPS = frozenset({
    aten.sym_size.int, aten.sym_stride.int, aten.sym_numel.default, aten.sym_storage_offset.default,
    operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod, operator.neg, operator.pow,
    torch.sym_max, torch.sym_min, torch.sym_sum,
})


def sym_op(ctx, node, args, kwargs):
    """The node's value: its meta value's expression (an int when the trace made it constant)."""
    val = node.meta.get("val")
    if not isinstance(val, (int, torch.SymInt)) or isinstance(val, bool):
        raise GraphUnsupported(f"{node.target} ({node.name}) gives {type(val).__name__}, not an int size",
                               cause="symbolic shapes")
    return ctx.symbols.expr(val)
