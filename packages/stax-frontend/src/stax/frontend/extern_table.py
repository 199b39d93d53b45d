"""The callables stax's wrappers bind for a graph's ExternKernel nodes: ATen ops through
aten_runtime, the getitem of a multi-output result, and the packed-weight ops of CPU
inference (packed_conv.py, packed_linear.py), which keep per-node state."""

from __future__ import annotations

from collections.abc import Callable

from stax.ir import Graph

from .aten_runtime import aten_kernel, extern_kinds, getitem_kernel
from .extern_format import GETITEM
from .packed_conv import KERNELS as CONV
from .packed_linear import KERNELS as LINEAR

PACKED = {**CONV, **LINEAR}  # kernel name -> factory of a fresh PackedKernel


def kernel_table_of(kinds) -> dict[str, Callable]:
    """{kernel name: callable} from extern_kinds' pairs (a whole-graph cache load has no graph)."""
    return {kernel: getitem_kernel if kernel == GETITEM else PACKED[kernel]() if kernel in PACKED
            else aten_kernel(kernel, fresh=not fallback) for kernel, fallback in kinds}


def kernel_table(graph: Graph) -> dict[str, Callable]:
    """{kernel name: callable} for every ExternKernel of `graph`."""
    return kernel_table_of(extern_kinds(graph))
