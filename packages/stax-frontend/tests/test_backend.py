"""The backend's contract: entry point, metrics, config, debug dump, fallbacks."""

from __future__ import annotations

import importlib.metadata
import logging

import pytest
import sympy
import torch
from conftest import check, run_stax
from stax.frontend import config, metrics
from test_pointwise import make


def _installed_dist():
    try:
        return importlib.metadata.distribution("stax-frontend")
    except importlib.metadata.PackageNotFoundError:
        return None


def test_entry_point_registers_backend():
    dist = _installed_dist()
    if dist is None:
        pytest.skip("stax-frontend is not pip-installed (running from PYTHONPATH): no entry point to test")
    eps = [e for e in dist.entry_points if e.group == "torch_dynamo_backends"]
    assert [(e.name, e.value) for e in eps] == [("stax", "stax.frontend.backend:stax_backend")]
    assert eps[0].load().__name__ == "stax_backend"
    assert "stax" in torch._dynamo.list_backends()


def test_metrics_count_and_reset():
    x = make(torch.float32)
    run_stax(lambda a: (a.exp().sum(-1), a + 1), x)
    m = metrics.snapshot()
    assert m.graphs_compiled == 1 and m.kernels_generated == 2 and m.compile_time_s > 0
    assert metrics.graphs_compiled == 1  # live attribute access
    metrics.reset()
    assert metrics.snapshot().graphs_compiled == 0 and metrics.snapshot().compile_time_s == 0


def test_extern_kernels_counted_separately():
    a, b = make(torch.float32, (8, 16)), make(torch.float32, (16, 4), seed=1)
    m = check(lambda x, y: (x @ y).relu() + 1, a, b)
    assert m.extern_calls == 1 and m.extern_ops["mm.default"] == 1 and m.fallback_calls == 0


def test_fallback_single_and_multi_output(caplog):
    """Ops Stax does not lower run as explicit ATen calls, counted and logged by name;
    a multi-output op is one call returning a tuple plus one selection per output."""
    x = make(torch.float32, (8, 16))
    with caplog.at_level(logging.INFO, logger="stax.frontend.fallback"):
        m = check(lambda a: (torch.sort(a, -1)[0] * 2, torch.sort(a, -1)[1], torch.special.i0(a * 0.3) + 1), x,
                  fallbacks=None)
    assert dict(m.fallback_ops) == {"sort.default": 1, "i0.default": 1}  # one sort call for both outputs
    assert "fallback to ATen: aten.sort.default" in caplog.text


def test_random_op_falls_back_and_matches_eager_stream():
    x = make(torch.float32, (8, 16))
    fn = lambda a: a + torch.rand_like(a)  # noqa: E731
    torch.manual_seed(123)
    expected = fn(x)
    compiled = torch.compile(fn, backend="stax", dynamic=False)
    torch.manual_seed(123)
    actual = compiled(x)
    torch.testing.assert_close(actual, expected)
    assert metrics.snapshot().fallback_calls >= 1


def test_unsupported_graph_runs_eagerly_when_not_strict(caplog):
    x = torch.randn(4, 4, dtype=torch.complex64)
    with config.patch(strict=False), caplog.at_level(logging.WARNING, logger="stax.frontend"):
        out = run_stax(lambda a: a * 2, x)
    torch.testing.assert_close(out, x * 2)
    assert metrics.snapshot().graphs_failed == 1
    assert "running it eagerly" in caplog.text


def test_debug_dump_files(tmp_path, caplog):
    x = make(torch.float32)
    with config.patch(debug=True, debug_dir=str(tmp_path)), caplog.at_level(logging.INFO, logger="stax.frontend"):
        run_stax(lambda a: a.exp().sum(-1), x)
    (d,) = list(tmp_path.iterdir())
    names = {p.name for p in d.iterdir()}
    assert names >= {"aten_graph.txt", "ir.txt", "schedule.txt", "source.txt", "lowering.txt"}
    assert "aten.exp" in (d / "aten_graph.txt").read_text()
    assert "Reduction(" in (d / "ir.txt").read_text()
    assert "fusion log:" in (d / "schedule.txt").read_text()
    assert (d / "source.txt").read_text().strip()
    assert f"wrote debug dump of inference graph to {d}" in caplog.text


def test_config_env_vars(monkeypatch):
    monkeypatch.setenv("STAX_DEBUG", "1")
    monkeypatch.setenv("STAX_DEBUG_DIR", "/tmp/somewhere")
    monkeypatch.setenv("STAX_RUNTIME", "interpret")
    c = config.from_env()
    assert c.debug and c.debug_dir == "/tmp/somewhere" and c.runtime == "interpret"
    monkeypatch.setenv("STAX_DEBUG", "0")
    assert not config.from_env().debug
    with pytest.raises(ValueError, match="runtime"):
        config.Config(runtime="gpu-please")


def test_config_patch_is_scoped():
    before = config.current()
    with config.patch(max_reads=3) as c:
        assert c.max_reads == 3 and config.current().max_reads == 3
    assert config.current() == before


def test_interpret_runtime_matches():
    """The numpy-interpreter runtime (a debugging aid) gives the same answers."""
    x = make(torch.float32, (8, 16))
    with config.patch(runtime="interpret"):
        check(lambda a: (a.softmax(-1), (a @ a.t()).sum(0), torch.sort(a)[0]), x, fallbacks=1)


def test_automatic_dynamic_compiles_one_symbolic_graph():
    """A second shape makes dynamo retrace with symbolic sizes: Stax compiles that graph (issue 23) and
    the third shape reuses it (tests/test_dynamic_shapes.py has the cases)."""
    f = torch.compile(lambda a: (a * 2).sum(-1), backend="stax")  # dynamic=None: automatic dynamic shapes
    for n in (5, 7, 9):
        x = torch.randn(n, 6)
        torch.testing.assert_close(f(x), (x * 2).sum(-1))
    m = metrics.snapshot()
    assert m.graphs_compiled == 2 and m.graphs_failed == 0


def test_effect_only_op_is_a_fallback_call():
    """Ops run only for their effect (an async assertion) are explicit fallback calls."""
    x = make(torch.float32, (6, 10))

    def f(a):
        torch._assert_async((a > -100).all(), "finite input")
        return a * 2

    m = check(f, x, fallbacks=None)
    assert set(m.fallback_ops) == {"_assert_async.msg"}


@pytest.mark.parametrize("sizes, strides", [((4, 3), (1, 4)), ([4, 3], [1, 4]),
                                            ((sympy.Integer(4), 3), (1, sympy.Integer(4)))])
def test_cpu_allocator_paths_agree(sizes, strides):
    """empty_strided_ints (torch's C++ path, for the wrapper's tuples of ints) and the generic
    empty_strided (lists, sympy integers) give the same tensor; every stax dtype maps to torch's."""
    from stax.frontend.dtypes import TO_TORCH
    from stax.frontend.runtime import TorchAllocator

    alloc = TorchAllocator()
    for d, td in TO_TORCH.items():
        for t in (alloc.empty_strided(sizes, strides, d), alloc.empty_strided_ints((4, 3), (1, 4), d)):
            assert (t.shape, t.stride(), t.dtype, t.device.type) == ((4, 3), (1, 4), td, "cpu")
            assert not t.requires_grad and alloc.data_ptr(t) == t.data_ptr()


def test_cpu_input_check_fast_path_and_its_errors():
    """TorchAllocator.matches answers the exact case; anything else takes stax.cpu's full check."""
    from stax.cpu import InputLayoutError
    from stax.cpu.runtime import check_input
    from stax.frontend.runtime import TorchAllocator
    from stax.ir import dtypes as dt

    alloc, t = TorchAllocator(), torch.randn(4, 3)
    assert alloc.matches(t, (4, 3), (3, 1), dt.float32)
    assert not alloc.matches(t, (4, 3), (3, 1), dt.float64) and not alloc.matches(t.t(), (3, 4), (4, 1), dt.float32)
    check_input(alloc, t, (4, 3), (3, 1), dt.float32, "x")
    check_input(alloc, torch.randn(4, 1), (4, 1), (1, 7), dt.float32, "y")  # a size-1 dim's stride is free
    with pytest.raises(InputLayoutError, match=r"input x: expected sizes \(3, 4\) and strides \(4, 1\)"):
        check_input(alloc, t.t(), (3, 4), (4, 1), dt.float32, "x")
    with pytest.raises(InputLayoutError, match="input x: expected dtype float32, got float64"):
        check_input(alloc, t.double(), (4, 3), (3, 1), dt.float32, "x")
    # the generated wrappers' checker: the exact match inline, the same errors otherwise
    from stax.cpu.loader import _input_checker

    wrapper_check = _input_checker(alloc)
    wrapper_check(t, (4, 3), (3, 1), dt.float32, "x")
    wrapper_check(torch.randn(4, 1), (4, 1), (1, 7), dt.float32, "y")
    with pytest.raises(InputLayoutError, match=r"input x: expected sizes \(3, 4\)"):
        wrapper_check(t.t(), (3, 4), (4, 1), dt.float32, "x")
    with pytest.raises(InputLayoutError, match="expected dtype float32, got float64"):
        wrapper_check(t.double(), (4, 3), (3, 1), dt.float32, "x")


def test_cpu_allocator_reuse_views_share_memory():
    """as_strided (a buffer reused with another layout): same dtype through torch.as_strided,
    another dtype through the storage; either way the view starts where the buffer does."""
    from stax.frontend.runtime import TorchAllocator
    from stax.ir import dtypes as dt

    alloc = TorchAllocator()
    base = torch.arange(24, dtype=torch.float32)
    buf = base[4:]  # a buffer at an offset inside its storage
    v = alloc.as_strided(buf, (4, 5), (1, 4), dt.float32)
    assert v.data_ptr() == buf.data_ptr() and v.stride() == (1, 4)
    assert torch.equal(v, buf[:20].reshape(5, 4).t())
    w = alloc.as_strided(buf, (2, 10), (10, 1), dt.int32)  # reinterpreted bytes
    assert w.dtype == torch.int32 and w.data_ptr() == buf.data_ptr()
    assert torch.equal(w.view(torch.float32), buf[:20].reshape(2, 10))


def test_cpu_extern_results_take_the_exact_match_fast_path():
    """LayoutFixer with the torch allocator: an extern result with the promised layout is returned
    as is (matches, one call); another layout goes to the copy; other sizes are an error."""
    from stax.cpu.runtime import LayoutFixer
    from stax.frontend.runtime import TorchAllocator
    from stax.ir import dtypes as dt

    class CopyWanted(Exception):
        pass

    def build_copy():
        raise CopyWanted

    fix = LayoutFixer(TorchAllocator(), build_copy)
    t = torch.randn(3, 4)
    assert fix(t, (3, 4), (4, 1), dt.float32, "buf0", "aten.mm.default") is t
    # size-1 stride free
    assert fix(torch.randn(3, 1), (3, 1), (1, 9), dt.float32, "buf0", "aten.mm.default") is not None
    with pytest.raises(CopyWanted):
        fix(t.t().contiguous().t(), (3, 4), (4, 1), dt.float32, "buf0", "aten.mm.default")
    with pytest.raises(RuntimeError, match="returned sizes"):
        fix(t, (4, 3), (3, 1), dt.float32, "buf0", "aten.mm.default")


@pytest.mark.parametrize("fast", [True, False])
def test_reinterpret_offsets_count_from_the_tensors_start(fast, monkeypatch):
    """aten_runtime.reinterpret (extern views, buffer reuse): torch's C++ path and the as_strided
    fallback agree, the offset counted from the tensor's own start, not its storage's."""
    from stax.frontend import aten_runtime

    if not fast:
        monkeypatch.setattr(aten_runtime, "_REINTERPRET", None)
    base = torch.arange(20.0)
    sub = base[4:]
    v = aten_runtime.reinterpret(sub, (2, 3), (1, 2), 3)
    assert v.storage_offset() == 7 and v.stride() == (1, 2)
    assert torch.equal(v, torch.tensor([[7.0, 9.0, 11.0], [8.0, 10.0, 12.0]]))


def test_public_bindings_match_their_aten_ops():
    """aten_runtime._PUBLIC's torch functions compute what their ATen overloads do, with the same
    positional and keyword arguments (how stax's wrappers call them)."""
    from stax.frontend import aten_runtime as fallback

    torch.manual_seed(0)
    args = {
        "aten.mm.default": ((torch.randn(5, 3), torch.randn(3, 4)), {}),
        "aten.addmm.default": ((torch.randn(4), torch.randn(5, 3), torch.randn(3, 4)), {"beta": 0.5, "alpha": 2.0}),
        "aten.bmm.default": ((torch.randn(2, 5, 3), torch.randn(2, 3, 4)), {}),
        "aten.baddbmm.default": ((torch.randn(2, 5, 4), torch.randn(2, 5, 3), torch.randn(2, 3, 4)), {"beta": 0.5}),
    }
    assert set(args) == set(fallback._PUBLIC)
    for kernel, (a, kw) in args.items():
        torch.testing.assert_close(fallback._PUBLIC[kernel](*a, **kw), fallback._resolve(kernel)(*a, **kw),
                                   rtol=0, atol=0)


def test_inputs_are_checked_once_per_call(monkeypatch):
    """The frontend checks (or re-strides) every input itself and then calls the stax.cpu module's
    unchecked entry: the module's own per-input check (TorchAllocator.matches) does not run again."""
    from stax.frontend.runtime import TorchAllocator

    seen = []
    real = TorchAllocator.matches
    monkeypatch.setattr(TorchAllocator, "matches", lambda self, *a: seen.append(1) or real(self, *a))

    def f(x, y):
        return (x * y + 1).relu()

    x, y = torch.randn(8, 16), torch.randn(8, 16)
    g = torch.compile(f, backend="stax")
    g(x, y)
    seen.clear()
    for _ in range(3):
        torch.testing.assert_close(g(x, y), f(x, y))
    assert seen == []
