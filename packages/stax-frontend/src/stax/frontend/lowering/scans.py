"""Scans: cumsum / cumprod / cummax / cummin (values and indices) / logcumsumexp as
`Scan` buffers (stax.ir: an inclusive prefix combine along one loop dimension, linear
time), the input inlined into the scan body.

Like eager, cumsum / cumprod of integers and bools accumulate in int64 (or the `dtype`
argument), half types in float32 with each prefix rounded to the result type, and on the
CPU float32 in float64 (ATen's CPU accumulate type: a float32 running sum or log-sum-exp
over a long row drifts by about n ulps, several times eager's error). The rounding is the
scan's own store (`Scan.out_dtype`): one kernel reads the input and writes the result,
with no buffer of the accumulator type in between.
"""

from __future__ import annotations

import torch
from stax.ir import dtypes as dt
from stax.ir.index import pointwise_vars

from ..tensor import TensorValue, lazy
from ..views import Unsupported
from .common import out_dtype
from .registry import REDUCTION, table

aten = torch.ops.aten


def _scan_acc(ctx, want: dt.DType) -> dt.DType:
    """The accumulator of a floating scan: ATen's acc_type (float64 for float32 on the CPU)."""
    acc = dt.compute_dtype(want)
    return dt.float64 if acc == dt.float32 and ctx.target_info.scan_acc_float64 else acc


def scan(ctx, x: TensorValue, dim: int, scan_type: str, acc: dt.DType, out: dt.DType | None = None):
    """Scan buffer of x (cast to `acc`) along `dim`, each prefix stored as `out` (default `acc`)."""
    ivars = pointwise_vars(x.ndim)
    value = ctx.builder.cast(x.load(ivars), acc)
    return ctx.scan_buffer(x.sizes, dim % x.ndim, scan_type, value, out)


def _scalar(ctx, x, want):
    """A 0-dim scan is its input (cast)."""
    return lazy((), want, x.device, lambda idx: ctx.builder.cast(x.load(idx), want))


def _cumulative(scan_type):
    """cumsum / cumprod (dtype=... included)."""

    def low(ctx, node, x, dim, dtype=None):
        want = out_dtype(node)
        if x.ndim == 0:
            return _scalar(ctx, x, want)
        acc = _scan_acc(ctx, want) if want.is_floating else want
        return scan(ctx, x, dim, scan_type, acc, want)

    return low


def _running_extreme(scan_type):
    """cummax / cummin -> (values, indices): two scans over the same value."""

    def low(ctx, node, x, dim):
        if x.dtype.is_bool:
            raise Unsupported(f"{scan_type} of bool")
        if x.ndim == 0:
            b = ctx.builder
            return _scalar(ctx, x, x.dtype), lazy((), dt.int64, x.device, lambda idx: b.const(0, dt.int64))
        return scan(ctx, x, dim, scan_type, x.dtype), scan(ctx, x, dim, scan_type + "_index", x.dtype)

    return low


def logcumsumexp(ctx, node, x, dim):
    want = out_dtype(node)
    if not want.is_floating:
        raise Unsupported("logcumsumexp of integers")
    if x.ndim == 0:
        return _scalar(ctx, x, want)
    return scan(ctx, x, dim, "logcumsumexp", _scan_acc(ctx, want), want)


LOWERINGS = table(REDUCTION, {
    aten.cumsum: _cumulative("cumsum"),
    aten.cumprod: _cumulative("cumprod"),
    aten.cummax: _running_extreme("cummax"),
    aten.cummin: _running_extreme("cummin"),
    aten.logcumsumexp: logcumsumexp,
})
