"""§7 Examples 7.1 and 7.2 end to end: the IR the frontend hands to stax.sched, and the results."""

from __future__ import annotations

import pathlib
import textwrap

import torch
import torch.nn.functional as F
from conftest import assert_same, run_stax
from stax.frontend import config, metrics

EXAMPLE_7_1_NODES = """\
  buf1: cpu float32[64, 1] strides=[1, 1] = Reduction(ranges=[64, 1], reduction_ranges=[128], sum)
      tmp0 = load(primals_1, 128*i0 + r0) : float32
      -> tmp0
  buf2: cpu float32[64, 128] strides=[128, 1] = Pointwise(ranges=[64, 128])
      tmp0 = load(primals_1, 128*i0 + i1) : float32
      tmp1 = load(buf1, i0) : float32
      tmp2 = truediv(tmp0, tmp1) : float32
      -> tmp2
"""


def _dumped(tmp_path: pathlib.Path, kind: str) -> dict[str, str]:
    (d,) = [p for p in tmp_path.iterdir() if p.name.startswith(kind)]
    return {f.name: f.read_text() for f in d.iterdir()}


def test_example_7_1(tmp_path):
    """k(x) = x / x.sum(-1, keepdim=True): a row-sum Reduction, then a Pointwise divide
    reading it at i0 (DESIGN.md's walk, step 2)."""
    x = torch.randn(64, 128).abs() + 0.5
    x.requires_grad_()
    k = lambda x: x / x.sum(-1, keepdim=True)  # noqa: E731
    with config.patch(debug=True, debug_dir=str(tmp_path)):
        y = run_stax(k, x)
    assert_same(y, k(x))
    ir = _dumped(tmp_path, "forward")["ir.txt"]
    assert "input primals_1: cpu float32[64, 128] strides=[128, 1]" in ir
    assert EXAMPLE_7_1_NODES in ir, ir


def test_example_7_2_cpu_materializes_exp(tmp_path):
    """m(x) = (exp(x).sum(-1), exp(x).amax(-1)): on CPU exp has two users and is
    expensive, so §6.6 rule 1 writes it to buf1; both reductions read buf1."""
    x = torch.randn(64, 128)

    def m(x):
        e = x.exp()
        return e.sum(-1), e.amax(-1)

    with config.patch(debug=True, debug_dir=str(tmp_path)):
        out = run_stax(m, x)
    assert_same(out, m(x))
    ir = _dumped(tmp_path, "inference")["ir.txt"]
    expected = textwrap.dedent("""\
      buf1: cpu float32[64, 128] strides=[128, 1] = Pointwise(ranges=[64, 128])
          tmp0 = load(arg0_1, 128*i0 + i1) : float32
          tmp1 = exp(tmp0) : float32
          -> tmp1
      buf2: cpu float32[64, 1] strides=[1, 1] = Reduction(ranges=[64, 1], reduction_ranges=[128], sum)
          tmp0 = load(buf1, 128*i0 + r0) : float32
          -> tmp0
      buf3: cpu float32[64, 1] strides=[1, 1] = Reduction(ranges=[64, 1], reduction_ranges=[128], max)
          tmp0 = load(buf1, 128*i0 + r0) : float32
          -> tmp0
    """)
    assert textwrap.indent(expected, "  ") in ir, ir
    assert metrics.snapshot().materialized["rule1:expensive_multi_use"] == 1


def test_example_7_2_gpu_costs_inline_exp(tmp_path):
    """Same program under the GPU cost table: exp stays inline in both reductions."""
    x = torch.randn(64, 128)
    m = lambda x: (x.exp().sum(-1), x.exp().amax(-1))  # noqa: E731
    with config.patch(debug=True, debug_dir=str(tmp_path), cpu_costs=config.GPU_COSTS):
        out = run_stax(m, x)
    assert_same(out, m(x))
    ir = _dumped(tmp_path, "inference")["ir.txt"]
    assert "Pointwise" not in ir and ir.count("exp(tmp0)") == 2, ir
    assert metrics.snapshot().materialized["rule1:expensive_multi_use"] == 0


def test_frontend_cse_merges_duplicate_exp(tmp_path):
    """`x.exp()` written twice is one node with two users after frontend CSE."""
    x = torch.randn(64, 128)
    m = lambda x: (x.exp().sum(-1), x.exp().amax(-1))  # noqa: E731
    out = run_stax(m, x)
    assert_same(out, m(x))
    assert metrics.snapshot().materialized["rule1:expensive_multi_use"] == 1


def test_broadcast_operand_is_computed_once_per_channel(tmp_path):
    """§6.6 rule 6: batch norm in eval mode with hardswish after it (MobileNetV3). The per-channel
    1/sqrt(var + eps) is read through a broadcast: it gets a 16-element buffer instead of a sqrt and a
    reciprocal per element of the map, and the normalized map, now cheap, is inlined into hardswish's two
    uses (it was a rule-1 buffer, written and read back: 2 x 3.2 MB of traffic per layer). The GPU cost
    table keeps everything inline."""
    x, w, b = torch.randn(4, 16, 56, 56), torch.randn(16), torch.randn(16)
    mean, var = torch.randn(16), torch.rand(16) + 0.5
    m = lambda x: F.hardswish(F.batch_norm(x, mean, var, w, b, training=False))  # noqa: E731
    with config.patch(debug=True, debug_dir=str(tmp_path / "cpu")):
        assert_same(run_stax(m, x), m(x))
    got = metrics.snapshot().materialized
    assert got["rule6:broadcast_expensive"] == 1 and got["rule1:expensive_multi_use"] == 0, got
    ir = _dumped(tmp_path / "cpu", "inference")["ir.txt"]
    assert "float32[16] strides=[1] = Pointwise" in ir and ir.count("= Pointwise") == 2, ir
    metrics.reset()
    with config.patch(cpu_costs=config.GPU_COSTS):
        torch._dynamo.reset()
        assert_same(run_stax(m, x), m(x))
    assert metrics.snapshot().materialized["rule6:broadcast_expensive"] == 0
