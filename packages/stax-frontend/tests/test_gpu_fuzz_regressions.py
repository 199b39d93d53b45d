"""Differential-fuzzer failures on the cuda path (issue 18.6), shrunk, through stax.gpu and
compared with eager: on cuda tensors with a GPU (Triton compiles the kernels, and rejects what
its interpreter may let pass), else on CPU tensors under Triton's interpreter
(TRITON_INTERPRET=1, config.device_override='gpu')."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same, run_stax
from stax.frontend import config, metrics, runtime

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
DEVICE = "cuda" if torch.cuda.is_available() and not INTERPRET else "cpu"
interpret = pytest.mark.skipif(
    (DEVICE == "cpu" and not INTERPRET) or runtime.gpu_unavailable_reason() is not None,
    reason="needs stax.gpu: a cuda GPU, or TRITON_INTERPRET=1 (CPU tensors through Triton's interpreter)",
)


def _route():
    return config.patch(device_override="gpu" if DEVICE == "cpu" else None)


def _gpu_check(fn, *args):
    args = [a.to(DEVICE) for a in args]
    with _route():
        out = run_stax(fn, *args)
    assert_same(out, fn(*args))
    m = metrics.snapshot()
    assert (m.graphs_failed, m.graphs_gpu) == (0, 1), m


@interpret
def test_masked_fill_and_all_over_no_rows():
    """Seed 5 graph 219: a (0, 3) pointwise node fused with all(-1) over 0 rows (ZeroDivisionError
    in stax.gpu's plan)."""

    def fn(x, mask, y):
        v = x.masked_fill(mask, -4.0)
        return torch.copysign(v, y), torch.all(v, -1)

    _gpu_check(fn, torch.randn(0, 3), torch.tensor([[True]]), torch.randn(1, 3))


@interpret
def test_logsumexp_over_an_empty_dim_beside_an_empty_diagonal():
    """Seed 5 graph 245: logsumexp over a 0-sized dim (3 rows of 0 elements) shares a kernel with
    a [0] pointwise node (the diagonal of a (0, 3) mean): "cannot be split into 3 rows"."""

    def fn(x):
        m = x.mean(-2)
        return (torch.logsumexp(m, 0),
                torch.empty_like(torch.diagonal(m, 0, 1, 0)).fill_(0.5) * torch.diagonal(m, 0, 1, 0))

    _gpu_check(fn, torch.randn(0, 1, 3))


@interpret
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_max_pool2d_nan_index_is_int64(dtype):
    """Seed 5 graph 46 (forward and backward): max_pool2d's index of the window's last NaN,
    max(where(isnan(x), i, -1)) with a constant i (a 1x1 window), saved for the backward:
    tl.where(c, 0, -1) was an int32 block, reduced with the int64 identity -2**63 (a Triton
    CompilationError on the GPU)."""

    def fn(x):
        return F.max_pool2d(x[..., None], 1, stride=1, padding=0, dilation=2, ceil_mode=True)

    x = torch.tensor([[1.5], [float("nan")]], dtype=dtype, device=DEVICE)
    g = torch.randn(2, 1, 1).to(DEVICE, dtype)
    xs, xe = (x.clone().requires_grad_(True) for _ in range(2))
    with _route():
        out = run_stax(fn, xs)
        out.backward(g)
    expected = fn(xe)
    expected.backward(g)
    assert_same((out, xs.grad), (expected, xe.grad))
    m = metrics.snapshot()
    assert (m.graphs_failed, m.graphs_gpu) == (0, 2), m


@interpret
def test_variance_of_one_computed_element_is_nan():
    """Seed 5 graphs 266 and 424 on the H200: the variance of one element is 0 / 0 (NaN) in eager; with
    its producer fused (a product), NVPTX contracted `x * y - mean` into one fma, the deviation was the
    product's rounding error, and the variance came out inf. Kernels with welford_m2 compile without
    FMA contraction (stax.gpu.compile.kernel_options)."""
    x = torch.tensor([0.7, 1.3, 2.9])
    for fn in (lambda a: torch.var(a[:1] * 1.37), lambda a: torch.var((a / -3).sum(), correction=2),
               lambda a: torch.var_mean(F.rms_norm(a[1:2] * a[2:], (1,)), correction=1)):
        torch._dynamo.reset()
        metrics.reset()
        _gpu_check(fn, x)


def test_cpu_scalar_operand_in_a_cuda_backward():
    """Seed 5 graph 199 and 14 more on the H200: `x[m] = 0.1` on cuda; the backward's
    `zeros([], device=cpu)` (index_put's value) made the graph run eagerly."""
    if DEVICE != "cuda":
        pytest.skip("needs a cuda GPU (the graph device must differ from the scalar's)")

    def fn(x, m):
        v = torch.var_mean(x, 1, keepdim=True)[1] * 2
        v[m] = 0.1
        return v

    x = torch.randn(3, 4, device="cuda", requires_grad=True)
    m = torch.tensor([True, False, True], device="cuda").view(3, 1)
    with config.patch(strict=True):
        got = run_stax(fn, x, m)
    want = fn(x.detach().clone().requires_grad_(True), m)
    assert_same(got, want)
    got.sum().backward()
    assert x.grad is not None
