"""Gradients the OpInfo database found wrong (issue 18, item 2): a backward graph whose
gradient is ATen's storage-less zero tensor, and scans on the CPU accumulated in float32
where ATen accumulates float32 in float64 (logcumsumexp's backward is itself a scan)."""

from __future__ import annotations

import pytest
import torch
from conftest import assert_same


def _grad(fn, x, g):
    xs = x.detach().clone().requires_grad_()
    (gx,) = torch.autograd.grad(fn(xs), xs, g)
    return gx


def test_sgn_backward_is_real_zeros():
    """sgn's derivative is `_efficientzerotensor` (no storage): it crashed the extern call."""
    x = torch.randn(20, 20)
    g = torch.randn(20, 20)
    got = _grad(torch.compile(torch.sgn, backend="stax"), x, g)
    assert_same(got, _grad(torch.sgn, x, g))
    assert not got._is_zerotensor() and got.untyped_storage().nbytes() == 400 * 4


def _max_error(a, ref):
    return (a.double() - ref).abs().max().item()


SCANS = {
    "logcumsumexp": lambda x: torch.logcumsumexp(x, -1),
    "cumsum": lambda x: torch.cumsum(x, -1),
}


@pytest.mark.parametrize("name", sorted(SCANS))
def test_long_row_scans_as_accurate_as_eager(name):
    """Against a float64 reference on rows of 16384: no worse than twice eager's float32 error
    (a float32 accumulator was about 7x eager's error in logcumsumexp's backward)."""
    fn = SCANS[name]
    torch.manual_seed(0)
    x = torch.randn(4, 16384)
    g = torch.randn(4, 16384)
    ref = fn(x.double())
    compiled = torch.compile(fn, backend="stax")
    assert _max_error(compiled(x), ref) <= 2 * _max_error(fn(x), ref) + 1e-6
    gref = _grad(fn, x.double(), g.double())
    assert _max_error(_grad(compiled, x, g), gref) <= 2 * _max_error(_grad(fn, x, g), gref) + 1e-6
