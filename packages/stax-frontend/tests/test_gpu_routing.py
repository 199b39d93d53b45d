"""Routing graphs to stax.gpu, run on CPU tensors under Triton's interpreter
(TRITON_INTERPRET=1, set by conftest without a GPU) with config.device_override='gpu':
the GPU scheduler policy, the GPU §6.6 cost table, stax.gpu's wrapper over the
frontend's extern kernels; results compared with eager (tolerances from conftest)."""

from __future__ import annotations

import logging
import os
import pathlib

import pytest
import torch
from conftest import assert_same, run_stax
from stax.frontend import config, metrics, runtime

interpret = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET", "0") in ("", "0") or runtime.gpu_unavailable_reason() is not None,
    reason="needs stax.gpu with TRITON_INTERPRET=1 (CPU tensors through Triton's interpreter)",
)


def _gpu_run(fn, *args, tmp_path=None):
    opts = dict(device_override="gpu")
    if tmp_path is not None:
        opts.update(debug=True, debug_dir=str(tmp_path))
    with config.patch(**opts):
        return run_stax(fn, *args)


def _dump(tmp_path: pathlib.Path, kind: str) -> dict[str, str]:
    (d,) = [p for p in tmp_path.iterdir() if p.name.startswith(kind)]
    return {f.name: f.read_text() for f in d.iterdir()}


@interpret
def test_softmax_is_one_gpu_kernel(tmp_path):
    """max -> sum(exp(x - max)) -> divide: dependent reductions fuse into one kernel
    under the GPU policy (fuse_dependent_reductions)."""
    x = torch.randn(8, 40)
    out = _gpu_run(lambda x: x.softmax(-1), x, tmp_path=tmp_path)
    assert_same(out, x.softmax(-1))
    m = metrics.snapshot()
    assert (m.graphs_compiled, m.graphs_gpu, m.kernels_generated, m.fallback_calls) == (1, 1, 1, 0), m
    assert "triton" in _dump(tmp_path, "inference")["source.txt"]


@interpret
def test_permuted_output_is_one_contiguous_gpu_loop(tmp_path):
    """x.t().exp(): eager's output has x.t()'s strides; the kernel walks that layout in memory
    order (stax.gpu's write_order), one flat index with stride 1 for its load and its store."""
    x = torch.randn(24, 40)
    out = _gpu_run(lambda x: x.t().exp(), x, tmp_path=tmp_path)
    assert_same(out, x.t().exp())  # values and eager's strides (1, 40)
    src = _dump(tmp_path, "inference")["source.txt"]
    assert "tl.load(in_ptr0 + (x0)" in src and "tl.store(out_ptr0 + (x0)" in src, src


@interpret
def test_example_7_2_gpu_one_kernel_exp_inlined(tmp_path):
    """(exp(x).sum(-1), exp(x).amax(-1)) on the GPU: the cost table keeps exp inline (no
    Pointwise buffer), both reductions share one kernel (Listing 7.2)."""
    x = torch.randn(64, 128)

    def m(x):
        e = x.exp()
        return e.sum(-1), e.amax(-1)

    out = _gpu_run(m, x, tmp_path=tmp_path)
    assert_same(out, m(x))
    dump = _dump(tmp_path, "inference")
    assert "Pointwise" not in dump["ir.txt"] and dump["ir.txt"].count("exp(tmp0)") == 2, dump["ir.txt"]
    assert "input arg0_1: cuda float32[64, 128]" in dump["ir.txt"]
    met = metrics.snapshot()
    assert met.materialized["rule1:expensive_multi_use"] == 0
    assert (met.graphs_gpu, met.kernels_generated) == (1, 1), met


@interpret
def test_log_softmax_nll_gathers_in_the_row_kernel(tmp_path):
    """nll_loss's per-row gather feeds a 1-output mean: rule 5 gives it a buffer and the GPU
    policy fuses it into the row kernel (max, sum, gather: many programs), not into the mean's
    single program. On the CPU the value stays inline (the CPU splits the mean over threads)."""
    import torch.nn.functional as F

    x, t = torch.randn(48, 40), torch.randint(0, 40, (48,))

    def loss(x, t):
        return F.nll_loss(F.log_softmax(x, -1), t)

    assert_same(_gpu_run(loss, x, t, tmp_path=tmp_path), loss(x, t))
    assert metrics.snapshot().materialized["rule5:gather_into_few_outputs"] == 1
    src = _dump(tmp_path, "inference")["source.txt"]
    row_kernel = src[src.index("def triton_per_fused_0"):src.index("def triton_per_fused_1")]
    assert "triton_helpers.flag_error(" in row_kernel and "tl.sum(" in row_kernel  # the gather, with max and sum
    assert "flag_error(" not in src[src.index("def triton_per_fused_1"):]
    metrics.reset()
    assert_same(run_stax(loss, x, t), loss(x, t))
    assert metrics.snapshot().materialized["rule5:gather_into_few_outputs"] == 0


@interpret
def test_training_step_on_gpu_path():
    """Forward and backward graphs (extern addmm, log_softmax, gather) through stax.gpu."""
    torch.manual_seed(3)
    w = torch.randn(16, 8, requires_grad=True)
    b = torch.randn(8, requires_grad=True)
    x, t = torch.randn(6, 16), torch.randint(0, 8, (6,))

    def f(x, t, w, b):
        return torch.nn.functional.cross_entropy(torch.tanh(x @ w + b), t)

    ref = [w.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()]
    loss_ref = f(x, t, *ref)
    loss_ref.backward()
    loss = _gpu_run(f, x, t, w, b)
    loss.backward()
    assert_same(loss, loss_ref)
    assert_same(w.grad, ref[0].grad, check_stride=False)
    assert_same(b.grad, ref[1].grad, check_stride=False)
    m = metrics.snapshot()
    assert (m.graphs_compiled, m.graphs_gpu, m.fallback_calls) == (2, 2, 0), m


@interpret
def test_multi_output_fallback_on_gpu_path():
    """A multi-output ATen fallback (sort) returns its tuple through stax.gpu's extern call."""
    x = torch.randn(5, 7)

    def f(x):
        v, i = x.sort(-1)
        return v * 2 + 1, i

    assert_same(_gpu_run(f, x), f(x))
    m = metrics.snapshot()
    assert m.graphs_gpu == 1 and m.fallback_ops["sort.default"] == 1, m


def test_missing_gpu_backend_runs_eagerly(monkeypatch, caplog):
    """A GPU graph without stax-gpu/triton: a warning, the graph runs eagerly, counted."""
    monkeypatch.setattr(runtime, "gpu_unavailable_reason", lambda: "ImportError: no module named triton")
    x = torch.randn(4, 6)
    with caplog.at_level(logging.WARNING, logger="stax.frontend"):
        out = _gpu_run(lambda x: x.exp().sum(0), x)
    assert_same(out, x.exp().sum(0))
    m = metrics.snapshot()
    assert (m.graphs_compiled, m.graphs_no_backend, m.graphs_failed) == (0, 1, 0), m
    assert any("stax-gpu" in r.getMessage() for r in caplog.records)


def check_repeated_calls(device) -> None:
    """Same input addresses call after call (where stax.gpu replays CUDA graphs): each result is
    eager's for that call's contents, results held across calls stay intact, and each call
    draws a new dropout mask (the seed is an input, read again at each replay)."""
    def softmax(x, w):
        return torch.softmax(x * w, -1)

    def dropout(x):
        return torch.nn.functional.dropout(x, 0.5, training=True)

    torch.manual_seed(0)
    x = torch.randn(16, 128, device=device)
    w = torch.randn(128, device=device)
    for fn, args in ((softmax, (x, w)), (dropout, (x,))):
        torch._dynamo.reset()
        metrics.reset()
        compiled = torch.compile(fn, backend="stax", dynamic=False)
        kept, masks = [], []
        for k in range(6):
            x.copy_(torch.randn(16, 128))
            got = compiled(*args)
            expect = fn(*args) if fn is softmax else 2 * x
            ok = (got == 0) | torch.isclose(got, expect) if fn is dropout else None
            masks.append((got != 0).clone())
            if k % 2:  # hold every other result; drop the rest at once
                kept.append((got, expect))
            elif fn is softmax:
                torch.testing.assert_close(got, expect)
            else:
                assert ok.all()
            del got
        for got, expect in kept:
            if fn is softmax:
                torch.testing.assert_close(got, expect)
            else:
                assert ((got == 0) | torch.isclose(got, expect)).all()
        if fn is dropout:
            assert all(not torch.equal(a, b) for a, b in zip(masks, masks[1:]))
        m = metrics.snapshot()
        assert m.graphs_gpu == m.graphs_compiled == 1 and m.fallback_calls == 0


@interpret
def test_repeated_calls_through_host_graphs(monkeypatch):
    """check_repeated_calls with every stax.gpu module graphed by the CPU stand-in for CUDA graphs."""
    import stax.gpu.graphs
    from stax.gpu.host_graphs import HostGraphs

    backend = HostGraphs()
    monkeypatch.setattr(stax.gpu.graphs, "BACKEND", backend)
    with config.patch(device_override="gpu"):
        check_repeated_calls("cpu")
    assert backend.captures >= 2 and backend.replays >= 2, (backend.captures, backend.replays)


@interpret
def test_training_steps_through_host_graphs(monkeypatch):
    """Training steps of a matmul-free model with every stax.gpu module graphed: forward and
    backward replay once their input addresses repeat, and each step matches eager's.
    (That autograd's hold on saved outputs keeps an instance busy: stax-gpu's test_graphs.)"""
    import stax.gpu.graphs
    from stax.gpu.host_graphs import HostGraphs

    backend = HostGraphs()
    monkeypatch.setattr(stax.gpu.graphs, "BACKEND", backend)
    torch._dynamo.reset()
    torch.manual_seed(0)
    x, t = torch.randn(16, 64), torch.randn(16, 64)
    w0 = torch.randn(64)

    def loss_fn(x, w, t):
        return (torch.softmax(torch.tanh(x * w), -1) * t).sum()

    compiled = torch.compile(loss_fn, backend="stax", dynamic=False)
    w, w_ref = w0.clone().requires_grad_(), w0.clone().requires_grad_()
    with config.patch(device_override="gpu"):
        for _ in range(4):
            x.copy_(torch.randn(16, 64))
            loss, loss_ref = compiled(x, w, t), loss_fn(x, w_ref, t)
            loss.backward()
            loss_ref.backward()
            torch.testing.assert_close(loss, loss_ref, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(w.grad, w_ref.grad, rtol=1e-5, atol=1e-6)
            with torch.no_grad():
                for p in (w, w_ref):
                    p -= 0.1 * p.grad
                    p.grad = None
    assert backend.replays >= 2, (backend.captures, backend.replays)


def check_model_calls(name: str, device, calls: int = 4) -> None:
    """A model's compiled forward called on one input tensor whose contents change each call
    (stax.gpu replays graphs there, library matmuls and convolutions included): every result,
    held across calls or not, is eager's."""
    from test_model_suite import TOL, _data

    torch.manual_seed(0)
    model, x, _ = _data(name, device)
    model.eval()
    torch._dynamo.reset()
    metrics.reset()
    compiled = torch.compile(model, backend="stax", dynamic=False)
    kept = []
    with torch.no_grad():
        for k in range(calls):
            # gpt: token ids
            x.copy_(torch.randint_like(x, 0, 50) if not x.is_floating_point() else torch.randn_like(x))
            got, ref = compiled(x), model(x)
            if k % 2:
                kept.append((got, ref))
            else:
                assert_same(got, ref, **TOL)
            del got
        for got, ref in kept:
            assert_same(got, ref, **TOL)
    m = metrics.snapshot()
    assert m.graphs_gpu == m.graphs_compiled >= 1 and m.fallback_calls == 0


@interpret
@pytest.mark.parametrize("name", ["mlp", "cnn", "encoder", "gpt"])
def test_model_calls_through_host_graphs(monkeypatch, name):
    """check_model_calls with every stax.gpu module graphed by HostGraphs (test_cuda runs them with real
    graphs). gpt's embedding checks indices with an error flag, read synchronously under the
    interpreter: graphed too, the flag read after each replay."""
    import stax.gpu.graphs
    from stax.gpu.host_graphs import HostGraphs

    backend = HostGraphs()
    monkeypatch.setattr(stax.gpu.graphs, "BACKEND", backend)
    with config.patch(device_override="gpu"):
        check_model_calls(name, "cpu")
    assert backend.replays >= 1, (backend.captures, backend.replays)


@interpret
def test_embedding_backward_scatter_is_never_silently_wrong(tmp_path):
    """The embedding's gradient scatter-adds rows at the token ids. Its index is either proven in
    range (torch 2.13's decomposition clamps and wraps it: value ranges) or checked and poisoned
    (an out-of-range id adds NaN: torch 2.11's), never checked and clamped silently, so on cuda
    the backward module reads its flag asynchronously and can be graphed."""
    torch.manual_seed(0)
    emb = torch.nn.Embedding(50, 8)
    ref = torch.nn.Embedding(50, 8)
    ref.load_state_dict(emb.state_dict())
    ids = torch.randint(0, 50, (4, 6))
    with config.patch(device_override="gpu", debug=True, debug_dir=str(tmp_path)):
        torch.compile(lambda i: emb(i).square().sum(), backend="stax", dynamic=False)(ids).backward()
    ref(ids).square().sum().backward()
    torch.testing.assert_close(emb.weight.grad, ref.weight.grad)
    kernels = _dump(tmp_path, "backward")["source.txt"].split("@triton.jit")
    scatters = [k for k in kernels if "tl.atomic_add" in k]
    assert scatters, "the gradient is a scatter kernel"
    for k in scatters:
        assert "flag_error" not in k or "float('nan')" in k, k


@interpret
def test_kernel_with_no_elements_is_not_launched():
    """A diagonal past the end is a (3, 0) tensor: stax-gpu planned a kernel over 0 elements and
    its store check raised (found by the fuzzer on the H200); now nothing is launched."""
    x, a = torch.randn(3, 1, 1), torch.randn(())
    fn = lambda x, a: torch.fmod(torch.diagonal(x, 2, 2, 1), a) + torch.fmod(x, a).sum()  # noqa: E731
    with config.patch(device_override="gpu"):
        got = torch.compile(fn, backend="stax")(x, a)
    assert got.shape == (3, 0) and torch.equal(got, fn(x, a))


@interpret
@pytest.mark.parametrize("train", [False, True])
def test_convolution_bias_is_a_stax_add_on_the_gpu_route(train, monkeypatch):
    """A convolution with a bias calls the library without it and adds the bias in a Stax kernel
    (conv_layout._bias_added: ATen's separate strided add was 40 launches per ConvNeXt-atto call on
    the H100), fused with the ReLU after it; forward and gradients as eager's."""
    from stax.frontend.lowering import conv_layout

    added = []
    real = conv_layout._bias_added
    monkeypatch.setattr(conv_layout, "_bias_added", lambda *a: added.append(1) or real(*a))
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 8, 3, padding=1)
    x = torch.randn(2, 3, 10, 10, requires_grad=train)

    def f(x):
        return torch.relu(conv(x)).sum((2, 3)) if train else torch.relu(conv(x))

    want = f(x)
    with torch.set_grad_enabled(train):
        got = _gpu_run(f, x)
    assert_same(got, want)
    if train:
        got.sum().backward()
        grads = [t.grad.clone() for t in (x, conv.weight, conv.bias)]
        for t in (x, conv.weight, conv.bias):
            t.grad = None
        want.sum().backward()
        for g, t in zip(grads, (x, conv.weight, conv.bias)):
            assert_same(g, t.grad)
    assert added and metrics.snapshot().graphs_failed == 0
