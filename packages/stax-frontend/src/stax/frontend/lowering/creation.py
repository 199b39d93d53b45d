"""Tensor factories: constants and iotas as lazy values (no memory until needed)."""

from __future__ import annotations

import torch
from stax.ir import dtypes as dt

from ..dtypes import to_stax
from ..tensor import lazy
from ..views import Unsupported
from .common import out_dtype
from .registry import POINTWISE, table

aten = torch.ops.aten
prims = torch.ops.prims


def _filled(ctx, node, sizes, value, device=None):
    ctx.check_device(device)
    want = out_dtype(node)
    b = ctx.builder
    return lazy(tuple(sizes), want, ctx.device, lambda idx: b.const(value, want))


def full(ctx, node, size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _filled(ctx, node, size, fill_value, device)


def scalar_tensor(ctx, node, value, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _filled(ctx, node, (), value, device)


def zeros(ctx, node, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _filled(ctx, node, size, 0, device)


def ones(ctx, node, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _filled(ctx, node, size, 1, device)


def empty(ctx, node, size, *args, device=None, **kwargs):
    """Uninitialized memory: any content is correct; zeros are deterministic."""
    return _filled(ctx, node, size, 0, device)


def empty_strided(ctx, node, size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _filled(ctx, node, size, 0, device)


def full_like(ctx, node, x, fill_value, *, device=None, **kwargs):
    return _filled(ctx, node, x.sizes, fill_value, device)


def zeros_like(ctx, node, x, *, device=None, **kwargs):
    return _filled(ctx, node, x.sizes, 0, device)


def ones_like(ctx, node, x, *, device=None, **kwargs):
    return _filled(ctx, node, x.sizes, 1, device)


def empty_like(ctx, node, x, *, device=None, **kwargs):
    return _filled(ctx, node, x.sizes, 0, device)


def new_full(ctx, node, x, size, fill_value, *, device=None, **kwargs):
    return _filled(ctx, node, size, fill_value, device)


def new_zeros(ctx, node, x, size, *, device=None, **kwargs):
    return _filled(ctx, node, size, 0, device)


def new_ones(ctx, node, x, size, *, device=None, **kwargs):
    return _filled(ctx, node, size, 1, device)


def new_empty(ctx, node, x, size, *, device=None, **kwargs):
    return _filled(ctx, node, size, 0, device)


def fill(ctx, node, x, value):
    if not isinstance(value, (bool, int, float)):
        raise Unsupported("fill with a tensor value")
    return _filled(ctx, node, x.sizes, value)


# Unsigned dtypes stax lacks that torch's `eye` decomposition builds an arange in (uint16 for
# 256 columns; eager's CPU arange has no kernel for them either): the values of a non-negative
# arange below 2**31 are carried exactly as int64, and its users only compare them
_UNSIGNED = (torch.uint16, torch.uint32, torch.uint64)


def _arange_dtype(node, start, end, step) -> dt.DType:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor) and val.dtype in _UNSIGNED:
        if min(start, end) < 0 or max(start, end) >= 2**31 or step <= 0:
            raise Unsupported(f"arange of {val.dtype} over [{start}, {end})")
        return dt.int64
    return out_dtype(node)


def arange(ctx, node, start, end=None, step=1, *, dtype=None, layout=None, device=None, pin_memory=None):
    ctx.check_device(device)
    if end is None:
        start, end = 0, start
    want = _arange_dtype(node, start, end, step)
    n = ctx.symbols.expr(node.meta["val"].shape[0])
    b = ctx.builder
    comp = dt.float64 if want.is_floating else dt.int64  # eager's accumulate type on CPU

    def fn(idx):
        i = b.index_value(idx[0], dt.int64)
        v = b.op("add", b.const(start, comp), b.op("mul", b.cast(i, comp), b.const(step, comp)))
        return b.cast(v, want)

    return lazy((n,), want, ctx.device, fn)


def iota(ctx, node, length, *, start, step, dtype, device, requires_grad):
    ctx.check_device(device)
    want = to_stax(dtype)
    b = ctx.builder

    def fn(idx):
        return b.cast(b.op("add", b.const(start, dt.int64),
                           b.op("mul", b.index_value(idx[0]), b.const(step, dt.int64))), want)

    return lazy((length,), want, ctx.device, fn)


LOWERINGS = table(POINTWISE, {
    aten.full: full,
    aten.scalar_tensor: scalar_tensor,
    aten.zeros: zeros,
    aten._efficientzerotensor: zeros,  # a backward's "no gradient": real zeros (a ZeroTensor has no storage)
    aten.ones: ones,
    aten.empty: empty,
    aten.empty_strided: empty_strided,
    aten.full_like: full_like,
    aten.zeros_like: zeros_like,
    aten.ones_like: ones_like,
    aten.empty_like: empty_like,
    aten.new_full: new_full,
    aten.new_zeros: new_zeros,
    aten.new_ones: new_ones,
    aten.new_empty: new_empty,
    aten.fill: fill,
    aten.arange: arange,
    prims.iota: iota,
})
