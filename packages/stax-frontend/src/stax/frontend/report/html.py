"""The report page: one self-contained HTML file (inline CSS, SVG, a few lines of JS, the data).

The data dict is embedded as JSON (`<script type="application/json" id="stax-report-data">`)
so tools (`stax.frontend.why`, the benchmarks) can read a saved page back with `load`.
"""

from __future__ import annotations

import json
import re
from html import escape

from .data import to_json
from .svg import fusion_graph_svg, human_bytes, kernel_colours, timeline_svg

DATA_ID = "stax-report-data"
_DATA_RE = re.compile(r'<script type="application/json" id="' + DATA_ID + r'">(.*?)</script>', re.S)

CSS = """
body { font-family: system-ui, sans-serif; margin: 0 2em 4em 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; border-bottom: 1px solid #ccc; margin-top: 2em; }
pre { background: #f6f8fa; padding: 0.6em; overflow-x: auto; font-size: 12px; line-height: 1.35; }
table { border-collapse: collapse; font-size: 13px; }
td, th { border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; } tr.rejected td { background: #fff4f4; } tr.fused td { background: #f3fff3; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; border-radius: 2px; vertical-align: middle;
          margin-right: 4px; }
nav a, #kernel-nav a { margin-right: 1em; display: inline-block; } .muted { color: #777; }
.error { background: #fee; padding: 0.6em; border: 1px solid #e99; }
section.kernel { border-left: 5px solid #ccc; padding-left: 0.8em; margin: 1em 0; }
div.scroll { overflow: auto; max-height: 85vh; border: 1px solid #eee; }
svg .node.hl rect { stroke-width: 4px; stroke: #000; }
"""

JS = """
(function () {
  var kernels = document.querySelectorAll('section.kernel');
  var list = document.getElementById('kernel-nav');
  kernels.forEach(function (s) {
    var a = document.createElement('a'); a.href = '#' + s.id; a.textContent = s.dataset.kernel; list.appendChild(a);
    s.addEventListener('mouseenter', function () {
      document.querySelectorAll('svg .node.' + s.dataset.kernel).forEach(function (g) { g.classList.add('hl'); });
    });
    s.addEventListener('mouseleave', function () {
      document.querySelectorAll('svg .node.hl').forEach(function (g) { g.classList.remove('hl'); });
    });
  });
  document.body.setAttribute('data-kernels-rendered', String(kernels.length));
})();
"""


def _pre(text: str | None, cls: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return f"<pre{c}>{escape(text or '')}</pre>"


def _table(head: list[str], rows: list[list[str]], row_classes: list[str] | None = None) -> str:
    out = ["<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"]
    for k, row in enumerate(rows):
        cls = f' class="{row_classes[k]}"' if row_classes else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _summary(data: dict) -> str:
    kernels = data.get("kernels", [])
    log = data.get("fusion_log", [])
    mem = data.get("memory", {})
    low = data.get("lowering", {})
    parts = [
        f"{sum(1 for k in kernels if k['kind'] != 'extern')} generated kernel(s), "
        f"{sum(1 for k in kernels if k['kind'] == 'extern')} extern call(s)",
        f"{sum(1 for r in log if r['fused'])} fusion(s), {sum(1 for r in log if not r['fused'])} rejected pair(s)",
        f"{len(data.get('nodes', []))} IR buffer(s) from "
        f"{sum(1 for n in data.get('aten', {}).get('nodes', []) if n['op'] == 'call_function')} ATen op(s)",
    ]
    if low.get("fallback_ops"):
        parts.append("fallbacks: " + ", ".join(f"{k}×{v}" for k, v in low["fallback_ops"].items()))
    phases = data.get("compile_phases")
    if phases:
        parts.append(f"compile {sum(phases.values()):.3f} s: "
                     + ", ".join(f"{k.replace('_', ' ')} {v:.3f} s" for k, v in phases.items()))
    if mem:
        eager = mem.get("eager_peak_bytes")
        parts.append(f"memory plan peak {human_bytes(mem['peak_bytes'])} (M* {human_bytes(mem['lower_bound_bytes'])})"
                     + (f", eager ≈ {human_bytes(eager)}" if eager is not None else ""))
    return "<ul>" + "".join(f"<li>{escape(p)}</li>" for p in parts) + "</ul>"


def _kernels(data: dict) -> str:
    kernels = data.get("kernels", [])
    colours = kernel_colours(len(kernels))
    rows = []
    for i, k in enumerate(kernels):
        sw = f'<span class="swatch" style="background:{colours[i]}"></span>'
        rows.append([
            f'{sw}<a href="#kernel-{escape(k["name"])}">{escape(k["name"])}</a>', escape(k["kind"]),
            escape(k["node_type"]), escape(k["group"]),
            escape(", ".join(f"{b} ({o})" for b, o in zip(k["nodes"], k["ops"]))),
            escape(", ".join(k["origins"]) or "-"), escape(", ".join(k["inlined"]) or "-"),
        ])
    out = [_table(["kernel", "kind", "scheduler node", "iteration group", "IR buffers (SchedulerNode)",
                   "ATen nodes (origins)", "ATen nodes inlined / views"], rows)]
    for i, k in enumerate(kernels):
        out.append(f'<section class="kernel" id="kernel-{escape(k["name"])}" data-kernel="{escape(k["name"])}" '
                   f'style="border-left-color:{colours[i]}">')
        out.append(f"<h3>{escape(k['header'])}</h3>")
        out.append(f"<p>From ATen: <b>{escape(', '.join(k['origins']) or '-')}</b>"
                   + (f"; inlined into it: {escape(', '.join(k['inlined']))}" if k["inlined"] else "") + "</p>")
        if k["kind"] == "extern":
            out.append("<p>Library call (ExternKernel): not generated by Stax.</p>")
        else:
            out.append(_pre(k["source"] or "(source not found in the compiled module)", "kernel-source"))
        if k["launch"]:
            out.append("<p>Launched by the wrapper:</p>" + _pre("\n".join(k["launch"])))
        out.append("<details><summary>IR of its nodes</summary>" + _pre(k["ir"]) + "</details></section>")
    return "\n".join(out)


def _fusion_log(data: dict) -> str:
    log = data.get("fusion_log", [])
    if not log:
        return "<p class='muted'>No candidate pairs (nothing shares a buffer, or a single node).</p>"
    rows, classes = [], []
    for r in log:
        rows.append([
            str(r["round"]), escape(f"{r['a']} ({', '.join(r['a_buffers'])})"),
            escape(f"{r['b']} ({', '.join(r['b_buffers'])})"), escape(r.get("relation", "")),
            "fused" if r["fused"] else "<b>rejected</b>",
            escape(r["reason"]), escape(str(tuple(r["score"])) if r["score"] is not None else "-"),
        ])
        classes.append("fused" if r["fused"] else "rejected")
    return _table(["round", "a", "b", "fusion", "verdict", "reason (rule)", "score (tau, sigma, omega, -delta)"],
                  rows, classes)


def _memory(data: dict) -> str:
    mem = data.get("memory")
    if not mem:
        return "<p class='muted'>No memory plan.</p>"
    names = [k["name"] for k in data.get("kernels", [])]
    svg = timeline_svg(mem["timeline"], names, mem["lower_bound_bytes"], mem["peak_bytes"], mem.get("eager_peak_bytes"))
    arena = f", arena {human_bytes(mem['arena_bytes'])}" if mem.get("arena_bytes") is not None else ""
    return (f"<p>Live bytes during each kernel (bars), the lower bound M* of Def 7.5 (a buffer written in place "
            f"over a dying input of its kernel shares that storage: counted once), the plan's peak{arena}, "
            "and eager PyTorch's estimated peak for the same ATen graph (same conventions: inputs freed after "
            "their last use).</p>" + svg + "<details><summary>allocation events</summary>"
            + _pre("\n".join(mem["events"])) + "</details>")


def render(data: dict) -> str:
    """The whole page for one graph's report data."""
    title = f"Stax report: {data.get('ident', 'graph')}"
    err = f'<div class="error"><b>Compilation failed:</b> {escape(data["error"])}</div>' if data.get("error") else ""
    low = data.get("lowering", {})
    low_text = "\n".join(f"{k}: {json.dumps(v)}" for k, v in low.items())
    body = [
        f"<h1>{escape(title)}</h1>", err, _summary(data),
        '<nav><a href="#kernels">kernels</a><a href="#fusion-log">fusion log</a>'
        '<a href="#fusion-graph">fusion graph</a>'
        '<a href="#memory">memory</a><a href="#aten">ATen graph</a><a href="#ir-before">IR before fusion</a>'
        '<a href="#ir-after">IR after fusion</a><a href="#source">source</a></nav>',
        '<p id="kernel-nav" class="muted">kernels: </p>',
        '<h2 id="kernels">Kernels and their provenance</h2>', _kernels(data),
        '<h2 id="fusion-log">Fusion log</h2>', _fusion_log(data),
        '<h2 id="fusion-graph">Fusion graph</h2><p>IR buffers filled with the colour of the kernel that computes '
        "them (the legend above the graph; each box names its kernel in its corner, k3 = kernel3; the same colours "
        "mark the kernels table and the memory timeline); grey: graph inputs; white, dashed: dropped (no users). "
        "Hover a node for its ATen origins.</p>",
        '<div class="scroll">' + fusion_graph_svg(data) + "</div>" if data.get("nodes") else "",
        '<h2 id="memory">Memory plan</h2>', _memory(data),
        '<h2 id="aten">ATen graph</h2>', _pre(data.get("aten", {}).get("code")),
        '<h2 id="ir-before">IR before fusion</h2>', _pre(data.get("ir_before")),
        "<details><summary>lowering summary</summary>" + _pre(low_text) + "</details>",
        '<h2 id="ir-after">IR after fusion (grouped by kernel)</h2>', _pre(data.get("ir_after")),
        '<h2 id="source">Generated source</h2><details><summary>the whole module</summary>'
        + _pre(data.get("source")) + "</details>",
    ]
    payload = to_json(data).replace("</", "<\\/")
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{CSS}</style></head><body>\n" + "\n".join(body)
        + f'\n<script type="application/json" id="{DATA_ID}">{payload}</script>\n'
        f"<script>{JS}</script>\n</body></html>\n"
    )


def extract(page: str) -> dict:
    """The data dict embedded in a rendered page."""
    m = _DATA_RE.search(page)
    if m is None:
        raise ValueError("not a Stax report page (no embedded report data)")
    return json.loads(m.group(1))  # "<\/" is the JSON escape of "</"
