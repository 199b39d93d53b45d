"""The per-graph debug dump (config.debug or STAX_DEBUG=1).

<debug_dir>/<kind>_<ir hash>/ gets: aten_graph.txt (the ATen FX graph), ir.txt
(stax.ir.Graph), schedule.txt (kernels, fusion log, memory plan), source.txt (the
generated code), lowering.txt (fallback / extern ops, materializations), and
error.txt when compiling failed (the stages before the failure are still written).
"""

from __future__ import annotations

import hashlib
import logging
import os

from .report import dump_json  # report.json: what `python -m stax.frontend.why` reads

log = logging.getLogger("stax.frontend")


def dump(cfg, kind: str, gm, lowered=None, schedule=None, module=None, error: BaseException | None = None) -> str:
    """Write what exists of the dump (a failed compile still dumps its earlier stages)."""
    ident = f"{kind}_{(lowered.graph.content_hash() if lowered else _fx_hash(gm))[:12]}"
    path = os.path.abspath(os.path.join(cfg.debug_dir, ident))
    os.makedirs(path, exist_ok=True)
    files = {"aten_graph.txt": gm.print_readable(print_output=False)}
    if lowered is not None:
        files["ir.txt"] = str(lowered.graph) + "\n"
        files["lowering.txt"] = _summary(lowered)
    if schedule is not None:
        files["schedule.txt"] = str(schedule) + "\n"
        files["report.json"] = dump_json(gm, lowered, schedule, module, kind)
    if module is not None:
        files["source.txt"] = str(getattr(module, "source", "")) + "\n"
    if error is not None:
        files["error.txt"] = f"{type(error).__name__}: {error}\n"
    for name, text in files.items():
        with open(os.path.join(path, name), "w") as f:
            f.write(text)
    log.info("stax: wrote debug dump of %s graph to %s", kind, path)
    return path


def _fx_hash(gm) -> str:
    return hashlib.sha256(gm.code.encode()).hexdigest()


def _summary(lowered) -> str:
    lines = ["fallback ops:"] + [f"  {k}: {v}" for k, v in sorted(lowered.fallback_ops.items())]
    lines += ["extern ops:"] + [f"  {k}: {v}" for k, v in sorted(lowered.extern_ops.items())]
    lines += ["materialized:"] + [f"  {k}: {v}" for k, v in sorted(lowered.materialized.items())]
    return "\n".join(lines) + "\n"
