"""Fused attention on cuda (issue 20, item 1): scaled_dot_product_attention runs as the
kernel eager's dispatcher picks (flash, memory-efficient or cuDNN), forward and backward,
as extern calls; their RNG state is an opaque value saved for the backward call; the
pointwise work around the call is Stax's. Skipped without a GPU.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same
from stax.frontend import metrics

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a cuda GPU")

ATTENTION = ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
             "_scaled_dot_product_cudnn_attention")


def _qkv(dtype, b=2, h=4, s=128, d=64, hk=None):
    torch.manual_seed(0)
    hk = h if hk is None else hk
    q = torch.randn(b, h, s, d, device="cuda", dtype=dtype)
    k = torch.randn(b, hk, s, d, device="cuda", dtype=dtype)
    v = torch.randn(b, hk, s, d, device="cuda", dtype=dtype)
    return q, k, v


def _eager_kernel(fn, *args) -> str | None:
    """The attention kernel eager runs for these arguments (from its profile)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as p:
        fn(*args)
    names = {e.key for e in p.key_averages()}
    return next((a for a in ATTENTION if f"aten::{a}" in names), None)


def _step(fn, *args):
    xs = [a.detach().clone().requires_grad_() for a in args]
    y = fn(*xs)
    y.backward(torch.ones_like(y))
    return (y.detach(), *[x.grad for x in xs])


def _tol(dtype):
    return dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=2e-4, atol=2e-4)


CASES = {
    "plain": lambda q, k, v: F.scaled_dot_product_attention(q * 1.5, k, v).relu(),
    "causal": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True) * 2,
    "mask": lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=torch.ones(q.shape[-2], k.shape[-2], device=q.device, dtype=torch.bool).tril()) + 1,
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_attention_is_the_fused_kernel(case, dtype):
    fn = CASES[case]
    q, k, v = _qkv(dtype)
    kernel = _eager_kernel(fn, q, k, v)
    got = _step(torch.compile(fn, backend="stax"), q, k, v)
    assert_same(got, _step(fn, q, k, v), **_tol(dtype), check_stride=False)
    m = metrics.snapshot()
    assert m.graphs_failed == 0 and m.graphs_gpu == m.graphs_compiled == 2, m
    used = {op.split(".")[0] for op in m.extern_ops}
    if kernel is not None:  # the same kernel as eager, forward and backward
        assert kernel in used and kernel + "_backward" in used, (kernel, dict(m.extern_ops))
        assert "bmm" not in used, dict(m.extern_ops)  # not the math form
    assert m.fallback_calls == 0, dict(m.fallback_ops)
    assert m.kernels_generated >= 2  # the pointwise work before / after the call


def test_dropout_inside_attention_is_eager_reproducible():
    """Same seed, same dropout mask as eager: the kernel draws from the same generator."""

    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.3) * 2

    q, k, v = _qkv(torch.bfloat16)
    compiled = torch.compile(fn, backend="stax")
    torch.manual_seed(1)
    got = _step(compiled, q, k, v)
    torch.manual_seed(1)
    ref = _step(fn, q, k, v)
    assert_same(got, ref, **_tol(torch.bfloat16), check_stride=False)
    torch.manual_seed(2)
    other = _step(compiled, q, k, v)
    assert not torch.equal(other[0], got[0])  # a new mask per call


def test_gqa_matches_eager():
    def fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True) - 0.5

    q, k, v = _qkv(torch.bfloat16, h=8, hk=2)
    assert_same(_step(torch.compile(fn, backend="stax"), q, k, v), _step(fn, q, k, v),
                **_tol(torch.bfloat16), check_stride=False)
    assert metrics.snapshot().graphs_failed == 0
