"""In-kernel random numbers for dropout: stax.ir's counter-based `rand` op (Philox4x32-10,
bit-identical to Triton's tl.rand) keyed by the per-call seed, with the counter
(per-node stream, element index), so every backend and the interpreter draw the same
bits whatever the fusion or tiling.

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

_STREAM_SHIFT = 40  # counter = stream << 40 | element index: streams never overlap below 2**40 elements


def native_dropout(ctx, node, x, p, train):
    if not train or p == 0:
        b = ctx.builder
        return (lazy(x.sizes, x.dtype, x.device, x.load),
                lazy(x.sizes, dt.bool_, x.device, lambda idx: b.const(True, dt.bool_)))
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
    """A float32 in [0, 1) per element: Philox(seed; counter = stream, element index)."""
    b = ctx.builder
    counter = b.index_value(flat_index + (stream << _STREAM_SHIFT))
    return b.op("rand", ctx.seed_value(), counter)


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
