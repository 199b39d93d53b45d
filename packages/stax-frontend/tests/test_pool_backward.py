"""Max-pool backward on CPU: an NCHW gradient is a scatter of the pooled gradients to their argmax
positions (lowering/nn.py: one pass over the pooled outputs, each (n, c) plane one thread's, in
eager's serial order, so the sums are eager's bit for bit); other layouts and ranks keep the gather
form over each input element's windows."""

import pytest
import torch
import torch.nn.functional as F
from conftest import run_stax
from stax.frontend import metrics
from stax.frontend.lowering import nn as nn_lowering

CASES = {  # (input shape, kernel, stride, padding, dilation, ceil_mode)
    "resnet_stem": ((2, 8, 20, 20), 3, 2, 1, 1, False),
    "2x2": ((2, 3, 8, 8), 2, 2, 0, 1, False),
    "ragged_ceil": ((1, 4, 15, 17), 3, 2, 1, 1, True),
    "dilated": ((2, 2, 13, 11), 3, 1, 1, 2, False),
}


def _grads(shape, k, s, p, d, ceil, channels_last: bool, compiled: bool):
    torch.manual_seed(0)
    x = torch.randn(*shape)
    x[..., ::3, ::2] = 0.5  # ties inside windows: the first index wins, as eager's
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    x.requires_grad_()
    g = torch.randn(F.max_pool2d(x, k, s, p, d, ceil).shape)

    def f(x, g):
        return (F.max_pool2d(x, k, s, p, d, ceil) * g).sum()

    (run_stax(f, x, g) if compiled else f(x, g)).backward()
    return x.grad


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("channels_last", [False, True])
def test_max_pool_backward_as_eager(case, channels_last, monkeypatch):
    scattered = []
    real = nn_lowering._max_pool2d_backward_scatter
    monkeypatch.setattr(nn_lowering, "_max_pool2d_backward_scatter",
                        lambda *a: scattered.append(1) or real(*a))
    want = _grads(*CASES[case], channels_last, compiled=False)
    got = _grads(*CASES[case], channels_last, compiled=True)
    assert metrics.snapshot().graphs_failed == 0
    if channels_last:
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    else:  # the scatter form: eager's sums, in eager's order
        assert torch.equal(got, want)
    assert bool(scattered) == (not channels_last), "NCHW gradients scatter; channels-last ones gather"
