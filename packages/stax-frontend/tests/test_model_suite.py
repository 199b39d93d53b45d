"""Issue 6's model suite: inference and one training step equal to eager (loss, every
grad, and mutated buffers such as batchnorm running stats), with the fallback count."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same
from models import CNN, GPT, Block, mlp
from stax.frontend import metrics

TOL = dict(rtol=1e-4, atol=1e-5)  # float32 through several matmuls and reductions


def _data(name, device="cpu"):
    g = torch.Generator().manual_seed(1)
    if name == "mlp":
        m, x, t = mlp(), torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g)
    elif name == "cnn":
        m, x, t = CNN(), torch.randn(4, 3, 16, 16, generator=g), torch.randint(0, 10, (4,), generator=g)
    elif name == "encoder":
        m, x, t = Block(32, 4, causal=False), torch.randn(2, 10, 32, generator=g), torch.randn(2, 10, 32, generator=g)
    else:
        m, x, t = GPT(), torch.randint(0, 50, (2, 16), generator=g), torch.randint(0, 50, (2, 16), generator=g)
    return m.to(device), x.to(device), t.to(device)


def _loss(name, out, target):
    if name == "encoder":
        return F.mse_loss(out, target)
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))


MODELS = ["mlp", "cnn", "encoder", "gpt"]


def check_inference(name, device="cpu"):
    """The model in eval mode, compiled, equals eager; returns the metrics (zero fallbacks asserted)."""
    torch.manual_seed(0)
    model, x, _ = _data(name, device)
    model.eval()
    with torch.no_grad():
        expected = model(x)
        actual = torch.compile(model, backend="stax", dynamic=False)(x)
    assert_same(actual, expected, **TOL)
    m = metrics.snapshot()
    assert m.graphs_failed == 0 and m.fallback_calls == 0, dict(m.fallback_ops)
    return m


def assert_same_step(model, ref, loss, loss_ref):
    """After one step: the loss, every gradient and every buffer (running stats: mutations) as eager's."""
    assert_same(loss, loss_ref, **TOL)
    for (pname, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        assert p.grad is not None, pname
        assert_same(p.grad, q.grad, check_stride=False, **TOL)
    for (_, b), (_, c) in zip(model.named_buffers(), ref.named_buffers()):
        assert_same(b, c, **TOL)


@pytest.mark.parametrize("name", MODELS)
def test_inference(name):
    check_inference(name)


@pytest.mark.parametrize("name", MODELS)
def test_training_step(name):
    torch.manual_seed(0)
    model, x, target = _data(name)
    ref = copy.deepcopy(model)
    model.train()
    ref.train()
    compiled = torch.compile(lambda inp: _loss(name, model(inp), target), backend="stax", dynamic=False)
    loss = compiled(x)
    loss.backward()
    loss_ref = _loss(name, ref(x), target)
    loss_ref.backward()
    assert_same_step(model, ref, loss, loss_ref)
    m = metrics.snapshot()
    assert m.graphs_compiled == 2 and m.graphs_failed == 0
    assert m.fallback_calls == 0, dict(m.fallback_ops)


def test_training_step_inside_compiled_frame():
    """loss.backward() inside the compiled function (a whole training step): AOTAutograd
    compiles the backward lazily while dynamo is active. Exactly the forward and the
    backward graph are compiled (dynamo must not trace Stax's compiler or the generated
    wrappers), and a second step compiles nothing new."""
    torch.manual_seed(0)
    model, x, target = _data("gpt")
    ref = copy.deepcopy(model)

    def step(mod, inp):
        for p in mod.parameters():
            p.grad = None
        loss = _loss("gpt", mod(inp), target)
        loss.backward()  # a graph break: the rest of the frame runs in a resume function
        return loss

    compiled = torch.compile(step, backend="stax", dynamic=False)
    for k in range(2):
        loss = compiled(model, x)
        loss_ref = step(ref, x)
        assert_same(loss, loss_ref, **TOL)
        for (_, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
            assert_same(p.grad, q.grad, check_stride=False, **TOL)
        m = metrics.snapshot()
        assert (m.graphs_compiled, m.graphs_failed, m.fallback_calls) == (2, 0, 0), (k, m)
