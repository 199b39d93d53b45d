"""CPU inference convolutions on packed oneDNN weights (conv_fusion.py, packed_conv.py): batch
norm folded in, ReLU and residual adds as post-ops, every result checked against eager — also
after the weights, the batch-norm statistics or a functional weight change between calls (the
cached packed weight must follow), and with the option off."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import assert_same, no_grad_call
from stax.frontend import config, metrics
from stax.frontend.packed_conv import KERNEL, available, fold

pytestmark = pytest.mark.skipif(not available(), reason="this torch has no oneDNN convolution")
PACKED = KERNEL.removeprefix("aten.")


class Block(nn.Module):
    """conv-bn-relu, conv-bn + identity, relu: a ResNet basic block, and a plain conv after it."""

    def __init__(self, c=8):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c3 = nn.Conv2d(c, 4, 1, stride=2)

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = F.relu(self.b2(self.c2(y)) + x)
        return self.c3(y)


def _block(seed=0):
    torch.manual_seed(seed)
    m = Block().eval()
    for bn in (m.b1, m.b2):
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.data.uniform_(0.5, 1.5)
        bn.bias.data.uniform_(-0.5, 0.5)
    return m, torch.randn(2, 8, 10, 10)


def test_block_runs_on_packed_weights_with_bn_relu_and_residual_folded():
    m, x = _block()
    f = no_grad_call(m)
    got = torch.compile(f, backend="stax", dynamic=False)(x)
    assert_same(got, f(x), rtol=1e-4, atol=1e-5)
    snap = metrics.snapshot()
    assert snap.extern_ops[PACKED] == 3 and snap.extern_ops["convolution.default"] == 0
    assert snap.kernels_generated <= 2  # x copied to NHWC, (c3's output back to NCHW): no bn / relu / add kernels


def test_cached_weights_follow_in_place_writes():
    """Without the version check the second and third calls would use the first call's packed weights."""
    m, x = _block()
    f = no_grad_call(m)
    compiled = torch.compile(f, backend="stax", dynamic=False)
    assert_same(compiled(x), f(x), rtol=1e-4, atol=1e-5)
    with torch.no_grad():
        m.c1.weight.mul_(-1.5)
        m.b2.running_var.add_(1.0)
        m.c3.bias.add_(2.0)
    assert_same(compiled(x), f(x), rtol=1e-4, atol=1e-5)
    other, _ = _block(seed=1)
    m.load_state_dict(other.state_dict())
    assert_same(compiled(x), f(x), rtol=1e-4, atol=1e-5)
    assert metrics.snapshot().graphs_compiled == 1


def test_a_weight_the_caller_passes_is_not_packed():
    """Only parameters and buffers are packed: a tensor passed in is new on every call."""
    def f(x, w, scale):
        return F.relu(F.conv2d(x, w, padding=1) * scale)

    compiled = torch.compile(f, backend="stax", dynamic=False)
    x = torch.randn(1, 3, 6, 6)
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        w, scale = torch.randn(5, 3, 3, 3, generator=g), torch.rand(5, 1, 1, generator=g) + 0.5
        with torch.no_grad():
            assert_same(compiled(x, w, scale), f(x, w, scale), rtol=1e-4, atol=1e-5)
    assert metrics.snapshot().extern_ops[PACKED] == 0


class Decaying(nn.Module):
    """A module whose forward writes its own weight (a static input the graph mutates)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3)

    def forward(self, x):
        self.conv.weight.mul_(0.5)
        return self.conv(x)


def test_a_weight_the_graph_writes_is_not_packed():
    torch.manual_seed(0)
    m, m_ref, x = Decaying(), Decaying(), torch.randn(1, 2, 5, 5)
    m_ref.load_state_dict(m.state_dict())
    compiled = torch.compile(m, backend="stax", dynamic=False)
    with torch.no_grad():
        for _ in range(3):
            assert_same(compiled(x), m_ref(x), rtol=1e-4, atol=1e-5)
    assert metrics.snapshot().extern_ops[PACKED] == 0


def test_a_parameter_replaced_by_a_new_tensor():
    m, x = _block()
    f = no_grad_call(m)
    compiled = torch.compile(f, backend="stax", dynamic=False)
    assert_same(compiled(x), f(x), rtol=1e-4, atol=1e-5)
    m.c2.weight = nn.Parameter(torch.randn_like(m.c2.weight))
    assert_same(compiled(x), f(x), rtol=1e-4, atol=1e-5)


def test_off_switch_and_training_keep_aten_convolutions():
    m, x = _block()
    with config.patch(conv_prepack=False):
        got = torch.compile(no_grad_call(m), backend="stax", dynamic=False)(x)
    assert_same(got, no_grad_call(m)(x), rtol=1e-4, atol=1e-5)
    assert metrics.snapshot().extern_ops[PACKED] == 0
    torch._dynamo.reset()
    metrics.reset()
    m.train()
    torch.compile(m, backend="stax", dynamic=False)(x).sum().backward()
    assert metrics.snapshot().extern_ops[PACKED] == 0


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_after_a_convolution_is_a_post_op_where_it_pays(approximate, cpu_capability, monkeypatch):
    """On AVX-512 the GELU runs inside the convolution; on AVX2 the exact one does, the tanh one (slow
    as oneDNN's post-op there: onednn_post_ops.py) runs in the Stax kernel writing the result back."""
    import stax.frontend.packed_conv as pc

    post_ops = []
    convolve = pc._convolve
    monkeypatch.setattr(pc, "_convolve", lambda *a: post_ops.append(a[-1]) or convolve(*a))
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.GELU(approximate=approximate)).eval()
    x = torch.randn(2, 3, 7, 7)
    f = no_grad_call(m)
    assert_same(torch.compile(f, backend="stax", dynamic=False)(x), f(x), rtol=1e-4, atol=1e-5)
    snap = metrics.snapshot()
    assert snap.extern_ops[PACKED] == 1 and snap.kernels_generated <= 2  # x to NHWC, the result back
    gelu = "gelu" if approximate == "none" else "gelu_tanh"
    inside = cpu_capability == "AVX512" or approximate == "none"
    assert set(post_ops) == {gelu if inside else "none"}, post_ops


class LayerScaled(nn.Module):
    """ConvNeXt's block end: conv, eval-mode dropout (traced as a clone), layer scale, residual add."""

    def __init__(self):
        super().__init__()
        self.conv, self.drop = nn.Conv2d(6, 6, 1), nn.Dropout(0.0)
        self.gamma = nn.Parameter(torch.rand(6) + 0.5)

    def forward(self, x):
        return self.drop(self.conv(x)).mul(self.gamma.reshape(1, -1, 1, 1)) + x


def test_a_dead_clone_does_not_stop_the_epilogue():
    torch.manual_seed(0)
    m, x = LayerScaled().eval(), torch.randn(2, 6, 5, 5)
    f = no_grad_call(m)
    assert_same(torch.compile(f, backend="stax", dynamic=False)(x), f(x), rtol=1e-4, atol=1e-5)
    snap = metrics.snapshot()
    assert snap.extern_ops[PACKED] == 1 and snap.kernels_generated <= 2  # no clone, scale or add kernel


@pytest.mark.parametrize("how", ["sub_div", "rsub", "scalar_mul_add"])
def test_fold_matches_the_epilogue(how):
    """fold(): the chain's affine map applied to the weight and bias equals the chain applied
    to the convolution's output (each step's operand order and kind)."""
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(1, 3, 5, 5, generator=g), torch.randn(4, 3, 3, 3, generator=g), torch.randn(4, generator=g)
    m, s = torch.randn(4, 1, 1, generator=g), torch.rand(4, 1, 1, generator=g) + 0.5
    y = F.conv2d(x, w, b)
    programs = {
        "sub_div": ('[["chain", "sub", ["c", 0]], ["sqrt", ["c", 1]], ["chain", "div", ["v", 1]]]', (y - m) / s.sqrt()),
        "rsub": ('[["chain", "rsub", ["c", 0]], ["chain", "mul", ["c", 1]]]', (m - y) * s),
        "scalar_mul_add": ('[["chain", "mul", 2.0], ["chain", "add", ["c", 1]]]', y * 2.0 + s),
    }
    program, want = programs[how]
    wf, bf = fold(w, b, [m, s], program)
    torch.testing.assert_close(F.conv2d(x, wf, bf), want, rtol=1e-5, atol=1e-5)


def test_a_whole_graph_cache_hit_runs_packed_convolutions(tmp_path):
    """The extern's name resolves to the packing kernel when a graph is loaded, not compiled."""
    m, x = _block()
    f = no_grad_call(m)
    with config.patch(graph_cache=True, graph_cache_dir=str(tmp_path)):
        torch.compile(f, backend="stax", dynamic=False)(x)
        torch._dynamo.reset()
        metrics.reset()
        got = torch.compile(f, backend="stax", dynamic=False)(x)
    assert metrics.snapshot().graph_cache_hits == 1
    assert_same(got, f(x), rtol=1e-4, atol=1e-5)


def test_frontend_works_where_the_custom_ops_cannot_register():
    """A torch whose custom-op API refuses these ops loses packing only (a warning), not the frontend."""
    import subprocess
    import sys

    code = (
        "import torch, torch.nn as nn\n"
        "real = torch.library.custom_op\n"
        "def refuse(name, *a, **k):\n"
        "    if name.startswith('stax::'): raise RuntimeError('no custom ops here')\n"
        "    return real(name, *a, **k)\n"
        "torch.library.custom_op = refuse\n"
        "from stax.frontend import metrics, packed_conv, packed_linear\n"
        "assert not packed_conv.available() and not packed_linear.available()\n"
        "m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 2)).eval()\n"
        "x = torch.randn(1, 3, 6, 6)\n"
        "with torch.no_grad():\n"
        "    got, want = torch.compile(m, backend='stax', options={'strict': True})(x), m(x)\n"
        "torch.testing.assert_close(got, want)\n"
        "assert metrics.snapshot().extern_ops['convolution.default'] == 1\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "could not register stax::packed_conv2d" in r.stderr
