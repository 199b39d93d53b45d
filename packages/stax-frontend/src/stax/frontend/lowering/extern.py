"""Library kernels Stax calls on purpose (counted as extern, not fallback): the
pointwise epilogue that follows them is lowered by Stax and fuses into its own kernel."""

from __future__ import annotations

import torch

from .. import packed_linear
from ..extern_calls import call_aten
from .registry import BUFFER, table

aten = torch.ops.aten

EXTERN_OPS = (
    aten.mm,
    aten.addmm,
    aten.bmm,
    aten.baddbmm,
    aten.convolution,
    aten.convolution_backward,
    aten._scaled_dot_product_flash_attention_for_cpu,
    aten._scaled_dot_product_flash_attention_for_cpu_backward,
    # cuda attention, as eager's dispatcher picks it (_fused_sdp_choice runs while tracing);
    # their philox seed / offset are opaque values carried to the backward call
    aten._scaled_dot_product_flash_attention,
    aten._scaled_dot_product_flash_attention_backward,
    aten._scaled_dot_product_efficient_attention,
    aten._scaled_dot_product_efficient_attention_backward,
    aten._scaled_dot_product_cudnn_attention,
    aten._scaled_dot_product_cudnn_attention_backward,
    *packed_linear.OPS,  # CPU inference linear layers on packed weights (linear_fusion.py)
)


def extern(ctx, node, *args, **kwargs):
    return call_aten(ctx, node, args, kwargs, fallback=False)


LOWERINGS = table(BUFFER, {op: extern for op in EXTERN_OPS})
