"""The CompiledModule interface (codegen -> frontend): generated source and its callable.

Defined here because both codegen packages (stax-cpu, stax-gpu) depend on stax-sched
but may not depend on each other.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CompiledModule:
    """`call(args)` takes a list of input buffers (it clears the list to free inputs
    early, Listing 8.1) and returns a tuple of output buffers. `call_unchecked`, when
    a code generator provides it, is `call` without the per-input layout checks, for a
    caller that has checked the inputs itself (the frontend does, on every call)."""

    source: str
    call: Callable = field(compare=False, repr=False)
    device: str = "cpu"
    kernel_names: tuple = ()
    call_unchecked: Callable | None = field(default=None, compare=False, repr=False)

    def __call__(self, args: list):
        return self.call(args)

    def content_hash(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    def __str__(self) -> str:
        return self.source
