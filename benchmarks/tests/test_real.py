"""Smoke tests of the real-model suite's pieces: the accuracy rule, the profile breakdown, the CPU
tensor peak, the torchvision stand-in, output names and the report. No speed is judged.

The models themselves are checked against eager in packages/stax-frontend/tests/test_real_models.py;
here one small model goes through the whole runner once.
"""

from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from torch.profiler import profile

from benchmarks.__main__ import RESULTS, SCRATCH, output_dir, parse, stem
from benchmarks.harness import accuracy, real_output
from benchmarks.harness.breakdown import extern_ops, op_name, profile_backend
from benchmarks.harness.memory import cpu_tensor_peak
from benchmarks.harness.progress import Progress
from benchmarks.harness.runner import Options, run_workload, selected, steps_per_workload

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
needs_models = pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("timm", "transformers")),
                                  reason="needs timm and transformers")


def test_accuracy_allclose_then_float64_rule():
    exact = torch.linspace(-1, 1, 4096, dtype=torch.float64)
    eager = exact + 1e-2 * torch.sin(exact * 37)  # an eager low-precision error of rmse ~7e-3
    close = accuracy.check([eager.float() + 1e-4], [eager.float()], None)
    assert close.ok and close.fp64_checked == 0  # allclose: no float64 run needed
    calls = []

    def fp64():
        calls.append(1)
        return [exact]

    worse = exact + 2.5 * (eager - exact)  # 2.5x eager's error
    v = accuracy.check([worse.float()], [eager.float()], fp64)
    assert not v.ok and "rmse vs float64" in v.what and v.worst_ratio == pytest.approx(2.5, rel=1e-3)
    v = accuracy.check([worse.bfloat16()], [eager.bfloat16()], fp64)  # low precision: 3x is allowed
    assert v.ok and 2.4 < v.worst_ratio < 2.6
    assert accuracy.check([eager.bfloat16()], [eager.bfloat16()], fp64, always_fp64=True).fp64_checked == 1
    assert len(calls) == 3  # once per check that needed it
    ints = accuracy.check([torch.tensor([1, 2])], [torch.tensor([1, 3])], None)
    assert not ints.ok and "int64" in ints.what
    assert not accuracy.check([torch.ones(2)], [torch.ones(3)], None).ok


def test_extern_op_names_from_generated_sources():
    cpu = "    buf3 = fix_layout(ext_buf3(buf1, primals_2), (4, 8), (8, 1), dt_float32, 'buf3', 'aten.mm.default')"
    gpu = "    buf3 = extern_call(EXTERN_2, (buf1,), CONSTANTS_2, (4,), (1,), F32, DEVICE)  # aten._foreach_add.List"
    assert extern_ops(cpu + "\n" + gpu + "\n    k_kernel0(data_ptr(buf0), errp)") == {
        "ext_buf3": "aten::mm", "EXTERN_2": "aten::_foreach_add.List"}
    assert op_name("aten.addmm.default") == "aten::addmm"


def test_cpu_tensor_peak_counts_tensor_memory():
    def f():
        a = torch.empty(1 << 20, dtype=torch.uint8)
        b = torch.empty(1 << 20, dtype=torch.float32)
        del a
        c = torch.empty(1 << 19, dtype=torch.uint8)
        return b, c

    with profile(profile_memory=True) as prof:
        f()
    peak = cpu_tensor_peak(prof.profiler.kineto_results.events())
    assert (1 << 20) * 5 <= peak < (1 << 20) * 6  # a and b live together; c comes after a is freed


def test_breakdown_times_stax_kernels_and_extern_calls():
    """stax: its kernels measured in ranges, the matmul an extern call; eager: all ATen, outside graphs."""
    w = torch.randn(64, 64)
    fn = lambda x: torch.softmax(x @ w, -1).exp()  # noqa: E731
    x = torch.randn(32, 64)
    compiled = torch.compile(fn, backend="stax", dynamic=False)
    compiled(x)
    bd = profile_backend("stax", lambda: compiled(x), 3, "cpu", lambda: None)["breakdown"]
    assert bd["generated_measured"] and bd["kernels"] >= 1 and bd["generated_ms"] > 0
    assert set(bd["extern_ms"]) >= {"aten::mm"} and not bd["outside_ms"]
    assert bd["total_ms"] >= bd["generated_ms"] + bd["extern_ms"]["aten::mm"]
    as_fallback = profile_backend("stax", lambda: compiled(x), 2, "cpu", lambda: None, {"mm.default": 1})
    assert "aten::mm" in as_fallback["breakdown"]["fallback_ms"]
    eager = profile_backend("eager", lambda: fn(x), 2, "cpu", lambda: None)
    assert eager["breakdown"]["in_graphs_ms"] == 0 and "aten::matmul" in eager["breakdown"]["outside_ms"]
    assert eager["peak_bytes"] >= 2 * 32 * 64 * 4
    torch._dynamo.reset()


def test_output_names_and_scratch_directory():
    assert stem(parse(["--suite", "real"])) == "real-cpu"
    assert (stem(parse(["--suite", "real", "--dtype", "bfloat16", "--train", "--device", "cuda:0"]))
            == "real-cuda-bfloat16-train")
    assert stem(parse(["--suite", "real", "--autocast", "--quick"])) == "real-cpu-autocast-quick"
    assert stem(parse(["--quick"])) == "cpu-micro-quick"
    assert output_dir(parse(["--quick"])) == SCRATCH == os.path.join(REPO, "bench_out")  # never the committed results
    assert output_dir(parse(["--suite", "real"])) == RESULTS == os.path.join(REPO, "benchmarks", "results")
    assert output_dir(parse(["--quick", "--out", "x"])) == "x"


def test_torchvision_stand_in_where_torchvision_fails(tmp_path):
    """A torchvision that raises like the registry's wheels beside torch 2.13: timm still imports and
    builds resnet18; the stub is gone from sys.modules afterwards (nobody else sees a torchvision)."""
    if importlib.util.find_spec("timm") is None:
        pytest.skip("needs timm")
    fake = tmp_path / "torchvision"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise RuntimeError('operator torchvision::nms does not exist')\n")
    code = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        import real_models as R
        m = R.build("resnet18", "test")
        print(R.torchvision_status())
        print(type(m.model).__name__, "torchvision" in sys.modules)
    """)
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    out = subprocess.run([sys.executable, "-c", code, os.path.join(REPO, "benchmarks", "workloads")], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    status, built = out.stdout.strip().splitlines()[-2:]
    assert status == "stub (RuntimeError: operator torchvision::nms does not exist)"
    assert built == "ResNet False"


@needs_models
def test_real_workloads_build_reset_and_run_eagerly():
    from benchmarks.workloads.real import Variant, workloads
    from benchmarks.workloads.real_models import MODELS

    ws = workloads(Variant())
    assert [w.name for w in ws] == [m.name for m in MODELS]
    quick = [w.name for w in selected(Options.real(Variant(), quick=True))]
    assert quick and set(quick) < {w.name for w in ws}
    step = next(w for w in workloads(Variant(train=True)) if w.name == "transformer_encoder_layer").make("cpu", True)
    before = [p.detach().clone() for p in step.params]
    loss = step.fn(*step.inputs)
    assert loss.ndim == 0 and any(not torch.equal(p, q) for p, q in zip(step.params, before))  # SGD moved them
    step.reset()
    assert all(torch.equal(p, q) for p, q in zip(step.params, before))
    assert all(p.grad is None for p in step.params if isinstance(p, torch.nn.Parameter))
    out64, grads64 = step.reference()
    assert out64.dtype == torch.float64 and grads64 and all(g.dtype == torch.float64 for g in grads64)
    with pytest.raises(ValueError, match="float32 weights"):
        Variant(dtype="bfloat16", autocast=True)


@needs_models
@pytest.mark.parametrize("variant", [dict(train=True), dict(dtype="bfloat16")], ids=["train-fp32", "infer-bf16"])
def test_one_real_model_through_the_runner(variant):
    """nn.TransformerEncoderLayer (the suite's quickest compile) through the whole runner: cold compile,
    the accuracy rule, timing, profile (breakdown + measured peak), and the report."""
    from benchmarks.workloads.real import Variant

    v = Variant(**variant)
    opts = Options.real(v, quick=True, backends=("stax", "eager"), rounds=2, only=("transformer_encoder_layer",))
    (w,) = selected(opts)
    rows = {r["backend"]: r for r in run_workload(w, opts, 1e10, Progress(steps_per_workload(opts), io.StringIO()))}
    stax, eager = rows["stax"], rows["eager"]
    assert stax["status"] == "ok", stax["error"]
    assert stax["warm_compile_s"] is None and stax["cold_compile_s"] > 0 and stax["samples"] == 2
    assert stax["case"]["model"] == "transformer_encoder_layer" and stax["case"]["preset"] == "quick"
    for r in (stax, eager):
        assert r["memory"]["kind"] == "cpu_tensor_peak" and r["memory"]["peak_bytes"] > 0
        assert r["breakdown"]["calls"] >= 2 and r["breakdown"]["total_ms"] > 0
    if v.low_precision:  # the float64 comparison always runs for bfloat16
        assert stax["accuracy"]["fp64_checked"] >= 1
    data = {"meta": {"suite": "real", "device": "cpu", "backends": ["stax", "eager"], "quick": True, "rounds": 2,
                     "date": "today", "wall_s": 1.0, "variant": dict(v.__dict__, label=v.label),
                     "machine": {"cpu": "test", "cores": 2, "torch_threads": 2, "torch": "x", "commit": "abc"}},
            "results": list(rows.values())}
    md = real_output.markdown(data)
    assert f"real models, {v.label} on cpu (quick)" in md and "| transformer_encoder_layer |" in md
    assert "## Where the time goes" in md


def _fake_real_data():
    def row(w, b, med, status="ok", err=None):
        return {"workload": w, "backend": b, "status": status, "error": err,
                "cold_compile_s": None if b == "eager" else 2.0,
                "median_s": med, "q1_s": med * 0.95 if med else None, "q3_s": med * 1.05 if med else None,
                "speedup": 1e-2 / med if med else None, "speedup_lo": 0.9e-2 / med if med else None,
                "speedup_hi": 1.1e-2 / med if med else None, "max_abs_err": 1e-6, "case": {"shape": "batch 2"},
                "memory": {"kind": "cpu_tensor_peak", "peak_bytes": 3 << 20},
                "breakdown": {"calls": 2, "total_ms": 11.0, "in_graphs_ms": 9.0, "generated_ms": 4.0,
                              "generated_measured": b == "stax", "kernels": 3 if b == "stax" else 0, "top_kernels": {},
                              "extern_ms": {"aten::mm": 5.0}, "fallback_ms": {}, "outside_ms": {}, "host_ms": 2.0}}
    results = [row("a", "stax", 5e-3), row("a", "inductor", 4e-3), row("a", "eager", 1e-2),
               row("b", "stax", None, "error", "compile: boom | bang"), row("b", "inductor", 5e-3),
               row("b", "eager", 1e-2)]
    meta = {"suite": "real", "device": "cpu", "backends": ["stax", "inductor", "eager"], "quick": False, "rounds": 3,
            "date": "2026-12-01 10:00", "wall_s": 9.0, "variant": {"label": "inference, float32"},
            "machine": {"cpu": "test", "cores": 2, "torch_threads": 2, "torch": "x", "commit": "abc"}}
    return {"meta": meta, "results": results}


def test_real_report_and_chart(tmp_path):
    data = _fake_real_data()
    md = real_output.markdown(data)
    assert "| a | batch 2 | 10.0 ±5% | 5.0 ±5% | 4.0 ±5% | 2.00× (1.80–2.20) | 2.50× (2.25–2.75) " in md
    assert "| 1.25 | 2.0 / 2.0 | 3.0 MiB / 3.0 MiB / 3.0 MiB | ok (max abs 1.0e-06) |" in md  # stax / Inductor
    assert "- b / stax: error: compile: boom | bang" in md and "Over the 1 of 2 models" in md
    assert "| a | inductor | 4.0 | 11.0 | 4.0* | 5.0: mm 5.0 |" in md and "| b | stax |" not in md
    s = real_output.summary(data)
    assert s["stax_over_inductor"] == pytest.approx(1.25) and s["stax_vs_eager"] == pytest.approx(2.0)
    pytest.importorskip("matplotlib", reason="matplotlib is in benchmarks/requirements.txt")
    real_output.chart(data, str(tmp_path / "c.png"))
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_merge_real_takes_each_model_from_its_last_run():
    """Runs split over device calls: a later run's rows win per model, a skipped row never replaces a
    run one, and the header names each run's commit and models."""
    import copy

    from benchmarks.harness.merge_real import merge

    first = _fake_real_data()
    second = copy.deepcopy(first)
    second["meta"]["machine"]["commit"], second["meta"]["date"] = "def", "2026-12-02 10:00"
    for r in second["results"]:
        if r["workload"] == "a":
            r.update(status="skipped", median_s=None)
        else:
            r.update(status="ok", error=None, median_s=4e-3, q1_s=3.9e-3, q3_s=4.1e-3, speedup=2.5, speedup_lo=2.4,
                     speedup_hi=2.6)
    merged = merge([first, second])
    got = {(r["workload"], r["backend"]): r for r in merged["results"]}
    assert got[("a", "stax")]["median_s"] == 5e-3 and got[("a", "stax")]["case"]["run"]["commit"] == "abc"
    assert got[("b", "stax")]["status"] == "ok" and got[("b", "stax")]["case"]["run"]["commit"] == "def"
    assert [r["models"] for r in merged["meta"]["merged"]] == [["a"], ["b"]]
    md = real_output.markdown(merged)
    assert "Merged from 2 runs" in md and "commit abc, 9 s: a" in md and "commit def, 9 s: b" in md
    assert "commit abc, def" in md and "Over the 2 of 2 models" in md
    third = copy.deepcopy(second)  # a merged report merged again: its rows keep their runs
    third["meta"]["machine"]["commit"], third["meta"]["date"] = "ghi", "2026-12-03 10:00"
    third["results"] = [r for r in third["results"] if r["workload"] == "b"]
    again = merge([merged, third])
    got = {(r["workload"], r["backend"]): r for r in again["results"]}
    assert got[("a", "stax")]["case"]["run"]["commit"] == "abc" and got[("b", "stax")]["case"]["run"]["commit"] == "ghi"
    assert [(r["commit"], r["models"]) for r in again["meta"]["merged"]] == [("abc", ["a"]), ("ghi", ["b"])]
    assert again["meta"]["merged"][0]["wall_s"] == first["meta"]["wall_s"]
    other = copy.deepcopy(second)
    other["meta"]["variant"] = {"label": "training step, float32"}
    with pytest.raises(SystemExit, match="different runs"):
        merge([first, other])
