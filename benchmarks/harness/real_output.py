"""The real suite's results: a markdown report (one row per model, then where each backend's time
goes) and a chart (speedup, cold compile time, peak memory per model).

The rows are the runner's (one per model and backend, see runner.py); this module only
arranges them. The JSON next to the report holds everything, including every breakdown.
"""

from __future__ import annotations

from .output import _conditions, _median, geomean, human_bytes

COMPILED = ("stax", "inductor")


def _rows(data: dict) -> dict:
    return {(r["workload"], r["backend"]): r for r in data["results"]}


def _models(data: dict) -> list[str]:
    return list(dict.fromkeys(r["workload"] for r in data["results"]))


def _ok(r) -> bool:
    return bool(r) and r["status"] == "ok" and r["median_s"] is not None


def _timed(r) -> bool:
    return bool(r) and r["median_s"] is not None  # ran (possibly a wrong result)


def _ms(r) -> str:
    if not _timed(r):
        return "—"
    spread = (r["q3_s"] - r["q1_s"]) / 2 / r["median_s"] * 100 if r["q1_s"] is not None else 0.0
    return f"{r['median_s'] * 1e3:.1f} ±{spread:.0f}%"


def _speedup(r) -> str:
    if not _timed(r) or r["speedup"] is None:
        return "—"
    mark = " ✗" if r["status"] == "mismatch" else ""
    return f"{r['speedup']:.2f}× ({r['speedup_lo']:.2f}–{r['speedup_hi']:.2f}){mark}"


def ratio(a, b) -> float | None:
    """a's median time / b's (stax / Inductor: below 1 stax is faster)."""
    return a["median_s"] / b["median_s"] if _timed(a) and _timed(b) else None


def _mem(r) -> str:
    m = (r or {}).get("memory")
    return human_bytes(m["peak_bytes"]) if m and m.get("peak_bytes") is not None else "—"


def _accuracy(r) -> str:
    if not r:
        return "—"
    if r["status"] in ("error", "skipped"):  # not checked: never "ok"
        return "—" if r["status"] == "error" else "skipped"
    acc = r.get("accuracy") or {}
    ratio_ = acc.get("worst_rmse_ratio")
    base = f"max abs {r['max_abs_err']:.1e}" if r.get("max_abs_err") is not None else ""
    if ratio_ is not None:
        base += f", rmse {ratio_:.2f}× eager's"
    if r["status"] == "mismatch":
        return "**wrong**: " + (r["error"] or "").replace("|", "\\|")
    return "ok" + (f" ({base})" if base else "")


def _stax_notes(r) -> str:
    s = (r or {}).get("stax")
    if not s:
        return ""
    bits = [f"{s['graphs_compiled']} graphs, {s['kernels']} kernels, {s['extern_calls']} extern"]
    if s["fallback_calls"]:
        bits.append(f"{s['fallback_calls']} fallback ({', '.join(sorted(s['fallback_ops']))})")
    if s["graphs_failed"]:
        bits.append(f"**{s['graphs_failed']} graph(s) ran eagerly**")
    return ", ".join(bits)


def _failures(data: dict) -> list[str]:
    out = []
    for r in data["results"]:
        if r["status"] in ("error", "mismatch", "skipped"):
            out.append(f"- {r['workload']} / {r['backend']}: {r['status']}: {(r['error'] or '').strip()}")
    return out


def summary(data: dict) -> dict:
    """Over models where eager, stax and Inductor all ran and matched: geomeans and compile medians."""
    rows = _rows(data)
    both = [m for m in _models(data) if all(_ok(rows.get((m, b))) for b in ("eager", *COMPILED))]
    out = {"models": len(both), "of": len(_models(data))}
    for b in COMPILED:
        out[f"{b}_vs_eager"] = geomean(rows[(m, b)]["speedup"] for m in both)
        out[f"{b}_cold_compile_s"] = _median(rows[(m, b)]["cold_compile_s"] for m in both)
    out["stax_over_inductor"] = geomean(ratio(rows[(m, "stax")], rows[(m, "inductor")]) for m in both)
    return out


def _header(data: dict) -> list[str]:
    meta, mach = data["meta"], data["meta"]["machine"]
    variant = (meta.get("variant") or {}).get("label", "")
    tv = next((r["case"].get("torchvision") for r in data["results"] if (r.get("case") or {}).get("torchvision")), None)
    lines = [
        f"# Stax benchmarks: real models, {variant} on {meta['device']}{' (quick)' if meta['quick'] else ''}",
        "",
        f"{meta['date']} · {mach.get('gpu') or mach['cpu']} · {mach['cores']} cores, torch threads "
        f"{mach['torch_threads']} · torch {mach['torch']} · commit {mach.get('commit') or '?'} · "
        f"{meta['rounds']} interleaved rounds per model · run took {meta['wall_s']:.0f} s",
        "",
        "Models built from code / configs with random init and fixed seeds (benchmarks/workloads/real_models.py), "
        "nothing downloaded; attention through `attn_implementation=\"sdpa\"`; dropout 0."
        + (f" timm imported with {tv}." if tv else ""),
    ]
    lines += [ln for c in _conditions(meta) for ln in ("", c)]
    if meta.get("merged"):  # merge_real.py: the rows of several runs, each model from one
        lines += ["", f"Merged from {len(meta['merged'])} runs (device calls are bounded to minutes); each model's "
                  "row comes from one run (the load averages above are the last run's):", ""]
        lines += [f"- {r['date']}, commit {r['commit']}, {r['wall_s']:.0f} s: {', '.join(r['models']) or '(none)'}"
                  for r in meta["merged"]]
    return lines


def markdown(data: dict) -> str:
    rows, models = _rows(data), _models(data)
    cuda = data["meta"]["device"].startswith("cuda")
    lines = _header(data) + [
        "",
        "| model | size | eager ms | stax ms | Inductor ms | stax vs eager | Inductor vs eager | stax / Inductor | "
        "cold compile s stax / Ind. | peak memory eager / stax / Ind. | stax accuracy | Ind. accuracy | stax did |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|---|---|",
    ]
    for m in models:
        e, s, i = (rows.get((m, b)) for b in ("eager", "stax", "inductor"))
        case = next((r.get("case") for r in (e, s, i) if r and r.get("case")), {}) or {}
        rt = ratio(s, i) if s and i else None
        cc = " / ".join("—" if not r or r["cold_compile_s"] is None else f"{r['cold_compile_s']:.1f}" for r in (s, i))
        lines.append(
            f"| {m} | {case.get('shape', '')} | {_ms(e)} | {_ms(s)} | {_ms(i)} | {_speedup(s)} | {_speedup(i)} | "
            f"{'—' if rt is None else f'{rt:.2f}'} | {cc} | {_mem(e)} / {_mem(s)} / {_mem(i)} | {_accuracy(s)} | "
            f"{_accuracy(i)} | {_stax_notes(s)} |")
    sm = summary(data)
    lines += ["", f"Over the {sm['models']} of {sm['of']} models where every backend ran and matched eager:", ""]
    for b in COMPILED:
        g, c = sm[f"{b}_vs_eager"], sm[f"{b}_cold_compile_s"]
        lines.append(f"- **{b}**: {'—' if g is None else f'{g:.2f}×'} over eager (geomean); cold compile "
                     f"{'—' if c is None else f'{c:.1f} s'} (median)")
    so = sm["stax_over_inductor"]
    lines.append(f"- stax time / Inductor time: {'—' if so is None else f'{so:.2f}'} (geomean; below 1: stax faster)")
    fails = _failures(data)
    if fails:
        lines += ["", "Failures, wrong results, skipped:", ""] + fails
    lines += ["", *_breakdown_table(data, cuda), "", *_legend(cuda), ""]
    return "\n".join(lines)


SHORT = (("aten::item", "item (GPU sync)"), ("aten::_local_scalar_dense", "item (GPU sync)"), ("aten::", ""),
         ("_scaled_dot_product_flash_attention_for_cpu", "sdpa_flash_cpu"),
         ("_scaled_dot_product_", "sdpa_"), ("convolution", "conv"), ("stax::packed_conv2d", "packed conv"),
         ("stax::packed_linear", "packed linear"))


def short(op: str) -> str:
    """Op names short enough for a table cell (sdpa_flash_cpu_backward, conv_backward, addmm)."""
    for a, b in SHORT:
        op = op.replace(a, b)
    return op


def _top(d: dict, n: int = 3) -> str:
    if not d:
        return "—"
    items = sorted(d.items(), key=lambda kv: -kv[1])
    head = ", ".join(f"{short(k)} {v:.1f}" for k, v in items[:n])
    rest = sum(v for _, v in items[n:])
    return f"{sum(d.values()):.1f}: {head}" + (f", other {rest:.1f}" if rest >= 0.05 else "")


def _breakdown_table(data: dict, cuda: bool) -> list[str]:
    rows = _rows(data)
    lines = ["## Where the time goes (ms per call, torch.profiler; see the legend)", "",
             "| model | backend | timed | profiled | generated kernels | extern calls (top ops) | fallbacks | "
             "ATen outside graphs | stax wrapper | host overhead |"
             + (" GPU kernels: generated / library |" if cuda else ""),
             "|---|---|--:|--:|--:|---|---|---|--:|--:|" + ("--:|" if cuda else "")]
    for m in _models(data):
        for b in ("stax", "inductor", "eager"):
            r = rows.get((m, b))
            bd = (r or {}).get("breakdown")
            if not bd or not _timed(r):
                continue
            if "error" in bd:
                lines.append(f"| {m} | {b} | | profile failed: {bd['error'].replace('|', '/')} |"
                             + " |" * (8 if cuda else 7))
                continue
            gen = "—" if b == "eager" else (f"{bd['generated_ms']:.1f}" + ("" if bd["generated_measured"] else "*"))
            if bd.get("kernels"):
                gen += f" ({bd['kernels']} kernels)"
            dev = bd.get("device")
            tail = f" {dev['generated_ms']:.1f} / {dev['library_ms']:.1f} |" if dev else (" — |" if cuda else "")
            lines.append(
                f"| {m} | {b} | {r['median_s'] * 1e3:.1f} | {bd['total_ms']:.1f} | {gen} | {_top(bd['extern_ms'])} | "
                f"{_top(bd['fallback_ms'])} | {_top(bd['outside_ms'])} | "
                f"{'—' if 'wrapper_ms' not in bd else format(bd['wrapper_ms'], '.1f')} | {bd['host_ms']:.1f} |{tail}")
    return lines


def _legend(cuda: bool) -> list[str]:
    return [
        "Legend. *ms*: median per call (± half the interquartile range, relative) of interleaved rounds (every "
        "backend once per round, rotating order). *vs eager*: eager's median / this median, with the range from the "
        "quartiles; ✗: the result was wrong. *stax / Inductor*: stax's median time over Inductor's (below 1: stax "
        "faster). *cold compile*: the first call of a fresh torch.compile wrapper with empty compile caches (one "
        "temporary cache directory per run; dynamo tracing, AOTAutograd, code generation, C++/Triton builds and one "
        "run); that wrapper is what is timed. *peak memory*: "
        + ("torch.cuda.max_memory_allocated during one call, minus what was allocated before it. " if cuda else
           "peak CPU tensor memory during a call beyond what was live before it, from torch.profiler's allocation "
           "events (profile_memory=True; harness/memory.py); not process RSS. ")
        + "*accuracy*: against eager, the rule of PyTorch's accuracy checks (harness/accuracy.py): allclose "
        "(float32 tol 2e-3, bfloat16 1e-2) or else rmse against a float64 run of the same weights at most 2x "
        "(bfloat16, "
        "and tensors under 1000 elements: 3x) eager's rmse + tol/10; with bfloat16 the float64 comparison always runs "
        "and *rmse N× eager's* is the worst tensor's ratio. A training step is checked on its loss and every "
        "parameter gradient of the first step from the same initial weights.",
        "",
        "Breakdown (torch.profiler, a few more calls per backend; *profiled*: the call's time there, above *timed* "
        "by the profiler's cost; the measured cost of the ranges stax's instrumentation adds is taken off its wrapper "
        "and host columns). *generated kernels*: stax's kernels, each call timed in a range around it; for Inductor "
        "(*) the time inside its compiled graphs outside any ATen op — its kernels plus its wrapper. *extern calls*: "
        "ATen ops a compiled graph calls on purpose (convolution, matmul, attention). *fallbacks*: ops stax does not "
        "lower. *ATen outside graphs*: ops between compiled graphs (eager: the whole model). *stax wrapper*: the "
        "Python of stax's generated wrappers (allocation, pointers) inside its graphs. *host overhead*: the rest — "
        "dynamo guards, AOTAutograd wrappers, the autograd engine, the optimizer's Python."
        + (" On cuda every column but the last is host time: what the CPU spends per call, launching kernels "
           "included (stax's *generated kernels*: its launchers; with a CUDA graph replayed, nothing is launched "
           "one by one and the column is inferred like Inductor's); *item (GPU sync)*: the host waiting for the GPU "
           "to read a value. *GPU kernels*: device time per call from the CUDA activity: triton_* kernels "
           "(generated, stax's or Inductor's) and library kernels (cuBLAS, cuDNN, ATen's)." if cuda else ""),
    ]


def chart(data: dict, path: str) -> None:
    """Three panels per model: speedup over eager (log), cold compile time (s), peak memory (MiB)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    rows, models = _rows(data), _models(data)
    colours = {"eager": "#9c9c9c", "stax": "#4e79a7", "inductor": "#f28e2b"}
    fig, axes = plt.subplots(1, 3, figsize=(15, 1.5 + 0.45 * len(models)), sharey=True)
    panels = [("speedup over eager (log; whiskers: quartiles)", COMPILED,
               lambda r: r["speedup"] if _timed(r) else None),
              ("cold compile s", COMPILED, lambda r: r["cold_compile_s"]),
              ("peak memory MiB", ("eager", *COMPILED),
               lambda r: r["memory"]["peak_bytes"] / 2**20 if r.get("memory") and r["memory"].get("peak_bytes")
               is not None else None)]
    for ax, (title, backends, value) in zip(axes, panels):
        h = 0.8 / len(backends)
        for j, b in enumerate(backends):
            for i, m in enumerate(models):
                r = rows.get((m, b))
                v = value(r) if r else None
                y = i + (j - (len(backends) - 1) / 2) * h
                if v is None:
                    ax.text(0.02, y, f"{b}: —", va="center", fontsize=6, color="#c00",
                            transform=ax.get_yaxis_transform())
                    continue
                err = None
                if title.startswith("speedup") and r.get("speedup_lo") is not None:  # whiskers: the quartile range
                    err = [[max(v - r["speedup_lo"], 0)], [max(r["speedup_hi"] - v, 0)]]
                ax.barh(y, v, height=h * 0.9, color=colours[b], label=b if i == 0 else None, xerr=err, capsize=2,
                        error_kw={"elinewidth": 0.7}, hatch="//" if r["status"] == "mismatch" else None)
                ax.text(v, y, f" {v:.2f}" if title.startswith("speedup") else f" {v:.1f}", va="center", fontsize=6)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="x", alpha=0.3)
        if title.startswith("speedup"):
            ax.axvline(1.0, color="#333", lw=1)
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}×"))
        ax.legend(fontsize=7, loc="lower right")
    axes[0].set_yticks(range(len(models)))
    axes[0].set_yticklabels(models, fontsize=8)
    axes[0].invert_yaxis()
    meta, mach = data["meta"], data["meta"]["machine"]
    fig.suptitle(f"Stax real models: {(meta.get('variant') or {}).get('label', '')} on {meta['device']}"
                 f"{' (quick)' if meta['quick'] else ''} ({mach.get('gpu') or mach['cpu']}, {mach['torch_threads']} "
                 f"threads), {meta['date'][:10]}, commit {mach.get('commit') or '?'}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
