"""The book's running example as an IR graph, for every package's tests and for readers.

Example 7.1 (§7, DESIGN.md's walk through the layers): k(x) = x / x.sum(-1, keepdim=True) on a
64x128 float32 input, as the frontend lowers it: a keepdim row sum `buf1` and the broadcast
divide `buf2`. Each layer's tests pin its own step of the walk on this one graph.
"""

from __future__ import annotations

from . import dtypes as dt
from .build import load, op
from .graph import ComputedBuffer, Graph, InputBuffer, Layout, Pointwise, Reduction
from .index import pointwise_vars, reduction_vars
from .sizevars import NO_SIZE_VARS, SizeVars


def example_7_1(rows=64, cols=128, device: str = "cpu", size_vars: SizeVars = NO_SIZE_VARS) -> Graph:
    """k(x) = x / x.sum(-1, keepdim=True), x: rows x cols float32 on `device` (the book's Example 7.1 at
    64x128). `rows` / `cols` may be size symbols (dynamic shapes) with their rows in `size_vars`.

    buf1 = Reduction((rows, 1), (cols,), sum, Load(primals_1, cols*i0 + r0));
    buf2 = Pointwise((rows, cols), Load(primals_1, cols*i0 + i1) / Load(buf1, i0)); output buf2.
    """
    i0, i1 = pointwise_vars(2)
    (r0,) = reduction_vars(1)
    f32 = dt.float32
    x = InputBuffer("primals_1", Layout.contiguous((rows, cols), f32, device))
    buf1 = ComputedBuffer(
        "buf1", Layout.contiguous((rows, 1), f32, device),
        Reduction((rows, 1), (cols,), "sum", load("primals_1", cols * i0 + r0, f32)),
    )
    div = op("truediv", load("primals_1", cols * i0 + i1, f32), load("buf1", i0, f32))
    buf2 = ComputedBuffer("buf2", Layout.contiguous((rows, cols), f32, device), Pointwise((rows, cols), div))
    return Graph((x,), (buf1, buf2), ("buf2",), size_vars)
