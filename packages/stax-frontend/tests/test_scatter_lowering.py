"""Scatter lowerings (scatter_add, index_put, scatter, index_add, embedding backward) become
stax.ir Scatter buffers — linear in the scattered points, native at any size — and match eager:
duplicates, last-wins assignment, negative indices, out-of-range errors."""

from __future__ import annotations

import os

import pytest
import stax.sched
import torch
import torch.nn.functional as F
from conftest import assert_same, run_stax
from stax.frontend import config, metrics, runtime
from stax.ir import ComputedBuffer, Reduction, Scatter


@pytest.fixture
def graphs(monkeypatch):
    """Every stax.ir.Graph the frontend schedules (the lowering's result), in order."""
    seen = []
    real = stax.sched.schedule

    def spy(graph, *args, **kwargs):
        seen.append(graph)
        return real(graph, *args, **kwargs)

    monkeypatch.setattr(stax.sched, "schedule", spy)
    return seen


def _bodies(graphs, kind):
    return [n for g in graphs for n in g.nodes if isinstance(n, ComputedBuffer) and isinstance(n.body, kind)]


def test_embedding_backward_large_is_one_linear_scatter(graphs):
    """Vocab 50000 x dim 64, 4096 tokens: the backward is one Scatter over the 4096 x 64 points
    (a dense form would be 50000 x 64 x 4096 multiply-adds); zero fallbacks; grads equal eager's."""
    w = torch.randn(50000, 64, requires_grad=True)
    ids = torch.randint(0, 50000, (4096,), generator=torch.Generator().manual_seed(1))
    w2 = w.detach().clone().requires_grad_()
    out = run_stax(lambda w, i: F.embedding(i, w) * 2, w, ids)
    ref = F.embedding(ids, w2) * 2
    g = torch.randn(ref.shape)
    out.backward(g)
    ref.backward(g)
    assert_same(out, ref)
    assert_same(w.grad, w2.grad)
    (sc,) = _bodies(graphs, Scatter)
    assert sc.body.mode == "add" and tuple(sc.body.ranges) == (50000, 64)
    assert tuple(sc.body.scatter_ranges) == (4096, 64)
    assert not _bodies(graphs, Reduction)
    m = metrics.snapshot()
    assert m.fallback_calls == 0 and m.graphs_failed == 0


def test_index_put_accumulate_many_duplicates_parallel():
    """200000 points onto 16 rows: every element sums ~12500 values, in parallel (atomic adds).
    Integer values, also as float64, so every partial sum is exact whatever the order."""
    gen = torch.Generator().manual_seed(0)
    idx = torch.randint(0, 16, (200000,), generator=gen)
    for dtype in (torch.float64, torch.int64):
        x = torch.randint(-1000, 1000, (16, 8), generator=gen).to(dtype)
        v = torch.randint(-1000, 1000, (200000, 8), generator=gen).to(dtype)
        out = run_stax(lambda x, i, v: x.index_put((i,), v, accumulate=True), x, idx, v)
        assert_same(out, x.index_put((idx,), v, accumulate=True))
    assert metrics.snapshot().fallback_calls == 0


def test_index_put_duplicates_last_wins(graphs):
    x = torch.zeros(4, 2)
    idx = torch.tensor([1, 3, 1, 1])
    v = torch.arange(8.0).view(4, 2)
    out = run_stax(lambda x, i, v: x.index_put((i,), v), x, idx, v)
    assert_same(out, torch.tensor([[0.0, 0], [6, 7], [0, 0], [2, 3]]))
    (sc,) = _bodies(graphs, Scatter)
    assert sc.body.mode == "set"


def test_index_put_negative_indices_wrap():
    x = torch.randn(5, 3)
    idx = torch.tensor([-1, 0, -5, 4])
    v = torch.randn(4, 3)
    out = run_stax(lambda x, i, v: x.index_put((i,), v, accumulate=True), x, idx, v)
    assert_same(out, x.index_put((idx,), v, accumulate=True))


@pytest.mark.parametrize("bad", [5, -6])
def test_index_put_out_of_range_raises_like_eager(bad):
    x, v = torch.randn(5, 3), torch.randn(3, 3)
    idx = torch.tensor([0, bad, 1])
    with pytest.raises(IndexError):
        x.index_put((idx,), v, accumulate=True)
    fn = torch.compile(lambda x, i, v: x.index_put((i,), v, accumulate=True), backend="stax", dynamic=False)
    assert_same(fn(x, torch.tensor([0, 4, 1]), v), x.index_put((torch.tensor([0, 4, 1]),), v, accumulate=True))
    with pytest.raises(IndexError, match="is out of bounds for dimension with size 5"):  # -6 reports as -1
        fn(x, idx, v)


def test_scatter_add_out_of_range_raises():
    x, src = torch.zeros(3, 4), torch.ones(2, 4)
    idx = torch.tensor([[0, 1, 2, 3], [0, 0, 0, 0]])
    fn = torch.compile(lambda x, i, s: x.scatter_add(0, i, s), backend="stax", dynamic=False)
    with pytest.raises(IndexError, match="index 3 is out of bounds"):
        fn(x, idx, src)


def test_scatter_add_fuses_nothing_but_inlines_inputs(graphs):
    """The Scatter body inlines its pointwise inputs (x * 2, src.exp()); the consumer (+ 1) is a
    separate pointwise kernel: three buffers would mean the inputs were materialized."""
    x, src = torch.randn(6, 5), torch.randn(4, 5)
    idx = torch.randint(0, 6, (4, 5))

    def f(x, i, s):
        return (x * 2).scatter_add(0, i, s.exp()) + 1

    assert_same(run_stax(f, x, idx, src), f(x, idx, src))
    (g,) = graphs
    assert [type(n.body).__name__ for n in g.nodes] == ["Scatter", "Pointwise"]


gpu_interpret = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET", "0") in ("", "0") or runtime.gpu_unavailable_reason() is not None,
    reason="needs stax.gpu with TRITON_INTERPRET=1 (CPU tensors through Triton's interpreter)",
)


@gpu_interpret
def test_gpu_target_scatters_are_native():
    """Through stax.gpu (interpreter): index_put accumulate, scatter_add and an embedding backward
    run as init + atomic scatter kernels, with zero fallbacks."""
    w = torch.randn(30, 8, requires_grad=True)
    w2 = w.detach().clone().requires_grad_()
    ids = torch.randint(0, 30, (5, 7))
    x, v, idx = torch.randn(6, 4), torch.randn(9, 4), torch.randint(0, 6, (9,))
    with config.patch(device_override="gpu"):
        out = run_stax(lambda w, i: F.embedding(i, w), w, ids)
        out.backward(torch.ones_like(out))
        got = run_stax(lambda x, i, v: (x.index_put((i,), v, accumulate=True),
                                        x.scatter_add(0, i[:4, None].expand(4, 4), v[:4])),
                       x, idx, v)
    F.embedding(ids, w2).backward(torch.ones(5, 7, 8))
    assert_same(w.grad, w2.grad)
    assert_same(got, (x.index_put((idx,), v, accumulate=True), x.scatter_add(0, idx[:4, None].expand(4, 4), v[:4])))
    m = metrics.snapshot()
    assert m.graphs_gpu == 3 and m.fallback_calls == 0 and m.graphs_failed == 0


@gpu_interpret
def test_gpu_target_without_atomic_add_is_an_explicit_fallback():
    """int8 has no GPU atomic add: that one op runs as a counted ATen fallback, the rest natively."""
    x, v, idx = torch.randint(-5, 5, (6, 4), dtype=torch.int8), torch.randint(-5, 5, (9, 4), dtype=torch.int8), \
        torch.randint(0, 6, (9,))
    with config.patch(device_override="gpu"):
        got = run_stax(lambda x, i, v: x.index_put((i,), v * 2, accumulate=True) + 1, x, idx, v)
    assert_same(got, x.index_put((idx,), v * 2, accumulate=True) + 1)
    m = metrics.snapshot()
    assert dict(m.fallback_ops) == {"index_put.default": 1} and m.graphs_failed == 0


def test_interpreter_runtime_and_report(tmp_path):
    """config.runtime='interpret' (the numpy interpreter) and the HTML report see every read of
    a Scatter (init, value, indices)."""
    x, v, idx = torch.randn(6, 4), torch.randn(9, 4), torch.randint(0, 6, (9,))

    def f(x, i, v):
        return (x + 1).index_put((i,), v.exp(), accumulate=True)

    with config.patch(runtime="interpret", report=True, report_dir=str(tmp_path)):
        got = run_stax(f, x, idx, v)
    assert_same(got, f(x, idx, v))
    assert any(p.suffix == ".html" for p in tmp_path.rglob("*"))
