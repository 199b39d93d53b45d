"""One report from real-suite runs split over several device calls (a call is bounded to minutes, a
training row takes about one): per model, the rows of the last file in which it ran.

    python -m benchmarks.harness.merge_real OUT_STEM IN.json [IN.json ...]

Each model's rows keep their own run's commit and date (`case["run"]`), and the header lists every
run merged, so a table assembled from several commits says so. Writes OUT_STEM.{json,md,png}.
"""

from __future__ import annotations

import argparse
import json


def _ran(rows: list[dict]) -> bool:
    return any(r["backend"] == "stax" and r["status"] != "skipped" for r in rows)


def _suite_order() -> list[str]:
    from ..workloads.real_models import MODELS

    return [m.name for m in MODELS]


def _runs_of(meta: dict) -> dict:
    """{(commit, date): run} of one part: the runs an earlier merge recorded, else the part's own."""
    own = {"commit": meta["machine"].get("commit"), "date": meta["date"], "wall_s": meta["wall_s"],
           "load_average": meta.get("load_average")}
    runs = meta.get("merged") or [own]
    return {(r["commit"], r["date"]): {k: r.get(k) for k in ("commit", "date", "wall_s", "load_average")}
            for r in runs}


def merge(parts: list[dict]) -> dict:
    """Later parts win per model; models in the suite's order. A part may itself be a merged report:
    its rows keep the run they came from (`case["run"]`), so a table can take new rows call by call."""
    variants = {json.dumps(p["meta"].get("variant"), sort_keys=True) for p in parts}
    if len(variants) != 1 or len({p["meta"]["device"] for p in parts}) != 1:
        raise SystemExit(f"merge_real: parts of different runs (variants {sorted(variants)}): not one table")
    order: list[str] = []
    chosen: dict[str, list[dict]] = {}
    known: dict = {}
    for p in parts:
        meta = p["meta"]
        known.update(_runs_of(meta))
        own = {"commit": meta["machine"].get("commit"), "date": meta["date"]}
        by_model: dict[str, list[dict]] = {}
        for r in p["results"]:
            by_model.setdefault(r["workload"], []).append(r)
        for m, rows in by_model.items():
            if m not in order:
                order.append(m)
            if _ran(rows) or m not in chosen:
                chosen[m] = [dict(r, case=dict(r.get("case") or {}, run=(r.get("case") or {}).get("run") or own))
                             for r in rows]
    suite = _suite_order()
    order.sort(key=lambda m: suite.index(m) if m in suite else len(suite))
    credited: dict = {}
    for m in order:
        if _ran(chosen[m]):
            run = chosen[m][0]["case"]["run"]
            credited.setdefault((run["commit"], run["date"]), []).append(m)
    runs = [dict(known.get(key, {"commit": key[0], "date": key[1], "wall_s": 0.0}), models=models)
            for key, models in sorted(credited.items(), key=lambda kv: kv[0][1])]
    meta = dict(parts[-1]["meta"], merged=runs, wall_s=sum(r["wall_s"] or 0.0 for r in runs))
    meta["machine"] = dict(meta["machine"], commit=", ".join(dict.fromkeys(str(r["commit"]) for r in runs)))
    return {"meta": meta, "results": [r for m in order for r in chosen[m]]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_stem")
    ap.add_argument("parts", nargs="+")
    ap.add_argument("--no-chart", action="store_true")
    args = ap.parse_args(argv)
    parts = []
    for path in args.parts:
        with open(path) as f:
            parts.append(json.load(f))
    from ..__main__ import write

    for path in write(merge(parts), args.out_stem, chart=not args.no_chart):
        print("wrote", path)


if __name__ == "__main__":
    main()
