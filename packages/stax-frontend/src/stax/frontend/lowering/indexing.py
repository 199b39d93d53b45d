"""Indexing: gathers are indirect loads, scatters of one element per row are selects.

An indirect load reads `x` at an index containing a fresh symbol t bound to a
data value (`Load.indirect = ((t, value, bound),)`); the runtime checks
0 <= value < bound and raises IndexError like eager. slice_scatter / select_scatter
and one-hot scatters are pointwise selects. Accumulating scatters (index_put with
accumulate, scatter_add) need a scatter store the IR does not have yet: they are
lowered densely (a reduction over the scattered rows) while that stays small, and
fall back to ATen beyond `config.dense_limit` multiply-adds.
"""

from __future__ import annotations

import sympy
import torch
from stax.ir import IndexValue, Load, Op, walk
from stax.ir import dtypes as dt
from stax.ir.index import FloorDiv, ModularIndexing, pointwise_vars, reduction_vars

from ..tensor import TensorValue, lazy
from ..views import Unsupported, broadcast_shapes, expand
from .common import out_dtype
from .registry import POINTWISE, REDUCTION, table

aten = torch.ops.aten

class _NeedsBuffer(Exception):
    pass


def _bind(ctx, value, bindings: dict):
    """Attach (symbol, index value, bound) to every Load whose index uses a bound symbol."""
    b = ctx.builder
    syms = set(bindings)
    memo = {}
    for n in walk(value):
        if isinstance(n, Load):
            ind = tuple((s, memo[id(v)], bd) for s, v, bd in n.indirect)
            used = n.index.free_symbols & syms
            ind += tuple((s, bindings[s][0], bindings[s][1]) for s in sorted(used, key=str))
            new = b.load(n.buffer, n.index, n.dtype, ind)
        elif isinstance(n, IndexValue):
            if n.index.free_symbols & syms:
                raise _NeedsBuffer()
            new = n
        elif isinstance(n, Op):
            new = b.intern(Op(n.name, tuple(memo[id(a)] for a in n.args), n.dtype))
        else:
            new = n
        memo[id(n)] = new
    return memo[id(value)]


def indirect_load(ctx, x: TensorValue, idx, bindings: dict):
    """x at `idx`, where some entries are symbols bound to data: {symbol: (value, bound)}."""
    try:
        return _bind(ctx, x.load(idx), bindings)
    except _NeedsBuffer:
        return _bind(ctx, ctx.realize(x, "indirect_source").load(idx), bindings)


def _index_value(ctx, t: TensorValue, idx, size: int, wrap: bool):
    b = ctx.builder
    v = b.cast(t.load(idx), dt.int64)
    if wrap:  # negative indices count from the end (advanced indexing)
        v = b.op("where", b.op("lt", v, b.const(0, dt.int64)), b.op("add", v, b.const(size, dt.int64)), v)
    return v


def gather(ctx, node, x, dim, index, sparse_grad=False):
    dim %= max(x.ndim, 1)

    def fn(idx):
        t = ctx.new_indirect_symbol()
        src = list(idx)
        src[dim] = t
        return indirect_load(ctx, x, tuple(src), {t: (_index_value(ctx, index, idx, x.sizes[dim], False), x.sizes[dim])})

    return lazy(index.sizes, x.dtype, x.device, fn)


def index_select(ctx, node, x, dim, index):
    dim %= max(x.ndim, 1)
    sizes = list(x.sizes)
    if x.ndim:
        sizes[dim] = index.numel()

    def fn(idx):
        t = ctx.new_indirect_symbol()
        src = list(idx)
        iv = (idx[dim],) if index.ndim == 1 else ()
        src[dim] = t
        return indirect_load(ctx, x, tuple(src), {t: (_index_value(ctx, index, iv, x.sizes[dim], False), x.sizes[dim])})

    return lazy(sizes, x.dtype, x.device, fn)


def embedding(ctx, node, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    n = indices.ndim
    sizes = tuple(indices.sizes) + (weight.sizes[1],)

    def fn(idx):
        t = ctx.new_indirect_symbol()
        v = _index_value(ctx, indices, idx[:n], weight.sizes[0], False)
        return indirect_load(ctx, weight, (t, idx[n]), {t: (v, weight.sizes[0])})

    return lazy(sizes, weight.dtype, weight.device, fn)


def index_tensor(ctx, node, x, indices):
    """x[indices] with integer index tensors (advanced indexing, torch's dim placement)."""
    indices, dims, bshape, before, after = _advanced_layout(x, indices)
    idx_t = {d: expand(indices[d], bshape) for d in dims}
    sizes = [x.sizes[d] for d in before] + list(bshape) + [x.sizes[d] for d in after]
    nb, nB = len(before), len(bshape)
    want = out_dtype(node)
    if tuple(node.meta["val"].shape) != tuple(sizes):
        raise Unsupported("index: unexpected result shape")

    def fn(idx):
        bidx = idx[nb: nb + nB]
        src = [None] * x.ndim
        for k, d in enumerate(before):
            src[d] = idx[k]
        for k, d in enumerate(after):
            src[d] = idx[nb + nB + k]
        bindings = {}
        for d in dims:
            t = ctx.new_indirect_symbol()
            src[d] = t
            bindings[t] = (_index_value(ctx, idx_t[d], bidx, x.sizes[d], True), x.sizes[d])
        return indirect_load(ctx, x, tuple(src), bindings)

    return lazy(sizes, want, x.device, fn)


def _in_slice(b, i, start, end, step):
    iv = b.index_value(i)
    c = b.op("logical_and", b.op("ge", iv, b.const(start, dt.int64)), b.op("lt", iv, b.const(end, dt.int64)))
    if step != 1:
        rem = b.index_value(ModularIndexing(i - start, 1, step))
        c = b.op("logical_and", c, b.op("eq", rem, b.const(0, dt.int64)))
    return c


def slice_scatter(ctx, node, base, src, dim=0, start=None, end=None, step=1):
    dim %= base.ndim
    n = base.sizes[dim]
    start = 0 if start is None else (start + n if start < 0 else start)
    end = n if end is None else (end + n if end < 0 else end)
    start, end = max(0, min(n, start)), max(0, min(n, end))
    length = src.sizes[dim]
    b = ctx.builder
    if length == 0:
        return lazy(base.sizes, base.dtype, base.device, base.load)

    def fn(idx):
        i = idx[dim]
        j = sympy.Max(0, sympy.Min(length - 1, FloorDiv(i - start, step)))
        sidx = tuple(j if k == dim else e for k, e in enumerate(idx))
        cond = _in_slice(b, i, start, end, step)
        return b.op("where", cond, b.cast(src.load(sidx), base.dtype), base.load(idx))

    return lazy(base.sizes, base.dtype, base.device, fn)


def select_scatter(ctx, node, base, src, dim, index):
    dim %= base.ndim
    index %= base.sizes[dim]
    b = ctx.builder

    def fn(idx):
        sidx = tuple(idx[:dim]) + tuple(idx[dim + 1:])
        cond = b.op("eq", b.index_value(idx[dim]), b.const(index, dt.int64))
        return b.op("where", cond, b.cast(src.load(sidx), base.dtype), base.load(idx))

    return lazy(base.sizes, base.dtype, base.device, fn)


def _one_hot_scatter(ctx, node, x, dim, index, src_value):
    """scatter with one index per row (index.size(dim) == 1, other dims equal): a select."""
    dim %= x.ndim
    if index.sizes[dim] != 1 or any(index.sizes[d] != x.sizes[d] for d in range(x.ndim) if d != dim):
        raise Unsupported("scatter with several indices per row")
    b = ctx.builder

    def fn(idx):
        row = tuple(0 if k == dim else e for k, e in enumerate(idx))
        target = _index_value(ctx, index, row, x.sizes[dim], False)
        cond = b.op("eq", b.index_value(idx[dim]), target)
        return b.op("where", cond, src_value(row), x.load(idx))

    return lazy(x.sizes, x.dtype, x.device, fn)


def scatter_value(ctx, node, x, dim, index, value):
    return _one_hot_scatter(ctx, node, x, dim, index, lambda row: ctx.builder.const(value, x.dtype))


def scatter_src(ctx, node, x, dim, index, src):
    return _one_hot_scatter(ctx, node, x, dim, index, lambda row: ctx.builder.cast(src.load(row), x.dtype))


def scatter_add(ctx, node, x, dim, index, src):
    """out[.., j, ..] = x + sum over k of src[.., k, ..] where index[.., k, ..] == j (dense form)."""
    dim %= x.ndim
    if any(index.sizes[d] != x.sizes[d] for d in range(x.ndim) if d != dim):
        raise Unsupported("scatter_add with a smaller index in non-scatter dims")
    k = index.sizes[dim]
    if x.numel() * k > ctx.cfg.dense_limit:
        raise Unsupported("scatter_add too large for the dense form")
    acc = dt.compute_dtype(x.dtype)
    ivars, (r,) = pointwise_vars(x.ndim), reduction_vars(1)
    b = ctx.builder
    ridx = tuple(r if d == dim else v for d, v in enumerate(ivars))
    hit = b.op("eq", _index_value(ctx, index, ridx, x.sizes[dim], False), b.index_value(ivars[dim]))
    contrib = b.op("where", hit, b.cast(src.load(ridx), acc), b.const(0, acc))
    sums = ctx.reduction_buffer(x.sizes, (k,), "sum", contrib)
    return lazy(x.sizes, x.dtype, x.device, lambda idx: b.cast(b.op("add", b.cast(x.load(idx), acc), sums.load(idx)), x.dtype))


def _advanced_layout(x, indices):
    """Indexed dims, their broadcast shape, and where x[indices] puts each dim (torch's rule)."""
    indices = list(indices) + [None] * (x.ndim - len(indices))
    dims = [d for d, t in enumerate(indices) if t is not None]
    if not dims or any(indices[d].dtype.is_bool for d in dims):
        raise Unsupported("index with no index tensor or a boolean mask")
    bshape = broadcast_shapes(*[indices[d].sizes for d in dims])
    rest = [d for d in range(x.ndim) if d not in dims]
    if dims == list(range(dims[0], dims[-1] + 1)):
        before, after = [d for d in rest if d < dims[0]], [d for d in rest if d > dims[-1]]
    else:
        before, after = [], rest
    return indices, dims, bshape, before, after


def index_put(ctx, node, x, indices, values, accumulate=False):
    """x[indices] = values (or +=) in dense form: each output element reduces over the
    index space and takes the values whose indices hit it (the last one for '=')."""
    indices, dims, bshape, before, after = _advanced_layout(x, indices)
    nbatch = 1
    for n in bshape:
        nbatch *= n
    if x.numel() * max(nbatch, 1) > ctx.cfg.dense_limit:
        raise Unsupported("index_put too large for the dense form")
    res_shape = [x.sizes[d] for d in before] + list(bshape) + [x.sizes[d] for d in after]
    vals = expand(values, res_shape)
    idx_t = {d: expand(indices[d], bshape) for d in dims}
    acc = dt.compute_dtype(x.dtype)
    ivars = pointwise_vars(x.ndim)
    rvars = reduction_vars(len(bshape))
    b = ctx.builder

    def value_index(bidx):
        return tuple(ivars[d] for d in before) + tuple(bidx) + tuple(ivars[d] for d in after)

    hit = None
    for d in dims:
        c = b.op("eq", _index_value(ctx, idx_t[d], rvars, x.sizes[d], True), b.index_value(ivars[d]))
        hit = c if hit is None else b.op("logical_and", hit, c)
    if accumulate:
        contrib = b.op("where", hit, b.cast(vals.load(value_index(rvars)), acc), b.const(0, acc))
        sums = ctx.reduction_buffer(x.sizes, bshape, "sum", contrib)
        return lazy(x.sizes, x.dtype, x.device,
                    lambda idx: b.cast(b.op("add", b.cast(x.load(idx), acc), sums.load(idx)), x.dtype))
    # assignment: the last index that hits wins, as eager's serial CPU loop
    strides = [1] * len(bshape)
    for k in range(len(bshape) - 2, -1, -1):
        strides[k] = strides[k + 1] * bshape[k + 1]
    flat = sum((r * st for r, st in zip(rvars, strides)), sympy.Integer(0))
    last = ctx.reduction_buffer(x.sizes, bshape, "max", b.op("where", hit, b.index_value(flat), b.const(-1, dt.int64)))

    def fn(idx):
        k = last.load(idx)
        t = ctx.new_indirect_symbol()
        bidx = [ModularIndexing(t, st, n) for st, n in zip(strides, bshape)]
        vidx = tuple(idx[d] for d in before) + tuple(bidx) + tuple(idx[d] for d in after)
        v = indirect_load(ctx, vals, vidx, {t: (b.op("maximum", k, b.const(0, dt.int64)), max(nbatch, 1))})
        return b.op("where", b.op("ge", k, b.const(0, dt.int64)), b.cast(v, x.dtype), x.load(idx))

    return lazy(x.sizes, x.dtype, x.device, fn)


LOWERINGS = {
    **table(POINTWISE, {
        aten.gather: gather,
        aten.index_select: index_select,
        aten.embedding: embedding,
        aten.index.Tensor: index_tensor,
        aten.slice_scatter: slice_scatter,
        aten.select_scatter: select_scatter,
        aten.scatter.value: scatter_value,
        aten.scatter.src: scatter_src,
    }),
    **table(REDUCTION, {
        aten.scatter_add: scatter_add,
        aten.index_put: index_put,
    }),
}
