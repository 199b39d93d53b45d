"""Inline SVG pictures for the report: the memory timeline and the fusion graph.

Both are drawn from the report's data (plain dicts and lists), with no plotting
library, so the page stays one self-contained file and renders anywhere.
"""

from __future__ import annotations

import colorsys
from html import escape

from .layout import place

# Kernel colours: Tableau 10 without its grey, then colours picked greedily for the largest
# smallest CIELAB distance (dE76) to those before them, to the input grey and to white, among
# mid-light colours of chroma >= 28 (black text stays readable). Any two of the first 24 are at
# least dE 25 apart and at least dE 27 from INPUT_COLOUR: no kernel looks grey or like another.
PALETTE = (
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#edc948", "#76b7b2", "#ff9da7",
    "#9c755f", "#cd26d9", "#26d926", "#8b7de8", "#e052b1", "#a9d926", "#d9c98c", "#26d9a9",
    "#52e078", "#eea0ee", "#bf8c40", "#b6e085", "#a5a5e9", "#d65c85", "#b65cd6", "#7dbde8",
)
INPUT_COLOUR = "#d9d9d9"
DROPPED_COLOUR = "#ffffff"
NODE_OPACITY = 0.85
_GOLDEN_ANGLE = 137.508


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def kernel_colours(n: int) -> tuple[str, ...]:
    """The colours of kernels 0..n-1 (deterministic): the palette, then hues spread by the golden
    angle at three lightnesses, as #rrggbb (every SVG renderer reads it), each unlike all before it
    and unlike the input and dropped-node fills."""
    out = list(PALETTE[:n])
    seen = {*out, INPUT_COLOUR, DROPPED_COLOUR}
    for k in range(len(out), n):
        hue, light = (k * _GOLDEN_ANGLE) % 360, (0.55, 0.68, 0.62)[k % 3]
        for step in range(360 * 6):  # taken: the next degree of hue, then a little lighter
            r, g, b = colorsys.hls_to_rgb(((hue + step) % 360) / 360, light + 0.02 * (step // 360), 0.6)
            colour = f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"
            if colour not in seen:
                break
        seen.add(colour)
        out.append(colour)
    return tuple(out)


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
    colours = kernel_colours(len(series))
    for k, v in enumerate(series):
        name = kernels[k] if k < len(kernels) else f"step{k}"
        colour = colours[k]
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
    """The IR nodes as a layered DAG, each filled with its kernel's colour (legend on top,
    the kernel named in each box's corner); graph inputs grey, dropped nodes white and dashed."""
    kernel_index = {k["name"]: i for i, k in enumerate(data.get("kernels", []))}
    colours = kernel_colours(len(kernel_index))
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
    width = max(width, 5 * 150 + 20)
    labels = {kname: f"{kname} ({data['kernels'][k]['kind']})" for kname, k in kernel_index.items()}
    col_w = max([150, *(24 + 6.2 * len(t) for t in labels.values())])  # ~6.2 px per character at 10 px
    per_row = max(1, int((width - 20) // col_w))
    legend_h = 22 * (1 + (len(kernel_index) - 1) // per_row) if kernel_index else 0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="fusion-graph" width="{width:.0f}" '
           f'height="{height + legend_h:.0f}" viewBox="0 0 {width:.0f} {height + legend_h:.0f}">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerUnits="userSpaceOnUse" '
           'markerWidth="9" markerHeight="9" '
           'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#666"/></marker></defs>']
    for i, (kname, k) in enumerate(kernel_index.items()):  # the legend: each kernel's swatch, as its nodes are filled
        lx, ly = 10 + col_w * (i % per_row), 6 + 22 * (i // per_row)
        out.append(f'<rect class="legend" data-kernel="{escape(kname)}" x="{lx:.0f}" y="{ly}" width="14" height="14" '
                   f'fill="{colours[k]}" fill-opacity="{NODE_OPACITY}" stroke="#333"/>')
        out.append(_text(lx + 18, ly + 11, labels[kname], 10))
    out.append(f'<g transform="translate(0 {legend_h})">')
    for a, b in edges:
        pa, pb = pos[a], pos[b]
        ka, kb = info.get(a, {}).get("kernel"), info.get(b, {}).get("kernel")
        inside = ka is not None and ka == kb
        colour = colours[kernel_index[ka]] if inside else "#888"
        out.append(f'<line x1="{pa.x:.1f}" y1="{pa.y + bh / 2:.1f}" x2="{pb.x:.1f}" y2="{pb.y - bh / 2:.1f}" '
                   f'stroke="{colour}" stroke-width="{2.5 if inside else 1.2}" marker-end="url(#arrow)"/>')
    for name in names:
        p = pos[name]
        node = info.get(name)
        x, y = p.x - bw / 2, p.y - bh / 2
        k = node.get("kernel") if node is not None else None
        if node is None:
            fill, label2, title, cls = INPUT_COLOUR, "input", f"graph input {name}", "input"
        else:
            fill = colours[kernel_index[k]] if k in kernel_index else DROPPED_COLOUR
            origins = ", ".join(node.get("origins", [])) or "-"
            label2 = _short(f"{node['op']}: {origins}")
            title = f"{name} ({node['op']}, {node['kind']}) in {k or 'no kernel (dropped)'}; ATen: {origins}"
            cls = f"node {k}" if k else "node dropped"
        dash = ' stroke-dasharray="4,3"' if node is not None and node.get("kernel") is None else ""
        out.append(f'<g class="{escape(cls)}" data-buffer="{escape(name)}"><title>{escape(title)}</title>'
                   f'<rect x="{x:.1f}" y="{y:.1f}" width="{bw}" height="{bh}" rx="6" fill="{fill}" '
                   f'fill-opacity="{NODE_OPACITY}" stroke="#333"{dash}/>')
        out.append(_text(p.x, p.y - 3, _short(name, 18), 11, "middle", 'font-weight="bold"'))
        out.append(_text(p.x, p.y + 12, label2, 9, "middle"))
        if k in kernel_index:  # the kernel's name in the box's corner: readable whatever the colours
            out.append(_text(x + bw - 4, y + 10, k.replace("kernel", "k"), 8, "end", 'class="kernel-tag"'))
        out.append("</g>")
    out.append("</g></svg>")
    return "\n".join(out)
