"""Views are index maps (no copies), non-contiguous inputs, and outputs that alias."""

from __future__ import annotations

import torch
from conftest import check, run_stax
from stax.frontend import metrics
from test_pointwise import make


def test_view_ops_compose_without_copies():
    """A chain of views feeding one pointwise op is one kernel with index maps."""
    x = make(torch.float32, (4, 6, 8))

    def f(a):
        b = a.permute(2, 0, 1).reshape(8, 24).t()  # (24, 8): non-contiguous reshape of a permute
        c = a[:, 1:5:2, ::3].unsqueeze(0).squeeze(0).transpose(0, 2)  # slices with steps
        d = a.select(1, 3).expand(2, 4, 8)
        return b * 2, c + 1, d.sum(0)

    m = check(f, x)
    assert m.nodes_lowered == 3  # one buffer per output, none for views


def test_non_contiguous_inputs():
    base = make(torch.float32, (16, 40))
    xt = base.t()  # transposed
    xs = base[:, ::3]  # strided slice
    xo = base[2:10, 5:30]  # storage offset
    check(lambda a, b, c: (a.exp() + 1, b * b, c.sum(-1), c.t() - 1), xt, xs, xo)


def test_expanded_input_and_broadcasts():
    x = make(torch.float32, (1, 33)).expand(8, 33)  # stride 0 input
    y = make(torch.float32, (8, 1))
    z = make(torch.float32, ())
    check(lambda a, b, c: (a + b, a * c, b - c + a), x, y, z)


def test_reshape_paths():
    x = make(torch.float32, (6, 10, 4))
    check(lambda a: ((a * 2).view(60, 4), (a + 1).reshape(-1), (a - 1).view(6, 5, 2, 4).sum(2)), x)


def test_split_unbind_and_cat_of_views():
    x = make(torch.float32, (6, 12))
    check(lambda a: [t * 2 for t in a.split(5, dim=1)] + [u + 1 for u in a.unbind(0)[:2]], x)


def test_output_is_view_of_input():
    """Outputs that are views of inputs come back as views (like eager), not copies."""
    x = make(torch.float32, (6, 12))
    fn = lambda a: (a.t(), a[1:3], a)  # noqa: E731
    out = run_stax(fn, x)
    for o, e in zip(out, fn(x)):
        assert torch.equal(o, e)
    assert out[0].data_ptr() == x.data_ptr() and out[1].data_ptr() == x[1:3].data_ptr()
    assert metrics.snapshot().fallback_calls == 0


def test_output_view_of_intermediate():
    x = make(torch.float32, (6, 12))
    check(lambda a: ((a + 1).relu(), (a + 1).relu().view(-1), (a + 1).relu().t()), x)


def test_channels_last_input_and_output_strides():
    x = make(torch.float32, (2, 3, 4, 5)).to(memory_format=torch.channels_last)
    check(lambda a: a * 2 + 1, x)
