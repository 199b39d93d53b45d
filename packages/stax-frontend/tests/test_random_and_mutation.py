"""Dropout from the in-kernel RNG (distribution, reproducibility, backward uses the same
mask) and input mutations (module buffers, optimizer-style copy_) written back."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same, run_stax
from stax.frontend import metrics


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_distribution_and_backward_mask(p):
    x = torch.randn(64, 256).abs() + 0.1  # nonzero everywhere, so zeros in y are dropped elements
    x.requires_grad_()
    f = torch.compile(lambda a: F.dropout(a, p, training=True), backend="stax", dynamic=False)
    torch.manual_seed(0)
    y = f(x)
    kept = y != 0
    frac = kept.float().mean().item()
    n = x.numel()
    # Bernoulli(1-p) over 16384 elements: within 6 standard deviations (<= 0.024)
    assert abs(frac - (1 - p)) < 6 * ((p * (1 - p) / n) ** 0.5)
    assert_same(y[kept], (x * (1 / (1 - p)))[kept])
    y.sum().backward()
    assert_same(x.grad, kept.float() / (1 - p))  # backward applies the forward's mask
    # rows are not all identical (the index feeds the hash) and calls differ
    assert not torch.equal(kept[0], kept[1])
    assert not torch.equal(f(x) != 0, kept)
    torch.manual_seed(0)
    assert torch.equal(f(x) != 0, kept)  # torch.manual_seed reproduces the mask
    assert metrics.snapshot().fallback_calls == 0


def test_dropout_eval_is_identity():
    x = torch.randn(8, 16)
    assert torch.equal(run_stax(lambda a: F.dropout(a, 0.5, training=False) * 1, x), x)


def test_module_buffer_mutation():
    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("steps", torch.zeros(()))
            self.register_buffer("ema", torch.zeros(16))

        def forward(self, x):
            self.steps.add_(1)
            self.ema.mul_(0.9).add_(x.mean(0) * 0.1)
            return x * self.steps

    m, ref = Counter(), Counter()
    cm = torch.compile(m, backend="stax", dynamic=False)
    for k in range(3):
        x = torch.randn(4, 16, generator=torch.Generator().manual_seed(k))
        assert_same(cm(x), ref(x))
    assert_same(m.steps, ref.steps)
    assert_same(m.ema, ref.ema)
    assert metrics.snapshot().fallback_calls == 0


def test_optimizer_style_copy():
    w = torch.randn(8, 8)
    g = torch.randn(8, 8)
    w_ref = w.clone()

    def sgd(w, g):
        w.copy_(w - 0.1 * g)
        return w.sum()

    s = run_stax(sgd, w, g)
    s_ref = sgd(w_ref, g)
    assert_same(s, s_ref)
    assert_same(w, w_ref)


def test_batchnorm_running_stats_update():
    bn, ref = torch.nn.BatchNorm1d(12), torch.nn.BatchNorm1d(12)
    x = torch.randn(32, 12) * 3 + 1
    out = torch.compile(bn, backend="stax", dynamic=False)(x)
    assert_same(out, ref(x), rtol=1e-5, atol=1e-5)
    for a, b in zip(bn.buffers(), ref.buffers()):
        assert_same(a, b, rtol=1e-5, atol=1e-6)
