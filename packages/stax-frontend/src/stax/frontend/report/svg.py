"""Inline SVG pictures for the report: the memory timeline and the fusion graph.

Both are drawn from the report's data (plain dicts and lists), with no plotting
library, so the page stays one self-contained file and renders anywhere.
"""

from __future__ import annotations

from html import escape

from .layout import place

PALETTE = (
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948",
    "#b07aa1", "#ff9da7", "#9c755f", "#79706e", "#86bcb6", "#d37295",
)
INPUT_COLOUR = "#d9d9d9"


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def kernel_colour(index: int) -> str:
    """Twelve distinct colours, then hues spread by the golden angle (no two kernels alike)."""
    if index < len(PALETTE):
        return PALETTE[index]
    return f"hsl({(index * 137.508) % 360:.0f}, 55%, 60%)"


def _text(x, y, s, size=11, anchor="start", extra="") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" {extra}>{escape(s)}</text>'


def timeline_svg(series: list[int], kernels: list[str], m_star: int, plan_peak: int, eager_peak: int | None) -> str:
    """Live bytes at each kernel step (bars) against M*, the plan's peak and eager's peak (lines)."""
    w, h, left, right, top, bottom = 760, 300, 80, 170, 20, 70
    n = max(len(series), 1)
    vmax = max([*series, m_star, plan_peak, eager_peak or 0, 1]) * 1.1
    pw, ph = w - left - right, h - top - bottom
    bw = pw / n

    def y(v):
        return top + ph - ph * v / vmax

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{w}" height="{h}" viewBox="0 0 {w} {h}">',
           f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#ccc"/>']
    for k in range(5):
        v = vmax * k / 4
        out.append(f'<line x1="{left - 4}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>')
        out.append(_text(left - 6, y(v) + 4, human_bytes(v), 10, "end"))
    every = max(1, n // 24)
    for k, v in enumerate(series):
        name = kernels[k] if k < len(kernels) else f"step{k}"
        colour = kernel_colour(k)
        out.append(
            f'<rect class="live" x="{left + k * bw + 1:.1f}" y="{y(v):.1f}" width="{max(bw - 2, 1):.1f}" '
            f'height="{top + ph - y(v):.1f}" fill="{colour}" fill-opacity="0.75">'
            f"<title>{escape(name)}: {human_bytes(v)} live ({v} B)</title></rect>"
        )
        if k % every == 0:
            cx, cy = left + (k + 0.5) * bw, top + ph + 10
            out.append(_text(cx, cy, name, 10, "end", f'transform="rotate(-45 {cx:.1f} {cy:.1f})"'))
    lines = [("M* (lower bound)", m_star, "#2ca02c", "6,3"), ("Stax plan peak", plan_peak, "#1f3b73", "2,2")]
    if eager_peak is not None:
        lines.append(("eager peak (estimate)", eager_peak, "#d62728", "8,4"))
    for k, (label, v, colour, dash) in enumerate(lines):
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="{colour}" '
                   f'stroke-width="2" stroke-dasharray="{dash}"><title>{escape(label)}: {v} B</title></line>')
        ly = top + 14 + 30 * k
        out.append(f'<line x1="{left + pw + 10}" x2="{left + pw + 34}" y1="{ly}" y2="{ly}" stroke="{colour}" '
                   f'stroke-width="2" stroke-dasharray="{dash}"/>')
        out.append(_text(left + pw + 38, ly + 4, label, 10))
        out.append(_text(left + pw + 38, ly + 16, human_bytes(v), 10))
    out.append(_text(left + pw / 2, h - 4, "kernel step", 11, "middle"))
    out.append("</svg>")
    return "\n".join(out)


def _short(s: str, n: int = 20) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def fusion_graph_svg(data: dict) -> str:
    """The IR nodes as a layered DAG, each filled with its kernel's colour; inputs grey."""
    kernel_index = {k["name"]: i for i, k in enumerate(data.get("kernels", []))}
    names = [i["name"] for i in data.get("inputs", [])] + [n["buffer"] for n in data.get("nodes", [])]
    info = {n["buffer"]: n for n in data.get("nodes", [])}
    edges = [(r, n["buffer"]) for n in data.get("nodes", []) for r in n.get("reads", []) if r in set(names)]
    edges = list(dict.fromkeys(edges))
    used = {a for a, _ in edges} | {b for _, b in edges} | set(info)
    names = [n for n in names if n in used]
    bw, bh = 136, 42
    pos = place(names, edges, dx=bw + 24, dy=bh + 46)
    width = max((p.x for p in pos.values()), default=0) + bw / 2 + 20
    height = max((p.y for p in pos.values()), default=0) + bh / 2 + 20
    legend_h = 22 * (1 + (len(kernel_index) - 1) // 5) if kernel_index else 0
    width = max(width, 5 * 150 + 20)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="fusion-graph" width="{width:.0f}" '
           f'height="{height + legend_h:.0f}" viewBox="0 0 {width:.0f} {height + legend_h:.0f}">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" '
           'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#666"/></marker></defs>']
    for i, (kname, k) in enumerate(kernel_index.items()):
        lx, ly = 10 + 150 * (i % 5), 6 + 22 * (i // 5)
        out.append(f'<rect x="{lx}" y="{ly}" width="14" height="14" fill="{kernel_colour(k)}"/>')
        kind = data["kernels"][k]["kind"]
        out.append(_text(lx + 18, ly + 11, f"{kname} ({kind})", 10))
    out.append(f'<g transform="translate(0 {legend_h})">')
    for a, b in edges:
        pa, pb = pos[a], pos[b]
        ka, kb = info.get(a, {}).get("kernel"), info.get(b, {}).get("kernel")
        inside = ka is not None and ka == kb
        colour = kernel_colour(kernel_index[ka]) if inside else "#888"
        out.append(f'<line x1="{pa.x:.1f}" y1="{pa.y + bh / 2:.1f}" x2="{pb.x:.1f}" y2="{pb.y - bh / 2:.1f}" '
                   f'stroke="{colour}" stroke-width="{2.5 if inside else 1.2}" marker-end="url(#arrow)"/>')
    for name in names:
        p = pos[name]
        node = info.get(name)
        x, y = p.x - bw / 2, p.y - bh / 2
        if node is None:
            fill, label2, title, cls = INPUT_COLOUR, "input", f"graph input {name}", "input"
        else:
            k = node.get("kernel")
            fill = kernel_colour(kernel_index[k]) if k in kernel_index else "#ffffff"
            origins = ", ".join(node.get("origins", [])) or "-"
            label2 = _short(f"{node['op']}: {origins}")
            title = f"{name} ({node['op']}, {node['kind']}) in {k or 'no kernel (dropped)'}; ATen: {origins}"
            cls = f"node {k}" if k else "node dropped"
        dash = ' stroke-dasharray="4,3"' if node is not None and node.get("kernel") is None else ""
        out.append(f'<g class="{escape(cls)}" data-buffer="{escape(name)}"><title>{escape(title)}</title>'
                   f'<rect x="{x:.1f}" y="{y:.1f}" width="{bw}" height="{bh}" rx="6" fill="{fill}" '
                   f'fill-opacity="0.85" stroke="#333"{dash}/>')
        out.append(_text(p.x, p.y - 3, _short(name, 18), 11, "middle", 'font-weight="bold"'))
        out.append(_text(p.x, p.y + 12, label2, 9, "middle"))
        out.append("</g>")
    out.append("</g></svg>")
    return "\n".join(out)
