"""Shape-changing copies as index maps: cat, constant_pad_nd, flip, roll.

cat and pad select between sources with `where`; every load index is clamped into
its source's range (the unselected branch is still evaluated by vectorized code,
so it must read in bounds); an empty source is never read.
"""

from __future__ import annotations

import sympy
import torch
from stax.ir import dtypes as dt
from stax.ir.index import ModularIndexing

from .. import views as V
from ..tensor import lazy
from ..views import Unsupported
from .common import out_dtype
from .registry import POINTWISE, table

aten = torch.ops.aten


def _clamp(e, n: int):
    return sympy.Max(0, sympy.Min(n - 1, e))


def _in_range(b, i, lo: int, hi: int):
    iv = b.index_value(i)
    return b.op("logical_and", b.op("ge", iv, b.const(lo, dt.int64)), b.op("lt", iv, b.const(hi, dt.int64)))


def cat(ctx, node, tensors, dim=0):
    want = out_dtype(node)
    parts = [t for t in tensors if not (t.ndim == 1 and t.sizes[0] == 0)]  # legacy empty tensors
    if not parts:
        raise Unsupported("cat of empty tensors")
    dim %= parts[0].ndim
    parts = [t for t in parts if t.sizes[dim] > 0] or parts[:1]
    sizes = list(parts[0].sizes)
    sizes[dim] = sum(t.sizes[dim] for t in parts)
    offsets, acc = [], 0
    for t in parts:
        offsets.append(acc)
        acc += t.sizes[dim]
    b = ctx.builder

    def fn(idx):
        i = idx[dim]
        value = None
        for t, off in reversed(list(zip(parts, offsets))):
            local = list(idx)
            local[dim] = _clamp(i - off, t.sizes[dim]) if len(parts) > 1 else i - off
            v = b.cast(t.load(tuple(local)), want)
            if value is None:
                value = v
            else:
                cond = b.op("lt", b.index_value(i), b.const(off + t.sizes[dim], dt.int64))
                value = b.op("where", cond, v, value)
        return value

    return lazy(sizes, want, ctx.device, fn)


def constant_pad_nd(ctx, node, x, pad, value=0):
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise Unsupported("bad pad spec")
    lows = [0] * x.ndim
    highs = [0] * x.ndim
    for k in range(len(pad) // 2):
        d = x.ndim - 1 - k
        lows[d], highs[d] = pad[2 * k], pad[2 * k + 1]
    sizes = [s + lo + hi for s, lo, hi in zip(x.sizes, lows, highs)]
    if any(s < 0 for s in sizes):
        raise Unsupported("pad gives a negative size")
    b = ctx.builder
    if 0 in x.sizes:  # all padding: an empty source has no index to clamp a load into
        return lazy(sizes, x.dtype, x.device, lambda idx: b.const(value, x.dtype))

    def fn(idx):
        cond = None
        src = []
        for d, (i, lo, n) in enumerate(zip(idx, lows, x.sizes)):
            if lo == 0 and highs[d] <= 0:
                src.append(i)
                continue
            src.append(_clamp(i - lo, n))
            c = _in_range(b, i, lo, lo + n)
            cond = c if cond is None else b.op("logical_and", cond, c)
        v = x.load(tuple(src))
        if cond is None:
            return v
        return b.op("where", cond, v, b.const(value, x.dtype))

    return lazy(sizes, x.dtype, x.device, fn)


def flip(ctx, node, x, dims):
    dims = {d % x.ndim for d in dims}
    m = lambda idx: tuple(x.sizes[k] - 1 - i if k in dims else i for k, i in enumerate(idx))  # noqa: E731
    return lazy(x.sizes, x.dtype, x.device, lambda idx: x.load(m(idx)))


def roll(ctx, node, x, shifts, dims=()):
    if isinstance(shifts, int):
        shifts = [shifts]
    if isinstance(dims, int):
        dims = [dims]
    if not dims:
        flat = V.reshape(x, (x.numel(),))
        return V.reshape(roll(ctx, node, flat, shifts, [0]), x.sizes)
    shift = {d % x.ndim: s for d, s in zip(dims, shifts)}

    def m(idx):
        out = []
        for k, i in enumerate(idx):
            n = x.sizes[k]
            s = shift.get(k, 0) % n if n else 0
            out.append(ModularIndexing(i + (n - s), 1, n) if s else i)
        return tuple(out)

    return lazy(x.sizes, x.dtype, x.device, lambda idx: x.load(m(idx)))


LOWERINGS = table(POINTWISE, {
    aten.cat: cat,
    aten.constant_pad_nd: constant_pad_nd,
    aten.flip: flip,
    aten.roll: roll,
})
