"""The lowering table: ATen op (overload or packet) -> Lowering(fn, kind), merged
from one module per category. A new op is a row in one of these tables."""

from __future__ import annotations

from . import conv_layout, creation, extern, indexing, nn, pointwise, random, reductions, scans, shape, views
from .registry import Lowering

LOWERINGS: dict = {
    **pointwise.LOWERINGS,
    **creation.LOWERINGS,
    **views.LOWERINGS,
    **reductions.LOWERINGS,
    **scans.LOWERINGS,
    **indexing.LOWERINGS,
    **shape.LOWERINGS,
    **nn.LOWERINGS,
    **random.LOWERINGS,
    **extern.LOWERINGS,
    **conv_layout.LOWERINGS,  # after extern: aten.convolution.default, overload before packet
}


def lookup(target) -> Lowering | None:
    """The lowering for an FX call target: exact overload first, then its packet."""
    low = LOWERINGS.get(target)
    if low is None:
        packet = getattr(target, "overloadpacket", None)
        if packet is not None:
            low = LOWERINGS.get(packet)
    return low


def is_library_call(target) -> bool:
    """Whether `target` runs as the ATen call itself (an extern, or a fallback): it gets its
    arguments as eager would, and no Stax kernel reads them."""
    low = lookup(target)
    return low is None or low.fn is extern.extern


__all__ = ["LOWERINGS", "Lowering", "is_library_call", "lookup"]
