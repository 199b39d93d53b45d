"""stax.frontend: the `stax` torch.compile backend.

    import torch
    y = torch.compile(f, backend="stax")(x)   # entry point: no import needed

Pipeline per graph: dynamo FX -> AOTAutograd (+ decompositions) -> ATen graph ->
stax.ir.Graph (graph_lowering) -> stax.sched.schedule -> stax.cpu (CPU tensors) or
stax.gpu (cuda tensors) -> callable.
Public: `stax_backend`, `register`, `config` (Config, patch), `metrics`
(snapshot, reset), `lower` (FX graph -> LoweredGraph, for tests and tools),
`StaxEagerWarning` (raised once per cause when a whole graph runs eagerly).
"""

from . import config, logs, metrics
from .backend import register, stax_backend
from .eager_warnings import StaxEagerWarning
from .graph_lowering import lower

logs.configure_from_env()  # quiet by default; STAX_LOG=fusion,memory,codegen turns areas on (logs.py)

__version__ = "0.1.0"

__all__ = ["StaxEagerWarning", "config", "lower", "metrics", "register", "stax_backend"]
