"""torch.dtype <-> stax.ir.DType, by table."""

from __future__ import annotations

import torch
from stax.ir import dtypes as dt

from .tensor import Unsupported

TO_STAX: dict[torch.dtype, dt.DType] = {
    torch.bool: dt.bool_,
    torch.uint8: dt.uint8,
    torch.int8: dt.int8,
    torch.int16: dt.int16,
    torch.int32: dt.int32,
    torch.int64: dt.int64,
    torch.float16: dt.float16,
    torch.bfloat16: dt.bfloat16,
    torch.float32: dt.float32,
    torch.float64: dt.float64,
}
TO_TORCH: dict[dt.DType, torch.dtype] = {v: k for k, v in TO_STAX.items()}


class UnsupportedDType(Unsupported):
    """No stax dtype for a torch one: the op runs as an ATen call (its result, if of such a
    dtype, an opaque value); a graph input or output of one makes the whole graph run eagerly."""


def to_stax(d: torch.dtype) -> dt.DType:
    try:
        return TO_STAX[d]
    except KeyError:
        raise UnsupportedDType(f"dtype {d} has no stax equivalent") from None


def to_torch(d: dt.DType) -> torch.dtype:
    return TO_TORCH[d]
