"""The activation after a oneDNN linear layer or convolution that its primitive can run as a post-op
(ReLU, GELU exact or tanh), and whether doing so pays on this CPU.

oneDNN's post-op cost depends on the primitive and the instruction set its JIT targets. Measured
(torch 2.13, packed weights, median of 50-200 calls, AVX2 AMD EPYC, 2 threads): the extra time of
the post-op against a separate eager pass over the same output:

| primitive, output | + relu | + gelu (erf) | + gelu (tanh) | eager gelu / gelu tanh alone |
|---|--:|--:|--:|--:|
| linear 788x192 -> 768 (ViT-tiny fc1) | +0.05 ms | +1.3 ms | +2.7 ms | 0.43 / 1.3 ms |
| 1x1 conv 4x40x56x56 -> 160 (ConvNeXt-atto) | | +1.5 ms | +6.9 ms | 3.1 ms |
| 1x1 conv 4x160x14x14 -> 640 | | +0.5 ms | +1.6 ms | 1.1 ms |

So on AVX2 the linear layer's GELU post-ops and the convolution's tanh GELU cost 2-6x a separate
pass (which Stax fuses with its neighbours besides); ReLU and the convolution's exact GELU pay.
On AVX-512 every one pays: the same models ran their GELU linears faster than Inductor's bare
addmm (benchmarks/results/real-cpu-run3.md: ViT-tiny packed linear 67.0 ms vs addmm 74.4 ms).
"""

from __future__ import annotations

import logging

import torch

log = logging.getLogger("stax.frontend.fusion")
aten = torch.ops.aten

# the post-ops worth running inside oneDNN: (primitive, torch.backends.cpu.get_cpu_capability()) -> names
ALL = frozenset({"relu", "gelu", "gelu_tanh"})
WORTH_FUSING = {
    ("linear", "AVX512"): ALL,
    ("conv", "AVX512"): ALL,
    ("linear", "AVX2"): frozenset({"relu"}),
    ("conv", "AVX2"): frozenset({"relu", "gelu"}),
}
DEFAULT = frozenset({"relu"})  # (a capability not measured: ReLU, a max, is cheap on any JIT level)


def activation(u) -> str | None:
    """The post-op node `u` is ('relu', 'gelu' exact, 'gelu_tanh'), else None."""
    if u.op != "call_function":
        return None
    if u.target is aten.relu.default:
        return "relu"
    if u.target is aten.gelu.default:
        approx = u.kwargs.get("approximate", u.args[1] if len(u.args) > 1 else "none")
        return {"none": "gelu", "tanh": "gelu_tanh"}.get(approx)
    return None


def worth_fusing(primitive: str, unary: str) -> bool:
    """Whether oneDNN's `primitive` ('linear', 'conv') runs post-op `unary` more cheaply than a
    separate (Stax-fused) pass would."""
    cap = torch.backends.cpu.get_cpu_capability()
    ok = unary in WORTH_FUSING.get((primitive, cap), DEFAULT)
    if not ok and (primitive, cap, unary) not in _SAID:
        _SAID.add((primitive, cap, unary))
        log.info("oneDNN post-ops: %s after a %s stays a Stax kernel on %s (slower as a post-op there)",
                 unary, primitive, cap)
    return ok


_SAID: set = set()  # (primitive, capability, post-op) logged once per process


def fusable(primitive: str, u) -> str | None:
    """activation(u), where it is worth running inside oneDNN's `primitive` here."""
    act = activation(u)
    return act if act is not None and worth_fusing(primitive, act) else None
