"""A materialized value no user sees is stored in its reads' memory order (read_order.py): after a
channels-last convolution, batch norm + ReLU saved for the backward graph stays NHWC (no transposing
kernel on either side); a value the user receives or a view reshapes keeps eager's layout. And the
compiled graph keeps no reference to its inputs during the call (saved activations die early)."""

import gc
import weakref
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import assert_same
from stax import ir
from stax.frontend import config
from stax.frontend.read_order import may_follow_reads, strides_following_reads
from stax.ir import dtypes as dt

aten = torch.ops.aten
i = ir.pointwise_vars(4)
SIZES = (2, 3, 4, 5)


def _load(name, strides):
    return ir.load(name, sum(s * v for s, v in zip(strides, i)), dt.float32)


def test_strides_follow_agreeing_full_size_reads():
    nhwc = (60, 1, 15, 3)
    both = ir.op("add", _load("a", nhwc), _load("b", nhwc))
    assert strides_following_reads(both, i, SIZES) == nhwc
    per_channel = ir.load("c", i[1], dt.float32)  # broadcast: no vote
    assert strides_following_reads(ir.op("mul", both, per_channel), i, SIZES) == nhwc
    assert strides_following_reads(_load("a", (60, 20, 5, 1)), i, SIZES) is None  # row-major: keep
    mixed = ir.op("add", _load("a", nhwc), _load("b", (60, 20, 5, 1)))
    assert strides_following_reads(mixed, i, SIZES) is None  # disagreeing reads: keep row-major
    sized_one = strides_following_reads(_load("a", (6, 1, 6, 3)), i, (2, 3, 1, 2))
    assert sized_one is not None and (sized_one[0], sized_one[1], sized_one[3]) == (6, 1, 3)


def test_only_buffers_no_user_sees_and_no_view_reshapes():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(aten.relu.default, (x,))
    saved = g.call_function(aten.alias.default, (y,))
    z = g.call_function(aten.mean.dim, (y, [2, 3]))
    g.output((z, saved))
    ctx = SimpleNamespace(saved_nodes={saved})
    assert may_follow_reads(ctx, y)
    assert not may_follow_reads(SimpleNamespace(saved_nodes=set()), y)  # returned to the user
    g.call_function(aten.view.default, (y, [2, -1]))
    assert not may_follow_reads(ctx, y)  # a flatten of an NHWC buffer would be a copy


class Tail(nn.Module):
    """The CNN's last block: conv -> bn -> relu -> mean; relu is saved for the backward graph."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(4, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x))).mean((2, 3))


def _step(follow: bool, monkeypatch):
    from stax.frontend import aot

    reported = []
    real = aot.report_output_strides
    monkeypatch.setattr(aot, "report_output_strides",
                        lambda lowered: (reported.append(lowered.output_strides), real(lowered))[1])
    torch.manual_seed(0)
    m, m_ref = Tail().train(), Tail().train()
    m_ref.load_state_dict(m.state_dict())
    x = torch.randn(2, 4, 6, 6)
    torch._dynamo.reset()
    with config.patch(follow_read_order=follow, partitioner="default"):  # the ReLU saved, not recomputed
        y = torch.compile(m, backend="stax", dynamic=False)(x)
        y.square().sum().backward()
    y_ref = m_ref(x)
    y_ref.square().sum().backward()
    assert_same(y, y_ref, rtol=1e-4, atol=1e-5)
    for p, q in zip(m.parameters(), m_ref.parameters()):
        assert_same(p.grad, q.grad, rtol=1e-4, atol=1e-4)
    return [st for strides in reported if strides for st in strides if st is not None and len(st) == 4]


def test_saved_relu_after_channels_last_conv_stays_nhwc(monkeypatch):
    on = _step(True, monkeypatch)
    off = _step(False, monkeypatch)
    nhwc = (288, 1, 48, 8)  # (2, 8, 6, 6) channels-last: the convolution's output is saved so either way
    assert on.count(nhwc) == off.count(nhwc) + 1  # and relu(bn(conv(x))) too, with the rule on


def test_the_call_keeps_no_reference_to_its_inputs():
    """The module clears the list it gets and frees each input after its last use; the compiled
    graph itself must hold none (else a saved activation outlives its last reader)."""

    def f(a, b):
        return (a * 2 + b).sum()

    a, b = torch.randn(64), torch.randn(64)
    seen = []
    from stax.frontend import runtime

    cg = None
    real = runtime.CompiledGraph.__init__

    def grab(self, *args, **kwargs):
        nonlocal cg
        real(self, *args, **kwargs)
        cg = self

    try:
        runtime.CompiledGraph.__init__ = grab
        torch._dynamo.reset()
        torch.compile(f, backend="stax", dynamic=False)(a, b)
    finally:
        runtime.CompiledGraph.__init__ = real
    assert cg is not None
    def probe(args):  # stands in for the module: clears its list as the generated wrapper does
        refs = [weakref.ref(t) for t in args]
        args.clear()
        gc.collect()
        seen.append([r() is None for r in refs])
        return (torch.zeros(()),)

    cg._call = probe
    cg([torch.randn(64), torch.randn(64)])
    assert seen == [[True, True]]
