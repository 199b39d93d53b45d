"""The per-graph HTML report (stax.frontend.report): content, provenance, memory timeline,
and that a real browser renders the kernels (headless Chromium, skipped where none exists)."""

from __future__ import annotations

import itertools
import math
import os
import pathlib
import re
import shutil
import subprocess

import pytest
import torch
from conftest import assert_same, run_stax
from stax.frontend import config, metrics
from stax.frontend.report import load, write_report
from stax.frontend.report.layout import place
from stax.frontend.report.sources import kernel_source, wrapper_lines, wrapper_source
from stax.frontend.report.svg import DROPPED_COLOUR, INPUT_COLOUR, kernel_colours

F32 = 4


def example_7_2(x):
    e = x.exp()
    return e.sum(-1), e.amax(-1)


def _pages(d: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in d.glob("*.html") if p.name != "index.html")


def _lab(colour: str) -> tuple[float, float, float]:
    """CIELAB (D65) of an sRGB #rrggbb colour."""
    lin = [(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
           for c in (int(colour[k:k + 2], 16) / 255 for k in (1, 3, 5))]
    r, g, b = lin
    xyz = ((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b,
           (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883)
    fx, fy, fz = (v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116 for v in xyz)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def _delta_e(a: str, b: str) -> float:
    return math.dist(_lab(a), _lab(b))


def _chroma(colour: str) -> float:
    _, a, b = _lab(colour)
    return math.hypot(a, b)


HEX = re.compile(r"#[0-9a-f]{6}")


def _fusion_graph_fills(html: str) -> tuple[dict, dict, dict]:
    """From a page's fusion-graph SVG: ({buffer: (kernel, fill)}, {input: fill}, {kernel: legend fill})."""
    svg = html[html.index('class="fusion-graph"'):]
    svg = svg[:svg.index("</svg>")]
    nodes, inputs = {}, {}
    for cls, buf, fill in re.findall(r'<g class="([^"]*)" data-buffer="([^"]*)"><title>[^<]*</title>'
                                     r'<rect [^>]*?fill="([^"]*)"', svg):
        if cls == "input":
            inputs[buf] = fill
        elif cls.startswith("node kernel"):
            nodes[buf] = (cls.split()[1], fill)
    legend = dict(re.findall(r'<rect class="legend" data-kernel="([^"]*)" [^>]*?fill="([^"]*)"', svg))
    return nodes, inputs, legend


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


def test_fusion_graph_fills_two_kernels_differently(report_7_2):
    """Example 7.2: exp (kernel0) and sum + amax (kernel1) get two different fills; a kernel's nodes
    share one fill, the legend's swatch of that kernel, and each box names its kernel."""
    page, _ = report_7_2
    html = page.read_text()
    nodes, inputs, legend = _fusion_graph_fills(html)
    assert {b: k for b, (k, _) in nodes.items()} == {"buf1": "kernel0", "buf2": "kernel1", "buf3": "kernel1"}
    fill = {b: f for b, (_, f) in nodes.items()}
    assert fill["buf1"] != fill["buf2"] == fill["buf3"]
    assert legend == {"kernel0": fill["buf1"], "kernel1": fill["buf2"]}
    assert inputs == {"arg0_1": INPUT_COLOUR} and INPUT_COLOUR not in fill.values()
    for buf, tag in (("buf1", "k0"), ("buf2", "k1"), ("buf3", "k1")):
        group = html[html.index(f'data-buffer="{buf}"'):]
        assert f'class="kernel-tag">{tag}</text>' in group[:group.index("</g>")]


def test_kernel_palette_is_distinct_and_never_grey():
    """Any two of the first 24 kernel colours differ by dE76 >= 25 and none is a grey (chroma >= 20,
    as far from the input grey): the old palette had a grey (#79706e, chroma 4) and two teals dE 4
    apart, and went to hsl() (unread by SVG 1.1 renderers) after 12. Past 24: #rrggbb, all different."""
    first = kernel_colours(24)
    assert all(HEX.fullmatch(c) for c in first)
    assert min(_delta_e(a, b) for a, b in itertools.combinations(first, 2)) >= 25
    assert min(_chroma(c) for c in first) >= 20
    assert min(_delta_e(c, INPUT_COLOUR) for c in first) >= 25
    many = kernel_colours(600)
    assert many[:24] == first and all(HEX.fullmatch(c) for c in many)
    assert len(set(many)) == 600 and not {INPUT_COLOUR, DROPPED_COLOUR} & set(many)


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
        # its source (own function or region block) is in the page
        assert f"int {name}(" in dom or f"// {name}: " in dom
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


def _cnn_bn():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.Flatten(), torch.nn.Linear(8 * 16 * 16, 10))


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 10))


@pytest.fixture(scope="module")
def model_reports(tmp_path_factory):
    """Report data of every graph of small real models: an MLP training step, a CNN with batch
    norm (training step and eval). {page name: data}. Packed weights off: the eval graphs keep
    their batch norm and activation kernels (packed, they would run inside oneDNN's calls)."""
    d = tmp_path_factory.mktemp("models")
    torch._dynamo.reset()
    with config.patch(report=True, report_dir=str(d), strict=True, conv_prepack=False, linear_prepack=False):
        for model, x in ((_mlp(), torch.randn(32, 64)), (_cnn_bn(), torch.randn(4, 3, 16, 16))):
            run_stax(model, x).square().mean().backward()
            torch._dynamo.reset()
            model.eval()
            with torch.no_grad():
                assert_same(run_stax(model, x), model(x), rtol=1e-4, atol=1e-4)
            torch._dynamo.reset()
    return {p.name: (p.read_text(), load(str(p))) for p in _pages(d)}


def test_m_star_never_exceeds_the_plan_peak_on_small_models(model_reports):
    """M* is a lower bound of the peak the plan reaches (the timeline's maximum). The CNN's eval graph
    writes its first batch norm + ReLU in place over the convolution's output at the step where Def 7.5
    alone peaks: M* read 150088 B above the plan's 149960 B (the pair counted twice)."""
    kinds = sorted(name.split("_")[0] for name in model_reports)
    assert kinds == ["backward", "backward", "forward", "forward", "inference", "inference"]
    in_place = []
    for name, (_, data) in model_reports.items():
        mem = data["memory"]
        assert mem["lower_bound_bytes"] <= mem["peak_bytes"] == max(mem["timeline"]), name
        reads = {n["buffer"]: n["reads"] for n in data["nodes"]}
        for e in mem["events"]:
            m = re.fullmatch(r"\[\d+\] (\w+) = (\w+); del \2  # reuse", e)
            if m and m.group(2) in reads[m.group(1)]:  # written over a buffer its own kernel reads
                in_place.append((name, e))
    assert any(name.startswith("inference") for name, _ in in_place), in_place  # the case M* got wrong


def test_fusion_graph_colours_on_small_models(model_reports):
    """Every kernel's nodes have one fill, its legend swatch; kernels' fills are distinct, chromatic
    (chroma >= 20) and far from the input grey; graph inputs grey."""
    assert max(len(d["kernels"]) for _, d in model_reports.values()) >= 13
    for name, (html, _) in model_reports.items():
        nodes, inputs, legend = _fusion_graph_fills(html)
        by_kernel: dict = {}
        for kernel, fill in nodes.values():
            by_kernel.setdefault(kernel, set()).add(fill)
        assert all(len(f) == 1 for f in by_kernel.values()), name
        fills = {k: f.pop() for k, f in by_kernel.items()}
        assert {k: legend[k] for k in fills} == fills, name
        assert set(inputs.values()) <= {INPUT_COLOUR}
        assert len(set(fills.values())) == len(fills), name
        assert all(HEX.fullmatch(f) and _chroma(f) >= 20 and _delta_e(f, INPUT_COLOUR) >= 25
                   for f in fills.values()), name
        assert min((_delta_e(a, b) for a, b in itertools.combinations(fills.values(), 2)), default=99) >= 20, name


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
