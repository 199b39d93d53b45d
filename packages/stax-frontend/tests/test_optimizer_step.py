"""foreach=True optimizer steps on CPU: `_foreach_*` ops split into per-tensor Stax kernels
(foreach_decomps.py) that write the updated tensors into the donated inputs (donation.py).
Every result is checked against eager; input mutations beyond optimizers too."""

import logging
import os
import re

import pytest
import torch
import torch.nn as nn
from stax.frontend import config, metrics, runtime
from stax.frontend.foreach_decomps import foreach_decompositions

aten = torch.ops.aten


def _lists(n=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = [(4, 5), (7,), (2, 3, 2)][:n]
    return [[torch.rand(s, generator=g) + 0.5 for s in shapes] for _ in range(3)]


CASES = {
    "add.List": lambda a, b, c: (aten._foreach_add.List, (a, b), {"alpha": -0.5}),
    "add.Scalar": lambda a, b, c: (aten._foreach_add.Scalar, (a, 2.5), {}),
    "sub.ScalarList": lambda a, b, c: (aten._foreach_sub.ScalarList, (a, [1.0, 2.0, 3.0]), {}),
    "mul.Tensor": lambda a, b, c: (aten._foreach_mul.Tensor, (a, torch.tensor(3.0)), {}),
    "div.ScalarList": lambda a, b, c: (aten._foreach_div.ScalarList, (a, [2.0, 4.0, 8.0]), {}),
    "addcmul.ScalarList": lambda a, b, c: (aten._foreach_addcmul.ScalarList, (a, b, c, [0.5, -1.0, 2.0]), {}),
    "addcdiv.Scalar": lambda a, b, c: (aten._foreach_addcdiv.Scalar, (a, b, c), {"value": -0.1}),
    "lerp.Scalar": lambda a, b, c: (aten._foreach_lerp.Scalar, (a, b, 0.3), {}),
    "lerp.List": lambda a, b, c: (aten._foreach_lerp.List, (a, b, c), {}),
    "pow.ScalarAndTensor": lambda a, b, c: (aten._foreach_pow.ScalarAndTensor, (0.9, a), {}),
    "sqrt.default": lambda a, b, c: (aten._foreach_sqrt.default, (a,), {}),
    "maximum.List": lambda a, b, c: (aten._foreach_maximum.List, (a, b), {}),
    "clamp_min.Scalar": lambda a, b, c: (aten._foreach_clamp_min.Scalar, (a, 0.9), {}),
    "norm.Scalar": lambda a, b, c: (aten._foreach_norm.Scalar, (a, 2), {}),
    "max.default": lambda a, b, c: (aten._foreach_max.default, (a,), {}),
    "copy.default": lambda a, b, c: (aten._foreach_copy.default, (a, b), {}),
    "zero.default": lambda a, b, c: (aten._foreach_zero.default, (a,), {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_foreach_decomposition_equals_the_foreach_op(case):
    op, args, kwargs = CASES[case](*_lists())
    table = foreach_decompositions()
    assert op in table
    got, want = table[op](*args, **kwargs), op(*args, **kwargs)
    assert len(got) == len(want)
    for x, y in zip(got, want):
        assert x.shape == y.shape and x.dtype == y.dtype
        torch.testing.assert_close(x, y, rtol=1e-6, atol=1e-7)


def _model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(32, 48), nn.Tanh(), nn.Linear(48, 8))


OPTIMIZERS = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.05, foreach=True),
    "sgd_momentum_wd": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-2, foreach=True),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, foreach=True),
}


def optimizer_steps(name: str, compiled: bool, steps: int, device: str = "cpu") -> tuple:
    """(model, optimizer, losses, metrics) of `steps` training steps of _model(0) with OPTIMIZERS[name]
    (test_cuda.py runs them on a GPU)."""
    x = torch.randn(16, 32, generator=torch.Generator().manual_seed(1)).to(device)
    m = _model(0).to(device)
    opt = OPTIMIZERS[name](m.parameters())

    def step(x):
        opt.zero_grad(set_to_none=True)
        loss = (m(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    fn = torch.compile(step, backend="stax") if compiled else step
    metrics.reset()
    losses = [fn(x) for _ in range(steps)]
    return m, opt, losses, metrics.snapshot()


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_foreach_optimizer_steps_match_eager_without_fallbacks(name):
    runs = [optimizer_steps(name, compiled, 3) for compiled in (False, True)]
    (me, oe, le, _), (ms, os_, ls, got) = runs
    assert got.graphs_compiled >= 3 and got.graphs_failed == 0
    assert got.fallback_calls == 0, got.fallback_ops  # the foreach ops are Stax kernels now
    torch.testing.assert_close(torch.stack(ls), torch.stack(le), rtol=1e-5, atol=1e-6)
    for a, b in zip(ms.parameters(), me.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    for p, q in zip(ms.parameters(), me.parameters()):  # momentum buffers / Adam moments
        for k, v in oe.state[q].items():
            torch.testing.assert_close(os_.state[p][k], v, rtol=1e-5, atol=1e-6)


INPLACE_MODELS = {  # 1x1 convolutions: weights (c_out, c_in, 1, 1) whose new value's strides differ
    # from the parameter's on the size-1 dims (channels-last gradients): the same memory
    "linear": (lambda: _model(0), (4, 32)),
    "conv1x1": (lambda: nn.Sequential(nn.Conv2d(3, 8, 1), nn.Tanh(), nn.Conv2d(8, 2, 1)), (2, 3, 5, 5)),
}


@pytest.mark.parametrize("model", sorted(INPLACE_MODELS))
def test_updated_parameters_are_written_in_place(caplog, model):
    """The step's new parameters are computed into the parameters' own storage (a reuse of the
    donated graph input) and returned as the parameters, so AOTAutograd's copy back into them
    moves nothing."""
    build, shape = INPLACE_MODELS[model]
    torch.manual_seed(0)
    m = build()
    opt = torch.optim.SGD(m.parameters(), lr=0.05, foreach=True)

    def step(x):
        opt.zero_grad(set_to_none=True)
        m(x).sum().backward()
        opt.step()

    compiled = torch.compile(step, backend="stax")
    with caplog.at_level(logging.DEBUG, logger="stax"):
        compiled(torch.randn(shape))
    in_place = {hit.group(1) for r in caplog.records
                if (hit := re.search(r"= (arg\d+_1); del \1  # reuse \(in place\)", r.getMessage()))}
    assert len(in_place) == len(list(m.parameters())), caplog.text
    # AOTAutograd's copy of each new value into its parameter: from the parameter's own memory in
    # its own layout (ATen's copy_ then returns at once)
    copies = []
    real_copy = torch.Tensor.copy_

    def spy(self, src, *args, **kwargs):
        copies.append((self.data_ptr(), self.stride()) == (src.data_ptr(), src.stride()))
        return real_copy(self, src, *args, **kwargs)

    torch.Tensor.copy_ = spy
    try:
        compiled(torch.randn(shape))
    finally:
        torch.Tensor.copy_ = real_copy
    assert copies.count(True) == len(list(m.parameters())), copies


gpu_route = pytest.mark.skipif(  # (test_cuda.py steps on a real GPU)
    os.environ.get("TRITON_INTERPRET", "0") in ("", "0") or runtime.gpu_unavailable_reason() is not None,
    reason="needs stax.gpu with TRITON_INTERPRET=1 (CPU tensors through Triton's interpreter)",
)


@gpu_route
@pytest.mark.parametrize("model", sorted(INPLACE_MODELS))
def test_gpu_foreach_kernels_write_the_step_in_place(caplog, model):
    """Config.gpu_foreach_kernels: stax.gpu's plans write each new parameter into the donated one too
    (the GPU route: CPU tensors through Triton's interpreter); without it the step is not in place."""
    with config.patch(device_override="gpu", gpu_foreach_kernels=True):
        test_updated_parameters_are_written_in_place(caplog, model)
    torch._dynamo.reset()
    caplog.clear()
    with config.patch(device_override="gpu"), pytest.raises(AssertionError):
        test_updated_parameters_are_written_in_place(caplog, model)


@gpu_route
@pytest.mark.parametrize("name", ["sgd_momentum_wd", "adamw"])
def test_gpu_foreach_kernels_match_eager(name):
    with config.patch(device_override="gpu", gpu_foreach_kernels=True):
        test_foreach_optimizer_steps_match_eager_without_fallbacks(name)


@gpu_route
def test_gpu_foreach_kernels_steps_replay_cuda_graphs(monkeypatch, caplog):
    """With the step written into the donated parameters, its module is still graphed (its outputs are
    views of the inputs, not the graph's memory): every stax.gpu module replays, under HostGraphs."""
    import stax.gpu.graphs
    from stax.gpu.host_graphs import HostGraphs

    backend = HostGraphs()
    monkeypatch.setattr(stax.gpu.graphs, "BACKEND", backend)
    runs = []
    for compiled in (False, True):
        torch._dynamo.reset()
        with config.patch(device_override="gpu", gpu_foreach_kernels=True), caplog.at_level("INFO", "stax.gpu"):
            runs.append(optimizer_steps("adamw", compiled, 6))
    (me, _, le, _), (ms, _, ls, got) = runs
    assert got.fallback_calls == 0, got.fallback_ops
    assert "CUDA graphs off" not in caplog.text
    assert backend.replays >= 3 * 3, (backend.captures, backend.replays)  # forward, backward, step: calls 3-6
    torch.testing.assert_close(torch.stack(ls), torch.stack(le), rtol=1e-5, atol=1e-6)
    for a, b in zip(ms.parameters(), me.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_foreach_kernels_off_keeps_the_fallback():
    m = _model(0)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, foreach=True)

    def step(x):
        opt.zero_grad(set_to_none=True)
        m(x).sum().backward()
        opt.step()

    metrics.reset()
    torch.compile(step, backend="stax", options={"foreach_kernels": False})(torch.randn(4, 32))
    assert metrics.snapshot().fallback_ops.get("_foreach_add.List") == 1


MUTATIONS = {
    # (function of (p, g) mutating p under no_grad, as an inference graph)
    "add_then_read": lambda p, g: (p.add_(g), p.sum())[1],
    "twice": lambda p, g: (p.add_(g), p.mul_(3.0), (p * g).sum())[2],
    "returned": lambda p, g: (p.mul_(2.0), p)[1],
    "new_value_and_old_read": lambda p, g: (q := p * 2.0, p.add_(g), q + p)[2],
    "two_inputs": lambda p, g: (p.add_(g), g.mul_(0.5), p + g)[2],
    "slice": lambda p, g: (p[1:].add_(g[1:]), p.sum())[1],
}


@pytest.mark.parametrize("case", sorted(MUTATIONS))
def test_input_mutations_match_eager(case):
    fn = MUTATIONS[case]
    gen = torch.Generator().manual_seed(3)
    p0, g0 = torch.randn(6, 5, generator=gen), torch.randn(6, 5, generator=gen)
    pe, ge = p0.clone(), g0.clone()
    ps, gs = p0.clone(), g0.clone()
    with torch.no_grad():
        want = fn(pe, ge)
        compiled = torch.compile(fn, backend="stax", fullgraph=True)
        got = compiled(ps, gs)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(ps, pe)
        torch.testing.assert_close(gs, ge)
        want2, got2 = fn(pe, ge), compiled(ps, gs)  # a second call: the compiled graph again
    torch.testing.assert_close(got2, want2)
    torch.testing.assert_close(ps, pe)
    torch.testing.assert_close(gs, ge)


def test_batch_norm_running_stats_in_a_training_forward_match_eager():
    """The forward graph of a training step mutates the running statistics (donated too)."""
    x = torch.randn(8, 6, 5, 5, generator=torch.Generator().manual_seed(4))
    mods = []
    for compiled in (False, True):
        torch.manual_seed(0)
        m = nn.Sequential(nn.Conv2d(6, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
        f = torch.compile(m, backend="stax") if compiled else m
        for _ in range(3):
            f(x).square().mean().backward()
        mods.append(m)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(mods[1][1], name), getattr(mods[0][1], name))


def test_optimizer_step_from_the_graph_cache_still_writes_in_place(tmp_path):
    """A step loaded from the whole-graph cache keeps its donated outputs (the cached call spec),
    and matches eager. With the cache on, an in-place `p.add_(g)` and then an out-of-place `p + g` of
    the same shapes: only the first writes into its input."""
    from stax.frontend import config

    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(5))
    with config.patch(graph_cache=True, graph_cache_dir=str(tmp_path / "graphs")):
        results = []
        for _ in range(2):
            torch._dynamo.reset()
            metrics.reset()
            m = _model(0)
            opt = torch.optim.SGD(m.parameters(), lr=0.05, foreach=True)

            def step(x, m=m, opt=opt):
                opt.zero_grad(set_to_none=True)
                m(x).sum().backward()
                opt.step()

            torch.compile(step, backend="stax")(x)
            results.append(([p.detach().clone() for p in m.parameters()], metrics.snapshot().graph_cache_hits))
        (first, hits0), (second, hits1) = results
        assert hits0 == 0 and hits1 >= 3  # forward, backward and the step from the cache
        m = _model(0)
        step(x, m, torch.optim.SGD(m.parameters(), lr=0.05, foreach=True))
        for a, b, c in zip(first, second, m.parameters()):
            torch.testing.assert_close(a, c)
            torch.testing.assert_close(b, c)

        p, g = torch.randn(5, 3), torch.randn(5, 3)
        for fn in (lambda p, g: p.add_(g), lambda p, g: p + g):
            torch._dynamo.reset()
            before = p.clone()
            with torch.no_grad():
                got = torch.compile(fn, backend="stax")(p, g)
            torch.testing.assert_close(got, before + g)
            p = got.clone() if got is p else p
        torch.testing.assert_close(p, before)  # the out-of-place graph left its input alone
