"""Size arithmetic in a symbolic-shape ATen graph (sym_size.int, operator.mul, ...): an expression.

Each such node's result is its traced SymInt, so it lowers to that SymInt's expression in stax.ir
size symbols (symbolic.py): the ShapeEnv already did the arithmetic, and no second implementation
of it lives here. A result that is not an int (SymBool, SymFloat) is unsupported: the graph runs eagerly.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import sympy
import torch

from .errors import GraphUnsupported

aten = torch.ops.aten

SYM_OPS = frozenset({
    aten.sym_size.int, aten.sym_stride.int, aten.sym_numel.default, aten.sym_storage_offset.default,
    operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod, operator.neg, operator.pow,
    torch.sym_max, torch.sym_min, torch.sym_sum, torch.sym_float, operator.truediv,
    torch.sym_int, math.trunc, math.floor, math.ceil,  # (an int of a float of sizes: symbolic.Symbols._to_int)
})


@dataclass(frozen=True)
class FloatSize:
    """A float scalar computed from sizes (`torch.sym_float(n)`, `n / m`, `2.0 / n` of SymInts): `op`
    of `a` and `b` (ints, floats, integer size expressions or FloatSizes), evaluated as an operand in
    the operation's dtype; promotion treats it as a Python float, as eager does."""

    op: str  # 'truediv' | 'mul' | 'add' | 'sub'
    a: object
    b: object


_FLOAT_OPS = {operator.truediv: "truediv", operator.mul: "mul", operator.add: "add", operator.sub: "sub"}


def _scalar(x) -> bool:
    return isinstance(x, (int, float, FloatSize)) or (isinstance(x, sympy.Basic) and bool(x.is_integer))


def sym_op(ctx, node, args, kwargs):
    """The node's value: its meta value's expression (an int when the trace made it constant); a float
    made of sizes is a FloatSize."""
    if node.target is torch.sym_float:
        (x,) = args
        return float(x) if isinstance(x, int) else FloatSize("truediv", x, 1)
    if node.target in _FLOAT_OPS and (node.target is operator.truediv
                                      or any(isinstance(a, (float, FloatSize)) for a in args)):
        a, b = args
        if not (_scalar(a) and _scalar(b)):
            raise GraphUnsupported(f"{node.target} of {args!r}", cause="symbolic shapes")
        if all(isinstance(x, (int, float)) for x in (a, b)):
            return node.target(a, b)
        return FloatSize(_FLOAT_OPS[node.target], a, b)
    val = node.meta.get("val")
    if not isinstance(val, (int, torch.SymInt)) or isinstance(val, bool):
        raise GraphUnsupported(f"{node.target} ({node.name}) gives {type(val).__name__}, not an int size",
                               cause="symbolic shapes")
    return ctx.symbols.expr(val)
