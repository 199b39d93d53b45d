"""The book's example programs as IR graphs (Examples 7.1 and 7.2), shared by the tests."""

from stax.ir import ComputedBuffer, Graph, InputBuffer, Layout, Pointwise, Reduction, dtypes, load, op
from stax.ir.examples import example_7_1  # noqa: F401  (the one Example 7.1, shared with the other packages' tests)
from stax.ir.index import pointwise_vars, reduction_vars
from stax.ir.sizevars import NO_SIZE_VARS

F32 = dtypes.float32
i0, i1, i2 = pointwise_vars(3)
(r0,) = reduction_vars(1)


def x_input(name="primals_1", rows=64, cols=128):
    return InputBuffer(name, Layout.contiguous((rows, cols), F32))


def example_7_2_cpu(rows=64, cols=128, size_vars=NO_SIZE_VARS) -> Graph:
    """m(x) = (e.sum(-1), e.amax(-1)) with e = x.exp() materialized as buf1 (CPU, rule 1 of 6.6)."""
    x = x_input(rows=rows, cols=cols)
    buf1 = ComputedBuffer(
        "buf1",
        Layout.contiguous((rows, cols), F32),
        Pointwise((rows, cols), op("exp", load("primals_1", cols * i0 + i1, F32))),
    )
    e = load("buf1", cols * i0 + r0, F32)
    buf2 = ComputedBuffer("buf2", Layout.contiguous((rows,), F32), Reduction((rows,), (cols,), "sum", e))
    buf3 = ComputedBuffer("buf3", Layout.contiguous((rows,), F32), Reduction((rows,), (cols,), "max", e))
    return Graph((x,), (buf1, buf2, buf3), ("buf2", "buf3"), size_vars)


def example_7_2_gpu(rows=64, cols=128, size_vars=NO_SIZE_VARS) -> Graph:
    """The same program as the GPU lowers it: exp inlined into both reductions."""
    x = x_input(rows=rows, cols=cols)
    e = op("exp", load("primals_1", cols * i0 + r0, F32))
    buf1 = ComputedBuffer("buf1", Layout.contiguous((rows,), F32), Reduction((rows,), (cols,), "sum", e))
    buf2 = ComputedBuffer("buf2", Layout.contiguous((rows,), F32), Reduction((rows,), (cols,), "max", e))
    return Graph((x,), (buf1, buf2), ("buf1", "buf2"), size_vars)
