"""The per-graph HTML report (stax.frontend.report): content, provenance, memory timeline,
and that a real browser renders the kernels (headless Chromium, skipped where none exists)."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest
import torch
from conftest import assert_same, run_stax
from stax.frontend import config, metrics
from stax.frontend.report import load, write_report
from stax.frontend.report.layout import place
from stax.frontend.report.sources import kernel_source, wrapper_lines, wrapper_source

F32 = 4


def example_7_2(x):
    e = x.exp()
    return e.sum(-1), e.amax(-1)


def _pages(d: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in d.glob("*.html") if p.name != "index.html")


@pytest.fixture(scope="module")
def report_7_2(tmp_path_factory):
    """Example 7.2 compiled once with the report on: (page path, report data)."""
    d = tmp_path_factory.mktemp("report72")
    torch._dynamo.reset()
    x = torch.randn(64, 128)
    with config.patch(report=True, report_dir=str(d), strict=True):
        out = run_stax(example_7_2, x)
    assert_same(out, example_7_2(x))
    (page,) = _pages(d)
    return page, load(str(page))


def test_example_7_2_two_cpu_kernels_with_provenance(report_7_2):
    """§7 Example 7.2 on CPU: exp is its own pointwise kernel; sum and amax share one loop nest."""
    page, data = report_7_2
    assert page.name.startswith("inference_")
    kernels = data["kernels"]
    assert [(k["kind"], k["node_type"]) for k in kernels] == [
        ("pointwise", "SchedulerNode"), ("fused", "FusedSchedulerNode")]
    assert [k["origins"] for k in kernels] == [["exp"], ["sum_1", "amax"]]
    assert [k["nodes"] for k in kernels] == [["buf1"], ["buf2", "buf3"]]
    for k in kernels:  # each kernel's C++ as compiled: its own function, or its block in a shared parallel region
        head, body = k["source"].split("\n", 1)
        assert head.startswith('extern "C" int ')
        fn = head[len('extern "C" int '):head.index("(")]
        assert fn == k["name"] or fn.startswith("region"), head
        assert head.split("  //")[0] in data["source"]
        assert f"// {k['name']}:" in body or fn == k["name"]
        assert any(f"k_{fn}(" in line for line in k["launch"])
    assert "exp(" in kernels[0]["source"] and "exp(" not in kernels[1]["source"]
    html = page.read_text()
    for k in kernels:
        assert f'id="kernel-{k["name"]}"' in html


def test_example_7_2_reason_exp_not_fused_vertically(report_7_2):
    """The fusion log shows the vertical pair exp->sum rejected, with the CPU rule's reason."""
    page, data = report_7_2
    log = data["fusion_log"]
    rejected = [r for r in log if not r["fused"] and r["a_buffers"] == ["buf1"] and "buf2" in r["b_buffers"]]
    assert rejected, log
    for r in rejected:
        assert r["relation"] == "vertical"
        assert "incompatible iteration spaces" in r["reason"] and "outer loop fusion depth 0" in r["reason"]
    fused = [r for r in log if r["fused"]]
    assert [(r["a_buffers"], r["b_buffers"], r["reason"]) for r in fused] == [(["buf2"], ["buf3"], "SAME_VARS_REDUCE")]
    html = page.read_text()
    assert "outer loop fusion depth 0" in html and "rejected" in html and "vertical" in html


def test_example_7_2_memory_timeline(report_7_2):
    """Live bytes per kernel replay the plan: kernel0 holds x and exp(x); kernel1 exp(x) and two row results."""
    _, data = report_7_2
    mem = data["memory"]
    x_bytes, row_bytes = 64 * 128 * F32, 64 * F32
    assert mem["timeline"] == [2 * x_bytes, x_bytes + 2 * row_bytes]
    assert max(mem["timeline"]) == mem["peak_bytes"]
    assert mem["lower_bound_bytes"] <= mem["peak_bytes"]
    # eager: exp allocates next to its input (input released after its last use), then the two reductions
    assert mem["eager_timeline"] == [2 * x_bytes, x_bytes + row_bytes, x_bytes + 2 * row_bytes]
    assert mem["eager_peak_bytes"] == 2 * x_bytes


def test_report_has_every_section_and_inline_svgs(report_7_2):
    page, data = report_7_2
    html = page.read_text()
    for anchor in ("kernels", "fusion-log", "fusion-graph", "memory", "aten", "ir-before", "ir-after", "source"):
        assert f'id="{anchor}"' in html
    assert html.count("<svg") == 2  # timeline + fusion graph, inline
    assert 'class="timeline"' in html and 'class="fusion-graph"' in html
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")  # self-contained: nothing fetched
    assert "torch.ops.aten.exp.default" in html  # the ATen graph
    assert "Pointwise(ranges=[64, 128])" in data["ir_before"]
    assert data["ir_after"].startswith("kernel0: SchedulerNode pointwise")
    for b in ("arg0_1", "buf1", "buf2", "buf3"):
        assert f'data-buffer="{b}"' in html


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None


def test_report_renders_kernels_in_headless_chromium(report_7_2, tmp_path):
    """A real browser loads the page, runs its script, and the DOM shows both kernels and their code."""
    browser = _chromium()
    if browser is None:
        pytest.skip("no Chromium found: install Debian's `chromium` (.ci/run does) to run the browser check")
    page, _ = report_7_2
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    dom = proc.stdout
    assert proc.returncode == 0 and "<body" in dom, proc.stderr[-2000:]
    assert 'data-kernels-rendered="2"' in dom  # the page's script ran and found both kernel sections
    for name in ("kernel0", "kernel1"):
        assert f'id="kernel-{name}"' in dom
        assert f'href="#kernel-{name}"' in dom  # the navigation the script built
        assert f"int {name}(" in dom or f"// {name}: " in dom  # its source (own function or region block) is in the page
    assert "outer loop fusion depth 0" in dom


def test_training_graphs_get_one_page_each_with_extern_calls(tmp_path):
    """Forward and backward of Linear+GELU: one page per graph, listed in index.html; the mm
    calls appear as extern kernels; the pages' kernels add up to metrics.kernels_generated."""
    lin = torch.nn.Linear(16, 8)
    x = torch.randn(4, 16)
    f = lambda x: torch.nn.functional.gelu(lin(x)).sum()  # noqa: E731
    with config.patch(report=True, report_dir=str(tmp_path)):
        y = run_stax(f, x)
        y.backward()
    torch.testing.assert_close(y, f(x), rtol=1e-5, atol=1e-5)
    pages = _pages(tmp_path)
    assert sorted(p.name.split("_")[0] for p in pages) == ["backward", "forward"]
    index = (tmp_path / "index.html").read_text()
    assert all(p.name in index for p in pages)
    datas = [load(str(p)) for p in pages]
    generated = sum(1 for d in datas for k in d["kernels"] if k["kind"] != "extern")
    assert generated == metrics.snapshot().kernels_generated
    externs = [k for d in datas for k in d["kernels"] if k["kind"] == "extern"]
    assert externs and all(k["source"] is None for k in externs)
    for d in datas:  # every IR buffer is in exactly one kernel, and the timeline replays the plan
        placed = [b for k in d["kernels"] for b in k["nodes"]]
        assert sorted(placed) == sorted(n["buffer"] for n in d["nodes"] if n["kernel"] is not None)
        assert max(d["memory"]["timeline"]) == d["memory"]["peak_bytes"]


def test_report_failure_never_breaks_compilation(tmp_path):
    """An unwritable report directory: the report is skipped (logged), the graph still runs."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    x = torch.randn(8, 8)
    with config.patch(report=True, report_dir=str(blocker / "sub")):
        out = run_stax(example_7_2, x)
    assert_same(out, example_7_2(x))
    assert write_report(config.current(), "inference", None) is None


def test_env_var_turns_reports_on(tmp_path, monkeypatch):
    monkeypatch.setenv("STAX_REPORT", "1")
    monkeypatch.setenv("STAX_REPORT_DIR", str(tmp_path))
    cfg = config.from_env()
    assert cfg.report and cfg.report_dir == str(tmp_path)
    monkeypatch.setenv("STAX_REPORT", "0")
    assert not config.from_env().report


CPP = """\
// prelude
static inline int helper(int a) { return a; }
extern "C" int kernel0(const float* in_ptr0, float* out_ptr0, int64_t* err)
{
    for (int x0 = 0; x0 < 4; x0++) { out_ptr0[x0] = in_ptr0[x0]; }
    return 0;
}

extern "C" int kernel10(const float* in_ptr0, int64_t* err)
{
    return 1;
}

# ---- Python wrapper ----
def call(args):
    buf1 = empty_strided((4,), (1,), dt_float32)
    if k_kernel0(data_ptr(arg0_1), data_ptr(buf1), errp):
        raise_error(err, 'kernel0')
    return (buf1,)
"""


def test_kernel_source_splitter():
    """One function per kernel by name (kernel1 is not a prefix match of kernel10); the wrapper's launch line."""
    k0 = kernel_source(CPP, "kernel0")
    assert k0.startswith('extern "C" int kernel0(') and k0.endswith("}") and "kernel10" not in k0
    assert kernel_source(CPP, "kernel10").endswith("return 1;\n}")
    assert kernel_source(CPP, "kernel1") is None
    w = wrapper_source(CPP)
    assert w.startswith("def call(args):") and w.rstrip().endswith("return (buf1,)")
    assert wrapper_lines(w, "kernel0") == ["if k_kernel0(data_ptr(arg0_1), data_ptr(buf1), errp):"]
    triton = "@triton.jit\ndef triton_kernel3(in_ptr0, xnumel):\n    x = 1\n\ndef call(args):\n    pass\n"
    assert kernel_source(triton, "kernel3") == "@triton.jit\ndef triton_kernel3(in_ptr0, xnumel):\n    x = 1"


def test_layered_layout_points_every_edge_down():
    """A diamond plus a long edge: layers by longest path, distinct slots, edges go downwards."""
    nodes = ["a", "b", "c", "d", "e"]
    edges = [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("a", "e"), ("d", "e")]
    pos = place(nodes, edges)
    assert [pos[n].layer for n in nodes] == [0, 1, 1, 2, 3]
    assert all(pos[a].y < pos[b].y for a, b in edges)
    assert len({(p.x, p.y) for p in pos.values()}) == len(nodes)
