"""Bugs the differential fuzzer found (issue 18, item 6), each as the shrunk program it reported:
stax against eager, forward and (where it failed there) backward. Each failed before its fix."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same
from stax.frontend import config

SCANS = {
    "cumsum": lambda x, d: torch.cumsum(x, d),
    "cumprod": lambda x, d: torch.cumprod(x, d),
    "cummax": lambda x, d: torch.cummax(x, d)[0],
    "cummin_indices": lambda x, d: torch.cummin(x, d)[1],
    "logcumsumexp": lambda x, d: torch.logcumsumexp(x, d),
}


@pytest.mark.parametrize("shape,dim", [((1, 31), 0), ((1, 7, 1, 5), 0), ((3, 3, 3, 1), 3), ((4, 7, 1, 1), 3),
                                       ((16, 1, 3, 31), 1)])
@pytest.mark.parametrize("scan", sorted(SCANS))
def test_scan_along_a_size_one_dim(scan, shape, dim):
    """stax-cpu dropped the size-1 scan axis with the other size-1 loops: the node had no
    sequential loop (broken C++), or after merging scanned along another dim (wrong values)."""
    fn = SCANS[scan]
    x = torch.randn(shape)
    assert_same(torch.compile(lambda t: fn(t, dim) * 2, backend="stax")(x), fn(x, dim) * 2)


def test_bool_scan_along_size_one_dim():
    x = torch.randn(4, 7, 1, 1)
    f = lambda x: torch.cumsum(torch.le(x, 0.1), 3, dtype=torch.int64)  # noqa: E731
    assert_same(torch.compile(f, backend="stax")(x), f(x))


def _grad_step(fn, *xs):
    xs = [x.detach().clone().requires_grad_() for x in xs]
    y = fn(*xs)
    y.backward(torch.ones_like(y))
    return (y.detach(), *[x.grad for x in xs])


ZERO_DIM = {
    "std_logsigmoid": (lambda x: F.logsigmoid(torch.std(x)), (3,), torch.float32),
    "select_rsqrt_atan2": (lambda x: (lambda v: torch.atan2(v, v))(torch.rsqrt(x.select(0, 1).abs() + 0.5)), (2,),
                           torch.float32),
    "empty_slice_atan2": (lambda x: (lambda v: torch.atan2(v, v))(x[-2:2:3]), (2,), torch.float16),
    "logsumexp_hypot": (lambda x: torch.hypot(torch.logsumexp(x, -1), x[0] * 0.5), (3,), torch.bfloat16),
}


@pytest.mark.parametrize("name", sorted(ZERO_DIM))
def test_zero_dim_producer_in_a_region(name):
    """A 0-d value produced and read in one parallel region: the chunking planner indexed its
    (empty) loop sizes and the backward failed to compile (IndexError)."""
    fn, shape, dtype = ZERO_DIM[name]
    x = torch.randn(shape, dtype=dtype)
    assert_same(_grad_step(torch.compile(fn, backend="stax"), x), _grad_step(fn, x))


def test_reuse_chain_keeps_each_output_layout():
    """`buf4 = buf1` (storage only) then `buf6 = buf4` (an output): buf6 was bound to buf1's
    (3, 1) tensor object and returned with that shape instead of (3,)."""

    def fn(x):
        v = torch.sum(x, -1)
        v.exp_()
        return F.softmax(v, 0), v

    x = torch.randn(3, 1)
    assert_same(torch.compile(fn, backend="stax")(x), fn(x))


def test_input_named_like_a_wrapper_helper():
    """A backward graph's saved `as_strided` (an FX placeholder name) became a wrapper local of that
    name, shadowing the helper the wrapper reuses buffers with (UnboundLocalError at call time, in
    the processes whose memory plan reused with a layout change). Inputs now avoid every name the
    target's wrapper binds, and Python's keywords and builtins."""
    import stax.cpu
    from stax.frontend.graph_lowering import GraphLowering

    gl = GraphLowering(torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph()), [], config.current())
    for name in [*stax.cpu.WRAPPER_NAMES, "k_kernel0", "ext_buf3", "dt_float32", "lambda", "len"]:
        assert gl.input_name(name) != name, name
    assert gl.input_name("primals_1") == "primals_1" and gl.input_name("as_strided_1") == "as_strided_1"


def test_eye_with_many_columns():
    """torch.eye's decomposition builds its arange in uint16 (no stax dtype, no eager CPU kernel
    either): the graph failed to compile. The values are carried exactly as int64."""
    fn = lambda x: x + torch.eye(1, 256, dtype=torch.float32)  # noqa: E731
    x = torch.randn(1, 256)
    assert_same(torch.compile(fn, backend="stax")(x), fn(x))


def test_max_pool_gradient_goes_to_the_last_nan_of_a_window():
    """Eager's pooling index is the window's last NaN (`val > max || isnan(val)`); stax took
    argmax's first NaN, so the gradient of log(x < 0) landed elsewhere."""
    fn = lambda x: F.max_pool2d(torch.log(x), 3, stride=2, padding=1)  # noqa: E731
    x = torch.tensor([[[0.5, -1.0, 2.0], [-3.0, 1.5, -0.5], [0.25, 4.0, -2.0]]])
    assert_same(_grad_step(torch.compile(fn, backend="stax"), x), _grad_step(fn, x))


def test_zero_element_producer_of_an_in_place_update():
    """diff along a size-1 dim is empty, then updated in place: the chunking planner read loop 0's
    stride of a zero-element store, which its index does not use (KeyError in the backward)."""

    x, i = torch.tensor([[[3], [-1], [0]]]), torch.tensor([[[2], [0], [1], [1]]])

    def fn(b):
        v = torch.diff(torch.gather(torch.acosh(x.abs() + 1), 1, i), dim=-1)
        v[0] += b
        return v

    b = torch.randn(4, 1)
    assert_same(_grad_step(torch.compile(fn, backend="stax"), b), _grad_step(fn, b))


@pytest.mark.parametrize("rows", [0, 2])
def test_pad_of_an_empty_tensor(rows):
    """Padding an empty source is all padding, but its (masked-off) load was still evaluated at
    index 0: for an empty index_select that read the empty index tensor's null data (SIGSEGV)."""
    fn = lambda x, i: F.pad(torch.index_select(x, 0, i), (1, 1, 2, 2)) * 2  # noqa: E731
    x, i = torch.randn(4, 3), torch.zeros(0, dtype=torch.int64)
    assert_same(torch.compile(fn, backend="stax")(x[:rows], i), fn(x[:rows], i))


@pytest.mark.parametrize("width", [15, 16, 33])
def test_sum_over_an_empty_index_select(width):
    """A reduction over an empty dim: its loads invariant in that dim (here the empty index tensor's
    element 0) were computed once before the reduction loop even when it runs no iteration, reading
    the null data of the empty tensor (SIGSEGV; seed 18 graph 99 on AVX2, where 15 lanes make one
    full vector block)."""
    fn = lambda x, i: torch.index_select(x, 1, i).nansum(1)  # noqa: E731
    x, i = torch.randn(3, 1, width), torch.zeros(0, dtype=torch.int64)
    assert_same(torch.compile(fn, backend="stax")(x, i), fn(x, i))


INDEX_FILLS = {
    "expanded_int": (lambda x, i: x.index_fill(0, i, 7), lambda: torch.tensor([2]).expand(4), [0, 2]),
    "transposed": (lambda x, i: x.index_fill(1, i, -1.5), lambda: torch.randn(5, 4).t(), [0, 4, 4]),
    "strided_tensor_value": (lambda x, i: x.index_fill(-1, i, torch.tensor(3.0)),
                             lambda: torch.randn(2, 3, 4)[:, :, ::2], 1),
    "zero_dim": (lambda x, i: x.index_fill(0, i, 2.0), lambda: torch.tensor(5.0), [0]),
    "expanded_float": (lambda x, i: x.index_fill(2, i, 0.0) * 2, lambda: torch.randn(3, 1, 6).expand(3, 5, 6), [5, 0]),
}


@pytest.mark.parametrize("case", sorted(INDEX_FILLS))
def test_index_fill_of_a_non_dense_input(case):
    """index_fill of an expanded int64 input failed to compile under torch 2.11 (AssertionError in
    AOTAutograd: its decomposition copy_'d into a new tensor); Stax decomposes it itself, to one
    index_put that it lowers (no fallback), on every torch version."""
    from stax.frontend import metrics
    from stax.frontend.decompositions import decomposition_table

    assert decomposition_table()[torch.ops.aten.index_fill.int_Scalar].__module__ == "stax.frontend.decompositions"
    fn, make, index = INDEX_FILLS[case]
    torch.manual_seed(0)
    x, i = make(), torch.tensor(index)
    metrics.reset()
    with config.patch(strict=True):
        got = torch.compile(fn, backend="stax", fullgraph=True)(x, i)
    assert_same(got, fn(x, i), check_stride=False)
    assert metrics.snapshot().fallback_calls == 0


def test_index_fill_gradient():
    x = torch.randn(4, 5)
    fn = lambda x: x.index_fill(1, torch.tensor([1, 3]), 0.5) * x  # noqa: E731
    assert_same(_grad_step(torch.compile(fn, backend="stax"), x), _grad_step(fn, x))


POW_EDGES = [float("-inf"), float("inf"), -0.0, 0.0, -2.0, 3.0, float("nan"), 1e-30, 1e30]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("exponent", [0.5, -0.5, -1.0, -2.0, 2.0, 3.0])
def test_pow_scalar_edges_as_eager(exponent, dtype):
    """pow(x, -0.5) went through pow(): pow(-inf, -0.5) is 0 where eager's rsqrt gives NaN (the
    gradient of pow(x, 0.5) is made of it); eager's CPU float16 kernel has no root special cases
    (pow(-inf, 0.5) inf, not sqrt's NaN). NaN and inf positions and zeros' signs as eager."""
    x = torch.tensor(POW_EDGES).to(dtype)
    got = torch.compile(lambda t: torch.pow(t, exponent), backend="stax")(x)
    exp = torch.pow(x, exponent)
    assert_same(got, exp)
    num = ~exp.isnan()  # a NaN's sign is not specified
    assert torch.equal(torch.signbit(got)[num], torch.signbit(exp)[num]), (got, exp)


def test_signbit_compared_with_a_float():
    """signbit's vector form (a lane loop storing chars) converted to float crashed GCC 12 with
    AVX-512 (internal compiler error): it reads the lanes' sign bits now. -0.0 and NaNs included."""
    x = torch.randn(3, 3, 3) * 3
    x.view(-1)[:6] = torch.tensor([-0.0, 0.0, float("nan"), -float("nan"), float("-inf"), float("inf")])
    fn = lambda t: torch.gt(torch.trunc(t), torch.signbit(t))  # noqa: E731
    assert_same(torch.compile(fn, backend="stax")(x), fn(x))
    assert_same(torch.compile(torch.signbit, backend="stax")(x.double()), torch.signbit(x.double()))


def test_relu_keeps_negative_zero():
    """relu(-0.0) is -0.0 in eager (x < 0 ? 0 : x); stax gave +0.0, and atan2 of it against a
    negative number flipped from -pi to pi."""
    x = torch.tensor([-0.0, 0.0, -1.0, float("nan")] * 5)
    y = torch.full((20,), -2.0, dtype=torch.float64)
    fn = lambda a, b: torch.atan2(torch.relu(a), b)  # noqa: E731
    assert_same(torch.compile(fn, backend="stax")(x, y), fn(x, y))
    got = torch.compile(torch.relu, backend="stax")(x)
    assert torch.equal(torch.signbit(got[~got.isnan()]), torch.signbit(torch.relu(x)[~x.isnan()]))


def test_attention_on_a_channels_last_convolution():
    """A convolution's output is channels-last inside CPU graphs; passed as is to the CPU flash
    attention (picked at trace time for a last-dim stride of 1), the query rows were read at
    the wrong places and past the buffer (garbage, NaN in varying places): an ATen call now
    gets its tensors with the traced strides."""
    torch.manual_seed(0)
    x, w = torch.randn(2, 4, 7, 6), torch.randn(3, 4, 3, 1)
    k, v = torch.randn(2, 3, 3, 6), torch.randn(2, 3, 3, 6)
    fn = lambda a, b, c, d: torch.relu(F.scaled_dot_product_attention(F.conv2d(a, b), c, d))  # noqa: E731
    got = torch.compile(fn, backend="stax", fullgraph=True)(x, w, k, v)
    torch.testing.assert_close(got, fn(x, w, k, v), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32])
def test_repeat_then_view(dtype):
    """torch's repeat decomposition returned a permuted layout where eager's repeat is contiguous: a
    following `.view(-1)` failed to trace (ValueError "Cannot view a tensor ... as a tensor with shape")."""

    def fn(x):
        v = x.repeat((3, 1, 2))
        v.view(-1).zero_()
        return v, x.repeat(2, 3).view(-1) * 2

    x = torch.ones(3, 1, dtype=dtype)
    with config.patch(strict=True):
        got = torch.compile(fn, backend="stax", fullgraph=True)(x.clone())
    assert_same(got, fn(x.clone()))


def test_cpu_scalar_factory_in_a_cuda_graph():
    """The backward of `x[m] = 0.1` on cuda makes `zeros([], device=cpu)` as index_put's value (eager
    allows a CPU scalar operand): the graph ran eagerly ("a tensor moves to cpu"; 15 of 973 graphs of
    the H200 fuzz run, seed 5). Lowered here with fake cuda tensors; a CPU scalar the graph returns
    still raises, since it must come back on the CPU."""
    from stax.frontend.graph_lowering import GraphUnsupported, lower
    from torch._subclasses import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    def backward(t, m):
        zeros = torch.ops.aten.zeros.default([], dtype=torch.float16, device="cpu")
        return (torch.ops.aten.index_put.default(t, [m], zeros),)

    def returns_it(t, m):
        zeros = torch.ops.aten.zeros.default([], dtype=torch.float16, device="cpu")
        return (torch.ops.aten.index_put.default(t, [m], zeros), zeros)

    with FakeTensorMode(allow_non_fake_inputs=True):
        t = torch.empty(3, 2, dtype=torch.float16, device="cuda")
        m = torch.empty(3, dtype=torch.bool, device="cuda")
        cuda = dict(target="gpu", tensor_device=torch.device("cuda:0"), kind="backward")
        lowered = lower(make_fx(backward)(t, m), [t, m], config.current(), **cuda)
        assert not lowered.fallback_ops and len(lowered.graph.outputs) == 1
        with pytest.raises(GraphUnsupported, match="moves to cpu"):
            lower(make_fx(returns_it)(t, m), [t, m], config.current(), **cuda)
