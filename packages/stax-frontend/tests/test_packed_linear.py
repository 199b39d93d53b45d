"""CPU inference linear layers on packed oneDNN weights (linear_fusion.py, packed_linear.py):
addmm / mm by a transposed weight and GPT-2's Conv1D form, ReLU / GELU as post-ops, every
result checked against eager — also after the weights change between calls — and with the
option off, in training, and for a weight the graph writes."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import assert_same, no_grad_call
from stax.frontend import config, metrics
from stax.frontend.packed_linear import KERNEL, available

pytestmark = pytest.mark.skipif(not available(), reason="this torch has no oneDNN linear")
PACKED = KERNEL


class Mlp(nn.Module):
    """linear-gelu, linear-relu (through a 3-d view), a bias-free linear, a Conv1D-style addmm."""

    def __init__(self, d=16):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(d, 4 * d), nn.Linear(4 * d, d), nn.Linear(d, d, bias=False)
        self.w, self.bias = nn.Parameter(torch.randn(d, 8) * 0.2), nn.Parameter(torch.randn(8))

    def forward(self, x):
        y = F.relu(self.b(F.gelu(self.a(x), approximate="tanh")))
        y = self.c(y) + x
        return torch.addmm(self.bias, y.reshape(-1, y.shape[-1]), self.w)


def _mlp(seed=0):
    torch.manual_seed(seed)
    return Mlp().eval(), torch.randn(2, 5, 16)


def test_linears_run_on_packed_weights_with_their_activation(cpu_capability):
    """ReLU always runs in the GEMM; GELU only where oneDNN's post-op is cheap (AVX-512), else it is
    a Stax kernel of its own (onednn_post_ops.py)."""
    m, x = _mlp()
    f = no_grad_call(m)
    assert_same(torch.compile(f, backend="stax", dynamic=False)(x), f(x), rtol=1e-4, atol=1e-5)
    snap = metrics.snapshot()
    assert snap.extern_ops[PACKED] == 4 and snap.extern_ops["addmm.default"] == snap.extern_ops["mm.default"] == 0
    # c(y) + x, and the tanh GELU where it is not a post-op
    assert snap.kernels_generated == {"AVX512": 1, "AVX2": 2}[cpu_capability], snap.kernels_generated


def test_dynamic_shapes_pack_each_weight_once(monkeypatch):
    """dynamic=True: the symbolic graph runs its linear layers on packed weights too, packed once at
    the first call and reused at every other row count (a repack per size would cost a weight copy
    per call); results equal eager at each size, also after a weight changes."""
    import stax.frontend.packed_linear as pl

    builds = []
    build = pl._build
    monkeypatch.setattr(pl, "_build", lambda a: builds.append(a[0].shape[0]) or build(a))
    m, _ = _mlp()
    f = no_grad_call(m)
    compiled = torch.compile(f, backend="stax", dynamic=True)
    for n in (3, 5, 11, 4):
        x = torch.randn(2, n, 16)
        assert_same(compiled(x), f(x), rtol=1e-4, atol=1e-5)
    snap = metrics.snapshot()
    assert snap.graphs_compiled == 1 and snap.graphs_failed == 0 and snap.extern_ops[PACKED] == 4, snap
    assert builds == [6] * 4  # the four weights, each once, at the first call's 2 x 3 rows
    with torch.no_grad():
        m.a.weight.mul_(-1.5)
    x = torch.randn(2, 7, 16)
    assert_same(compiled(x), f(x), rtol=1e-4, atol=1e-5)
    assert len(builds) == 5


def test_cached_weights_follow_in_place_writes():
    m, x = _mlp()
    f = no_grad_call(m)
    compiled = torch.compile(f, backend="stax", dynamic=False)
    assert_same(compiled(x), f(x), rtol=1e-4, atol=1e-5)
    with torch.no_grad():
        m.a.weight.mul_(-1.5)
        m.bias.add_(1.0)
        m.w.mul_(2.0)
    assert_same(compiled(x), f(x), rtol=1e-4, atol=1e-5)
    m.load_state_dict(_mlp(seed=1)[0].state_dict())
    assert_same(compiled(x), f(x), rtol=1e-4, atol=1e-5)
    assert metrics.snapshot().graphs_compiled == 1


def test_a_weight_the_caller_passes_is_not_packed():
    """Only parameters and buffers are packed: a tensor passed in is new on every call."""
    def f(x, w, b):
        return F.gelu(F.linear(x, w, b))

    compiled = torch.compile(f, backend="stax", dynamic=False)
    x = torch.randn(3, 6)
    with torch.no_grad():
        for seed in range(3):
            g = torch.Generator().manual_seed(seed)
            w, b = torch.randn(5, 6, generator=g), torch.randn(5, generator=g)
            assert_same(compiled(x, w, b), f(x, w, b), rtol=1e-4, atol=1e-5)
    assert metrics.snapshot().extern_ops[PACKED] == 0


class Decaying(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 5)

    def forward(self, x):
        self.lin.weight.add_(1.0)
        return self.lin(x)


def test_a_weight_the_graph_writes_is_not_packed():
    torch.manual_seed(0)
    m, m_ref, x = Decaying(), Decaying(), torch.randn(3, 4)
    m_ref.load_state_dict(m.state_dict())
    compiled = torch.compile(m, backend="stax", dynamic=False)
    with torch.no_grad():
        for _ in range(3):
            assert_same(compiled(x), m_ref(x), rtol=1e-4, atol=1e-5)
    assert metrics.snapshot().extern_ops[PACKED] == 0


def test_off_switch_and_training_keep_aten_gemms():
    m, x = _mlp()
    with config.patch(linear_prepack=False):
        got = torch.compile(no_grad_call(m), backend="stax", dynamic=False)(x)
    assert_same(got, no_grad_call(m)(x), rtol=1e-4, atol=1e-5)
    assert metrics.snapshot().extern_ops[PACKED] == 0
    torch._dynamo.reset()
    metrics.reset()
    m.train()
    torch.compile(m, backend="stax", dynamic=False)(x).sum().backward()
    assert metrics.snapshot().extern_ops[PACKED] == 0
