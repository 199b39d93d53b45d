"""The `stax` torch.compile backend (entry point `torch_dynamo_backends: stax`)."""

from __future__ import annotations

from . import config
from .aot import aot_compile


def stax_backend(gm, example_inputs, options: dict | None = None, **kwargs):
    """torch.compile(model, backend="stax", options={...}): compile with the config in effect now,
    `options` applied (config.with_options)."""
    return aot_compile(gm, example_inputs, config.with_options(config.current(), options))


def register(name: str = "stax") -> None:
    """Make backend="stax" work without the installed entry point (e.g. from PYTHONPATH)."""
    import torch._dynamo

    if name not in torch._dynamo.list_backends(exclude_tags=()):
        from torch._dynamo.backends.registry import register_backend

        register_backend(compiler_fn=stax_backend, name=name)
