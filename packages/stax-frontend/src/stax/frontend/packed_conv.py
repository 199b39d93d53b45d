"""`stax::packed_conv2d`: a CPU inference convolution on a prepacked oneDNN weight, with the
per-channel affine epilogue (batch norm, bias) folded into that weight and a ReLU / residual
add run as oneDNN post-ops.

Inside a compiled inference graph a convolution's weight is a graph input (a parameter), so
eager, and Inductor without freezing, reorder it into oneDNN's blocked format on every call
(ResNet-18's 512-channel 3x3 convolution, batch 4: 9.1 ms with the reorder, 7.4 ms without,
one thread). This op packs the weight once and keeps it for as long as nothing wrote the
tensors it came from (packed_weights.py says how that is checked, and what it cannot see).
conv_fusion.py builds the calls.

`program` (a JSON string) computes the epilogue's operands from `consts` (graph inputs) and
then the chain applied to the convolution's output, as steps over values
`["c", k]` (consts[k]), `["v", j]` (step j's result) and literals:
`[op, arg, ...]` is one ATen op (an entry of `_OPS`); `["chain", how, operand]` applies
`how` in add / sub / rsub / mul / div to the running affine map out = conv * scale + shift.
"""

import json
from collections.abc import Callable
from typing import Optional

import torch

from .packed_weights import PackedKernel, register

aten = torch.ops.aten

NAME = "stax::packed_conv2d"
KERNEL = "stax.packed_conv2d.default"
# the post-ops conv_fusion.py matches (oneDNN has more): name -> (oneDNN attr, algorithm)
UNARY = {"none": ("none", ""), "relu": ("relu", ""), "gelu": ("gelu", "none"), "gelu_tanh": ("gelu", "tanh")}

# The ATen ops a per-channel operand may be computed with (the batch-norm decompositions of
# torch 2.11 and 2.13 use these): name -> callable on tensors and literals.
_OPS: dict[str, Callable] = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal, "neg": torch.neg,
    "unsqueeze": torch.unsqueeze, "squeeze": torch.squeeze, "view": lambda t, s: t.reshape(s),
    "to_float": lambda t: t.float(), "identity": lambda t: t,
}


def available() -> bool:
    """Whether this torch has oneDNN's fused convolution (every x86-64 CPU build has) and the op."""
    return OP is not None and torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn,
                                                                               "_convolution_pointwise")


def packed_conv2d(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], other: Optional[torch.Tensor],  # noqa: UP045
                  consts: list[torch.Tensor], program: str, stride: list[int], padding: list[int],
                  dilation: list[int], groups: int, unary: str) -> torch.Tensor:
    """Eager form (what a traced call or an uncached run computes): fold, pack, convolve."""
    w, b = fold(weight, bias, consts, program)
    return _convolve(x, _pack(w, padding, stride, dilation, groups, x), b, other, stride, padding, dilation,
                     groups, unary)


def _fake(x, weight, bias, other, consts, program, stride, padding, dilation, groups, unary):
    n, _, h, w = x.shape
    kh, kw = weight.shape[2], weight.shape[3]
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    c = weight.shape[0]
    return x.new_empty((n, c, oh, ow)).contiguous(memory_format=torch.channels_last)


OP = register(NAME, packed_conv2d, _fake)  # (typing.Optional in the signature: the schema torch 2.11 infers)


def _value(arg, consts, values):
    if isinstance(arg, list) and len(arg) == 2 and arg[0] in ("c", "v") and isinstance(arg[1], int):
        return consts[arg[1]] if arg[0] == "c" else values[arg[1]]
    return arg


def fold(weight: torch.Tensor, bias: torch.Tensor | None, consts, program: str):
    """(weight * scale per output channel, bias * scale + shift): the affine epilogue of
    `program` folded into the convolution (no epilogue: weight and bias as they are)."""
    steps = json.loads(program)
    if not steps:
        return weight, bias
    c = weight.shape[0]
    scale = torch.ones(c, dtype=weight.dtype)
    shift = torch.zeros(c, dtype=weight.dtype)
    values: list = []
    for op, *args in steps:
        if op == "chain":
            how, operand = args[0], _value(args[1], consts, values)
            v = torch.as_tensor(operand, dtype=weight.dtype).broadcast_to((1, c, 1, 1)).reshape(c)
            scale, shift = _CHAIN[how](scale, shift, v)
            values.append(None)
        else:
            values.append(_OPS[op](*(_value(a, consts, values) for a in args)))
    base = bias if bias is not None else torch.zeros(c, dtype=weight.dtype)
    return weight * scale.reshape(c, 1, 1, 1), base * scale + shift


# out = conv * scale + shift; one chain step maps (scale, shift) for `conv_side <op> v`
_CHAIN: dict[str, Callable] = {
    "add": lambda a, b, v: (a, b + v),
    "sub": lambda a, b, v: (a, b - v),
    "rsub": lambda a, b, v: (-a, v - b),
    "mul": lambda a, b, v: (a * v, b * v),
    "div": lambda a, b, v: (a / v, b / v),
}


def _pack(w, padding, stride, dilation, groups, x):
    return torch.ops.mkldnn._reorder_convolution_weight(w.contiguous(), padding, stride, dilation, groups,
                                                        list(x.shape))


def _convolve(x, packed, b, other, stride, padding, dilation, groups, unary):
    attr, algorithm = UNARY[unary]
    if other is None:
        return torch.ops.mkldnn._convolution_pointwise(x, packed, b, padding, stride, dilation, groups, attr, [],
                                                       algorithm)
    return torch.ops.mkldnn._convolution_pointwise.binary(
        x, other, packed, b, padding, stride, dilation, groups, "add", 1.0, None if attr == "none" else attr, [],
        algorithm)


def _sources(a):
    x, w, bias, _, consts = a[:5]
    return (w, bias, *consts), tuple(x.shape)


def _build(a):
    x, w, bias, _, consts, program, stride, padding, dilation, groups, _ = a
    wf, bf = fold(w, bias, consts, program)
    return _pack(wf, padding, stride, dilation, groups, x), bf


def _run(a, state):
    x, _, _, other, _, _, stride, padding, dilation, groups, unary = a
    return _convolve(x, state[0], state[1], other, stride, padding, dilation, groups, unary)


KERNELS = {KERNEL: lambda size_names=(): PackedKernel("stax_packed_conv2d", _sources, _build, _run, size_names)}
