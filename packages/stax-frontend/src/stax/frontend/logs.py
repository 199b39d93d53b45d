"""Logging areas: `STAX_LOG=fusion,memory,codegen` turns on the loggers of those areas.

Every Stax package logs through `logging.getLogger("stax.<area>")` and is silent by
default (the `stax` logger has a NullHandler, Python's convention for libraries).
`STAX_LOG` (read when `stax.frontend` is imported, or by `configure_from_env()`)
names areas, comma separated; each becomes a logger at DEBUG with one stderr handler:

    area        loggers                        what it says
    fusion      stax.sched.fusion              the §7.4 fusion log: candidates, scores, fusing / cannot fuse
    memory      stax.sched.memory              reuse lines (`buf5 = buf2; del buf2  # reuse`), peak, order
    sched       stax.sched                     all of the scheduler
    codegen     stax.cpu, stax.gpu             ISA probe, C++ / Triton builds, cache hits, autotuning
    cpu / gpu   stax.cpu / stax.gpu            one backend only
    fallback    stax.frontend.fallback         ATen ops that ran as fallback kernels, by name
    frontend    stax.frontend                  lowering, guards, re-striding, graphs run eagerly
    compile     stax.frontend.compile          one line per graph: wall time of each compile phase
    cache       stax.frontend.cache            the whole-graph cache: misses, skipped graphs and why, corrupt entries
    report      stax.frontend.report           where per-graph reports are written
    all         stax                           everything

An entry may also be a logger name (`stax.cpu`) and may carry a level
(`fusion:INFO`, `all:WARNING`); unknown areas raise with the list of known ones.
`configure()` is idempotent: calling it again replaces the handler it installed.
"""

from __future__ import annotations

import logging
import os
import sys

ROOT = "stax"

AREAS: dict[str, tuple[str, ...]] = {
    "fusion": ("stax.sched.fusion",),
    "memory": ("stax.sched.memory",),
    "sched": ("stax.sched",),
    "codegen": ("stax.cpu", "stax.gpu"),
    "cpu": ("stax.cpu",),
    "gpu": ("stax.gpu",),
    "fallback": ("stax.frontend.fallback",),
    "frontend": ("stax.frontend",),
    "compile": ("stax.frontend.compile",),
    "cache": ("stax.frontend.cache",),
    "report": ("stax.frontend.report",),
    "all": ("stax",),
}

FORMAT = "[%(name)s] %(levelname)s %(message)s"
_MARK = "_stax_logs"  # attribute on the handlers and loggers this module configured


def parse(spec: str) -> dict[str, int]:
    """'fusion,codegen:INFO' -> {logger name: level}; raises ValueError on an unknown area."""
    out: dict[str, int] = {}
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        area, _, level_name = item.partition(":")
        area = area.strip()
        is_logger_name = area == ROOT or area.startswith(ROOT + ".")
        level = logging.getLevelName(level_name.strip().upper()) if level_name else logging.DEBUG
        if not isinstance(level, int):
            raise ValueError(f"STAX_LOG: unknown level {level_name!r} in {item!r}")
        if is_logger_name:
            names: tuple[str, ...] = (area,)
        elif area.lower() in AREAS:
            names = AREAS[area.lower()]
        else:
            raise ValueError(f"STAX_LOG: unknown area {area!r}; known areas: {', '.join(AREAS)} "
                             "(or a logger name stax.*)")
        for name in names:
            out[name] = min(level, out.get(name, level))
    return out


def install_null_handler() -> None:
    """The library convention: no 'No handlers could be found' noise, nothing printed."""
    root = logging.getLogger(ROOT)
    if not any(isinstance(h, logging.NullHandler) for h in root.handlers):
        root.addHandler(logging.NullHandler())


def configure(spec: str | dict | None, stream=None) -> dict[str, int]:
    """Enable the areas in `spec` ('fusion,memory' or {logger: level}) with one stderr handler.

    Loggers this module enabled earlier and not named now are reset (level NOTSET,
    handler removed), so `configure('')` turns everything off again.
    """
    install_null_handler()
    levels = parse(spec) if isinstance(spec, str) else dict(spec or {})
    for name in list(logging.Logger.manager.loggerDict):
        lg = logging.getLogger(name)
        if (name == ROOT or name.startswith(ROOT + ".")) and getattr(lg, _MARK, False):
            for h in [h for h in lg.handlers if getattr(h, _MARK, False)]:
                lg.removeHandler(h)
            lg.setLevel(logging.NOTSET)
            setattr(lg, _MARK, False)
    if not levels:
        return levels
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    setattr(handler, _MARK, True)
    # One handler on each named logger, but a record reaches it once: a child whose
    # ancestor is also named does not propagate its records into a second handler.
    for name, level in levels.items():
        lg = logging.getLogger(name)
        lg.setLevel(level)
        setattr(lg, _MARK, True)
        if not any(_is_ancestor(other, name) for other in levels):
            lg.addHandler(handler)
    return levels


def _is_ancestor(a: str, b: str) -> bool:
    return a != b and b.startswith(a + ".")


def configure_from_env(environ=None) -> dict[str, int]:
    """Apply `STAX_LOG` when set; a bad value is reported once on stderr, never raised."""
    spec = (environ if environ is not None else os.environ).get("STAX_LOG")
    install_null_handler()
    if spec is None:
        return {}
    try:
        return configure(spec)
    except ValueError as e:
        print(f"stax: ignoring STAX_LOG: {e}", file=sys.stderr)
        return {}
