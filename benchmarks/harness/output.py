"""Results out: JSON (everything), a markdown table (for humans and PRs), a PNG chart of speedups."""

from __future__ import annotations

import json
import math


def human_bytes(n) -> str:
    if n is None:
        return "—"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def write_json(data: dict, path: str) -> None:
    with open(path, "w") as f:
        json.dump(data, f, indent=1, default=str)
        f.write("\n")


def _num(x, fmt: str) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def _memory(row: dict) -> str:
    m = row.get("memory")
    if not m or m.get("peak_bytes") is None:
        return "—"
    if m["kind"] == "stax_plan":
        return f"plan {human_bytes(m['peak_bytes'])} (M* {human_bytes(m['lower_bound_bytes'])})"
    if m["kind"] == "eager_estimate":
        return f"est. {human_bytes(m['peak_bytes'])}"
    return human_bytes(m["peak_bytes"])


def _status(row: dict) -> str:
    if row["status"] == "error":
        return "**failed**: " + (row["error"] or "").replace("|", "\\|")
    parts = []
    if row["status"] == "mismatch":
        parts.append("**wrong result**: " + (row["error"] or "").replace("|", "\\|"))
    s = row.get("stax")
    if s:
        bits = [f"{s['kernels']} kernels"]
        if s["extern_calls"]:
            bits.append(f"{s['extern_calls']} extern")
        if s["fallback_calls"]:
            bits.append(f"{s['fallback_calls']} fallback ({', '.join(sorted(s['fallback_ops']))})")
        if s["graphs_failed"]:
            bits.append(f"{s['graphs_failed']} graph(s) ran eagerly")
        parts.append(", ".join(bits))
    return "; ".join(parts) or "ok"


def _speedup(row: dict) -> str:
    if row["speedup"] is None:
        return "—"
    return f"{row['speedup']:.2f}× ({row['speedup_lo']:.2f}–{row['speedup_hi']:.2f})"


def geomean(xs) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _median(xs) -> float | None:
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def summary(data: dict) -> dict:
    """Per backend (rows that ran and matched eager): geometric-mean speedup over eager; over the
    memory-bound ones the median and lowest fraction of copy bandwidth; the median cold compile."""
    out = {}
    for b in data["meta"]["backends"]:
        rows = [r for r in data["results"] if r["backend"] == b and r["status"] == "ok" and r["speedup"]]
        bw = [r["frac_copy"] for r in rows if r["memory_bound"] and r.get("frac_copy")]
        out[b] = {"geomean_speedup": geomean(r["speedup"] for r in rows), "workloads": len(rows),
                  "failed": sum(1 for r in data["results"] if r["backend"] == b and r["status"] != "ok"),
                  "median_frac_copy": _median(bw), "min_frac_copy": min(bw) if bw else None,
                  "median_cold_compile_s": _median(r["cold_compile_s"] for r in rows)}
    return out


def compile_ratio(data: dict, a: str = "stax", b: str = "inductor") -> float | None:
    """Median over workloads of a's cold compile time / b's (both compiled and matched eager)."""
    rows = {(r["workload"], r["backend"]): r for r in data["results"] if r["status"] == "ok"}
    ratios = [rows[(w, a)]["cold_compile_s"] / rows[(w, b)]["cold_compile_s"]
              for (w, k) in rows if k == a and (w, b) in rows
              and rows[(w, a)]["cold_compile_s"] and rows[(w, b)]["cold_compile_s"]]
    return _median(ratios)


def _conditions(meta: dict) -> list[str]:
    """How the run was made: malloc settings (shared by every backend) and the machine's load."""
    lines = []
    m = meta.get("malloc")
    if m is not None:
        got = ", ".join(f"{k}={human_bytes(v)}" for k, v in m.get("applied", {}).items())
        lines.append("Malloc (whole process, every backend): " + (f"glibc tuned by stax.cpu ({got})" if got else
                                                                   f"glibc defaults — {m.get('reason') or 'untuned'}"))
    la = meta.get("load_average")
    if la and la.get("start") and la.get("end"):
        lines.append(f"Load average (1/5/15 min) at start {'/'.join(map(str, la['start']))}, at end "
                     f"{'/'.join(map(str, la['end']))} on {meta['machine']['cores']} cores: the machine was shared "
                     "with other jobs; interleaved rounds spread that noise over all backends")
    return lines


def _copy_reference(results: list) -> list[str]:
    """How '% of copy' was measured: against the copy bandwidth of each workload's own rounds."""
    per = [r["copy_gbps"] for r in results if r.get("copy_gbps")]
    if not per:
        return []
    return ["", f"% of copy: against the copy bandwidth measured in each workload's own interleaved rounds (the same "
                f"large copy timed once per round): {min(per):.1f}-{max(per):.1f} GB/s across workloads, "
                f"median {_median(per):.1f}"]


def markdown(data: dict) -> str:
    meta = data["meta"]
    mach = meta["machine"]
    lines = [
        f"# Stax benchmarks: `{meta['suite']}` suite on {meta['device']}{' (quick)' if meta['quick'] else ''}",
        "",
        f"{meta['date']} · {mach.get('gpu') or mach['cpu']} · {mach['cores']} cores, torch threads "
        f"{mach['torch_threads']} · torch {mach['torch']} · commit {mach.get('commit') or '?'}",
        f"Copy bandwidth (measured in this run): **{meta['copy_bandwidth_gbps']:.1f} GB/s** · "
        f"{meta['rounds']} interleaved rounds per workload · median (IQR) per call · run took {meta['wall_s']:.0f} s",
        *_copy_reference(data["results"]),
        *[ln for c in _conditions(meta) for ln in ("", c)],
        "",
        "| workload | backend | median ms | IQR ms | vs eager | GB/s | % of copy | compile cold s | warm s | "
        "peak memory | notes |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|---|---|",
    ]
    for r in data["results"]:
        bw = r["memory_bound"] and r["gbps"] is not None
        ms = lambda x: _num(x * 1e3 if x is not None else None, ".3f")  # noqa: E731
        iqr = (r["q3_s"] - r["q1_s"]) if r["q1_s"] is not None else None
        lines.append(
            f"| {r['workload']} | {r['backend']} | {ms(r['median_s'])} | {ms(iqr)} | {_speedup(r)} | "
            f"{_num(r['gbps'] if bw else None, '.1f')} | "
            f"{_num(r['frac_copy'] * 100 if bw and r['frac_copy'] else None, '.0f')}"
            f"{'%' if bw and r['frac_copy'] else ''} | "
            f"{_num(r['cold_compile_s'], '.2f')} | {_num(r['warm_compile_s'], '.2f')} | {_memory(r)} | {_status(r)} |"
        )
    lines += ["", "Geometric mean speedup over eager (workloads that ran and matched eager):", ""]
    summ = summary(data)
    for b, s in summ.items():
        if b == "eager":
            continue
        g = s["geomean_speedup"]
        lines.append(f"- **{b}**: {_num(g, '.2f')}× over {s['workloads']} workload(s)"
                     + (f", {s['failed']} failed or wrong" if s["failed"] else ""))
    bw = [(b, s) for b, s in summ.items() if s["median_frac_copy"] is not None]
    if bw:
        lines += ["", "Memory-bound workloads, % of copy bandwidth (median, lowest):", ""]
        lines += [f"- {b}: {s['median_frac_copy'] * 100:.0f}%, {s['min_frac_copy'] * 100:.0f}%" for b, s in bw]
    cc = [(b, s["median_cold_compile_s"]) for b, s in summ.items() if s["median_cold_compile_s"] is not None]
    if cc:
        ratio = compile_ratio(data)
        lines += ["", "Cold compile per workload (median): " + ", ".join(f"{b} {t:.2f} s" for b, t in cc)
                  + (f"; stax / inductor (median of per-workload ratios): {ratio:.2f}" if ratio is not None else "")]
    lines += [
        "",
        "vs eager: median eager time / median time, with the range from the quartiles (eager q1/q3 over this q3/q1). "
        "GB/s: minimum bytes (inputs + parameters read once, outputs + gradients written once) per median time, "
        "shown for memory-bound workloads only. Peak memory on CPU: the Stax memory plan's peak (and its lower "
        "bound M*) next to eager's estimated peak for the same ATen graphs; on CUDA: max_memory_allocated "
        "during one call.",
        "",
    ]
    return "\n".join(lines)


def chart(data: dict, path: str) -> None:
    """Grouped horizontal bars: speedup over eager per workload and compiled backend (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    meta = data["meta"]
    backends = [b for b in meta["backends"] if b != "eager"]
    workloads = list(dict.fromkeys(r["workload"] for r in data["results"]))
    rows = {(r["workload"], r["backend"]): r for r in data["results"]}
    colours = {"stax": "#4e79a7", "inductor": "#f28e2b"}
    height = 0.8 / max(len(backends), 1)
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.55 * len(workloads) * max(1, len(backends) / 2)))
    for j, b in enumerate(backends):
        for i, w in enumerate(workloads):
            r = rows.get((w, b))
            y = i + (j - (len(backends) - 1) / 2) * height
            if r is None or r["speedup"] is None:
                ax.text(1.0, y, f"  {b}: failed", va="center", fontsize=8, color="#c00")
                continue
            err = [[r["speedup"] - r["speedup_lo"]], [r["speedup_hi"] - r["speedup"]]]
            ax.barh(y, r["speedup"], height=height * 0.9, color=colours.get(b, f"C{j}"),
                    hatch="//" if r["status"] != "ok" else None, xerr=err, capsize=2,
                    label=b if i == 0 else None, error_kw={"elinewidth": 0.8})
            note = " ✗ wrong" if r["status"] == "mismatch" else ""
            ax.text(max(r["speedup"], r["speedup_hi"]) * 1.06, y, f"{r['speedup']:.2f}×{note}", va="center", fontsize=7)
    ax.axvline(1.0, color="#333", lw=1)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}×"))
    ax.set_yticks(range(len(workloads)))
    ax.set_yticklabels(workloads, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("speedup over eager (median; bars: quartile range; log scale)")
    mach = meta["machine"]
    ax.set_title(f"Stax benchmarks: {meta['suite']}{' (quick)' if meta['quick'] else ''} on {meta['device']} "
                 f"({mach.get('gpu') or mach['cpu']}, {mach['torch_threads']} threads), {meta['date'][:10]}; "
                 f"copy bandwidth {meta['copy_bandwidth_gbps']:.1f} GB/s", fontsize=9)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="x", which="both", alpha=0.3)
    lo = min([r["speedup_lo"] for r in data["results"] if r["speedup_lo"]] + [0.5])
    hi = max([r["speedup_hi"] for r in data["results"] if r["speedup_hi"]] + [2.0])
    ax.set_xlim(lo / 1.3, hi * 1.6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
