"""Which code generator a graph goes to: its tensors' device (cuda -> stax.gpu, cpu -> stax.cpu)."""

from __future__ import annotations

import torch

from .config import Config
from .errors import GraphUnsupported

GPU, CPU = "gpu", "cpu"  # code generation targets: stax.gpu (Triton) or stax.cpu (C++)


def graph_device(gm: torch.fx.GraphModule, example_inputs) -> torch.device:
    """The device of the graph's tensors: its one non-CPU device if any (0-dim CPU
    tensors may mix with it, as in eager), else cpu."""
    vals = [t for t in example_inputs if isinstance(t, torch.Tensor)]
    vals += [n.meta.get("val") for n in gm.graph.nodes if n.op == "call_function"]
    found = set()
    for v in vals:
        for t in v if isinstance(v, (list, tuple)) else (v,):
            if isinstance(t, torch.Tensor) and t.device.type not in ("cpu", "meta"):
                found.add(t.device)
    if len(found) > 1:
        raise GraphUnsupported(f"tensors on several devices: {sorted(map(str, found))}")
    return found.pop() if found else torch.device("cpu")


def route(gm: torch.fx.GraphModule, example_inputs, cfg: Config) -> tuple[str, torch.device]:
    """(target, device): cuda graphs (or all, with cfg.device_override='gpu') go to stax.gpu."""
    device = graph_device(gm, example_inputs)
    target = GPU if device.type == "cuda" or cfg.device_override == GPU else CPU
    return target, device
