"""View ATen ops: index maps on the input (views.py), never copies."""

from __future__ import annotations

import sympy
import torch
from stax.ir.index import ModularIndexing

from .. import views as V
from ..strides import is_dense
from ..tensor import BufferView
from ..views import Unsupported
from .registry import VIEW, table

aten = torch.ops.aten


def view(ctx, node, x, sizes):
    return V.reshape(x, sizes)


def permute(ctx, node, x, dims):
    return V.permute(x, dims)


def transpose(ctx, node, x, d0, d1):
    if x.ndim < 2:
        return x
    dims = list(range(x.ndim))
    dims[d0 % x.ndim], dims[d1 % x.ndim] = dims[d1 % x.ndim], dims[d0 % x.ndim]
    return V.permute(x, dims)


def t(ctx, node, x):
    return transpose(ctx, node, x, 0, 1)


def expand(ctx, node, x, sizes, implicit=False):
    return V.expand(x, sizes)


def unsqueeze(ctx, node, x, dim):
    return V.unsqueeze(x, dim)


def squeeze(ctx, node, x, dims=None):
    if isinstance(dims, int):
        dims = [dims]
    return V.squeeze(x, dims)


def slice_(ctx, node, x, dim=0, start=None, end=None, step=1):
    return V.slice_(x, dim, start, end, step, ranges=ctx.symbols.value_ranges())


def select(ctx, node, x, dim, index):
    return V.select(x, dim, index, ranges=ctx.symbols.value_ranges())


def alias(ctx, node, x, *args, **kwargs):
    return x


def split(ctx, node, x, split_size, dim=0):
    dim %= x.ndim
    n = x.sizes[dim]
    vals = node.meta.get("val")
    if not isinstance(n, int) and isinstance(vals, (list, tuple)):  # symbolic: the pieces as traced
        sizes = [ctx.symbols.expr(v.shape[dim]) for v in vals]
    elif isinstance(split_size, int):
        step = max(split_size, 1)
        sizes = [min(step, n - s) for s in range(0, n, step)] or [0]
    else:
        sizes = list(split_size)
    out, start = [], 0
    ranges = ctx.symbols.value_ranges()
    for s in sizes:
        out.append(V.slice_(x, dim, start, start + s, ranges=ranges))
        start += s
    return tuple(out)


def unbind(ctx, node, x, dim=0):
    dim %= x.ndim
    return tuple(V.select(x, dim, k) for k in range(x.sizes[dim]))


def diagonal(ctx, node, x, offset=0, dim1=0, dim2=1):
    return V.diagonal(x, offset, dim1, dim2)


def as_strided(ctx, node, x, size, stride, storage_offset=None):
    """A raw view of the source's storage. Stax values have no storage of their own, so the
    storage is eager's: the source's meta layout (dense, offset 0) maps each storage
    position back to a logical element; the view becomes an index map through it."""
    src = node.args[0].meta.get("val")
    if src is None or ctx.symbols.expr(src.storage_offset()) != 0:
        raise Unsupported("as_strided: source storage layout unknown")
    if isinstance(x, BufferView) and x.buffer in {i.name for i in ctx.inputs}:
        raise Unsupported("as_strided of a graph input (its storage offset is only known at run time)")
    sizes, strides = ctx.symbols.meta_sizes(src), ctx.symbols.exprs(src.stride())
    hint = ctx.symbols.hint  # (symbolic strides: the order of the dims at the size hints; density is exact)
    if not is_dense(sizes, strides, key=hint):
        raise Unsupported("as_strided of an overlapping source")
    order = sorted(range(len(sizes)), key=lambda d: -hint(strides[d]))
    off = storage_offset or 0

    def m(idx):
        pos = off + sum((i * st for i, st in zip(idx, stride)), sympy.Integer(0))
        out = [sympy.Integer(0)] * len(sizes)
        for d in order:
            if sizes[d] != 1:
                out[d] = ModularIndexing(pos, strides[d], sizes[d])
        return tuple(out)

    return V.apply_view(x, size, m)


def unfold(ctx, node, x, dim, size, step):
    return V.unfold(x, dim, size, step, ranges=ctx.symbols.value_ranges())


LOWERINGS = table(VIEW, {
    aten.unfold: unfold,
    aten.view: view,
    aten._unsafe_view: view,
    aten.reshape: view,
    aten.permute: permute,
    aten.transpose: transpose,
    aten.t: t,
    aten.expand: expand,
    aten.unsqueeze: unsqueeze,
    aten.squeeze: squeeze,
    aten.slice: slice_,
    aten.select: select,
    aten.alias: alias,
    aten.detach: alias,
    aten.split: split,
    aten.split_with_sizes: split,
    aten.unbind: unbind,
    aten.diagonal: diagonal,
    aten.as_strided: as_strided,
})

