"""Issue 19's real models — timm resnet18/50, mobilenetv3_small_100, convnext_atto,
vit_tiny_patch16_224; transformers BERT, GPT-2, T5, Llama (GQA, RoPE) from small configs;
nn.TransformerEncoderLayer — compiled by stax in strict mode (a graph that fails to compile
fails the test) and compared with eager: inference, and one training step (loss, every
parameter gradient and every updated weight after the SGD step).

The models, their inputs and the training step are the benchmark's own
(benchmarks/workloads/real_models.py, the `real` suite), at the `test` preset: a 64 px image
batch of 2, 16 tokens, 2-layer text configs, so each model takes seconds. That file imports
only torch, timm and transformers; it is loaded here by path, without the benchmarks package.
Where torchvision cannot be imported (beside torch 2.13's CPU build no wheel loads), timm is
imported through the documented stand-in of benchmarks/workloads/torchvision_shim.py: the CNNs
are never skipped for it. A machine with a GPU also runs the cuda tests (test_*_cuda), through
stax.gpu; without a GPU they are skipped.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
from conftest import assert_same
from stax.frontend import config, metrics

REAL_MODELS = Path(__file__).resolve().parents[3] / "benchmarks" / "workloads" / "real_models.py"


def _load():
    name = "stax_test_real_models"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REAL_MODELS)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


R = _load()
OUT_TOL = dict(rtol=1e-4, atol=1e-5)  # float32 through tens of layers of matmuls, convolutions, reductions
GRAD_TOL = dict(rtol=1e-4, atol=1e-4)  # gradients: summed over the batch, larger than the outputs
CUDA_TOL = dict(rtol=1e-3, atol=1e-3)  # cuda: other reduction orders (Triton vs cuDNN / ATen kernels)
# cuda training steps: stax's error against a float64 run of the same step at most REF_FACTOR times eager's
# own. Eager's convolutions and matmuls run in TF32 there (cuDNN's default), so through ResNet-50's backward
# eager and stax differ by 1e-2 where both are as far from the float64 answer: a fixed tolerance cannot tell.
REF_FACTOR = 3.0

# The ATen ops each model may leave to eager (subset check: a new fallback fails, a removed one passes).
# SGD(foreach=True) is _foreach_add.List in every training step; nn.TransformerEncoderLayer in eval
# mode under no_grad takes PyTorch's fused fast path (one native op), in eager as in the compiled graph.
ALLOWED_FALLBACKS = {
    ("transformer_encoder_layer", False): {"_transformer_encoder_layer_fwd.default"},
    ("convnext_atto", True): {"as_strided_scatter.default", "_foreach_add.List"},
}
TRAIN_FALLBACKS = {"_foreach_add.List"}


def _needs(family: str) -> None:
    module = {"timm": "timm", "transformers": "transformers"}.get(family)
    if module and importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (tox's frontend env pins it)")


def _build(name: str, device: str):
    _needs(R.by_name(name).family)
    return R.build(name, "test", device)


def _fallbacks_ok(name: str, train: bool) -> None:
    m = metrics.snapshot()
    assert m.graphs_failed == 0 and m.graphs_compiled >= 1, m
    allowed = ALLOWED_FALLBACKS.get((name, train), TRAIN_FALLBACKS if train else set())
    assert set(m.fallback_ops) <= allowed, f"new fallbacks: {set(m.fallback_ops) - allowed}"


def check_inference(name: str, device: str = "cpu", tol=None):
    sample = _build(name, device)
    fn, inputs, _ = R.program(sample, train=False, device=device)
    expected = fn(*inputs)
    with config.patch(strict=True):
        actual = torch.compile(fn, backend="stax", dynamic=False)(*inputs)
    assert_same(actual, expected, check_stride=False, **(tol or OUT_TOL))
    _fallbacks_ok(name, False)
    return metrics.snapshot()


def _rms(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).pow(2).mean().sqrt()) if a.numel() else 0.0


def assert_near_reference(actual, expected, reference, what: str, factor: float = REF_FACTOR) -> None:
    """`actual` (stax) no further from `reference` (float64 eager) than `factor` times `expected` (eager
    in the test's dtype), in root-mean-square error, with a floor of 16 ulps of that dtype at the reference's
    RMS size: a float32 sum of thousands of terms in another order than eager's (batch norm's statistics)."""
    assert actual.shape == expected.shape == reference.shape, what
    ours, eagers = _rms(actual, reference), _rms(expected, reference)
    size = float(reference.double().pow(2).mean().sqrt()) if reference.numel() else 0.0
    floor = 16 * torch.finfo(expected.dtype).eps * size
    assert ours <= factor * eagers + floor, (
        f"{what}: stax's RMS error vs float64 {ours:.3g} > {factor} x eager's {eagers:.3g} (+ {floor:.3g})")


def check_training_step(name: str, device: str = "cpu", tol=None, reference: bool = False):
    """One compiled step (forward, backward, SGD) from the same weights as one eager step. `reference`:
    judged against a float64 eager step from the same weights (assert_near_reference), not by `tol`."""
    sample, ref = _build(name, device), _build(name, device)
    fn, inputs, model = R.program(sample, train=True, device=device)
    ref_fn, ref_inputs, ref_model = R.program(ref, train=True, device=device)
    loss_ref = ref_fn(*ref_inputs)
    with config.patch(strict=True):
        loss = torch.compile(fn, backend="stax", dynamic=False)(*inputs)
    if reference:
        ref64 = R.build(name, "test", device, torch.float64)
        fn64, inputs64, model64 = R.program(ref64, train=True, device=device)
        same = lambda a, e, r, what: assert_near_reference(a, e, r, what)  # noqa: E731
        same(loss, loss_ref, fn64(*inputs64), "loss")
    else:
        same = lambda a, e, r, what: assert_same(a, e, check_stride=False, **(tol or GRAD_TOL))  # noqa: E731
        assert_same(loss, loss_ref, **(tol or OUT_TOL))
        model64 = ref_model
    for (pname, p), q, r in zip(model.named_parameters(), ref_model.parameters(), model64.parameters()):
        assert p.grad is not None, pname
        same(p.grad, q.grad, r.grad, f"grad of {pname}")
        same(p.detach(), q.detach(), r.detach(), f"{pname} after the SGD step")
    for (bname, b), c, r in zip(model.named_buffers(), ref_model.buffers(), model64.buffers()):
        if b.is_floating_point():  # batch norm's running statistics
            same(b, c, r, bname)
        else:
            assert torch.equal(b, c), bname
    _fallbacks_ok(name, True)
    return metrics.snapshot()


NAMES = [m.name for m in R.MODELS]


@pytest.mark.parametrize("name", NAMES)
def test_inference(name):
    check_inference(name)


@pytest.mark.parametrize("name", NAMES)
def test_training_step(name):
    check_training_step(name)


def test_every_issue_19_model_is_in_the_suite():
    """The list the benchmark times is the list tested here, and it holds what issue 19 asks for."""
    assert {"resnet18", "resnet50", "mobilenetv3_small_100", "convnext_atto", "vit_tiny_patch16_224", "bert", "gpt2",
            "t5", "llama", "transformer_encoder_layer"} <= set(NAMES)
    _needs("transformers")
    llama = R.build("llama", "test").model.config
    assert llama.num_key_value_heads < llama.num_attention_heads  # grouped-query attention
    assert R.build("bert", "test").model.config._attn_implementation == R.ATTN_IMPLEMENTATION == "sdpa"


def test_timm_models_build_with_or_without_torchvision():
    """timm imports either the real torchvision or, where that fails, the stand-in (never a skip)."""
    _needs("timm")
    R.ensure_timm()
    status = R.torchvision_status()
    try:
        import torchvision  # noqa: F401

        works = True
    except Exception:  # noqa: BLE001 - what the shim handles: ImportError or torchvision::nms missing
        works = False
    assert status.startswith("real torchvision" if works else "stub"), status
    assert R.build("resnet18", "test").model.num_classes == 1000


on_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a cuda GPU")


@on_cuda
@pytest.mark.parametrize("name", NAMES)
def test_inference_cuda(name):
    m = check_inference(name, "cuda", CUDA_TOL)
    assert m.graphs_gpu == m.graphs_compiled, m  # every graph through stax.gpu


@on_cuda
@pytest.mark.parametrize("name", NAMES)
def test_training_step_cuda(name):
    m = check_training_step(name, "cuda", reference=True)
    # forward and backward through stax.gpu; the step's graphs on CPU scalars alone (if any) go to stax.cpu
    assert m.graphs_gpu >= 2, m


def test_reference_check_catches_a_wrong_gradient():
    """The cuda tests' float64-reference rule (assert_near_reference) on CPU: a step that matches
    passes, an error 20x eager's own (above the 16-ulp floor) fails."""
    check_training_step("resnet18", reference=True)
    ref = torch.linspace(-1, 1, 101, dtype=torch.float64)
    eager = (ref + 1e-6 * torch.randn(101, dtype=torch.float64, generator=torch.Generator().manual_seed(0))).float()
    assert_near_reference(eager.clone(), eager, ref, "same as eager")
    with pytest.raises(AssertionError, match="RMS error"):
        assert_near_reference(ref.float() + 2e-5, eager, ref, "20x eager's error")
