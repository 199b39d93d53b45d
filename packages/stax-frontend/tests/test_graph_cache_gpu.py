"""The whole-graph cache for stax.gpu graphs (issue 24): test_graph_cache.py's checks, on the GPU target.

Without a GPU the graphs go to stax.gpu on CPU tensors through Triton's interpreter
(config.device_override='gpu', TRITON_INTERPRET=1 from conftest); with one, on cuda. Two or three
processes compile one tiny model (WORKER: forward + backward, a constant, a matmul, a sort fallback)
on one graph cache directory; the other tests run in this process on a directory of their own.
"""

from __future__ import annotations

import os
from pathlib import Path

import graph_cache_checks as checks
import pytest
import torch
import torch._dynamo
from conftest import assert_same
from stax.frontend import config, metrics, runtime

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(
    runtime.gpu_unavailable_reason() is not None
    or (DEVICE == "cpu" and os.environ.get("TRITON_INTERPRET", "0") in ("", "0")),
    reason="needs stax.gpu: a GPU, or TRITON_INTERPRET=1 (CPU tensors through Triton's interpreter)",
)



def _worker_env(graph_dir: Path) -> dict:
    env = {"STAX_CACHE_DIR": str(graph_dir.parent / "stax"), "STAX_WORKER_TARGET": "gpu"}
    return {**env, "TRITON_INTERPRET": "1"} if DEVICE == "cpu" else env


@pytest.fixture(scope="module")
def processes(tmp_path_factory):
    graph_dir = tmp_path_factory.mktemp("gpu") / "graphs"
    return checks.run_processes(graph_dir, tmp_path_factory.mktemp("arrive"), _worker_env(graph_dir))


def test_two_processes_writing_one_key_both_succeed(processes):
    checks.check_both_writers_succeed(processes)


def test_second_process_loads_without_lowering_scheduling_or_codegen(processes):
    checks.check_reader_loads_without_compiling(processes)


# ---- in this process ------------------------------------------------------------------------


def _f(x, w):
    return torch.relu(x @ w).softmax(-1) * 3.0


ARGS = (torch.randn(8, 16, device=DEVICE), torch.randn(16, 12, device=DEVICE))


def _gpu(**fields):
    return config.patch(device_override="gpu" if DEVICE == "cpu" else None, **fields)


def _compile(**options):
    """One fresh compile of _f on the GPU target (dynamo's cache cleared: the backend runs again)."""
    torch._dynamo.reset()
    with _gpu():
        return torch.compile(_f, backend="stax", dynamic=False, options=options or None)(*ARGS)


@pytest.fixture
def graph_dir(tmp_path):
    with config.patch(graph_cache=True, graph_cache_dir=str(tmp_path / "graphs")):
        yield tmp_path / "graphs"


def test_hit_in_a_fresh_compile_equals_eager(graph_dir, monkeypatch):
    import stax.gpu

    assert_same(_compile(), _f(*ARGS))
    assert metrics.snapshot().graph_cache_stores == 1
    metrics.reset()
    monkeypatch.setattr(stax.gpu, "compile_schedule", None)  # a hit never compiles
    assert_same(_compile(), _f(*ARGS))
    m = metrics.snapshot()
    assert m.graph_cache_hits == 1 and m.extern_ops == {"mm.default": 1}, m
    assert not {"lower", "schedule", "codegen"} & set(m.phase_runs), m.phase_runs


@pytest.mark.parametrize("damage", sorted(checks.DAMAGES))
def test_corrupt_entry_is_rebuilt_never_loaded(graph_dir, damage, caplog):
    checks.check_corrupt_entry_rebuilt(graph_dir, damage, caplog, _compile, _f(*ARGS))


def test_autotuning_choices_are_stored_after_the_first_call(graph_dir, monkeypatch):
    """The entry is written before the first call and again after it with the launch configs chosen there
    (stax.gpu.with_choices, here choosing each kernel's first candidate: the interpreter does not tune); a
    hit loads those choices and stores nothing."""
    import dataclasses

    import stax.gpu
    from stax.frontend.graph_cache import GraphCache

    def chosen(artifact, module):
        return dataclasses.replace(artifact, kernels=tuple(
            dataclasses.replace(k, choices=(("", k.candidates[0]),)) for k in artifact.kernels))

    monkeypatch.setattr(stax.gpu, "with_choices", chosen)
    assert_same(_compile(), _f(*ARGS))
    assert metrics.snapshot().graph_cache_stores == 2
    path = checks.entry(graph_dir)
    entry = GraphCache(graph_dir, None).load(path.stem)
    assert entry.artifact.artifact.kernels and all(k.choices for k in entry.artifact.artifact.kernels)
    metrics.reset()
    assert_same(_compile(), _f(*ARGS))
    m = metrics.snapshot()
    assert m.graph_cache_hits == 1 and m.graph_cache_stores == 0 and m.graphs_gpu == 1, m


def test_gpu_option_change_misses(graph_dir, monkeypatch):
    """A GpuConfig field, given as an option or through STAX_GPU_CONFIG, names another entry; the same
    option again finds its own."""
    _compile()
    metrics.reset()
    _compile(**{"gpu.xblock_cap": 4})
    _compile(**{"gpu.hoist_loads": False})
    monkeypatch.setenv("STAX_GPU_CONFIG", "operand_order=0")
    assert_same(_compile(), _f(*ARGS))
    monkeypatch.delenv("STAX_GPU_CONFIG")
    m = metrics.snapshot()
    assert m.graph_cache_misses == 3 and m.graph_cache_hits == 0, m
    metrics.reset()
    assert_same(_compile(**{"gpu.xblock_cap": 4}), _f(*ARGS))
    assert metrics.snapshot().graph_cache_hits == 1


def test_device_kind_and_triton_version_are_in_the_key(graph_dir, monkeypatch):
    """An entry written for one device kind (or Triton) is not looked up for another."""
    import stax.gpu

    _compile()
    real = stax.gpu.target_identity
    monkeypatch.setattr(stax.gpu, "target_identity", lambda c: real(c).replace("triton", "triton 0.0 was"))
    metrics.reset()
    assert_same(_compile(), _f(*ARGS))
    m = metrics.snapshot()
    assert m.graph_cache_misses == 1 and m.graph_cache_hits == 0, m


def test_cpu_and_gpu_entries_are_apart(graph_dir):
    """The same function for stax.cpu is another entry: neither target ever loads the other's."""
    if DEVICE != "cpu":
        pytest.skip("CPU tensors go to stax.cpu only without a device override")
    _compile()
    torch._dynamo.reset()
    metrics.reset()
    assert_same(torch.compile(_f, backend="stax", dynamic=False)(*ARGS), _f(*ARGS))
    m = metrics.snapshot()
    assert m.graph_cache_misses == 1 and m.graph_cache_hits == 0 and m.graphs_gpu == 0, m
    assert len(list(graph_dir.rglob("*.entry"))) == 2


def test_unwritable_directory_works_uncached_with_one_warning(tmp_path, monkeypatch):
    checks.check_unwritable_directory(tmp_path, monkeypatch, _compile, _f(*ARGS), {"gpu.xblock_cap": 4},
                                      "Triton modules are written to the private directory")


@pytest.mark.skipif(checks.RUN_AS_ROOT, reason="root writes through a chmod 0o500 directory")
def test_read_only_directory_still_hits(graph_dir, recwarn):
    checks.check_read_only_directory_hits(graph_dir, recwarn, _compile, _f(*ARGS))


def test_graphs_not_cached_say_why(graph_dir):
    with config.patch(report=True, report_dir=str(graph_dir.parent / "report")):
        _compile()
    m = metrics.snapshot()
    assert m.graph_cache_skipped == {"config.debug / config.report need the IR": 1}, m
    assert m.graph_cache_stores == 0 and not list(graph_dir.rglob("*.entry"))


def test_symbolic_graph_hits(graph_dir):
    """A symbolic-shape GPU graph is stored and loaded like a static one (its sized launchers and size
    expressions as plain data): the hit runs sizes the first compile never saw."""
    def run(sizes):
        torch._dynamo.reset()
        g = lambda x: (x.exp() + 1).sum(-1)  # noqa: E731
        with _gpu():
            f = torch.compile(g, backend="stax", dynamic=True)
            for n in sizes:
                x = torch.randn(n, 3 * n, device=DEVICE)
                assert_same(f(x), g(x))
    run((5, 7))
    assert metrics.snapshot().graph_cache_stores >= 1
    metrics.reset()
    run((9, 4))
    m = metrics.snapshot()
    assert m.graphs_compiled == 1 and m.graph_cache_hits == 1 and m.graphs_gpu == 1, m
    assert "lower" not in m.phase_runs, m.phase_runs


def test_module_reading_rng_state_loads_without_cuda_graphs(graph_dir, monkeypatch):
    """A backward whose library call reads RNG state is built with cuda_graphs=False: its entry is loaded
    so again (the forward keeps graphs on), and the results are eager's."""
    if DEVICE != "cpu":
        pytest.skip("the op is CPU-only: this runs the GPU route on CPU tensors, through Triton's interpreter")
    import stax.gpu
    from test_opaque_values import _step, f

    x = torch.randn(6, 7)
    with _gpu():
        assert_same(_step(torch.compile(f, backend="stax"), x), _step(f, x))
    assert metrics.snapshot().graph_cache_stores == 2
    loaded, real = [], stax.gpu.load_artifact

    def spy(artifact, *, config, **kw):
        loaded.append(config.cuda_graphs)
        return real(artifact, config=config, **kw)

    monkeypatch.setattr(stax.gpu, "load_artifact", spy)
    torch._dynamo.reset()
    metrics.reset()
    with _gpu():
        assert_same(_step(torch.compile(f, backend="stax"), x), _step(f, x))
    assert metrics.snapshot().graph_cache_hits == 2
    assert loaded == [True, False]
