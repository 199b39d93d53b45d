"""Inputs whose runtime strides differ from the compiled ones (issue 18, item 1).

AOTAutograd compiles the backward graph for the strides it traced for the saved tensors; a
saved `expand` of a computed value is traced with stride 0 but stored dense by the forward
graph. Two rules keep that correct: the forward graph reports every output's real strides
(so the backward is compiled for them), and a compiled module never copies an input into an
overlapping layout — it runs a variant compiled for the input's own non-overlapping layout.
"""

from __future__ import annotations

import logging

import pytest
import torch
import torch.nn.functional as F
from conftest import assert_same
from stax.frontend import aot, config
from torch.fx.experimental.proxy_tensor import make_fx

SAVED_EXPANDS = {
    "expand_as_of_sum": lambda x: x * x.sum(0, keepdim=True).expand_as(x),
    "normalize": lambda x: F.normalize(x, dim=-1),
    "broadcast_to_of_mean": lambda x: x * torch.broadcast_to(x.mean(1, keepdim=True), x.shape),
}


def _train_step(fn, x):
    xs = x.detach().clone().requires_grad_()
    y = fn(xs)
    y.backward(torch.arange(y.numel(), dtype=y.dtype).reshape(y.shape).sin())
    return y.detach(), xs.grad


@pytest.mark.parametrize("name", sorted(SAVED_EXPANDS))
@pytest.mark.parametrize("partitioner", ["default", "min_cut"])
def test_saved_expand_backward(name, partitioner):
    """The issue's reproductions: the backward crashed copying into stride (0, 1)."""
    fn = SAVED_EXPANDS[name]
    x = torch.randn(8, 5)
    with config.patch(partitioner=partitioner):
        assert_same(_train_step(torch.compile(fn, backend="stax"), x), _train_step(fn, x))


@pytest.mark.parametrize("name", sorted(SAVED_EXPANDS))
def test_saved_expand_without_stride_report(name, monkeypatch, caplog):
    """Where AOTAutograd gets no stride report (another torch), the backward module sees a
    dense tensor where it was compiled for an expand: it runs a variant compiled for it."""
    monkeypatch.setattr(aot, "report_output_strides", lambda lowered: None)
    fn = SAVED_EXPANDS[name]
    x = torch.randn(8, 5)
    # the default partitioner saves the expand (min-cut may recompute it in the backward instead)
    with caplog.at_level(logging.INFO, logger="stax.frontend"), config.patch(partitioner="default"):
        got = _train_step(torch.compile(fn, backend="stax"), x)
    assert_same(got, _train_step(fn, x))
    assert "compiling a variant" in caplog.text


def _compiled_for_expand():
    def f(x, y):
        return x * 2 + y.sin()

    xe, y = torch.randn(1, 5).expand(8, 5), torch.randn(8, 5)
    gm = make_fx(f)(xe, y)
    return f, aot.compile_graph(gm, [xe, y], kind="inference", cfg=config.current()), xe, y


RUNTIME_LAYOUTS = {
    "as_compiled": lambda: torch.randn(1, 5).expand(8, 5),
    "dense": lambda: torch.randn(8, 5),
    "transposed": lambda: torch.randn(5, 8).t(),
    "sliced": lambda: torch.randn(8, 10)[:, ::2],
    "storage_offset": lambda: torch.randn(50)[10:].view(8, 5),
    "other_expand": lambda: torch.randn(8, 1).expand(8, 5),
    "all_zero_strides": lambda: torch.randn(()).expand(8, 5),
}


@pytest.mark.parametrize("layout", sorted(RUNTIME_LAYOUTS))
def test_module_compiled_for_an_expand_takes_any_layout(layout):
    """The general rule, at the module: any runtime layout of an input compiled as an expand."""
    f, compiled, _, y = _compiled_for_expand()
    x = RUNTIME_LAYOUTS[layout]()
    assert_same(compiled([x, y]), f(x, y), check_stride=False)  # the compiled output layout


def test_variants_are_reused_and_bounded():
    f, compiled, _, y = _compiled_for_expand()
    for _ in range(2):
        for make in RUNTIME_LAYOUTS.values():
            x = make()
            assert_same(compiled([x, y]), f(x, y), check_stride=False)  # the compiled output layout
    # dense, transposed, sliced (storage_offset and the overlapping ones reuse dense)
    assert len(compiled._variants) == 3
    for k in range(8):  # past the bound: other layouts go to the dense variant
        x = torch.randn(8, 12 + k)[:, 1:6]
        assert_same(compiled([x, y]), f(x, y), check_stride=False)  # the compiled output layout
    assert len(compiled._variants) <= 4


def test_forward_reports_real_strides_of_saved_expand():
    """The forward graph's report says the saved expand is dense (what it returns)."""
    reports = []
    real = aot.report_output_strides

    def spy(lowered):
        reports.append(list(lowered.output_strides))
        real(lowered)

    fn = SAVED_EXPANDS["expand_as_of_sum"]
    x = torch.randn(8, 5, requires_grad=True)
    with pytest.MonkeyPatch.context() as mp, config.patch(partitioner="default"):
        mp.setattr(aot, "report_output_strides", spy)
        torch.compile(fn, backend="stax")(x).sum().backward()
    assert reports, "the forward graph reported no strides"
    assert (0, 1) not in reports[0] and (5, 1) in reports[0]


def test_a_host_scalar_of_a_device_graph_keeps_one_device_address():
    """A 0-dim CPU input of a graph compiled for another device (a float dynamo made an input under
    dynamic shapes) goes into one device scalar per input, so the module sees the same address every
    call (CUDA graphs are keyed by input addresses); an input the graph returns gets its own copy.
    The meta device stands in for cuda here (test_cuda.py checks values and replays on a GPU)."""
    from stax.frontend.runtime import CompiledGraph

    g = CompiledGraph.__new__(CompiledGraph)  # (only what _device_scalar reads)
    g.device, g._scalars, g._returned_inputs = torch.device("meta"), {}, (1,)
    first = g._device_scalar(0, torch.tensor(3.14, dtype=torch.float64))
    again = g._device_scalar(0, torch.tensor(2.71, dtype=torch.float64))
    assert again is first and first.device.type == "meta" and first.dtype == torch.float64
    assert g._device_scalar(0, torch.tensor(1.0)) is not first  # another dtype: its own scalar
    returned = g._device_scalar(1, torch.tensor(1.0))
    assert returned is not g._device_scalar(1, torch.tensor(1.0))  # returned to the caller: never reused
