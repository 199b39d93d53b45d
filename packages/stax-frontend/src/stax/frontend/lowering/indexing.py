"""Indexing: gathers are indirect loads, scatters are Scatter stores (or selects).

An indirect load reads `x` at an index containing a fresh symbol t bound to a
data value (`Load.indirect = ((t, value, bound),)`); the runtime checks
0 <= value < bound and raises IndexError like eager. slice_scatter / select_scatter
and one-hot scatters are pointwise selects. scatter / scatter_add / index_put (and
through torch's decompositions index_add, embedding_dense_backward and the backward
of gather / index_select / indexing) are `stax.ir.Scatter` buffers: out = self, then
one store per scattered point ('add' accumulates, 'set' keeps the last) — linear in
the points, with the same bounds checks as indirect loads.
"""

from __future__ import annotations

import sympy
import torch
from stax.ir import IndexValue, Layout, Load, Op, Scatter, simplify_index, walk
from stax.ir import dtypes as dt
from stax.ir import views as IV
from stax.ir.index import FloorDiv, ModularIndexing, contiguous_strides, pointwise_vars, reduction_vars

from ..tensor import TensorValue, as_size, lazy
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
        return indirect_load(ctx, x, tuple(src),
                             {t: (_index_value(ctx, index, idx, x.sizes[dim], False), x.sizes[dim])})

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
    if ctx.symbols.meta_sizes(node.meta["val"]) != tuple(sizes):
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
    length = src.sizes[dim]
    if not all(isinstance(e, int) for e in (n, start or 0, end or 0)):  # symbolic: stax.ir.views places the bounds
        try:
            _, m = IV.slice_map(base.sizes, dim, start, end, step, ranges=ctx.symbols.value_ranges())
        except NotImplementedError as e:
            raise Unsupported(str(e)) from None
        start = m((0,) * base.ndim)[dim]
        end = start + step * (length - 1) + 1
    else:
        start = 0 if start is None else (start + n if start < 0 else start)
        end = n if end is None else (end + n if end < 0 else end)
        start, end = max(0, min(n, start)), max(0, min(n, end))
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
    n = base.sizes[dim]
    if isinstance(n, int):
        index %= n
    else:  # a symbolic size: stax.ir.views proves the index in range (negative: from the end)
        try:
            _, m = IV.select_map(base.sizes, dim, int(index), ranges=ctx.symbols.value_ranges())
        except NotImplementedError as e:
            raise Unsupported(str(e)) from None
        index = m((0,) * (base.ndim - 1))[dim]
    b = ctx.builder

    def fn(idx):
        sidx = tuple(idx[:dim]) + tuple(idx[dim + 1:])
        cond = b.op("eq", b.index_value(idx[dim]), b.const(index, dt.int64))
        return b.op("where", cond, b.cast(src.load(sidx), base.dtype), base.load(idx))

    return lazy(base.sizes, base.dtype, base.device, fn)


def scatter_store(ctx, node, x: TensorValue, scatter_sizes, coords_fn, value_fn, mode: str, opmath: bool = False):
    """A Scatter buffer: out = x, then out[coords] += value (mode 'add') or = value ('set') at every
    point of `scatter_sizes`. `coords_fn(rvars)` -> (coordinates, indirect bindings),
    `value_fn(rvars)` -> the value there; both over r0.. (linear in the scattered points).
    `opmath` (an 'add' into a half type): the sums run in float32, rounded once to x's type, as
    eager's scatter_add / index_add on CPU (0.65625 + 0.166 - 0.8203 is 0.00195 there; added in
    bfloat16 one at a time it is 0, and a gradient's sign(0) is 0: the fuzzer's bwd-value_686ae4eb15)."""
    if x.ndim == 0:
        raise Unsupported("scatter into a 0-dim tensor")
    acc = dt.compute_dtype(x.dtype) if opmath and mode == "add" else x.dtype
    if mode == "add" and not ctx.target_info.atomic_add(acc):
        raise Unsupported(f"accumulating scatter into {acc}: no atomic add on {ctx.target}")
    b = ctx.builder
    ivars, rvars = pointwise_vars(x.ndim), reduction_vars(len(scatter_sizes))
    rranges = dict(zip(rvars, scatter_sizes))
    init = ctx.simplify_value(b.cast(b.cast(x.load(ivars), x.dtype), acc), dict(zip(ivars, x.sizes)))
    coords, indirect = coords_fn(rvars)
    value = ctx.simplify_value(b.cast(b.cast(value_fn(rvars), x.dtype), acc), rranges)
    indirect = tuple((t, ctx.simplify_value(v, rranges), bound) for t, v, bound in indirect)
    coords = tuple(simplify_index(sympy.sympify(c), rranges) for c in coords)
    body = Scatter(tuple(x.sizes), init, tuple(scatter_sizes), coords, indirect, value, mode)
    out = ctx.add_computed(body, Layout(ctx.device, acc, tuple(x.sizes), _out_strides(ctx, node, x.sizes)))
    if acc == x.dtype:
        return out
    return lazy(out.sizes, x.dtype, out.device, lambda idx: b.cast(out.load(idx), x.dtype))


def _out_strides(ctx, node, sizes) -> tuple:
    """Eager's result strides (it clones `self`) when dense, else contiguous."""
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor) and ctx.symbols.meta_sizes(val) == tuple(sizes):
        return ctx.symbols.meta_strides(val)
    return tuple(as_size(st) for st in contiguous_strides(sizes))


def _dim_scatter(ctx, node, x, dim, index, value_fn, mode, opmath=False):
    """scatter / scatter_add along `dim`: out[.., index[r], ..] (+)= value(r) over index's shape."""
    dim %= max(x.ndim, 1)
    if index.ndim != x.ndim:
        raise Unsupported("scatter with an index of another rank")

    def coords(rvars):
        t = ctx.new_indirect_symbol()
        v = _index_value(ctx, index, rvars, x.sizes[dim], False)
        return tuple(t if d == dim else r for d, r in enumerate(rvars)), ((t, v, x.sizes[dim]),)

    return scatter_store(ctx, node, x, index.sizes, coords, value_fn, mode, opmath)


def _one_hot_scatter(ctx, node, x, dim, index, src_value):
    """scatter with one index per row (index.size(dim) == 1, other dims equal) is a select,
    which fuses with its neighbours; any other index shape is a Scatter store ('set')."""
    dim %= max(x.ndim, 1)
    if x.ndim == 0 or index.sizes[dim] != 1 or any(index.sizes[d] != x.sizes[d] for d in range(x.ndim) if d != dim):
        return _dim_scatter(ctx, node, x, dim, index, src_value, "set")
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
    """out = x; out[.., index[.., k, ..], ..] += src[.., k, ..]: a Scatter store ('add')."""
    return _dim_scatter(ctx, node, x, dim, index, src.load, "add", opmath=True)


def scatter_reduce(ctx, node, x, dim, index, src, reduce, include_self=True):
    """scatter_reduce with reduce='sum' (including self) is scatter_add; the others fall back."""
    if reduce != "sum" or not include_self:
        raise Unsupported(f"scatter_reduce {reduce!r} (include_self={include_self})")
    return scatter_add(ctx, node, x, dim, index, src)


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


def _mask_put(ctx, x, indices, values, accumulate):
    """x[mask] = values (or +=) with one boolean mask: a pointwise select, when the values
    do not depend on how many elements the mask holds (a scalar, or one row broadcast)."""
    ks = [d for d, t in enumerate(indices) if t is not None]
    if len(ks) != 1 or not indices[ks[0]].dtype.is_bool:
        raise Unsupported("index_put mixing a boolean mask with other indices")
    pos, mask = ks[0], indices[ks[0]]
    k = mask.ndim
    if tuple(mask.sizes) != tuple(x.sizes[pos: pos + k]):
        raise Unsupported("boolean mask shape differs from the dims it indexes")
    one_row = list(x.sizes[:pos]) + [1] + list(x.sizes[pos + k:])  # x[mask]'s shape with its count as 1
    offset = len(one_row) - values.ndim
    if offset < 0 or (0 <= pos - offset < values.ndim and values.sizes[pos - offset] != 1):
        raise Unsupported("index_put values sized by the number of True elements (data-dependent)")
    vals = expand(values, one_row)
    b = ctx.builder

    def fn(idx):
        hit = mask.load(tuple(idx[pos: pos + k]))
        v = b.cast(vals.load(tuple(idx[:pos]) + (sympy.Integer(0),) + tuple(idx[pos + k:])), x.dtype)
        old = x.load(idx)
        return b.op("where", hit, b.op("add", old, v) if accumulate else v, old)

    return lazy(x.sizes, x.dtype, x.device, fn)


def index_put(ctx, node, x, indices, values, accumulate=False):
    """x[indices] = values (or +=): a Scatter store over the shape of x[indices], each indexed
    dim's coordinate bound to its (wrapped) index value; '=' keeps the last of duplicates.
    A single boolean mask with count-independent values is a select (`_mask_put`)."""
    if any(t is not None and t.dtype.is_bool for t in indices):
        return _mask_put(ctx, x, list(indices) + [None] * (x.ndim - len(indices)), values, accumulate)
    indices, dims, bshape, before, after = _advanced_layout(x, indices)
    nb, nB = len(before), len(bshape)
    res_shape = [x.sizes[d] for d in before] + list(bshape) + [x.sizes[d] for d in after]
    vals = expand(values, res_shape)
    idx_t = {d: expand(indices[d], bshape) for d in dims}

    def coords(rvars):
        out = [None] * x.ndim
        for k, d in enumerate(before):
            out[d] = rvars[k]
        for k, d in enumerate(after):
            out[d] = rvars[nb + nB + k]
        indirect = []
        for d in dims:
            t = ctx.new_indirect_symbol()
            out[d] = t
            indirect.append((t, _index_value(ctx, idx_t[d], rvars[nb: nb + nB], x.sizes[d], True), x.sizes[d]))
        return tuple(out), tuple(indirect)

    return scatter_store(ctx, node, x, res_shape, coords, vals.load, "add" if accumulate else "set")


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
        aten.scatter_reduce.two: scatter_reduce,
        aten.index_put: index_put,
    }),
}
