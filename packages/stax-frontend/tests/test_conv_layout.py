"""Channels-last convolutions in CPU inference graphs (lowering/conv_layout.py): results and
output strides as eager's, and the layouts as planned — the graph input and each weight copied
once to NHWC, the kernel between two convolutions writing NHWC directly (no NCHW copy first),
training graphs untouched."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import assert_same, check
from stax.frontend import config, metrics


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)

    def forward(self, x):
        y = self.c2(F.relu(self.bn1(self.c1(x))))
        return y, y.mean((2, 3))


def _model():
    torch.manual_seed(0)
    m = ConvNet().eval()
    m.bn1.running_mean.uniform_(-0.5, 0.5)
    m.bn1.running_var.uniform_(0.5, 2.0)
    return m, torch.randn(2, 3, 12, 12)


def _infer(m):
    def f(x):
        with torch.no_grad():
            return m(x)

    return f


def test_inference_convolutions_run_channels_last():
    m, x = _model()
    check(_infer(m), x, rtol=1e-4, atol=1e-5)  # values and NCHW output strides as eager's
    # x and two weights copied to NHWC; relu(bn(conv1)) written NHWC by its own kernel: no fourth copy
    assert metrics.snapshot().materialized["conv:channels_last"] == 3


def test_off_switch_and_training_graphs_keep_nchw():
    m, x = _model()
    with config.patch(conv_channels_last=False):
        check(_infer(m), x, rtol=1e-4, atol=1e-5)
    assert metrics.snapshot().materialized["conv:channels_last"] == 0
    torch._dynamo.reset()
    metrics.reset()
    m.train()
    y, pooled = torch.compile(m, backend="stax", dynamic=False)(x)
    y_ref, pooled_ref = _model()[0].train()(x)
    assert_same(y, y_ref, rtol=1e-4, atol=1e-5)
    assert_same(pooled, pooled_ref, rtol=1e-4, atol=1e-5)
    assert metrics.snapshot().materialized["conv:channels_last"] == 0


@pytest.mark.parametrize("shape", [(1, 3, 1, 7), (2, 3, 5, 1)])
def test_size_one_spatial_dims(shape):
    m, _ = _model()
    check(_infer(m), torch.randn(*shape), rtol=1e-4, atol=1e-5)
