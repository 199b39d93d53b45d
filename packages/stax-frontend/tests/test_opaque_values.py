"""Opaque extern results (issue 20, item 1): RNG state a library kernel returns for its
backward — uint64, a meta-device tensor at trace time, as cuda's flash / memory-efficient
attention return philox seed and offset — flows from the forward graph to the backward's
library call as an opaque value, while the pointwise work around the calls is Stax's.

The library pair here is a custom op modelled on the attention kernels' contract: its
forward returns (out, state) with `state` faked on the meta device, and its backward reads
the state back. On CPU this exercises the same lowering and runtime path cuda attention takes.
"""

from __future__ import annotations

import os

import pytest
import torch
from conftest import assert_same
from stax.frontend import metrics

_lib = torch.library.Library("stax_opaque_test", "DEF")  # noqa: TID251 - a test-only op namespace
_lib.define("noisy(Tensor x, int seed) -> (Tensor, Tensor)")
_lib.define("noisy_backward(Tensor grad, Tensor state) -> Tensor")


def _noise(state: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    seed, offset = (int(v) for v in state.to(torch.int64))
    g = torch.Generator().manual_seed(seed + offset)
    return torch.rand(like.shape, generator=g, dtype=like.dtype)


def _noisy(x, seed):
    state = torch.tensor([seed, 7], dtype=torch.uint64)  # (seed, offset), as a philox state
    return x * (1 + _noise(state, x)), state


def _noisy_backward(grad, state):
    return grad * (1 + _noise(state, grad))


_lib.impl("noisy", _noisy, "CPU")
_lib.impl("noisy_backward", _noisy_backward, "CPU")


@torch.library.register_fake("stax_opaque_test::noisy", lib=_lib)
def _noisy_fake(x, seed):
    return torch.empty_like(x), torch.empty(2, dtype=torch.uint64, device="meta")


@torch.library.register_fake("stax_opaque_test::noisy_backward", lib=_lib)
def _noisy_backward_fake(grad, state):
    return torch.empty_like(grad)


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(output[1])


def _backward(ctx, grad, grad_state):
    (state,) = ctx.saved_tensors
    return torch.ops.stax_opaque_test.noisy_backward(grad, state), None


torch.library.register_autograd("stax_opaque_test::noisy", _backward, setup_context=_setup_context, lib=_lib)


def f(x):
    y, _ = torch.ops.stax_opaque_test.noisy(x.sin() * 2, 1234)
    return y.exp() + 1


def _step(fn, x):
    xs = x.detach().clone().requires_grad_()
    y = fn(xs)
    y.backward(torch.ones_like(y))
    return y.detach(), xs.grad


def test_rng_state_flows_forward_to_backward():
    x = torch.randn(6, 7)
    got = _step(torch.compile(f, backend="stax"), x)
    assert_same(got, _step(f, x))
    snap = metrics.snapshot()
    assert snap.graphs_compiled == 2 and snap.graphs_failed == 0
    assert snap.fallback_ops["stax_opaque_test.noisy.default"] == 1
    assert snap.fallback_ops["stax_opaque_test.noisy_backward.default"] == 1
    assert snap.kernels_generated >= 3  # sin*2 before, exp+1 after, the backward's pointwise work


def test_opaque_value_read_by_a_computation_is_an_aten_call():
    """A view or computation on the state cannot be a Stax kernel: it runs as ATen, its
    result opaque too, and the library call reads that."""

    def g(x):
        y, state = torch.ops.stax_opaque_test.noisy(x, 99)
        return torch.ops.stax_opaque_test.noisy_backward(y.cos(), state.clone()[:2]) * 3

    x = torch.randn(3, 4)
    assert_same(torch.compile(g, backend="stax")(x), g(x))
    assert metrics.snapshot().fallback_ops["clone.default"] == 1


def test_backward_after_an_eager_forward_takes_raw_state(monkeypatch):
    """The backward graph compiled by Stax also takes a state that is not a carrier (its
    forward graph ran eagerly): the module wraps it."""
    from stax.frontend import aot
    from stax.frontend.runtime import eager_callable

    real = aot.compile_graph

    def forward_eagerly(gm, example_inputs, *, kind, cfg, input_strides=None):
        if kind == "forward":
            return eager_callable(gm)
        return real(gm, example_inputs, kind=kind, cfg=cfg, input_strides=input_strides)

    monkeypatch.setattr(aot, "compile_graph", forward_eagerly)
    x = torch.randn(5, 3)
    assert_same(_step(torch.compile(f, backend="stax"), x), _step(f, x))
    assert metrics.snapshot().graphs_compiled == 1


@pytest.mark.parametrize("carrier", [True, False])
def test_eager_backward_takes_carrier_or_raw_state(carrier):
    from stax.frontend.aten_runtime import carry, uncarry

    state = torch.tensor([5, 7], dtype=torch.uint64)
    value = carry(state, torch.device("cpu")) if carrier else state
    assert uncarry(value) is state


# cuda attention's other contract: with no CUDA graph capture running, eager's memory-efficient and
# flash kernels return the philox seed and offset as 0-dim int64 CPU tensors, and the backward reads them
_lib.define("seeded(Tensor x, int seed) -> (Tensor, Tensor)")
_lib.define("seeded_backward(Tensor grad, Tensor seed) -> Tensor")
_lib.impl("seeded", lambda x, seed: _noisy(x, seed)[:1] + (torch.tensor(seed),), "CPU")
_lib.impl("seeded_backward", lambda grad, seed: _noisy_backward(grad, torch.stack([seed, seed.new_tensor(7)])), "CPU")
torch.library.register_fake("stax_opaque_test::seeded", lambda x, seed: (torch.empty_like(x), torch.tensor(seed)),
                            lib=_lib)
torch.library.register_fake("stax_opaque_test::seeded_backward", lambda grad, seed: torch.empty_like(grad), lib=_lib)
torch.library.register_autograd(
    "stax_opaque_test::seeded",
    lambda ctx, grad, _: (torch.ops.stax_opaque_test.seeded_backward(grad, ctx.saved_tensors[0]), None),
    setup_context=_setup_context, lib=_lib)


def test_a_host_scalar_only_library_calls_read_is_passed_as_it_is(monkeypatch):
    """The saved seed (a 0-dim int64 tensor read only by the backward's library call) is an opaque
    input of the backward graph: handed over unchecked, never copied to the graph's device (on cuda
    that copy synchronized the host with the GPU once per attention layer and step)."""
    from stax.frontend import runtime

    opaque = []
    init = runtime.CompiledGraph.__init__

    def record(self, spec, *a, **k):
        init(self, spec, *a, **k)
        opaque.append(sorted(spec.input_names[p] for p in spec.opaque_positions))

    monkeypatch.setattr(runtime.CompiledGraph, "__init__", record)

    def h(x):
        y, _ = torch.ops.stax_opaque_test.seeded(x.sin() * 2, 4321)
        return y.exp() + 1

    x = torch.randn(6, 7)
    for _ in range(2):  # the second step takes the per-call path
        assert_same(_step(torch.compile(h, backend="stax"), x), _step(h, x))
    assert len(opaque) == 2 and len(opaque[1]) == 1, opaque  # (forward, backward): the backward's seed
    assert metrics.snapshot().graphs_failed == 0


_lib.define("seeded_p(Tensor x, int seed, float dropout_p) -> (Tensor, Tensor)")
_lib.define("seeded_p_backward(Tensor grad, Tensor seed, float dropout_p) -> Tensor")
_lib.impl("seeded_p", lambda x, seed, dropout_p: (x * (1 - dropout_p), torch.tensor(seed)), "CPU")
_lib.impl("seeded_p_backward", lambda grad, seed, dropout_p: grad * (1 - dropout_p), "CPU")
torch.library.register_fake("stax_opaque_test::seeded_p",
                            lambda x, seed, dropout_p: (torch.empty_like(x), torch.tensor(seed)), lib=_lib)
torch.library.register_fake("stax_opaque_test::seeded_p_backward",
                            lambda grad, seed, dropout_p: torch.empty_like(grad), lib=_lib)


def _seeded_p_backward(ctx, grad, _):
    return torch.ops.stax_opaque_test.seeded_p_backward(grad, ctx.saved_tensors[0], ctx.p), None, None


def _seeded_p_setup(ctx, inputs, output):
    ctx.save_for_backward(output[1])
    ctx.p = inputs[2]


torch.library.register_autograd("stax_opaque_test::seeded_p", _seeded_p_backward, setup_context=_seeded_p_setup,
                                lib=_lib)


@pytest.mark.parametrize("op, expected", [("seeded", [True, False]), ("seeded_p 0.0", [True, True]),
                                          ("seeded_p 0.25", [True, False])])
def test_a_module_whose_library_call_reads_rng_state_is_never_cuda_graphed(monkeypatch, op, expected):
    """A CUDA graph captured around the backward's library call would keep the seed it read on the
    host at capture time, and replay it every step: such a module is compiled with graphs off. An
    attention kernel reads its seed only for dropout: at `dropout_p` 0 graphs stay on."""
    pytest.importorskip("triton")
    if torch.cuda.is_available():
        pytest.skip("the op is CPU-only: this runs the GPU route on CPU tensors, through Triton's interpreter")
    if os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        pytest.skip("the GPU route without a GPU needs TRITON_INTERPRET=1")
    import stax.gpu
    from stax.frontend import config

    graphed = []
    real = stax.gpu.compile_schedule

    def spy(schedule, *, config, **kw):
        graphed.append(config.cuda_graphs)
        return real(schedule, config=config, **kw)

    monkeypatch.setattr(stax.gpu, "compile_schedule", spy)

    name, *p = op.split()

    def h(x):
        extra = (float(p[0]),) if p else ()
        y, _ = getattr(torch.ops.stax_opaque_test, name)(x.sin() * 2, 4321, *extra)
        return y.exp() + 1

    x = torch.randn(6, 7)
    with config.patch(device_override="gpu"):
        assert_same(_step(torch.compile(h, backend="stax"), x), _step(h, x))
    assert graphed == expected  # (forward, backward): the forward may be graphed; the backward reading a seed, not
