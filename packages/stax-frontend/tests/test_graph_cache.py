"""The whole-graph cache (graph_cache.py, whole_graph.py) and the compile phase times (phases.py).

Two or three processes compile one tiny model (graph_cache_worker.py: forward + backward, a
constant, a matmul, a sort fallback) on one graph cache directory; the other tests run in this
process, on a graph cache directory of their own (the second compile in one process reads the
disk too: there is no in-memory copy). stax.cpu's .so cache stays the session's (warm), except
for the read-only test, which needs both unusable.
"""

from __future__ import annotations

import logging

import graph_cache_checks as checks
import pytest
import torch
import torch._dynamo
from conftest import assert_same
from stax.frontend import config, metrics


@pytest.fixture(scope="module")
def processes(tmp_path_factory):
    """Two workers writing the same entries of an empty graph cache at once (each waits, before its first
    write, until both have missed: graph_cache_worker.py), then a third process on the cache they left."""
    return checks.run_processes(tmp_path_factory.mktemp("graphs"), tmp_path_factory.mktemp("arrive"), {})


def test_two_processes_writing_one_key_both_succeed(processes):
    checks.check_both_writers_succeed(processes)


def test_concurrent_writes_of_one_key_never_show_a_partial_entry(tmp_path):
    """Writers replace the entry atomically: a reader polling it meanwhile sees the old or the new
    entry whole, never a torn one (1 MB of source makes a torn write likely were it written in place)."""
    import threading

    from stax.frontend.graph_cache import GraphCache, GraphEntry

    cache = GraphCache(tmp_path / "graphs", tmp_path)
    key = "ab" * 32
    entries = [GraphEntry(key, "g", None, None, ((), ()), (), (("source", c * (1 << 20)),)) for c in "xy"]
    cache.store(entries[0])
    stop, seen, errors = threading.Event(), set(), []

    def write(entry):
        for _ in range(20):
            cache.store(entry)

    def read():
        while not stop.is_set():
            try:
                seen.add(cache.load(key).counts[0][1][0])
            except Exception as e:  # noqa: BLE001 - a torn entry: what must not happen
                errors.append(e)

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=write, args=(e,)) for e in entries]
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    reader.join()
    assert not errors and seen <= {"x", "y"} and seen, (errors[:1], seen)
    assert not list(tmp_path.rglob("*.tmp"))


def test_second_process_loads_without_lowering_scheduling_or_codegen(processes):
    checks.check_reader_loads_without_compiling(processes)


# ---- in this process ------------------------------------------------------------------------


def _f(x, w):
    return torch.relu(x @ w).softmax(-1) * 3.0


ARGS = (torch.randn(8, 16), torch.randn(16, 12))


def _compile(**options):
    """One fresh compile of _f (dynamo's cache cleared: the backend runs again) and its result."""
    torch._dynamo.reset()
    return torch.compile(_f, backend="stax", dynamic=False, options=options or None)(*ARGS)


@pytest.fixture
def graph_dir(tmp_path):
    with config.patch(graph_cache=True, graph_cache_dir=str(tmp_path / "graphs")):
        yield tmp_path / "graphs"


def test_hit_in_a_fresh_compile_equals_eager(graph_dir):
    assert_same(_compile(), _f(*ARGS))
    assert metrics.snapshot().graph_cache_stores == 1
    metrics.reset()
    assert_same(_compile(), _f(*ARGS))
    m = metrics.snapshot()
    assert m.graph_cache_hits == 1 and "lower" not in m.phase_runs and m.extern_ops == {"mm.default": 1}


def _g(x, w, n: int):
    """Symbolic sizes everywhere under dynamic=True: rows, a SymInt argument, a view by a size product."""
    y = torch.relu(x @ w).softmax(-1) * x.shape[0]
    return y.reshape(-1)[: n * w.shape[1]].reshape(n, -1) + 1.0


def _compile_dynamic(rows_and_n, **patch):
    """A fresh dynamic=True compile of _g, called at each (rows, n); returns the compiled results and eager's."""
    torch._dynamo.reset()
    w = torch.randn(16, 12, generator=torch.Generator().manual_seed(0))
    g = torch.compile(_g, backend="stax", dynamic=True)
    got, want = [], []
    for rows, n in rows_and_n:
        x = torch.randn(rows, 16, generator=torch.Generator().manual_seed(rows))
        got.append(g(x, w, n))
        want.append(_g(x, w, n))
    return got, want


def test_symbolic_graph_hits_with_its_sizes_and_assumptions(graph_dir):
    """A symbolic-shape graph is stored (its size expressions as plain data) and a fresh compile loads it:
    no lowering, the same results at sizes neither compile saw."""
    for got, want in zip(*_compile_dynamic([(8, 3), (6, 2)])):
        assert_same(got, want)
    m = metrics.snapshot()
    assert m.graphs_compiled == 1 and m.graphs_failed == 0 and m.graph_cache_stores == 1, m
    metrics.reset()
    for got, want in zip(*_compile_dynamic([(8, 3), (11, 5), (29, 7)])):
        assert_same(got, want)
    m = metrics.snapshot()
    assert m.graphs_compiled == 1 and m.graph_cache_hits == 1 and "lower" not in m.phase_runs, m


def test_symbolic_ranges_are_in_the_key(graph_dir):
    """The same program with a size range the guards narrowed (another ShapeEnv fact) is another entry."""
    _compile_dynamic([(8, 3), (6, 2)])
    metrics.reset()
    torch._dynamo.reset()
    w = torch.randn(16, 12)
    x = torch.randn(8, 16)
    torch._dynamo.mark_dynamic(x, 0, min=4, max=64)
    g = torch.compile(_g, backend="stax")
    assert_same(g(x, w, 3), _g(x, w, 3))
    m = metrics.snapshot()
    assert m.graph_cache_hits == 0 and m.graph_cache_misses == 1, m


@pytest.mark.parametrize("damage", sorted(checks.DAMAGES))
def test_corrupt_entry_is_rebuilt_never_loaded(graph_dir, damage, caplog):
    checks.check_corrupt_entry_rebuilt(graph_dir, damage, caplog, _compile, _f(*ARGS))


def test_config_change_misses(graph_dir):
    _compile()
    metrics.reset()
    _compile(**{"cpu.min_chunk": 4096})
    _compile(max_reads=4)
    _compile(**{"scheduler.max_fusion_nodes": 1})
    m = metrics.snapshot()
    assert m.graph_cache_misses == 3 and m.graph_cache_hits == 0, m
    metrics.reset()
    _compile(max_reads=4)  # the same config again: its own entry
    assert metrics.snapshot().graph_cache_hits == 1


def test_input_layout_and_dtype_miss(graph_dir):
    x, w = ARGS
    torch.compile(_f, backend="stax", dynamic=False)(x, w)
    for args in ((x.t().contiguous().t(), w), (x.double(), w.double()), (x[:4], w)):
        torch._dynamo.reset()
        assert_same(torch.compile(_f, backend="stax", dynamic=False)(*args), _f(*args))
    m = metrics.snapshot()
    assert m.graph_cache_misses == 4 and m.graph_cache_hits == 0, m


def test_unwritable_directory_works_uncached_with_one_warning(tmp_path, monkeypatch):
    checks.check_unwritable_directory(tmp_path, monkeypatch, _compile, _f(*ARGS), {"max_reads": 4}, "private directory")


@pytest.mark.skipif(checks.RUN_AS_ROOT, reason="root writes through a chmod 0o500 directory")
def test_read_only_directory_still_hits(graph_dir, recwarn):
    checks.check_read_only_directory_hits(graph_dir, recwarn, _compile, _f(*ARGS))


def test_graphs_not_cached_say_why(graph_dir):
    with config.patch(runtime="interpret"):
        _compile()
    with config.patch(report=True, report_dir=str(graph_dir.parent / "report")):
        _compile()
    m = metrics.snapshot()
    assert m.graph_cache_skipped == {"config.runtime='interpret'": 1, "config.debug / config.report need the IR": 1}
    assert m.graph_cache_stores == 0 and not graph_dir.exists()


def test_cache_off_is_not_looked_up(tmp_path):
    with config.patch(graph_cache=False, graph_cache_dir=str(tmp_path / "graphs")):
        _compile()
        _compile()
    m = metrics.snapshot()
    assert m.graph_cache_hits == m.graph_cache_misses == m.graph_cache_stores == 0
    assert not (tmp_path / "graphs").exists() and m.graph_times[0].cache == "off"


def test_one_phase_line_per_graph(graph_dir, caplog):
    """Each graph logs one line with its phases after its first call; metrics and the report have them."""
    x = torch.randn(8, 16, requires_grad=True)
    with caplog.at_level(logging.INFO, logger="stax.frontend.compile"):
        torch.compile(lambda a: (a.tanh() * 2).sum(), backend="stax", dynamic=False)(x).backward()
    lines = [r.getMessage() for r in caplog.records if r.name == "stax.frontend.compile"]
    assert len(lines) == 2 and lines[0].startswith("stax: forward graph") and lines[1].startswith("stax: backward")
    assert all(f" {p} " in lines[0] for p in ("aot", "lower", "schedule", "codegen", "cxx", "load", "first run"))
    assert "graph cache miss (stored)" in lines[0]
    times = metrics.snapshot().graph_times
    assert [t.kind for t in times] == ["forward", "backward"] and all(t.total_s > 0 for t in times)
    assert metrics.snapshot().phase_runs["first_run"] == 2


def test_report_lists_compile_phases(tmp_path):
    from stax.frontend import report

    with config.patch(report=True, report_dir=str(tmp_path)):
        _compile()
    (page,) = [p for p in tmp_path.glob("*.html") if p.name != "index.html"]
    phases = report.load(str(page))["compile_phases"]
    assert {"lower", "schedule", "codegen", "cxx", "load"} <= set(phases) and "first_run" not in phases


@pytest.mark.parametrize("value", [torch.device("cpu"), lambda: 0], ids=["torch-object", "callable"])
def test_entry_holding_other_than_plain_data_is_not_written(tmp_path, value):
    """Only builtins and stax's dataclasses are stored: anything else makes the graph uncacheable (the
    pipeline logs and counts the reason, whole_graph.store) instead of pickling an object it cannot rebuild."""
    from stax.frontend.graph_cache import GraphCache, GraphEntry
    from stax.frontend.graph_key import Uncacheable

    cache = GraphCache(tmp_path / "graphs", tmp_path)
    with pytest.raises(Uncacheable, match="not plain data|does not pickle"):
        cache.store(GraphEntry("cd" * 32, "g", None, None, ((), ()), (), (("value", value),)))
    assert not list((tmp_path / "graphs").rglob("*.entry"))
