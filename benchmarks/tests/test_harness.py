"""Smoke tests of the benchmark harness pieces. Nothing here judges speed: timings are
only checked for shape (counts, order, finiteness), never for values."""

from __future__ import annotations

import io
import json
import math

import pytest
import torch

from benchmarks.harness import output
from benchmarks.harness.progress import Progress
from benchmarks.harness.runner import Options, _compare, run_workload, selected, steps_per_workload
from benchmarks.harness.timing import Stats, calibrate, interleaved
from benchmarks.workloads import Case, Workload, min_bytes, nbytes, suite


def test_stats_median_and_quartiles():
    s = Stats.of([5.0, 1.0, 4.0, 2.0, 3.0])
    assert (s.median, s.q1, s.q3, s.n, s.iqr) == (3.0, 2.0, 4.0, 5, 2.0)
    assert Stats.of([7.0]) == Stats(7.0, 7.0, 7.0, 1)
    with pytest.raises(ValueError):
        Stats.of([])


def test_interleaved_rotates_the_order_and_counts_samples():
    calls = []
    fns = {n: (lambda n=n: calls.append(n)) for n in ("a", "b", "c")}
    samples = interleaved(fns, rounds=3, inner={"a": 1, "b": 2, "c": 1}, warmup=0)
    assert {n: len(v) for n, v in samples.items()} == {"a": 3, "b": 3, "c": 3}
    assert all(x >= 0 and math.isfinite(x) for v in samples.values() for x in v)
    # each round starts one backend later: a b b c | b b c a | c a b b
    assert calls == ["a", "b", "b", "c", "b", "b", "c", "a", "c", "a", "b", "b"]
    assert calibrate(lambda: None, 0.0) == 1


def test_progress_bar_lines():
    out = io.StringIO()
    p = Progress(4, out, width=8)
    p.step("first")
    p.step("second")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[##......] 1/4 first (")
    assert lines[1].startswith("[####....] 2/4 second (")


def test_compare_outputs_and_gradients():
    a = torch.tensor([1.0, float("nan"), 3.0])
    ok, err, _ = _compare((a,), [], (a.clone(),), [], 1e-3, 1e-3)
    assert ok and err == 0.0
    ok, err, what = _compare((a + 1,), [], (a,), [], 1e-3, 1e-3)
    assert not ok and err == 1.0 and "tensor 0" in what
    ok, _, what = _compare(torch.ones(2), [torch.ones(3)], torch.ones(2), [torch.zeros(3)], 1e-3, 1e-3)
    assert not ok and "tensor 1" in what  # the gradient differs
    ok, _, what = _compare(torch.ones(2), [], torch.ones(3), [], 1e-3, 1e-3)
    assert not ok and "vs eager" in what


def test_every_workload_builds_and_runs_eagerly_at_quick_size():
    for name in ("micro", "models"):
        ws = suite(name)
        assert len({w.name for w in ws}) == len(ws)
        for w in ws:
            case = w.make("cpu", True)
            out = case.fn(*case.inputs)
            assert min_bytes(case, out) >= nbytes(case.inputs) > 0, w.name
    assert [w.name for w in selected(Options.quick_defaults(suite="micro"))] == [
        w.name for w in suite("micro") if w.quick]
    with pytest.raises(ValueError, match="unknown suite"):
        suite("nope")


def _tiny(device, quick):
    return Case(lambda x: torch.softmax(x, -1), (torch.randn(8, 16),))


def test_a_failing_workload_or_backend_is_reported_not_raised():
    opts = Options(backends=("bogus", "eager"), rounds=2, min_sample_s=0.0)
    progress = Progress(10, io.StringIO())

    def broken(device, quick):
        raise RuntimeError("cannot build")

    rows = run_workload(Workload("broken", broken), opts, 1e10, progress)
    assert [(r["backend"], r["status"]) for r in rows] == [("bogus", "error"), ("eager", "error")]
    assert "building the workload failed: RuntimeError: cannot build" in rows[0]["error"]
    rows = {r["backend"]: r for r in run_workload(Workload("tiny", _tiny), opts, 1e10, progress)}
    assert rows["bogus"]["status"] == "error" and "unknown backend 'bogus'" in rows["bogus"]["error"]
    assert rows["eager"]["status"] == "ok" and rows["eager"]["samples"] == 2 and rows["eager"]["speedup"] == 1.0
    assert rows["eager"]["min_bytes"] == 2 * 8 * 16 * 4  # the input read once, the output written once
    # memory bound: '% of copy' is against the copy bandwidth timed in the same rounds (no row of its own)
    assert "copy" not in rows and rows["eager"]["copy_gbps"] > 0
    assert rows["eager"]["frac_copy"] == pytest.approx(rows["eager"]["gbps"] / rows["eager"]["copy_gbps"])


def test_stax_row_has_memory_plan_and_counters():
    """One tiny workload through the stax backend: counters, the plan's peak next to eager's estimate."""
    opts = Options(backends=("stax", "eager"), rounds=2, min_sample_s=0.0)
    rows = {r["backend"]: r for r in run_workload(Workload("tiny", _tiny), opts, 1e10,
                                                  Progress(steps_per_workload(opts), io.StringIO()))}
    stax = rows["stax"]
    assert stax["status"] == "ok", stax["error"]
    assert stax["stax"]["graphs_compiled"] == 1 and stax["stax"]["kernels"] >= 1
    assert stax["cold_compile_s"] > 0 and stax["warm_compile_s"] > 0 and stax["max_abs_err"] <= 1e-5
    mem = stax["memory"]
    assert mem["kind"] == "stax_plan" and mem["lower_bound_bytes"] <= mem["peak_bytes"]
    assert rows["eager"]["memory"] == {"kind": "eager_estimate", "peak_bytes": mem["eager_estimate_bytes"]}
    # eager runs the same (decomposed) ATen graph op by op: at least the input and the output are live at once
    assert mem["eager_estimate_bytes"] >= 2 * 8 * 16 * 4


def _data():
    def row(w, b, med, status="ok", err=None):
        return {"workload": w, "backend": b, "status": status, "error": err, "memory_bound": True,
                "cold_compile_s": 1.0 if b != "eager" else None, "warm_compile_s": 0.1 if b != "eager" else None,
                "median_s": med, "q1_s": med * 0.9 if med else None, "q3_s": med * 1.1 if med else None,
                "samples": 5, "inner": 1, "speedup": (1e-3 / med) if med else None,
                "speedup_lo": (0.9e-3 / (1.1 * med)) if med else None,
                "speedup_hi": (1.1e-3 / (0.9 * med)) if med else None,
                "min_bytes": 1000, "gbps": 1.0, "frac_copy": 0.5, "memory": None, "max_abs_err": 0.0}
    results = [row("w1", "stax", 0.5e-3), row("w1", "eager", 1e-3), row("w2", "stax", 2e-3),
               row("w2", "eager", 1e-3), row("w3", "stax", None, "error", "compile: boom | bang"),
               row("w3", "eager", 1e-3)]
    meta = {"suite": "micro", "device": "cpu", "backends": ["stax", "eager"], "quick": True, "rounds": 5,
            "copy_bandwidth_gbps": 2.0, "date": "today", "wall_s": 1.0,
            "machine": {"cpu": "test cpu", "cores": 2, "torch_threads": 2, "torch": "x", "commit": "abc"}}
    return {"meta": meta, "results": results}


def test_markdown_table_and_summary():
    data = _data()
    md = output.markdown(data)
    assert "| w1 | stax | 0.500 |" in md and "2.00×" in md
    assert "**failed**: compile: boom \\| bang" in md  # a pipe in an error does not break the table
    # geomean of 2.0 (w1) and 0.5 (w2); w3 failed
    assert "- **stax**: 1.00× over 2 workload(s), 1 failed or wrong" in md
    assert json.loads(json.dumps(data, default=str)) == data


def test_chart_is_a_png(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is in benchmarks/requirements.txt")
    path = tmp_path / "chart.png"
    output.chart(_data(), str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_summary_bandwidth_compile_and_run_conditions():
    data = _data()
    data["results"][0]["frac_copy"] = 0.9  # w1 stax; w2 stax keeps 0.5; w3 failed (not counted)
    data["meta"]["backends"] = ["stax", "inductor", "eager"]
    data["results"] += [dict(data["results"][0], backend="inductor", cold_compile_s=4.0, frac_copy=0.2)]
    s = output.summary(data)
    assert s["stax"]["median_frac_copy"] == pytest.approx(0.7) and s["stax"]["min_frac_copy"] == 0.5
    assert s["stax"]["median_cold_compile_s"] == 1.0 and s["inductor"]["median_cold_compile_s"] == 4.0
    assert output.compile_ratio(data) == 0.25  # only w1 has both
    data["meta"]["malloc"] = {"applied": {"M_MMAP_THRESHOLD": 1 << 30}, "reason": ""}
    data["meta"]["load_average"] = {"start": [1.5, 1.0, 0.5], "end": [2.0, 1.5, 1.0]}
    md = output.markdown(data)
    assert "glibc tuned by stax.cpu (M_MMAP_THRESHOLD=1.0 GiB)" in md
    assert "at start 1.5/1.0/0.5, at end 2.0/1.5/1.0 on 2 cores" in md
    assert "- stax: 70%, 50%" in md and "stax / inductor (median of per-workload ratios): 0.25" in md
