"""The whole-graph cache's checks, once for both targets (test_graph_cache.py: stax.cpu,
test_graph_cache_gpu.py: stax.gpu): worker processes on one cache directory, damaged entries,
unusable directories. Each test file passes its own compile (a fresh compile of its tiny function)
and the eager reference; the assertions are the same on both targets.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

from conftest import assert_same
from stax.frontend import config, metrics
from stax.frontend.graph_cache import MAGIC, StaxCacheWarning

# One process: compile graph_cache_worker.py's Tiny (forward + backward, a constant, a matmul, a sort
# fallback) with the graph cache on, check it against eager, print what the backend did as one JSON line.
WORKER = Path(__file__).with_name("graph_cache_worker.py")
ROOT = Path(__file__).resolve().parents[3]


def start_worker(graph_dir: Path, extra_env: dict, arrive: Path | None = None, n: int = 0) -> subprocess.Popen:
    """A worker on `graph_dir`; with `arrive`, it waits before its first write until `n` workers missed."""
    paths = [str(p) for p in sorted((ROOT / "packages").glob("*/src"))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")]),
           "STAX_GRAPH_CACHE_DIR": str(graph_dir), "OMP_NUM_THREADS": "1", **extra_env}
    args = [sys.executable, str(WORKER)] + ([str(arrive), str(n)] if arrive else [])
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def worker_result(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def run_processes(graph_dir: Path, arrive: Path, extra_env: dict) -> tuple[list[dict], dict, Path]:
    """Two workers writing the same entries of an empty graph cache at once, then a third process on
    the cache they left."""
    writers = [worker_result(p) for p in [start_worker(graph_dir, extra_env, arrive, 2) for _ in range(2)]]
    return writers, worker_result(start_worker(graph_dir, extra_env)), graph_dir


def check_both_writers_succeed(processes) -> None:
    """Both compile and run correctly; the forward graph (missed by both) is written by both, the backward
    one may be a hit if the other process stored it first; no temporary file is left behind."""
    writers, _, graph_dir = processes
    for r in writers:
        assert r["max_err"] < 1e-5 and r["max_grad_err"] < 1e-5, r
        assert r["misses"] + r["hits"] == 2 and r["stores"] == r["misses"] and r["corrupt"] == 0, r
        assert r["skipped"] == {}, r
    assert sum(r["stores"] for r in writers) >= 3, writers
    entries = list(graph_dir.rglob("*.entry"))
    assert len(entries) == 2 and not list(graph_dir.rglob("*.tmp")), entries


def check_reader_loads_without_compiling(processes) -> None:
    """Forward and backward are hits in a fresh process: no lowering, scheduling or code generation ran;
    the results are eager's, the fallback and kernel counts the first process's."""
    writers, reader, _ = processes
    assert reader["hits"] == 2 and reader["misses"] == 0 and reader["corrupt"] == 0, reader
    assert reader["graphs"] == 2 and reader["fallbacks"] == writers[0]["fallbacks"] == {"sort.default": 1}
    assert reader["kernels"] == writers[0]["kernels"] > 0
    for phase in ("lower", "schedule", "codegen"):
        assert phase not in reader["phase_runs"], reader["phase_runs"]
        assert all(w["phase_runs"].get(phase, 0) == w["misses"] > 0 for w in writers), writers
    assert reader["phase_runs"]["load"] == 2
    assert reader["max_err"] < 1e-5 and reader["max_grad_err"] < 1e-5, reader


def entry(graph_dir: Path) -> Path:
    (path,) = graph_dir.rglob("*.entry")
    return path


def truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def flip(p: Path) -> None:
    """One bit in the payload's middle (generated source text on either target)."""
    data = bytearray(p.read_bytes())
    data[len(MAGIC) + 65 + (len(data) - len(MAGIC) - 65) // 2] ^= 0x01
    p.write_bytes(bytes(data))


DAMAGES = {"truncated": truncate, "flipped-byte": flip}


def check_corrupt_entry_rebuilt(graph_dir: Path, damage: str, caplog, compile_once: Callable, expected) -> None:
    compile_once()
    DAMAGES[damage](entry(graph_dir))
    metrics.reset()
    with caplog.at_level(logging.WARNING, logger="stax.frontend.cache"):
        assert_same(compile_once(), expected)
    m = metrics.snapshot()
    assert m.graph_cache_corrupt == 1 and m.graph_cache_hits == 0 and m.phase_runs["lower"] == 1, m
    assert m.graph_cache_stores == 1 and "is corrupt" in caplog.text
    metrics.reset()
    assert_same(compile_once(), expected)  # the rebuilt entry is whole again
    assert metrics.snapshot().graph_cache_hits == 1


def check_unwritable_directory(tmp_path: Path, monkeypatch, compile_once: Callable, expected,
                               other_options: dict, message: str) -> None:
    """A cache directory under a regular file cannot be made, whoever runs the test (root writes through
    chmod): generated modules go to a private directory, nothing is stored, one warning says both."""
    (tmp_path / "file").write_text("in the way")
    monkeypatch.setenv("STAX_CACHE_DIR", str(tmp_path / "file" / "cache"))
    with config.patch(graph_cache=True), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert_same(compile_once(), expected)
        assert_same(compile_once(**other_options), expected)
    mine = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(mine) == 1 and issubclass(mine[0].category, StaxCacheWarning), [str(w.message) for w in mine]
    assert message in str(mine[0].message)
    m = metrics.snapshot()
    assert m.graph_cache_stores == 0 and m.graph_cache_misses == 2 and m.graphs_compiled == 2


def check_read_only_directory_hits(graph_dir: Path, recwarn, compile_once: Callable, expected) -> None:
    compile_once()
    for d in [graph_dir, *graph_dir.iterdir()]:
        d.chmod(0o500)
    try:
        metrics.reset()
        assert_same(compile_once(), expected)
        assert metrics.snapshot().graph_cache_hits == 1
        assert len([w for w in recwarn if issubclass(w.category, StaxCacheWarning)]) == 1
    finally:
        for d in [graph_dir, *graph_dir.iterdir()]:
            d.chmod(0o700)


# root writes through a chmod 0o500 directory: the read-only check needs another user
RUN_AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
