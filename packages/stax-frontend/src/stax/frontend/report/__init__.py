"""Per-graph HTML reports: what Stax did with one compiled graph and why.

Enabled by `config.report` (env `STAX_REPORT=1`); pages go to `config.report_dir`
(env `STAX_REPORT_DIR`, default `stax_report/`), one `<kind>_<ir hash>.html` per
compiled graph plus an `index.html`. Each page holds the ATen graph, the IR before
and after fusion, the fusion log with the reason for every rejected pair, every
kernel with its source and the ATen nodes it came from, the memory plan as a
timeline against M* and eager's peak, and the fusion graph coloured by kernel.

    from stax.frontend import config
    with config.patch(report=True, report_dir="out"):
        torch.compile(f, backend="stax")(x)

`load(path)` reads a page (or a debug dump's report.json) back into its data dict.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from html import escape

from .data import collect, to_json
from .html import extract, render

log = logging.getLogger("stax.frontend.report")

__all__ = ["collect", "load", "render", "write_report"]


def _ident(kind: str, gm, lowered) -> str:
    if lowered is not None:
        return f"{kind}_{lowered.graph.content_hash()[:12]}"
    return f"{kind}_{hashlib.sha256(gm.code.encode()).hexdigest()[:12]}"


def write_report(cfg, kind: str, gm, lowered=None, schedule=None, module=None, error=None, times=None) -> str | None:
    """Write `<cfg.report_dir>/<kind>_<hash>.html`; returns its path (None if writing failed: never raises)."""
    try:
        ident = _ident(kind, gm, lowered)
        data = collect(gm, lowered, schedule, module, kind=kind, error=error, ident=ident, times=times)
        directory = os.path.abspath(getattr(cfg, "report_dir", "stax_report"))
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, ident + ".html")
        with open(path, "w") as f:
            f.write(render(data))
        _write_index(directory)
        log.info("stax: wrote report of %s graph to %s", kind, path)
        return path
    except Exception as e:  # noqa: BLE001 - a report must never break compilation
        log.warning("stax: could not write the report of a %s graph (%s: %s)", kind, type(e).__name__, e)
        return None


def _write_index(directory: str) -> None:
    pages = sorted((p for p in os.listdir(directory) if p.endswith(".html") and p != "index.html"),
                   key=lambda p: os.path.getmtime(os.path.join(directory, p)))
    items = "".join(f'<li><a href="{escape(p)}">{escape(p[:-5])}</a></li>' for p in pages)
    with open(os.path.join(directory, "index.html"), "w") as f:
        f.write(f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>Stax reports</title></head>'
                f"<body><h1>Stax reports</h1><ol>{items}</ol></body></html>\n")


def load(path: str) -> dict:
    """Report data from a report page (.html) or a JSON file (the debug dump's report.json)."""
    with open(path) as f:
        text = f.read()
    if path.endswith(".json"):
        return json.loads(text)
    return extract(text)


def dump_json(gm, lowered, schedule, module=None, kind: str = "graph") -> str:
    """The report data as JSON, for the debug dump (report.json): what `why` reads. Never raises."""
    try:
        return to_json(collect(gm, lowered, schedule, module, kind=kind, ident=_ident(kind, gm, lowered)))
    except Exception as e:  # noqa: BLE001 - the dump must not break compilation
        log.warning("stax: could not collect report data (%s: %s)", type(e).__name__, e)
        return to_json({"version": 0, "kind": kind, "error": f"report data failed: {type(e).__name__}: {e}"})
