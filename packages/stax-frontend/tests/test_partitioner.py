"""AOTAutograd's partitioner (Config.partitioner): min-cut rematerialization by default, as in
Inductor — the forward graph saves fewer tensors (a GELU's output is recomputed in the backward
from its input rather than saved), which lowers a training step's peak memory."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same
from stax.frontend import aot, config


def _saved_count(partitioner: str, fn, *args) -> tuple[int, tuple]:
    """(forward graph outputs, the step's results) with `partitioner`."""
    outputs = []
    real = aot.compile_graph

    def spy(gm, example_inputs, *, kind, cfg, input_strides=None):
        if kind == "forward":
            out = next(n for n in gm.graph.nodes if n.op == "output")
            outputs.append(len(out.args[0]))
        return real(gm, example_inputs, kind=kind, cfg=cfg, input_strides=input_strides)

    args = [a.detach().clone().requires_grad_() for a in args]
    torch._dynamo.reset()  # a fresh compile of the same function
    with pytest.MonkeyPatch.context() as mp, config.patch(partitioner=partitioner):
        mp.setattr(aot, "compile_graph", spy)
        y = torch.compile(fn, backend="stax")(*args)
        y.backward()
    return outputs[0], (y.detach(), *[a.grad for a in args])


def chain(x, w):
    return (F.gelu((x * 2).sin()).exp() * w).cos().sum()


def test_min_cut_saves_fewer_tensors_with_the_same_gradients():
    x, w = torch.randn(16, 32), torch.randn(32)
    n_default, ref = _saved_count("default", chain, x, w)
    n_min_cut, got = _saved_count("min_cut", chain, x, w)
    assert n_min_cut < n_default, (n_min_cut, n_default)
    assert_same(got, ref)


def test_unknown_partitioner_is_an_error():
    with pytest.raises(ValueError, match="partitioner"):
        config.Config(partitioner="greedy")
