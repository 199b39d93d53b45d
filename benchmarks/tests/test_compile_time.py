"""Smoke tests of `--suite real --compile` (harness/compile_time.py, compile_output.py): the output
name, the table from rows, and one measurement child process. No speed is judged."""

from __future__ import annotations

import importlib.util

import pytest

from benchmarks.__main__ import parse, stem
from benchmarks.harness import compile_output, compile_time

needs_models = pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("timm", "transformers")),
                                  reason="needs timm and transformers")


def test_compile_output_name():
    assert stem(parse(["--suite", "real", "--compile"])) == "compile-cpu"
    assert stem(parse(["--suite", "real", "--compile", "--train", "--device", "cuda"])) == "compile-cuda-train"


def _row(w, b, cold, warm, **stax):
    return {"workload": w, "backend": b, "cold": {"first_call_s": cold, **stax}, "warm": {"first_call_s": warm, **stax}}


def test_compile_table_ratios_and_errors():
    rows = [_row("resnet18", "stax", 2.0, 1.0, backend_s=0.5, phases={"lower": 0.1, "cxx": 0.3}, cache_hits=2,
                 graphs=2, cache_skipped={}),
            _row("resnet18", "inductor", 8.0, 2.0),
            {"workload": "bert", "backend": "stax", "cold": {"error": "exit 1: Boom"}, "warm": {"error": "exit 1"}},
            _row("bert", "inductor", 4.0, 1.0)]
    data = {"meta": {"label": "inference, float32", "device": "cpu", "machine": {"cpu": "x", "commit": "abc"},
                     "date": "today", "threads": 2}, "results": rows}
    text = compile_output.markdown(data)
    assert "| resnet18 | 2.00 | 1.00 | 0.50 / 0.50 | 8.00 | 2.00 | 0.25× | 0.50× |" in text
    assert "stax cold: **exit 1: Boom**" in text and "2/2 graphs from the graph cache" in text
    assert "cold 0.25×, warm 0.50× (1 models)" in text
    assert "| resnet18 | cold |  |  | 0.10 |" in text


@needs_models
def test_one_measurement_process(tmp_path):
    class Opts:
        device, dtype, train, autocast, quick, threads = "cpu", "float32", False, False, True, 1

    row = compile_time._run_child("bert", "stax", str(tmp_path), Opts, {})
    assert "error" not in row, row
    assert row["first_call_s"] > 0 and row["graphs"] == 1 and row["cache_misses"] == 1 and row["phases"]["lower"] > 0


def test_models_after_the_deadline_are_skipped_not_run():
    """Past --deadline no child process starts (a bounded GPU call keeps its table); the rows say why."""
    rows = compile_time.measure(["resnet18", "bert"], ("stax", "inductor"), opts=None, deadline_s=-1)
    assert [(r["workload"], r["backend"]) for r in rows] == [("resnet18", "stax"), ("resnet18", "inductor"),
                                                             ("bert", "stax"), ("bert", "inductor")]
    assert all(r[p]["error"].startswith("skipped: --deadline") for r in rows for p in ("cold", "warm"))
    meta = {"label": "inference, float32", "device": "cuda", "machine": {}, "date": "today"}
    assert "stax cold: **skipped: --deadline -1 s passed**" in compile_output.markdown({"meta": meta, "results": rows})
