"""In-kernel random numbers for dropout: a counter-based hash (splitmix64) of
(per-call seed, per-node stream, element index), written with the op table's
integer ops, so the same expression runs in every backend and the interpreter.

The seed is a graph input the wrapper draws from torch's default generator on
every call (torch.manual_seed makes runs reproducible). The distribution equals
eager's (iid Bernoulli(1-p) keep mask, kept values scaled by 1/(1-p)); the bits
differ from eager's generator. Plain rand/randn/bernoulli stay ATen calls so they
reproduce eager's stream exactly.
"""

from __future__ import annotations

import torch
from stax.ir import dtypes as dt
from stax.ir.index import strided_index

from ..tensor import lazy
from .common import out_dtype
from .registry import POINTWISE, table

aten = torch.ops.aten

_M1 = 0xBF58476D1CE4E5B9 - (1 << 64)  # splitmix64 multipliers as signed int64 (wrapping)
_M2 = 0x94D049BB133111EB - (1 << 64)
_GOLDEN = 0x9E3779B97F4A7C15 - (1 << 64)


def _shr(b, z, k: int):
    """z >>> k (logical, as splitmix64 needs): floor division by 2**k, then the sign bits masked off."""
    return b.op("bitwise_and", b.op("floordiv", z, b.const(1 << k, dt.int64)), b.const((1 << (64 - k)) - 1, dt.int64))


def native_dropout(ctx, node, x, p, train):
    if not train or p == 0:
        b = ctx.builder
        return lazy(x.sizes, x.dtype, x.device, x.load), lazy(x.sizes, dt.bool_, x.device, lambda idx: b.const(True, dt.bool_))
    b = ctx.builder
    strides = []
    acc = 1
    for s in reversed(x.sizes):
        strides.append(acc)
        acc *= s
    strides = tuple(reversed(strides))
    stream = ctx.new_random_stream()  # one stream per dropout node

    def keep(idx):
        return b.op("ge", _uniform(ctx, strided_index(idx, strides), stream), b.const(p, dt.float32))

    scale = 1.0 / (1.0 - p) if p < 1 else 0.0
    comp = dt.compute_dtype(x.dtype)

    def out_fn(idx):
        v = b.op("mul", b.cast(x.load(idx), comp), b.const(scale, comp))
        return b.cast(b.op("where", keep(idx), v, b.const(0, comp)), x.dtype)

    return lazy(x.sizes, x.dtype, x.device, out_fn), lazy(x.sizes, dt.bool_, x.device, keep)


def _uniform(ctx, flat_index, stream: int):
    """A float32 in [0, 1) per element: 24 random bits of splitmix64(seed, stream, index)."""
    b = ctx.builder
    seed = ctx.seed_value()
    z = b.op("add", seed, b.op("mul", b.op("add", b.index_value(flat_index), b.const(stream << 40, dt.int64)),
                                b.const(_GOLDEN, dt.int64)))
    z = b.op("mul", b.op("bitwise_xor", z, _shr(b, z, 30)), b.const(_M1, dt.int64))
    z = b.op("mul", b.op("bitwise_xor", z, _shr(b, z, 27)), b.const(_M2, dt.int64))
    z = b.op("bitwise_xor", z, _shr(b, z, 31))
    bits = _shr(b, z, 40)  # the top 24 bits
    return b.op("mul", b.cast(bits, dt.float32), b.const(2.0 ** -24, dt.float32))


def native_dropout_backward(ctx, node, grad, mask, scale):
    want = out_dtype(node)
    b = ctx.builder
    comp = dt.compute_dtype(want)

    def fn(idx):
        g = b.op("mul", b.cast(grad.load(idx), comp), b.const(scale, comp))
        return b.cast(b.op("where", b.cast(mask.load(idx), dt.bool_), g, b.const(0, comp)), want)

    return lazy(grad.sizes, want, grad.device, fn)


LOWERINGS = table(POINTWISE, {
    aten.native_dropout: native_dropout,
    aten.native_dropout_backward: native_dropout_backward,
})
