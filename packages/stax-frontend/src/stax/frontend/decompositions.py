"""The decomposition table handed to AOTAutograd.

torch's core-ATen table (torch._decomp.core_aten_decompositions) plus the
decompositions of the composite ops Stax lowers better as their parts (softmax,
norms, losses, activation backwards: they become reductions and fused pointwise
bodies), minus the ops Stax lowers or calls directly (kept whole on purpose).
Documented in the README.
"""

from __future__ import annotations

import functools

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

from .encoder_layer_decomp import DECOMPOSITIONS as ENCODER_LAYER
from .foreach_decomps import foreach_decompositions
from .lowering.extern import EXTERN_OPS

aten = torch.ops.aten

# Composite ops that core ATen keeps whole but that Stax wants as reductions + pointwise.
EXTRA = [
    aten._softmax,
    aten._log_softmax,
    aten._softmax_backward_data,
    aten._log_softmax_backward_data,
    aten.native_layer_norm,
    aten.native_layer_norm_backward,
    aten.native_group_norm,
    aten.native_group_norm_backward,
    aten.native_batch_norm,
    aten.native_batch_norm_backward,
    aten._native_batch_norm_legit,
    aten._native_batch_norm_legit_functional,
    aten._native_batch_norm_legit_no_training,
    aten.logsumexp,
    aten.gelu_backward,
    aten.silu,
    aten.silu_backward,
    aten.mish,
    aten.hardswish,
    aten.hardswish_backward,
    aten.hardsigmoid,
    aten.hardsigmoid_backward,
    aten.hardtanh,
    aten.hardtanh_backward,
    aten.leaky_relu,
    aten.leaky_relu_backward,
    aten.elu,
    aten.elu_backward,
    aten.softplus,
    aten.softplus_backward,
    aten.threshold_backward,
    aten.sigmoid_backward,
    aten.tanh_backward,
    aten.mse_loss,
    aten.mse_loss_backward,
    aten.nll_loss_forward,
    aten.nll_loss_backward,
    aten.binary_cross_entropy,
    aten.binary_cross_entropy_backward,
    aten.embedding_dense_backward,
    aten.select_backward,
    aten.slice_backward,
    aten.addcmul,
    aten.addcdiv,
    aten.lerp,
    aten.rsub,
    aten.masked_fill,
    aten.repeat,
    aten.clamp_min,
    aten.clamp_max,
]

# Ops Stax keeps whole: lowered natively (one reduction / one body) or called as extern kernels.
KEEP = [
    *EXTERN_OPS,  # library kernels (lowering/extern.py); incl. the CPU flash attention, whose torch 2.13
    # decomposition disagrees with the flash backward (wrong grads even with aot_eager)
    aten.gelu,
    aten.var,
    aten.var_mean,
    aten.std,
    aten.std_mean,
    aten.amax,
    aten.amin,
    aten.argmax,
    aten.argmin,
    aten.prod,
    aten.mean,
    aten.sum,
    aten.clamp,
    aten.where,
    aten.nan_to_num,
    aten.logaddexp,
    aten.cat,
    aten.flip,
    aten.roll,
    aten.constant_pad_nd,
    aten.gather,
    aten.index_select,
    aten.embedding,
    aten.slice_scatter,
    aten.select_scatter,
    aten.linalg_vector_norm,
    aten.max_pool2d_with_indices,
    aten.max_pool2d_with_indices_backward,
    aten.avg_pool2d,
    aten.avg_pool2d_backward,
]


def _index_fill(x, dim, index, value):
    """index_fill as one functional index_put: torch 2.11's decomposition of a non-dense `x`
    (expanded, transposed) `copy_`s into a new tensor, which AOTAutograd's functional graph
    rejects (an AssertionError at compile time)."""
    if x.dim() == 0:
        return _index_fill(x.reshape(1), 0, index.reshape(-1), value).reshape(())
    if not isinstance(value, torch.Tensor):
        value = torch.scalar_tensor(value, dtype=x.dtype, device=x.device)
    return aten.index_put(x, [None] * (dim % x.dim()) + [index.reshape(-1)], value.to(x.dtype))


_TORCH_REPEAT = get_decompositions([aten.repeat])[aten.repeat.default]


def _repeat(x, repeats):
    """torch's repeat decomposition with eager's contiguous result: torch's returns a permuted layout
    ((6, 1, 3) for eager's (6, 2, 1)), so a later `.view(-1)` fails to trace (a ValueError at compile time)."""
    return _TORCH_REPEAT(x, repeats).contiguous()


# Stax's own decompositions, where torch's (of some supported version) cannot be used.
OWN = {
    aten.index_fill.int_Scalar: _index_fill,
    aten.index_fill.int_Tensor: _index_fill,
    aten.repeat.default: _repeat,
    **ENCODER_LAYER,  # nn.TransformerEncoderLayer's eval fast path (encoder_layer_decomp.py)
}


@functools.cache
def _table():
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(EXTRA))
    table.update(OWN)
    keep = set()
    for packet in KEEP:
        keep.update(packet.overloads() and [getattr(packet, o) for o in packet.overloads()])
    return {op: fn for op, fn in table.items() if op not in keep}


def decomposition_table(foreach: bool = False) -> dict:
    """{OpOverload: decomposition} for aot_module_simplified (a fresh dict each call). `foreach`:
    split `_foreach_*` ops into per-tensor ops (foreach_decomps.py) — for CPU graphs, where each
    becomes a kernel writing its parameter in place; on cuda they stay one library call (torch's
    multi-tensor kernels) unless Config.gpu_foreach_kernels: no faster than them on an H100 (stax-frontend README)."""
    table = dict(_table())
    if foreach:
        table.update(foreach_decompositions())
    return table
