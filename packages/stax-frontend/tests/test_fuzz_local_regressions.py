"""Bugs the differential fuzzer found in the torch 2.13 CPU run (issue 18, item 6; triage/local),
each as a small program compared with eager. Each failed before its fix."""

from __future__ import annotations

import torch


def test_float16_scatter_add_forward_sums_in_float():
    """fwd-value_9dbe80c2e7 (scatter_add@f16, forward): the terms landing on one element were
    added one at a time in float16 (1024 + 0.5 + 0.5 stays 1024, ties to even); eager's CPU
    scatter_add sums in float32 and rounds once (1025). Fixed with the half scatter_add in 9569e51."""
    x = torch.tensor([1024.0, -3.0, 0.25], dtype=torch.float16)
    index = torch.tensor([0, 0, 2, 1], dtype=torch.int64)
    src = torch.tensor([0.5, 0.5, 0.0001, 2.0], dtype=torch.float16)

    def fn(x0, i, s):
        return torch.scatter_add(x0, 0, i, s)

    eager = fn(x, index, src)
    assert eager[0].item() == 1025.0
    stax = torch.compile(fn, backend="stax", fullgraph=True)(x, index, src)
    torch.testing.assert_close(stax, eager, rtol=0, atol=0)
