"""2-D convolutions on channels-last memory in CPU inference graphs.

oneDNN runs a float convolution on NHWC memory directly; given NCHW, it reorders the
input, the weight and the output on every call (Inductor's CPU graphs convert to
channels-last for the same reason). Inside an inference graph no one else sees those
intermediate layouts, so the convolution's input and weight are realized channels-last
(the producing kernel writes them so; a graph input or a weight costs one copy kernel)
and its output is declared channels-last, which the kernels after it read as such.
Forward graphs of training keep NCHW: what they save for the backward graph must have
the strides AOTAutograd traced, so a saved NHWC activation would need a second, NCHW copy
(whether that still wins has not been measured).
"""

from __future__ import annotations

import torch

from ..fallback import call_aten
from .registry import BUFFER, table

aten = torch.ops.aten


def channels_last_strides(sizes) -> tuple:
    """(N, C, H, W) -> the strides of NHWC memory."""
    n, c, h, w = sizes
    return (h * w * c, 1, w * c, c)


def applies(ctx, conv: torch.fx.Node) -> bool:
    """Whether convolution node `conv` runs channels-last in this graph."""
    val = conv.meta.get("val")
    x = conv.args[0].meta.get("val") if isinstance(conv.args[0], torch.fx.Node) else None
    transposed = conv.args[6] if len(conv.args) > 6 else conv.kwargs.get("transposed", False)
    return (
        ctx.cfg.conv_channels_last
        and ctx.device == "cpu"
        and ctx.kind == "inference"
        and not transposed
        and isinstance(val, torch.Tensor)
        and isinstance(x, torch.Tensor)
        and val.dim() == 4
        and x.dim() == 4
        and val.dtype in (torch.float32, torch.bfloat16)
    )


def preferred_strides(ctx, node: torch.fx.Node) -> tuple | None:
    """NHWC strides for a value realized only as the input of channels-last convolutions,
    so that its kernel writes it so (no NCHW copy first); None otherwise."""
    users = list(node.users)
    if not users or any(u.target is not aten.convolution.default or u.args[0] is not node or not applies(ctx, u)
                        for u in users):
        return None
    val = node.meta.get("val")
    return channels_last_strides(val.shape) if isinstance(val, torch.Tensor) and val.dim() == 4 else None


def convolution(ctx, node, x, w, *rest, **kwargs):
    """aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)."""
    val = node.meta.get("val")
    if not applies(ctx, node):
        return call_aten(ctx, node, (x, w, *rest), kwargs, fallback=False)
    x = ctx.realize(x, "conv:channels_last", strides=channels_last_strides(x.sizes))
    w = ctx.realize(w, "conv:channels_last", strides=channels_last_strides(w.sizes))
    return call_aten(ctx, node, (x, w, *rest), kwargs, fallback=False, out_strides=channels_last_strides(val.shape))


LOWERINGS = table(BUFFER, {aten.convolution.default: convolution})
