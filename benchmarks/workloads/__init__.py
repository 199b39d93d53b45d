"""Benchmark workloads: each builds (function, inputs) for a device, fresh and seeded.

`suite(name)` lists a suite's workloads; `--quick` keeps those marked `quick` and
builds them at small sizes. A workload's `make(device, quick)` returns a `Case`;
`min_bytes` is the traffic no implementation can avoid (inputs and parameters read
once, outputs written once, gradients written once when training), the numerator
of achieved bandwidth.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass
class Case:
    fn: Callable
    inputs: tuple
    params: tuple = ()  # tensors read besides the inputs (module parameters and buffers)
    training: bool = False  # fn runs forward and backward (parameter grads are written)


@dataclass(frozen=True)
class Workload:
    name: str
    make: Callable[[str, bool], Case]
    memory_bound: bool = True  # bandwidth is the right yardstick (else: compute bound, e.g. matmuls)
    quick: bool = False  # part of the --quick smoke run
    notes: str = ""


def nbytes(x) -> int:
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (tuple, list)):
        return sum(nbytes(t) for t in x)
    if isinstance(x, dict):
        return sum(nbytes(t) for t in x.values())
    return 0


def min_bytes(case: Case, outputs) -> int:
    """Bytes that must move at least once: inputs + parameters read, outputs (+ grads) written."""
    grads = nbytes(case.params) if case.training else 0
    return nbytes(case.inputs) + nbytes(case.params) + nbytes(outputs) + grads


def suite(name: str) -> list[Workload]:
    from . import micro, models

    table = {"micro": micro.WORKLOADS, "models": models.WORKLOADS}
    if name not in table:
        raise ValueError(f"unknown suite {name!r}; choose from {', '.join(table)}")
    return list(table[name])
