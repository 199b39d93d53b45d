"""The --compile table: cold and warm compile time per model, stax beside Inductor (compile_time.py's rows).

Ratios are stax / Inductor (below 1: stax compiles faster); the geometric means are over models
where both backends measured. A failed measurement shows its error in the notes column.
"""

from __future__ import annotations

from .output import geomean

PHASE_ORDER = ("aot", "cache", "lower", "schedule", "codegen", "cxx", "load", "first_run")


def _s(x) -> str:
    return f"{x:.2f}" if isinstance(x, (int, float)) else "—"


def _get(rows, w, b, phase, key="first_call_s"):
    r = rows.get((w, b)) or {}
    return (r.get(phase) or {}).get(key)


def _ratio(a, b):
    return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0 else None


def markdown(data: dict) -> str:
    meta = data["meta"]
    load = meta.get("load_average") or {}
    rows = {(r["workload"], r["backend"]): r for r in data["results"]}
    models = list(dict.fromkeys(r["workload"] for r in data["results"]))
    out = [f"# Compile time: {meta['label']}, {meta['device']} ({meta['machine'].get('cpu', '')}, "
           f"{meta.get('threads') or 'all'} threads)", "",
           f"{meta['date']}, commit {meta['machine'].get('commit')}, torch {meta['machine'].get('torch')}, "
           f"load average {load.get('start')} -> {load.get('end')} "
           "(1/5/15 min; the machine is shared). "
           "Each number is one process (`python -m benchmarks --suite real --compile`): the first call of a fresh "
           "torch.compile wrapper after an untimed trivial compile; cold: fresh STAX_CACHE_DIR and "
           "TORCHINDUCTOR_CACHE_DIR; warm: a second process on the caches the first filled. "
           "stax backend: the time inside stax's backend (metrics.compile_time_s), without dynamo, "
           "AOTAutograd and the first run.", "",
           "| model | stax cold s | stax warm s | stax backend cold / warm s | Inductor cold s | Inductor warm s "
           "| stax / Inductor cold | stax / Inductor warm | notes |",
           "|---|---|---|---|---|---|---|---|---|"]
    cold_ratios, warm_ratios = [], []
    for w in models:
        sc, sw = _get(rows, w, "stax", "cold"), _get(rows, w, "stax", "warm")
        ic, iw = _get(rows, w, "inductor", "cold"), _get(rows, w, "inductor", "warm")
        rc, rw = _ratio(sc, ic), _ratio(sw, iw)
        cold_ratios += [rc] if rc else []
        warm_ratios += [rw] if rw else []
        notes = []
        for b in ("stax", "inductor"):
            for phase in ("cold", "warm"):
                err = _get(rows, w, b, phase, "error")
                if err:
                    notes.append(f"{b} {phase}: **{err}**")
        warm_stax = (rows.get((w, "stax")) or {}).get("warm") or {}
        if "cache_hits" in warm_stax:
            notes.append(f"stax warm: {warm_stax['cache_hits']}/{warm_stax['graphs']} graphs from the graph cache")
            if warm_stax.get("cache_skipped"):
                notes.append("not cached: " + ", ".join(f"{k} ×{v}" for k, v in warm_stax["cache_skipped"].items()))
        back = f"{_s(_get(rows, w, 'stax', 'cold', 'backend_s'))} / {_s(_get(rows, w, 'stax', 'warm', 'backend_s'))}"
        out.append(f"| {w} | {_s(sc)} | {_s(sw)} | {back} | {_s(ic)} | {_s(iw)} | "
                   f"{_s(rc) + '×' if rc else '—'} | {_s(rw) + '×' if rw else '—'} | {'; '.join(notes)} |")
    out.append("")
    if cold_ratios:
        out.append(f"Geometric mean stax / Inductor: cold {geomean(cold_ratios):.2f}×"
                   + (f", warm {geomean(warm_ratios):.2f}×" if warm_ratios else "") + f" ({len(cold_ratios)} models).")
        out.append("")
    out += ["Where stax's cold and warm compile goes (seconds summed over the model's graphs, "
            "metrics.phase_s; aot: AOTAutograd before each graph reached stax):", "",
            "| model | run | " + " | ".join(PHASE_ORDER) + " |", "|---|---|" + "---|" * len(PHASE_ORDER)]
    for w in models:
        for phase in ("cold", "warm"):
            ph = _get(rows, w, "stax", phase, "phases") or {}
            if ph:
                out.append(f"| {w} | {phase} | " + " | ".join(_s(ph.get(p)) if p in ph else "" for p in PHASE_ORDER)
                           + " |")
    return "\n".join(out) + "\n"
