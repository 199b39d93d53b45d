"""`torch._transformer_encoder_layer_fwd` (nn.TransformerEncoderLayer's fast path in eval mode
under no_grad) as the ops it stands for, so Stax compiles the layer instead of calling it as one
ATen fallback: the input projection, attention (torch's CPU flash attention, an extern), the
output projection, the feed-forward block and the two layer norms, in norm-first or norm-after
order. With a mask the fast path is left whole (an explicit, counted fallback).
"""

import torch
import torch.nn.functional as F

aten = torch.ops.aten


def transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
                                  use_gelu, norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2,
                                  norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None,
                                  mask_type=None):
    """The layer on a dense (batch, seq, embed) input, batch first (what the fast path takes)."""
    if mask is not None or src.dim() != 3 or src.is_nested or embed_dim % num_heads:
        return NotImplemented
    b, s, e = src.shape
    h = num_heads

    def attention(x):
        qkv = F.linear(x, qkv_weight, qkv_bias).view(b, s, 3, h, e // h).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        return F.linear(o.transpose(1, 2).reshape(b, s, e), proj_weight, proj_bias)

    def feed_forward(x):
        y = F.linear(x, ffn_weight_1, ffn_bias_1)
        return F.linear(F.gelu(y) if use_gelu else F.relu(y), ffn_weight_2, ffn_bias_2)

    def norm1(x):
        return F.layer_norm(x, (e,), norm_weight_1, norm_bias_1, eps)

    def norm2(x):
        return F.layer_norm(x, (e,), norm_weight_2, norm_bias_2, eps)

    if norm_first:
        x = src + attention(norm1(src))
        return x + feed_forward(norm2(x))
    x = norm1(src + attention(src))
    return norm2(x + feed_forward(x))


DECOMPOSITIONS = {aten._transformer_encoder_layer_fwd.default: transformer_encoder_layer_fwd}
