"""Wrong values the differential fuzzer found on CPU (issue 18, item 6), each reduced to a small
graph whose answer is known: Stax against eager, at eager's own precision. Each failed before its fix."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _grads(fn, inputs, cotangents, compiled: bool):
    f = torch.compile(fn, backend="stax", fullgraph=True) if compiled else fn
    xs = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    outs = f(*xs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    torch.autograd.backward(outs, cotangents)
    return [o.detach() for o in outs], [x.grad for x in xs if x.requires_grad]


def test_sum_over_an_expanded_dim_of_a_where():
    """bwd-value_171f8944e3: GCC 12.2's vectorizer gave all vectors of an SLP group of masked loads
    the first vector's mask; the backward's sum over the expanded dim of where(x > 0, 0, g) lost
    half its terms (stax-cpu's miscompile probe now adds -fno-tree-loop-if-convert there)."""
    x = torch.tensor([[-1.1258, -1.1524, 0.5667], [0.7935, 0.5988, -1.5551], [-0.3414, 1.8530, 0.4681],
                      [-0.1577, -0.1734, 0.1835], [1.3894, 1.5863, 0.9463], [-0.8437, 0.9318, 1.2590]])

    def fn(x0):
        return F.hardshrink(x0, 0.5), torch.where(x0.expand(2, 6, 3) > 0, 0.5, x0.expand(2, 6, 3))

    cot = [torch.ones(6, 3), torch.arange(36, dtype=torch.float32).view(2, 6, 3)]  # small integers: exact sums
    _, (eager,) = _grads(fn, [x], cot, False)
    _, (stax,) = _grads(fn, [x], cot, True)
    torch.testing.assert_close(stax, eager, rtol=0, atol=0)


def test_std_of_float16_past_the_float16_range_of_its_variance():
    """fwd-nonfinite_45ebc7e83f: std rounded the variance to float16 before its root (inf past 65504)."""
    x = torch.tensor([-1000.0, 200.0, 900.0, -300.0, 50.0, 700.0, -800.0, 100.0], dtype=torch.float16)
    for fn in (lambda t: torch.std(t, 0), lambda t: torch.std_mean(t, 0)[0]):
        eager = fn(x)
        assert torch.isfinite(eager)
        torch.testing.assert_close(torch.compile(fn, backend="stax", fullgraph=True)(x), eager)  # float16 tolerance


def test_bfloat16_scatter_add_sums_in_float():
    """bwd-value_686ae4eb15: scatter_add into bfloat16 added one term at a time in bfloat16
    (0.65625 + 0.166 - 0.8203 = 0); eager sums in float32 and rounds once (0.00195)."""
    x = torch.full((1, 4), 0.65625, dtype=torch.bfloat16)
    src = torch.tensor([[0.166015625] * 4, [-0.8203125] * 4], dtype=torch.bfloat16)
    index = torch.zeros(2, 4, dtype=torch.int64)

    def fn(x0, i, s):
        return torch.scatter_add(x0, 0, i, s) * 2

    eager = fn(x, index, src)
    assert eager[0, 0].item() == 0.00390625
    torch.testing.assert_close(torch.compile(fn, backend="stax", fullgraph=True)(x, index, src), eager, rtol=0, atol=0)


def test_float16_cummin_gradient_sums_in_float():
    """bwd-value_063ae134dc: cummin's backward is a scatter_add of the gradient; in float16 one term
    at a time 1024 + 0.5 + 0.5 is 1024, eager's float32 sum rounds to 1025."""
    x = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float16)
    cot = [torch.tensor([[1024.0, 0.5, 0.5]], dtype=torch.float16)]

    def fn(t):
        return torch.cummin(t, 1)[0]

    _, (eager,) = _grads(fn, [x], cot, False)
    _, (stax,) = _grads(fn, [x], cot, True)
    assert eager[0, 0].item() == 1025.0
    torch.testing.assert_close(stax, eager, rtol=0, atol=0)


def test_float16_scatter_add_forward_sums_in_float():
    """fwd-value_9dbe80c2e7 (scatter_add@f16, forward): the terms landing on one element were
    added one at a time in float16 (1024 + 0.5 + 0.5 stays 1024, ties to even); eager's CPU
    scatter_add sums in float32 and rounds once (1025). Fixed with the half scatter_add in 9569e51."""
    x = torch.tensor([1024.0, -3.0, 0.25], dtype=torch.float16)
    index = torch.tensor([0, 0, 2, 1], dtype=torch.int64)
    src = torch.tensor([0.5, 0.5, 0.0001, 2.0], dtype=torch.float16)

    def fn(x0, i, s):
        return torch.scatter_add(x0, 0, i, s)

    eager = fn(x, index, src)
    assert eager[0].item() == 1025.0
    stax = torch.compile(fn, backend="stax", fullgraph=True)(x, index, src)
    torch.testing.assert_close(stax, eager, rtol=0, atol=0)
