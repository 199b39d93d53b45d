"""Helpers shared by the lowering tables: dtype promotion (torch's own rules),
broadcasting, and turning operands (tensors or Python scalars) into values."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import sympy
import torch
from stax.ir import dtypes as dt
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as KIND
from torch._prims_common import elementwise_dtypes

from ..dtypes import to_stax, to_torch
from ..sym_ops import FloatSize
from ..tensor import Lazy, TensorValue, lazy
from ..views import Unsupported, broadcast_shapes, expand

__all__ = ["KIND", "promote", "broadcast_all", "operand", "pointwise", "out_dtype", "dims_arg"]


@functools.cache
def _dummy(dtype: torch.dtype, scalar: bool) -> torch.Tensor:
    return torch.empty(() if scalar else (1,), dtype=dtype)


def _promotion_arg(a):
    if isinstance(a, TensorValue):
        return _dummy(to_torch(a.dtype), a.ndim == 0)
    if isinstance(a, (bool, int, float)):
        return a
    if is_size_expr(a):  # a symbolic int (a size): an int operand
        return 1
    if isinstance(a, FloatSize):  # torch.sym_float of a size: a float operand
        return 1.0
    raise Unsupported(f"cannot promote operand {a!r}")


def is_size_expr(a) -> bool:
    """A symbolic size used as a scalar operand (dynamic shapes)."""
    return isinstance(a, sympy.Basic) and a.is_integer and not a.is_number


def promote(args: Sequence, kind=KIND.DEFAULT) -> tuple[dt.DType, dt.DType]:
    """(computation dtype, result dtype) by torch's elementwise rules (0-dim tensors and
    Python scalars participate as torch says); half types compute in float32."""
    present = [a for a in args if a is not None]
    comp, res = elementwise_dtypes(*[_promotion_arg(a) for a in present], type_promotion_kind=kind)
    return to_stax(comp), to_stax(res)


def out_dtype(node) -> dt.DType:
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        raise Unsupported(f"{node.target}: no tensor meta value")
    return to_stax(val.dtype)


def broadcast_all(args: Sequence) -> tuple[tuple, list]:
    """Broadcast the tensor operands to one shape; scalars pass through."""
    shapes = [a.sizes for a in args if isinstance(a, TensorValue)]
    shape = broadcast_shapes(*shapes)
    return shape, [expand(a, shape) if isinstance(a, TensorValue) else a for a in args]


def operand(ctx, a, idx, dtype: dt.DType):
    """The value of operand `a` at `idx`, converted to `dtype`."""
    b = ctx.builder
    if isinstance(a, TensorValue):
        return b.cast(a.load(idx), dtype)
    if isinstance(a, (bool, int, float)) or is_size_expr(a):
        return b.const(a, dtype)
    if isinstance(a, FloatSize):  # its operation on its operands, in the operation's dtype
        return b.op(a.op, operand(ctx, a.a, idx, dtype), operand(ctx, a.b, idx, dtype))
    raise Unsupported(f"operand {a!r}")


def pointwise(ctx, node, args: Sequence, compute: Callable, kind=KIND.DEFAULT, check=True) -> Lazy:
    """The generic pointwise lowering: promote, broadcast, compute in the computation
    dtype, cast to the result dtype — the same rounding points as eager.

    `compute(b, *values)` builds the result from operand values (all in the
    computation dtype) with builder `b`. The result dtype is checked against the
    FX meta value; a mismatch means our promotion is wrong: fall back instead.
    """
    comp, res = promote(args, kind)
    shape, bargs = broadcast_all(args)
    device = next((a.device for a in args if isinstance(a, TensorValue)), ctx.device)
    if check:
        want = out_dtype(node)
        if want != res:
            raise Unsupported(f"{node.target}: promotion gives {res}, eager gives {want}")
    b = ctx.builder

    def fn(idx):
        vals = [operand(ctx, a, idx, comp) for a in bargs]
        return b.cast(compute(b, *vals), res)

    return lazy(shape, res, device, fn)


def dims_arg(dims, ndim: int) -> list[int]:
    """Normalize a dim / list of dims; None or [] means all dims (torch's reduction rule)."""
    if dims is None:
        return list(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    if len(dims) == 0:
        return list(range(ndim))
    n = max(ndim, 1)
    return sorted({d % n for d in dims}) if ndim else []
