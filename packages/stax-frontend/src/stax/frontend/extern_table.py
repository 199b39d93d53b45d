"""The callables stax's wrappers bind for a graph's ExternKernel nodes: ATen ops through
aten_runtime, the getitem of a multi-output result, and the packed-weight ops of CPU
inference (packed_conv.py, packed_linear.py), which keep per-node state."""

from __future__ import annotations

import functools
from collections.abc import Callable

from stax.ir import Graph

from .aten_runtime import aten_kernel, extern_kinds, getitem_kernel
from .extern_format import GETITEM
from .packed_conv import KERNELS as CONV
from .packed_linear import KERNELS as LINEAR

PACKED = {**CONV, **LINEAR}  # kernel name -> factory of a fresh PackedKernel


def kernel_table_of(kinds, size_names: tuple = ()) -> dict[str, Callable]:
    """{kernel name: callable} from extern_kinds' pairs (a whole-graph cache load has no graph);
    `size_names`: a symbolic-shape graph's size symbols (row order), which its calls pass as `sizes=`
    (packed linear layers occur in symbolic graphs too; packed convolutions in static ones only)."""
    getitem = functools.partial(getitem_kernel, size_names=size_names) if size_names else getitem_kernel
    return {kernel: getitem if kernel == GETITEM else PACKED[kernel](size_names) if kernel in PACKED
            else aten_kernel(kernel, fresh=not fallback, size_names=size_names) for kernel, fallback in kinds}


def kernel_table(graph: Graph) -> dict[str, Callable]:
    """{kernel name: callable} for every ExternKernel of `graph`."""
    return kernel_table_of(extern_kinds(graph), tuple(r.symbol.name for r in graph.size_vars.rows))
