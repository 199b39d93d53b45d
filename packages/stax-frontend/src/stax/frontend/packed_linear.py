"""`stax::packed_linear`: a CPU inference linear layer (addmm / mm by a transposed weight that is
a graph input) on a oneDNN weight packed once (for the first call's row count: the packed weight
serves any row count, so a dynamic-shape graph packs once too), with a ReLU or GELU as a post-op.
Eager and Inductor without freezing hand the plain weight to the GEMM on every call (2 threads,
128 x 256 by an 8192-wide head: 4.9 ms as addmm, 2.6 ms packed). The packed weight
follows the tensor it came from (packed_weights.py); linear_fusion.py builds the calls.
"""

from typing import Optional

import torch

from .packed_weights import PackedKernel, register

NAME = "stax::packed_linear"
KERNEL = "stax.packed_linear.default"
UNARY = {"none": "", "relu": "", "gelu": "none", "gelu_tanh": "tanh"}  # post-op -> oneDNN algorithm


def available() -> bool:
    return OP is not None and torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def packed_linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], unary: str,  # noqa: UP045
                  in_by_out: bool) -> torch.Tensor:
    """Eager form: x @ weight.T + bias (x @ weight + bias where `in_by_out`: GPT-2's Conv1D), then
    the post-op (what an uncached run computes)."""
    a = (x, weight, bias, unary, in_by_out)
    return _run(a, _build(a))


def _fake(x, weight, bias, unary, in_by_out):
    return x.new_empty((x.shape[0], weight.shape[1 if in_by_out else 0]))


OP = register(NAME, packed_linear, _fake)  # (typing.Optional in the signature: the schema torch 2.11 infers)
OPS = () if OP is None else (OP.overloadpacket,)  # (as lowering/extern.EXTERN_OPS lists ops)


def _sources(a):
    x, w, bias = a[:3]
    return (w, bias), None  # (not the row count: oneDNN runs any row count on the packed weight)


def _build(a):
    x, w, _, _, in_by_out = a
    return torch.ops.mkldnn._reorder_linear_weight((w.t() if in_by_out else w).contiguous(), x.shape[0])


def _run(a, packed):
    x, _, bias, unary, _ = a
    attr = "gelu" if unary.startswith("gelu") else unary
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, attr, [], UNARY[unary])


KERNELS = {KERNEL: lambda size_names=(): PackedKernel("stax_packed_linear", _sources, _build, _run, size_names)}
