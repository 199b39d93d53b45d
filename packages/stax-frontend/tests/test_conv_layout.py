"""Channels-last convolutions in CPU graphs (lowering/conv_layout.py): results and output
strides as eager's, and the layouts as planned — the graph input and each weight copied once
to NHWC, the kernel between two convolutions writing NHWC directly (no NCHW copy first); in
training, saved activations stay NHWC (reported to AOTAutograd) and the backward's
convolutions run channels-last too."""

import os

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


@pytest.mark.parametrize("prepack", [False, True])
def test_inference_convolutions_run_channels_last(prepack):
    m, x = _model()
    with config.patch(conv_prepack=prepack):
        check(_infer(m), x, rtol=1e-4, atol=1e-5)  # values and NCHW output strides as eager's
    # ATen convolutions: x and two weights copied to NHWC; relu(bn(conv1)) written NHWC by its own
    # kernel: no fourth copy. Packed (test_packed_conv.py): only x is copied, bn and relu run in conv1
    assert metrics.snapshot().materialized["conv:channels_last"] == (1 if prepack else 3)


def test_off_switch_keeps_nchw():
    m, x = _model()
    with config.patch(conv_channels_last=False):
        check(_infer(m), x, rtol=1e-4, atol=1e-5)
    assert metrics.snapshot().materialized["conv:channels_last"] == 0


def test_training_saves_activations_channels_last(monkeypatch):
    """A training step: values, output strides and gradients as eager's; the forward graph
    returns its saved activations NHWC and says so to AOTAutograd (without the report the
    backward graph would be compiled for NCHW and copy every saved activation back)."""
    from stax.frontend import aot

    reported = []
    real = aot.report_output_strides
    monkeypatch.setattr(aot, "report_output_strides",
                        lambda lowered: (reported.append(lowered.output_strides), real(lowered))[1])
    m, x = _model()
    m.train()
    m_ref = _model()[0].train()
    compiled = torch.compile(m, backend="stax", dynamic=False)
    (y, pooled), (y_ref, pooled_ref) = compiled(x), m_ref(x)
    assert_same(y, y_ref, rtol=1e-4, atol=1e-5)  # includes eager's (NCHW) strides
    assert_same(pooled, pooled_ref, rtol=1e-4, atol=1e-5)
    (y.sum() + pooled.square().sum()).backward()
    (y_ref.sum() + pooled_ref.square().sum()).backward()
    for p, q in zip(m.parameters(), m_ref.parameters()):
        assert_same(p.grad, q.grad, rtol=1e-4, atol=1e-4)
    nhwc = [st for strides in reported if strides for st in strides
            if st is not None and len(st) == 4 and st[1] == 1]
    assert nhwc, reported  # relu(bn(conv1)) is saved for conv2's backward, as NHWC
    assert metrics.snapshot().extern_ops["convolution_backward.default"] == 2


@pytest.mark.parametrize("shape", [(1, 3, 1, 7), (2, 3, 5, 1)])
def test_size_one_spatial_dims(shape):
    m, _ = _model()
    check(_infer(m), torch.randn(*shape), rtol=1e-4, atol=1e-5)


def test_a_value_only_saved_keeps_eager_layout():
    """preferred_strides: NHWC only where a channels-last convolution reads the value; a 4-D
    value only saved for the backward graph (attention probabilities, say) keeps eager's layout."""
    from types import SimpleNamespace

    from stax.frontend.lowering import conv_layout

    aten = torch.ops.aten
    g = torch.fx.Graph()
    x, w = g.placeholder("x"), g.placeholder("w")
    y = g.call_function(aten.relu.default, (x,))
    g.output((y,))
    x.meta["val"], w.meta["val"], y.meta["val"] = (torch.empty(2, 3, 4, 5), torch.empty(6, 3, 1, 1),
                                                   torch.empty(2, 3, 4, 5))
    from stax.frontend.symbolic import Symbols
    from stax.frontend.targets import TARGETS

    ctx = SimpleNamespace(saved_nodes={y}, cfg=config.Config(), device="cpu", target_info=TARGETS["cpu"],
                          kind="inference", env={}, symbols=Symbols())
    assert conv_layout.preferred_strides(ctx, y) is None
    conv = g.call_function(aten.convolution.default, (y, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1))
    conv.meta["val"] = torch.empty(2, 6, 4, 5)
    assert conv_layout.preferred_strides(ctx, y) == (60, 1, 15, 3)


def test_an_activation_returned_and_saved_keeps_eager_strides_for_the_user():
    """relu(bn(conv1(x))) is the user's output, conv2's input and saved for backward: the user
    gets eager's NCHW strides (its saved copy may differ), gradients as eager's."""
    m, x = _model()
    m.train()
    m_ref = _model()[0].train()

    def f(m, x):
        r = F.relu(m.bn1(m.c1(x)))
        return r, m.c2(r)

    r, y = torch.compile(f, backend="stax", dynamic=False)(m, x)
    r_ref, y_ref = f(m_ref, x)
    assert_same(r, r_ref, rtol=1e-4, atol=1e-5)  # values and strides
    assert_same(y, y_ref, rtol=1e-4, atol=1e-5)
    (r.square().sum() + y.sum()).backward()
    (r_ref.square().sum() + y_ref.sum()).backward()
    for p, q in zip(m.parameters(), m_ref.parameters()):
        assert_same(p.grad, q.grad, rtol=1e-4, atol=1e-4)


def _pool_layouts(fn, x):
    """The layouts of the Reduction buffers `fn` lowers to (inference graph of `x`)."""
    from stax.frontend import lower
    from stax.ir import ComputedBuffer, Reduction
    from torch._decomp import core_aten_decompositions
    from torch.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(fn, decomposition_table=core_aten_decompositions())(x)
    graph = lower(gm, [x], config.current(), kind="inference").graph
    return [tuple(int(s) for s in n.layout.strides) for n in graph.nodes
            if isinstance(n, ComputedBuffer) and isinstance(n.body, Reduction)]


@pytest.mark.parametrize("pool", ["max", "avg"])
def test_pooling_keeps_channels_last(pool):
    """A pooling of NHWC activations is stored NHWC, as eager's: stored NCHW, ResNet's max pool
    wrote across channels and both of its readers (the next convolution, the residual add)
    read it back through a transpose."""
    op = F.max_pool2d if pool == "max" else F.avg_pool2d
    fn = lambda x: op((x * 2).relu(), 3, 2, 1) + 1  # noqa: E731
    x = torch.randn(2, 8, 9, 9).to(memory_format=torch.channels_last)
    strides = _pool_layouts(fn, x)
    assert strides and all(st[1] == 1 for st in strides), strides  # channels innermost
    check(fn, x)
    nchw = _pool_layouts(fn, x.contiguous())
    assert nchw and all(st[-1] == 1 for st in nchw), nchw


# ---------------------------------------------------------------- the GPU route (cuDNN), through Triton's interpreter


GPU = "cuda" if torch.cuda.is_available() else "cpu"


def _gpu_route():
    """cuda tensors on a GPU; else CPU tensors through Triton's interpreter (conftest sets it)."""
    pytest.importorskip("triton")
    if GPU == "cpu" and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        pytest.skip("the GPU route without a GPU needs TRITON_INTERPRET=1")
    return config.patch(device_override="gpu" if GPU == "cpu" else None)


def _captured_aten_calls(monkeypatch):
    """(op name, args) of every extern ATen call the compiled graphs make."""
    from stax.frontend import extern_calls

    calls, real = [], extern_calls.call_aten

    def spy(ctx, node, args, kwargs, *a, **k):
        calls.append((str(node.target), args))
        return real(ctx, node, args, kwargs, *a, **k)

    from stax.frontend.lowering import conv_layout

    monkeypatch.setattr(conv_layout, "call_aten", spy)
    return calls


def test_gpu_training_convolutions_run_channels_last_and_stax_sums_the_bias(monkeypatch):
    """On the GPU route a training step's convolutions take NHWC memory (cuDNN's Hopper kernels
    are NHWC: given NCHW they transpose on every call) and convolution_backward is asked for no
    bias gradient: Stax sums grad_output itself (ATen's separate reduce kernel: 1.3 ms per
    ConvNeXt-atto step on the H200). Gradients as eager's."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)  # (a GPU: eager and stax in full float32)
    with _gpu_route():
        calls = _captured_aten_calls(monkeypatch)
        m, x = _model()
        m, x = m.train().to(GPU), x.to(GPU)
        m_ref = _model()[0].train().to(GPU)
        compiled = torch.compile(m, backend="stax", dynamic=False)
        (y, pooled), (y_ref, pooled_ref) = compiled(x), m_ref(x)
        assert_same(y, y_ref, rtol=1e-4, atol=1e-5)
        (y.sum() + pooled.square().sum()).backward()
        (y_ref.sum() + pooled_ref.square().sum()).backward()
        for p, q in zip(m.parameters(), m_ref.parameters()):
            assert_same(p.grad, q.grad, rtol=1e-4, atol=1e-4)
        assert metrics.snapshot().graphs_gpu == 2
    masks = [args[-1] for op, args in calls if "convolution_backward" in op]
    assert masks and all(mask[2] is False for mask in masks), masks  # c2 has a bias: its gradient is Stax's
    assert metrics.snapshot().materialized["conv:channels_last"] > 0
