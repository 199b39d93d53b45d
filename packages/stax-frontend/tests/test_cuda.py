"""The op-suite subset and the model suite on a real GPU (skipped without one): cuda
graphs are routed to stax.gpu (Triton), compared with eager on cuda with the tolerances
of the CPU suites, and every compiled graph must have gone through stax.gpu.

STAX_TEST_EMULATE_CUDA=1 runs the same tests on CPU tensors through Triton's
interpreter (config.device_override='gpu'): slow (minutes), so not part of the
default run; it checks the GPU route without a GPU.
"""

from __future__ import annotations

import copy
import os

import pytest
import torch
from stax.frontend import config, metrics
from test_gpu_routing import check_model_calls, check_repeated_calls
from test_model_suite import MODELS, _data, _loss, assert_same_step, check_inference
from test_op_suite import CASES, _make, check_case

EMULATE = os.environ.get("STAX_TEST_EMULATE_CUDA") == "1" and os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.skipif(DEVICE != "cuda" and not EMULATE, reason="needs a cuda GPU")


@pytest.fixture(autouse=True)
def _gpu_route():
    with config.patch(device_override="gpu" if DEVICE == "cpu" else None):
        yield

SUBSET = [
    "gelu", "silu", "softmax", "log_softmax", "layer_norm", "group_norm", "var_std", "logsumexp",
    "norm", "cumsum", "cumprod", "cummax_cummin", "logcumsumexp", "var_mean", "erfinv_erfc", "argmax_any", "cat", "pad",
    "flip", "roll", "gather", "index_select",
    "embedding", "index_tensor", "scatter_add", "index_put_acc", "where_clamp", "mse", "cross_entropy",
    "max_pool2d", "avg_pool2d",
]
# Cases known to fail on the GPU route: {name: reason} (xfail, strict: remove once fixed).
KNOWN: dict[str, str] = {}
CUDA_CASES = [
    pytest.param(c, id=c[0], marks=[pytest.mark.xfail(reason=KNOWN[c[0]], strict=True)] if c[0] in KNOWN else [])
    for c in CASES if c[0] in SUBSET
]


def _all_on_gpu(m):
    assert m.graphs_failed == 0 and m.graphs_no_backend == 0
    assert m.graphs_compiled >= 1 and m.graphs_gpu == m.graphs_compiled, m


@pytest.mark.parametrize("case", CUDA_CASES)
def test_op_on_cuda(case):
    name, fn, specs, dtypes = case
    for dtype in dtypes:
        torch._dynamo.reset()
        metrics.reset()
        check_case(fn, [_make(s, dtype, False, k).to(DEVICE) for k, s in enumerate(specs)], dtype, device=DEVICE)
        m = metrics.snapshot()
        _all_on_gpu(m)
        if EMULATE and dtype == torch.bfloat16 and name == "index_put_acc":
            # Triton's interpreter has no bf16 atomic add: that one op is a counted fallback there (bf16
            # scatter_add accumulates in float32, as eager does, so it compiles there too)
            assert dict(m.fallback_ops) == {"index_put.default": 1}
            continue
        assert m.fallback_calls == 0, f"{name} ({dtype}): fallback ops {dict(m.fallback_ops)}"


@pytest.fixture
def full_float32(monkeypatch):
    """Convolutions in IEEE float32 on both sides: cuDNN's default TF32 rounds operands to 10 mantissa
    bits, so eager's NCHW call and stax's channels-last one (another algorithm) differ by ~1e-4 there."""
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)


@pytest.mark.parametrize("name", MODELS)
def test_model_inference_cuda(name, full_float32):
    _all_on_gpu(check_inference(name, DEVICE))


@pytest.mark.parametrize("name", MODELS)
def test_model_training_step_cuda(name, full_float32):
    """A whole training step compiled (backward inside the compiled frame), three times."""
    torch.manual_seed(0)
    model, x, target = _data(name, DEVICE)
    ref = copy.deepcopy(model)
    model.train()
    ref.train()

    def step(mod, inp):
        for p in mod.parameters():
            p.grad = None
        loss = _loss(name, mod(inp), target)
        loss.backward()
        return loss

    compiled = torch.compile(step, backend="stax", dynamic=False)
    for _ in range(4):  # step 2 captures CUDA graphs (step 3 under GpuConfig.pdl: step 2 is timed), then replays
        assert_same_step(model, ref, compiled(model, x), step(ref, x))
    m = metrics.snapshot()
    _all_on_gpu(m)
    assert m.graphs_compiled == 2 and m.fallback_calls == 0, (m.graphs_compiled, dict(m.fallback_ops))


@pytest.mark.parametrize("flag", [False, True], ids=["foreach-library", "foreach-kernels"])
@pytest.mark.parametrize("name", ["sgd_momentum_wd", "adamw"])
def test_foreach_optimizer_steps_cuda(name, flag):
    """foreach=True optimizer steps compiled with the backward, four steps, against eager: torch's
    multi-tensor kernels as a library call, or (Config.gpu_foreach_kernels) per-tensor Stax kernels
    written into the parameters, with no fallback left."""
    from test_optimizer_step import optimizer_steps

    runs = []
    for compiled in (False, True):
        torch._dynamo.reset()
        with config.patch(gpu_foreach_kernels=flag):
            runs.append(optimizer_steps(name, compiled, 4, DEVICE))
    (me, _, le, _), (ms, _, ls, got) = runs
    assert got.graphs_failed == 0 and got.graphs_gpu >= 2, got  # (forward, backward; a state init may not be)
    assert (got.fallback_calls == 0) == (flag or DEVICE == "cpu"), dict(got.fallback_ops)  # (CPU route: always split)
    torch.testing.assert_close(torch.stack(ls), torch.stack(le), rtol=1e-5, atol=1e-6)
    for a, b in zip(ms.parameters(), me.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_repeated_calls_keep_every_result_and_draw_new_dropout_masks():
    """On cuda stax.gpu replays CUDA graphs for repeated input addresses (test_gpu_routing
    runs the same check on CPU through HostGraphs)."""
    check_repeated_calls(DEVICE)


@pytest.mark.parametrize("name", MODELS)
def test_model_called_repeatedly_cuda(name, full_float32):
    check_model_calls(name, DEVICE)


def test_scalar_constant_in_a_cuda_graph():
    """`x[m] = 7` lifts 7 as a 0-dim CPU constant into a cuda graph (eager allows the mix): the
    graph ran eagerly ("constant ... is on cpu"), found by the fuzzer on the H200."""

    def fn(x, m):
        x[m] = 7
        return x * 2

    x, m = torch.tensor([3, 4], device=DEVICE), torch.tensor([True, False], device=DEVICE)
    got = torch.compile(fn, backend="stax")(x.clone(), m)
    assert torch.equal(got, fn(x.clone(), m))
    _all_on_gpu(metrics.snapshot())


@pytest.mark.skipif(DEVICE != "cuda", reason="a real cuda module (graphs keyed by input addresses)")
def test_a_float_input_keeps_its_device_address_and_graphs_replay():
    """Under dynamic shapes dynamo makes a Python float an input: a new 0-dim CPU tensor every call
    (GPT-2's `math.pi`). Copied to a new device tensor per call, its address never repeated, so the
    module's CUDA graphs never replayed (dynamic GPT-2 at 2.1-2.5x the static arm's time on an H100).
    Now it is copied into one device scalar per input: results follow each call's value, and replays happen."""
    import gc

    from stax.gpu.graphs import GraphedCall

    def f(x, scale: float):
        return (x * scale).sin() + x.shape[0]

    c = torch.compile(f, backend="stax", dynamic=True)
    x = torch.randn(33, 8, device=DEVICE)
    for k in range(6):
        scale = 0.5 + k
        torch.testing.assert_close(c(x, scale), f(x, scale))
    replays = sum(g.stats["replays"] for g in gc.get_objects() if _is_graphed_call(g, GraphedCall))
    assert replays >= 3, replays


def _is_graphed_call(obj, cls) -> bool:
    try:
        return isinstance(obj, cls)
    except ReferenceError:  # (a dead weak proxy among gc's objects)
        return False
