"""`why`: were two nodes fused, and which rule refused it — from a saved report page or debug dump."""

from __future__ import annotations

import json
import pathlib

import pytest
import torch
from conftest import run_stax
from stax.frontend import config
from stax.frontend.report import load
from stax.frontend.why import main, rule_of, why


def example_7_2(x):
    e = x.exp()
    return e.sum(-1), e.amax(-1)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Example 7.2 compiled once with both the report and the debug dump on."""
    rep, dump = tmp_path_factory.mktemp("rep"), tmp_path_factory.mktemp("dump")
    torch._dynamo.reset()
    with config.patch(report=True, report_dir=str(rep), debug=True, debug_dir=str(dump), strict=True):
        run_stax(example_7_2, torch.randn(64, 128))
    (page,) = [p for p in rep.glob("*.html") if p.name != "index.html"]
    return page, dump


def test_exp_and_sum_were_not_fused_and_the_rule_is_named(saved):
    """Example 7.2: exp -> sum is a vertical pair refused by Def 7.2 (CPU: outer loops differ)."""
    page, _ = saved
    a = why(load(str(page)), "exp", "sum_1")
    assert a.fused is False
    assert "vertical fusion of buf1 (op0, ATen exp) and buf2 (op1, ATen sum_1) was rejected" in a.text
    assert "outer loop fusion depth 0" in a.text and "Def 7.2" in a.text
    assert a.records and all(not r["fused"] for r in a.records)


def test_sum_and_amax_were_fused(saved):
    page, _ = saved
    data = load(str(page))
    for names in (("sum_1", "amax"), ("buf2", "buf3"), ("op2", "op1")):  # ATen, buffer and SchedulerNode names
        a = why(data, *names)
        assert a.fused is True, a.text
        assert "SAME_VARS_REDUCE" in a.text and "kernel1" in a.text


def test_inputs_and_unknown_names(saved):
    page, _ = saved
    data = load(str(page))
    assert why(data, "arg0_1", "buf1").fused is None
    unknown = why(data, "nope", "buf1")
    assert unknown.fused is None and "unknown node 'nope'" in unknown.text and "sum_1" in unknown.text


def test_cli_on_report_dir_and_on_debug_dump(saved, capsys):
    """The CLI reads a report directory and a debug dump (report.json) alike."""
    page, dump = saved
    assert main([str(page.parent), "exp", "amax"]) == 0
    out_report = capsys.readouterr().out
    (dump_dir,) = [d for d in pathlib.Path(dump).iterdir() if d.is_dir()]
    assert (dump_dir / "report.json").exists()
    assert main([str(dump_dir), "exp", "amax", "--json"]) == 0
    answers = json.loads(capsys.readouterr().out)
    assert len(answers) == 1 and answers[0]["fused"] is False
    assert "incompatible iteration spaces" in answers[0]["text"]
    assert "incompatible iteration spaces" in out_report and page.stem in out_report
    assert main([str(page.parent), "exp", "nope"]) == 2
    assert main([str(page.parent / "missing"), "a", "b"]) == 2


def _report(tmp_path, fn, *args):
    torch._dynamo.reset()
    with config.patch(report=True, report_dir=str(tmp_path)):
        run_stax(fn, *args)
    (page,) = [p for p in tmp_path.glob("*.html") if p.name != "index.html"]
    return load(str(page))


def test_inlined_aten_node_is_inside_its_users_buffer(tmp_path):
    """x*2 has one user and is cheap: it is composed into the reduction's body, no buffer of its own."""
    data = _report(tmp_path, lambda x: (x * 2).sum(-1), torch.randn(8, 32))
    a = why(data, "mul", "sum_1")
    assert a.fused is True
    assert "inlined into" in a.text


def test_nodes_sharing_no_buffer_were_never_candidates(tmp_path):
    data = _report(tmp_path, lambda x, y: (x.exp(), y.sin()), torch.randn(16), torch.randn(32))
    a = why(data, "exp", "sin")
    assert a.fused is False and "never a candidate pair" in a.text and not a.records


def test_extern_kernels_are_never_fused(tmp_path):
    w = torch.randn(16, 8)
    data = _report(tmp_path, lambda x: torch.relu(x @ w), torch.randn(4, 16))
    mm = next(n for n in data["nodes"] if n["kind"] in ("extern", "fallback"))
    relu = next(n for n in data["nodes"] if mm["buffer"] in n["reads"])
    a = why(data, mm["buffer"], relu["buffer"])
    assert a.fused is False and "extern" in a.text.lower()


def test_every_rejection_reason_maps_to_a_rule():
    assert rule_of("incompatible iteration spaces: x").startswith("Def 7.2")
    assert rule_of("index mismatch: buf1 written at i0, read by op2 at i0 + 1").startswith("Prop 7.2")
    assert rule_of("would create a cycle (Prop 7.1)").startswith("Prop 7.1")
    assert rule_of("something new") == "something new"
