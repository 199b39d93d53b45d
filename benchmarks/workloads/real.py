"""The `real` suite: the models of real_models.py (timm CNNs and a ViT, transformers encoder,
decoders and encoder-decoder, nn.TransformerEncoderLayer) as benchmark workloads.

One workload per model, in one phase and one precision per run (`Variant`):
- inference: the model in eval mode under `torch.no_grad()`, returning its logits / hidden states;
- training (`--train`): one step as PyTorch's own dynamo benchmarks take it — zero the
  gradients (set to None), forward, loss, backward, `torch.optim.SGD(lr=0.01, foreach=True)`
  step — the whole step is the function every backend compiles; it returns the loss
  (real_models.program, which the frontend tests compile too).
- precision: float32, the whole model in bfloat16 (`--dtype bfloat16`), or float32 weights
  under `torch.autocast(<device>, torch.bfloat16)` (`--autocast`).

A training step changes the weights, so a `RealCase` can `reset()` the model to its initial
state (parameters, buffers, gradients None): the harness resets before eager's reference
call and before each backend's first call, so all of them start from the same weights.
`reference()` runs the same first call on a float64 copy of the model (no autocast): the
accuracy rule for low precision compares each backend's error against it (harness/accuracy.py).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import partial

import torch

from . import Case, Workload
from .real_models import MODELS, build, program, torchvision_status


@dataclass(frozen=True)
class Variant:
    """What one run of the suite measures: phase and precision."""

    train: bool = False
    dtype: str = "float32"  # float32 | bfloat16: the model's parameters and float inputs
    autocast: bool = False  # float32 weights, forward under torch.autocast(bfloat16)

    def __post_init__(self):
        if self.dtype not in ("float32", "bfloat16"):
            raise ValueError(f"dtype must be float32 or bfloat16, got {self.dtype!r}")
        if self.autocast and self.dtype != "float32":
            raise ValueError("--autocast keeps float32 weights: use it with --dtype float32")

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    @property
    def low_precision(self) -> bool:
        return self.dtype != "float32" or self.autocast

    @property
    def label(self) -> str:
        """'inference, float32' / 'training step, bfloat16' / 'inference, autocast bfloat16'."""
        phase = "training step" if self.train else "inference"
        return f"{phase}, {'autocast bfloat16' if self.autocast else self.dtype}"

    @property
    def stem(self) -> str:
        """File-name suffix: '', '-bfloat16', '-autocast', plus '-train'."""
        return ("-autocast" if self.autocast else "" if self.dtype == "float32" else f"-{self.dtype}") + (
            "-train" if self.train else "")


@dataclass
class RealCase(Case):
    reset: object = None  # () -> None: back to the initial weights, gradients None
    reference: object = None  # () -> (output, [grads]) of the first call in float64
    low_precision: bool = False
    info: dict = field(default_factory=dict)  # model, shape, preset, what torchvision timm got


def _state(model: torch.nn.Module) -> tuple:
    return tuple(model.parameters()) + tuple(model.buffers())


def _resetter(model: torch.nn.Module):
    saved = [t.detach().clone() for t in _state(model)]

    def reset():
        with torch.no_grad():
            for t, s in zip(_state(model), saved):
                t.copy_(s)
        for p in model.parameters():
            p.grad = None

    return reset


def _float64(t: torch.Tensor) -> torch.Tensor:
    return t.double() if t.is_floating_point() else t


def _reference(sample, variant: Variant, device: str, reset):
    """The first call on a float64 copy of the initial model, without autocast: (output, grads)."""
    reset()
    ref = copy.copy(sample)
    ref.model = copy.deepcopy(sample.model).double()
    ref.inputs, ref.targets = tuple(map(_float64, sample.inputs)), tuple(map(_float64, sample.targets))
    fn, inputs, model = program(ref, variant.train, False, device)
    out = fn(*inputs)
    grads = [p.grad.detach() for p in _state(model) if isinstance(p, torch.Tensor) and p.grad is not None]
    return out, grads


def make_case(name: str, variant: Variant, device: str, quick: bool) -> RealCase:
    preset = "quick" if quick else ("cuda" if device.startswith("cuda") else "cpu")
    sample = build(name, preset, device, variant.torch_dtype)
    fn, inputs, model = program(sample, variant.train, variant.autocast, device)
    fn.__name__ = f"{name}_{'train' if variant.train else 'infer'}"
    reset = _resetter(model)
    cache: list = []

    def reference():
        if not cache:
            cache.append(_reference(sample, variant, device, reset))
            reset()
        return cache[0]

    info = {"model": name, "shape": sample.shape, "preset": preset, "variant": variant.label,
            "params": sum(p.numel() for p in model.parameters())}
    if any(m.name == name and m.family == "timm" for m in MODELS):
        info["torchvision"] = torchvision_status()
    return RealCase(fn, inputs, _state(model), training=variant.train, reset=reset, reference=reference,
                    low_precision=variant.low_precision, info=info)


def workloads(variant: Variant) -> list[Workload]:
    """The suite for one variant; `quick` marks the --quick subset."""
    return [Workload(m.name, partial(make_case, m.name, variant), memory_bound=False, quick=m.quick,
                     notes=m.about) for m in MODELS]
