"""Shape-changing copies as index maps: cat, constant_pad_nd (their math in stax.ir.views), flip, roll."""

from __future__ import annotations

import torch
from stax.ir import views as IV
from stax.ir.index import ModularIndexing

from .. import views as V
from ..tensor import lazy
from ..views import Unsupported
from .common import out_dtype
from .registry import POINTWISE, table

aten = torch.ops.aten


def cat(ctx, node, tensors, dim=0):
    want = out_dtype(node)
    parts = [t for t in tensors if not (t.ndim == 1 and t.sizes[0] == 0)]  # legacy empty tensors
    if not parts:
        raise Unsupported("cat of empty tensors")
    dim %= parts[0].ndim
    sizes = list(parts[0].sizes)
    sizes[dim] = sum(t.sizes[dim] for t in parts)
    b = ctx.builder
    loaders = [(t.sizes[dim], lambda idx, t=t: b.cast(t.load(idx), want)) for t in parts]
    return lazy(sizes, want, ctx.device, lambda idx: IV.cat(loaders, dim, sizes, idx, nodes=b))


def constant_pad_nd(ctx, node, x, pad, value=0):
    """torch's flat pad list runs from the last dim backwards, (lo, hi) per dim."""
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise Unsupported("bad pad spec")
    pads = [[0, 0] for _ in range(x.ndim)]
    for k in range(len(pad) // 2):
        pads[x.ndim - 1 - k] = [pad[2 * k], pad[2 * k + 1]]
    sizes = [s + lo + hi for s, (lo, hi) in zip(x.sizes, pads)]  # (stax.ir checks them: constant_pad)
    b = ctx.builder
    return lazy(sizes, x.dtype, x.device,
                lambda idx: IV.constant_pad(x.load, x.sizes, pads, value, x.dtype, idx, nodes=b))


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
            if not isinstance(n, int):  # a symbolic size (>= MIN_SIZE = 2): (i - s) mod n, kept non-negative
                s = shift.get(k, 0)
                out.append(ModularIndexing(i - s + (-(-s // 2) if s > 0 else 0) * n, 1, n) if s else i)
                continue
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
