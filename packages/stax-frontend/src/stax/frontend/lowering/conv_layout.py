"""2-D convolutions on channels-last memory in inference and training graphs (CPU and cuda).

oneDNN runs a float convolution on NHWC memory directly; given NCHW, it reorders the
input, the weight and the output on every call (Inductor's CPU graphs convert to
channels-last for the same reason). cuDNN's fast Hopper kernels are NHWC too: given NCHW,
a ResNet-18 training step on the H200 spent 2.4 ms of its 7 ms of library time in cuDNN's
nchwToNhwc / nhwcToNchw transposes (Inductor's cuda graphs are channels-last as well).
Inside a graph no one else sees those intermediate
layouts, so the convolution's input and weight are realized channels-last (the producing
kernel writes them so; a graph input or a weight costs one copy kernel) and its output is
declared channels-last, which the kernels after it read as such.

A training forward graph also returns the activations saved for the backward graph: those
keep their channels-last layout (`saved_outputs`), and the forward compiler reports every
output's real strides to AOTAutograd (TracingContext.output_strides, aot.report_output_strides), which restrides the
backward graph's inputs before compiling it (where no tracing context can take the report,
forward graphs keep NCHW). In the backward graph convolution_backward runs NHWC too.
"""

from __future__ import annotations

import torch
from stax.ir import dtypes as dt

from .. import packed_conv
from ..extern_calls import ExternTuple, call_aten
from ..tensor import as_size, lazy
from .reductions import finish, reduce
from .registry import BUFFER, table

aten = torch.ops.aten
PACKED = packed_conv.OP  # torch.ops.stax.packed_conv2d.default (None: not registered)


def channels_last_strides(sizes) -> tuple:
    """(N, C, H, W) -> the strides of NHWC memory."""
    n, c, h, w = sizes
    return tuple(as_size(s) for s in (h * w * c, 1, w * c, c))


def applies(ctx, conv: torch.fx.Node) -> bool:
    """Whether convolution node `conv` runs channels-last in this graph."""
    x = conv.args[0].meta.get("val") if isinstance(conv.args[0], torch.fx.Node) else None
    transposed = conv.args[6] if len(conv.args) > 6 else conv.kwargs.get("transposed", False)
    return (
        (ctx.kind == "inference" or (ctx.kind == "forward" and _stride_report() is not None))
        and _eligible(ctx, transposed, conv.meta.get("val"))
        and isinstance(x, torch.Tensor)
        and x.dim() == 4
    )


def _eligible(ctx, transposed, val) -> bool:
    """The conditions every channels-last convolution (forward or backward) shares."""
    return (
        ctx.cfg.conv_channels_last
        and ctx.target_info.channels_last_convs
        and not transposed
        and isinstance(val, torch.Tensor)
        and val.dim() == 4
        and val.dtype in (torch.float32, torch.bfloat16)
    )


def _stride_report():
    """AOTAutograd's list for the forward graph's real output strides, with the metadata that
    says which outputs are saved for backward; None outside such a compile."""
    tc = torch._guards.TracingContext.try_get()
    if tc is None or tc.output_strides is None or getattr(tc, "fw_metadata", None) is None:
        return None
    return tc


def saved_outputs(ctx, n_outputs: int) -> range:
    """Positions of a training forward graph's outputs that only the backward graph reads:
    these may keep a channels-last layout (reported by `aot.report_output_strides`)."""
    if ctx.kind != "forward" or not ctx.cfg.conv_channels_last or not ctx.target_info.channels_last_convs:
        return range(0)
    tc = _stride_report()
    try:
        return range(*tc.fw_metadata.tensors_saved_for_backwards_slice.indices(n_outputs)) if tc else range(0)
    except (AttributeError, AssertionError):  # another torch's metadata: keep traced layouts
        return range(0)


def preferred_strides(ctx, node: torch.fx.Node) -> tuple | None:
    """NHWC strides for a value realized only as the input of channels-last convolutions
    (and maybe saved for the backward graph, which takes any layout), so that its kernel
    writes it so (no NCHW copy first); None otherwise."""
    if not node.users or not all(_takes_channels_last(ctx, node, u) for u in node.users):
        return None
    if not any(_is_conv_input(ctx, node, u) for u in node.users):  # saved only: keep eager's layout
        return None
    val = node.meta.get("val")
    return channels_last_strides(ctx.symbols.meta_sizes(val)) if isinstance(val, torch.Tensor) and val.dim() == 4 \
        else None


def _takes_channels_last(ctx, node: torch.fx.Node, user: torch.fx.Node) -> bool:
    """`user` reads `node` as well in NHWC: a channels-last convolution's input, the graph output
    of a value only the backward graph reads, or an alias of `node` that only such users read."""
    if user.op == "output":
        return node in ctx.saved_nodes
    if user.op != "call_function":
        return False
    if user.target is aten.alias.default:
        return bool(user.users) and all(_takes_channels_last(ctx, user, u) for u in user.users)
    return _is_conv_input(ctx, node, user)


def _is_conv_input(ctx, node: torch.fx.Node, user: torch.fx.Node) -> bool:
    """`user` is a channels-last convolution (or its backward) reading `node` as its input (gradient)."""
    if user.op != "call_function" or not user.args or not (
            user.args[0] is node or (user.target is PACKED and user.args[3] is node)):
        return False
    if user.target is aten.convolution_backward.default:
        return backward_applies(ctx, user)
    if user.target is PACKED:
        return True
    return user.target is aten.convolution.default and applies(ctx, user)


def backward_applies(ctx, node: torch.fx.Node) -> bool:
    """Whether convolution_backward `node` runs channels-last in a backward graph, as the
    forward's convolutions do: its input (saved NHWC by the forward, or copied so), weight and
    incoming gradient are NHWC, and the gradients are declared as oneDNN then returns them."""
    x = node.args[1]
    transposed = node.args[7] if len(node.args) > 7 else False
    return (
        ctx.kind == "backward"
        and _eligible(ctx, transposed, x.meta.get("val") if isinstance(x, torch.fx.Node) else None)
    )


def _bias_grad(ctx, grad, rest: tuple) -> tuple:
    """(rest with the bias gradient masked off, that gradient as a Stax sum of grad_output over all
    but its channel dim) where the target computes it so (cuda: ATen's separate reduction kernel
    read the whole gradient once more, 1.3 ms per ConvNeXt-atto step on the H200; a Stax reduction
    fuses with the gradient's producer), else (rest, None)."""
    *head, mask = rest
    if not (ctx.target_info.conv_bias_grad and isinstance(mask, (list, tuple)) and len(mask) == 3 and mask[2]):
        return rest, None
    dims = [0, *range(2, grad.ndim)]
    bias = finish(ctx, reduce(ctx, grad, dims, False, "sum", dt.compute_dtype(grad.dtype)), grad.dtype)
    return (*head, [mask[0], mask[1], False]), bias


def convolution_backward(ctx, node, grad, x, w, *rest, **kwargs):
    """aten.convolution_backward(grad_output, input, weight, bias_sizes, ...) -> (grad_input,
    grad_weight, grad_bias): channels-last in backward graphs (see backward_applies); the bias
    gradient a Stax reduction where the target says so (_bias_grad)."""
    rest, bias = _bias_grad(ctx, grad, tuple(rest))
    out = _convolution_backward(ctx, node, grad, x, w, rest, kwargs)
    return out if bias is None else ExternTuple((out[0], out[1], bias))


def _convolution_backward(ctx, node, grad, x, w, rest, kwargs):
    if not backward_applies(ctx, node):
        return call_aten(ctx, node, (grad, x, w, *rest), kwargs, fallback=False)
    grad = ctx.realize(grad, "conv:channels_last", strides=channels_last_strides(grad.sizes))
    x = ctx.realize(x, "conv:channels_last", strides=channels_last_strides(x.sizes))
    w = ctx.realize(w, "conv:channels_last", strides=channels_last_strides(w.sizes))
    per_item = [channels_last_strides(ctx.symbols.meta_sizes(v)) if isinstance(v, torch.Tensor) and v.dim() == 4
                else None
                for v in node.meta["val"]]
    return call_aten(ctx, node, (grad, x, w, *rest), kwargs, fallback=False, out_strides=per_item,
                     traced_inputs=False)


def convolution(ctx, node, x, w, *rest, **kwargs):
    """aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
    the bias added by a Stax pointwise op where the target says so (_bias_added)."""
    if rest and rest[0] is not None and not kwargs and ctx.target_info.conv_bias_add:
        return _bias_added(ctx, _convolution(ctx, node, x, w, (None, *rest[1:]), kwargs), rest[0])
    return _convolution(ctx, node, x, w, rest, kwargs)


def _bias_added(ctx, out, bias):
    """out + bias per output channel (dim 1), as a pointwise value that fuses with the convolution's
    consumer. cuda: ATen added a 2-D convolution's bias to cuDNN's channels-last output in a separate
    strided kernel, 40 launches and 0.77 of 3.1 ms per ConvNeXt-atto inference call on the H100;
    Inductor also calls the convolution without its bias and adds it in its own kernel."""
    b = ctx.builder
    acc = dt.compute_dtype(out.dtype)
    return lazy(out.sizes, out.dtype, out.device, lambda idx: b.cast(
        b.op("add", b.cast(out.load(idx), acc), b.cast(bias.load((idx[1],)), acc)), out.dtype))


def _convolution(ctx, node, x, w, rest, kwargs):
    val = node.meta.get("val")
    if not applies(ctx, node):
        return call_aten(ctx, node, (x, w, *rest), kwargs, fallback=False)
    x = ctx.realize(x, "conv:channels_last", strides=channels_last_strides(x.sizes))
    w = ctx.realize(w, "conv:channels_last", strides=channels_last_strides(w.sizes))
    return call_aten(ctx, node, (x, w, *rest), kwargs, fallback=False,
                     out_strides=channels_last_strides(ctx.symbols.meta_sizes(val)), traced_inputs=False)


def packed_conv2d(ctx, node, x, weight, bias, other, consts, *rest):
    """stax::packed_conv2d (conv_fusion.py): its activation input and residual channels-last,
    the tensors its packed weight is folded from as they are (graph inputs)."""
    x = ctx.realize(x, "conv:channels_last", strides=channels_last_strides(x.sizes))
    if other is not None:
        other = ctx.realize(other, "conv:channels_last", strides=channels_last_strides(other.sizes))
    return call_aten(ctx, node, (x, weight, bias, other, consts, *rest), {}, fallback=False,
                     out_strides=channels_last_strides(node.meta["val"].shape), traced_inputs=False)


LOWERINGS = table(BUFFER, {aten.convolution.default: convolution, **({PACKED: packed_conv2d} if PACKED else {}),
                           aten.convolution_backward.default: convolution_backward})
